"""Budgets and approvals on smolagents agents (scripted models, real ``ToolCallingAgent`` and
``CodeAgent``): the runner enforces the same limits, and calls wait for a person, also from code."""

from __future__ import annotations

import pytest
from smolagents_fakes import Turn, answer, call, code
from support import wait_until
from test_smolagents import KIND_IDS, KINDS, Fakes, answer_turn, held, lookup_turn

import nbagent
from nbagent.adapters.smolagents import source as adapter
from nbagent.analytics import cost
from nbagent.guardrails import Limits
from nbagent.guardrails.limits import estimate_tokens

pytestmark = pytest.mark.needs("smolagents")

LONG = "word " * 400


@pytest.fixture
def fakes():
    made = Fakes()
    yield made
    made.close()


@pytest.mark.parametrize("kind", ["tool", "code"])
def test_output_token_limit_trips_mid_stream(fakes, kind):
    model = fakes.model([Turn(text=LONG), answer_turn(kind)], stream=True, chunks=100, delay_s=4.0)
    agent = fakes.agent(kind, model)
    record = nbagent.run(agent, "talk", limits=Limits(max_output_tokens=50))
    chunk = estimate_tokens(LONG[: len(LONG) // 100 + 1])
    assert record.status == "limit" and record.stop_reason == "max_output_tokens"
    step = record.steps[-1]
    assert step.interrupted and step.usage_source == "estimated"
    assert 50 < step.output_tokens <= 50 + chunk
    assert model.chunks_sent < 100  # cut mid-reply


@pytest.mark.parametrize(("kind", "stream"), KINDS, ids=KIND_IDS)
def test_token_limit_on_reported_usage_ends_limit(fakes, kind, stream):
    # smolagents reports a step's usage as the step ends, when its next model call may have begun:
    # that call is held, so the limit's Stop is what ends it.
    turns = [lookup_turn(kind, usage=(100, 10)), lookup_turn(kind, usage=(400, 10)), held(answer_turn(kind))]
    model = fakes.model(turns, stream=stream)
    record = nbagent.run(fakes.agent(kind, model), "look up twice", limits=Limits(max_tokens=300))
    assert record.status == "limit" and record.stop_reason == "max_tokens"
    assert model.calls_started in (2, 3) and model.calls_finished == 2
    assert [s.usage_source for s in record.steps[:2]] == ["reported", "reported"]
    assert record.steps[1].total_tokens == 410 and record.output is None


def test_time_limit_stops_a_smolagents_tool_mid_call(fakes):
    tool = fakes.tool(delay_s=60)
    model = fakes.model([call("lookup", query="paris"), answer("42")])
    record = nbagent.run(fakes.agent("tool", model, tools=[tool]), "look", limits=Limits(max_seconds=0.5))
    assert record.status == "limit" and record.stop_reason == "max_seconds"
    assert tool.calls_started == 1 and tool.calls_finished == 0
    assert record.tool_calls[0].status in ("abandoned", "cancelled")


def test_cost_limit_on_a_priced_smolagents_model(fakes):
    cost.set_price("scripted-smol", input_per_mtok=1000.0, output_per_mtok=1000.0)
    try:
        model = fakes.model(
            [lookup_turn("tool", usage=(200, 50)), lookup_turn("tool", usage=(300, 50)), answer_turn("tool")]
        )
        record = nbagent.run(fakes.agent("tool", model), "look", limits=Limits(max_cost_usd=0.4))
    finally:
        cost.clear_prices()
    assert record.status == "limit" and record.stop_reason == "max_cost_usd"


def test_an_unpriced_smolagents_model_with_a_cost_limit_is_refused(fakes):
    model = fakes.model([answer_turn("tool")], model_id="nobody-prices-this")
    with pytest.raises(ValueError, match="max_cost_usd needs the price"):
        nbagent.start(fakes.agent("tool", model), "t", limits=Limits(max_cost_usd=1.0))
    assert model.calls_started == 0


def test_tool_calling_agent_calls_of_one_step_are_pending_together_and_approved_ones_run(fakes):
    tool = fakes.tool()
    turn = Turn(tool_calls=(("lookup", {"query": "a"}), ("lookup", {"query": "b"})))
    agent = fakes.agent("tool", fakes.model([turn, answer("42")]), tools=[tool])
    run = nbagent.start(agent, "look up two", approve={"lookup"})
    wait_until(lambda: len(run.pending_approvals) == 2)
    assert [p.arguments for p in run.pending_approvals] == [{"query": "a"}, {"query": "b"}]
    assert tool.calls_started == 0
    for pending in run.pending_approvals:
        run.approve(pending.call_id)
    record = run.wait(timeout=20)
    assert record.status == "success" and tool.calls_started == 2
    assert [c.approval for c in record.tool_calls[:2]] == ["approved", "approved"]


def test_tool_calling_agent_denial_is_what_the_model_sees_and_no_tool_of_the_step_runs(fakes):
    tool = fakes.tool()
    turn = Turn(tool_calls=(("lookup", {"query": "a"}), ("lookup", {"query": "b"})))
    model = fakes.model([turn, answer("42")])
    run = nbagent.start(fakes.agent("tool", model, tools=[tool]), "look up two", approve={"lookup"})
    wait_until(lambda: len(run.pending_approvals) == 2)
    first, second = run.pending_approvals
    run.approve(first.call_id)
    run.deny(second.call_id, "not b")
    record = run.wait(timeout=20)
    assert record.status == "success" and tool.calls_started == 0
    statuses = {c.call_id: (c.status, c.approval) for c in record.tool_calls}
    assert statuses[first.call_id] == ("cancelled", "approved")
    assert statuses[second.call_id] == ("denied", "denied")
    assert "the user denied this call: not b" in model.prompts[1]


@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_code_agent_tool_called_from_code_waits_for_its_approval(fakes, decision):
    tool = fakes.tool()
    model = fakes.model([code("print(lookup('paris'))"), code("final_answer('42')")])
    run = nbagent.start(fakes.agent("code", model, tools=[tool]), "look", approve={"lookup"})
    wait_until(lambda: run.pending_approvals)
    (pending,) = run.pending_approvals
    assert (pending.tool, pending.arguments) == ("lookup", {"query": "paris"})
    assert tool.calls_started == 0
    if decision == "approve":
        run.approve(pending.call_id)
    else:
        run.deny(pending.call_id, "no paris")
    record = run.wait(timeout=20)
    nested = next(c for c in record.tool_calls if c.tool == "lookup")
    assert record.status == "success"
    if decision == "approve":
        assert tool.calls_started == 1 and (nested.status, nested.approval) == ("ok", "approved")
        assert "facts about paris" in model.prompts[1]
    else:
        assert tool.calls_started == 0 and (nested.status, nested.error) == ("denied", "no paris")
        assert "the user denied this call: no paris" in model.prompts[1]


def test_stop_while_a_smolagents_call_waits_ends_interrupted_and_nothing_runs(fakes):
    tool = fakes.tool()
    agent = fakes.agent("tool", fakes.model([call("lookup", query="x"), answer("42")]), tools=[tool])
    run = nbagent.start(agent, "look", approve=lambda c: c.tool == "lookup")
    wait_until(lambda: run.pending_approvals)
    run.interrupt()
    record = run.wait(timeout=20)
    assert record.status == "interrupted" and tool.calls_started == 0
    assert adapter.wait_idle(agent, timeout=20) and tool.calls_started == 0


@pytest.mark.parametrize(("kind", "stream"), KINDS, ids=KIND_IDS)
def test_smolagents_steps_record_when_their_model_call_ended(fakes, kind, stream):
    model = fakes.model([lookup_turn(kind), answer_turn(kind)], stream=stream)
    record = nbagent.run(fakes.agent(kind, model), "look")
    for step in record.steps:
        assert step.started_at <= step.model_ended_at <= step.ended_at
        for tool_call in step.tool_calls:
            assert step.model_ended_at <= tool_call.started_at
