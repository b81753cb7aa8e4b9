"""Budgets (``Limits``) on the native agent: each limit trips at the right moment, mid-stream where
it applies, and the record is as complete as for a Stop."""

from __future__ import annotations

import asyncio
import math

import pytest
from support import add, fast_model, wait_until

import nbagent
from nbagent.analytics import cost
from nbagent.errors import LimitExceeded
from nbagent.guardrails import Limits
from nbagent.guardrails.limits import estimate_tokens
from nbagent.models import ModelText, ModelUsage, Reply, ScriptedModel, ToolCall
from nbagent.models.base import Model

LONG = "word " * 2000
CHUNK = estimate_tokens(" word")
"""What one streamed piece of ``LONG`` counts for: the most a token limit may be overshot by."""


def streaming(turns, tokens_per_s: float = 2000.0) -> ScriptedModel:
    return ScriptedModel(turns, tokens_per_s=tokens_per_s, first_token_s=0.0)


@nbagent.tool
async def slow(seconds: float) -> str:
    """Wait.

    Args:
        seconds: how long.
    """
    await asyncio.sleep(seconds)
    return "waited"


def test_output_token_limit_trips_mid_stream_and_keeps_the_streamed_count():
    record = nbagent.run(nbagent.Agent(streaming([LONG])), "talk", limits=Limits(max_output_tokens=50))
    assert record.status == "limit"
    assert record.stop_reason == "max_output_tokens"
    assert record.error_type == "LimitExceeded" and "max_output_tokens" in record.error
    step = record.steps[-1]
    assert step.interrupted and step.usage_source == "estimated"
    assert 50 < step.output_tokens <= 50 + CHUNK
    assert 0 < len(step.model_output) < len(LONG)  # cut mid-reply, the text so far kept
    with pytest.raises(LimitExceeded) as caught:
        record.raise_for_status()
    assert caught.value.limit == "max_output_tokens" and caught.value.record is record


def test_total_token_limit_counts_every_step_and_is_never_exceeded_by_more_than_a_chunk():
    model = streaming([[ToolCall("add", {"a": 1, "b": 2})], LONG])
    record = nbagent.run(nbagent.Agent(model, tools=[add]), "add then talk", limits=Limits(max_tokens=300))
    assert record.status == "limit" and record.stop_reason == "max_tokens"
    assert record.steps[0].usage_source == "reported" and record.steps[0].tool_calls[0].status == "ok"
    assert 300 < record.total_tokens <= 300 + CHUNK


class CountingModel(Model):
    """Reports the input tokens it is told to, and counts the requests it received."""

    name = "counting"

    def __init__(self, reported_input: int) -> None:
        self.reported_input = reported_input
        self.requests = 0

    async def stream(self, messages, tools):
        self.requests += 1
        yield ModelText("fine")
        yield ModelUsage(self.reported_input, 1)


def test_input_token_limit_refuses_a_request_before_it_is_sent():
    model = CountingModel(reported_input=10)
    record = nbagent.run(nbagent.Agent(model), "x " * 400, limits=Limits(max_input_tokens=20))
    assert record.status == "limit" and record.stop_reason == "max_input_tokens"
    assert model.requests == 0
    assert record.steps[0].input_tokens > 20 and record.steps[0].usage_source == "estimated"


def test_input_token_limit_is_checked_again_when_the_server_reports_it():
    model = CountingModel(reported_input=5000)  # the prompt looked small; the server says otherwise
    agent = nbagent.Agent(model, tools=[add])
    record = nbagent.run(agent, "hi", limits=Limits(max_input_tokens=1000))
    assert model.requests == 1
    assert record.status == "limit" and record.stop_reason == "max_input_tokens"


def test_cost_limit_trips_mid_reply_within_one_chunk():
    cost.set_price("priced-scripted", input_per_mtok=1_000.0, output_per_mtok=10_000.0)
    try:
        model = ScriptedModel([LONG], tokens_per_s=2000.0, first_token_s=0.0, name="priced-scripted")
        record = nbagent.run(nbagent.Agent(model), "talk", limits=Limits(max_cost_usd=0.5))
    finally:
        cost.clear_prices()
    assert record.status == "limit" and record.stop_reason == "max_cost_usd"
    assert record.steps[-1].usage_source == "estimated"
    assert 0.5 < record.cost_usd <= 0.5 + CHUNK * 10_000.0 / 1e6
    assert record.cost_usd == pytest.approx(
        (record.input_tokens * 1_000.0 + record.output_tokens * 10_000.0) / 1e6
    )


def test_a_cost_limit_on_a_model_without_a_price_is_refused_at_start():
    before = nbagent.history.last()
    model = fast_model(["hi"], name="no-such-model-anywhere")
    with pytest.raises(
        ValueError, match="max_cost_usd needs the price of the model 'no-such-model-anywhere'"
    ):
        nbagent.start(nbagent.Agent(model), "task", limits=Limits(max_cost_usd=1.0))
    assert model.calls == 0 and nbagent.history.last() is before


def test_time_limit_stops_mid_tool_call():
    model = fast_model([[ToolCall("slow", {"seconds": 60})], "done"])
    record = nbagent.run(nbagent.Agent(model, tools=[slow]), "wait", limits=Limits(max_seconds=0.3))
    assert record.status == "limit" and record.stop_reason == "max_seconds"
    assert record.tool_calls[0].status == "cancelled"
    assert record.duration_s >= 0.3


def test_time_spent_waiting_for_an_approval_does_not_count_against_max_seconds():
    send = nbagent.tool(name="send", requires_approval=True)(_send)
    model = fast_model([[ToolCall("send", {"to": "ops"}, id="c1")], "sent"])
    run = nbagent.start(nbagent.Agent(model, tools=[send]), "send", limits=Limits(max_seconds=0.5))
    wait_until(lambda: run.pending_approvals)
    wait_until(
        lambda: run.limits_used()["max_seconds"][0] >= 0 and run.approvals.pending and _waited(run) > 0.8
    )
    assert not run.done()
    assert run.approve("c1")
    record = run.wait(timeout=20)
    assert record.status == "success"
    assert record.wait_s > 0.8 and record.tool_calls[0].approval_wait_s > 0.8


def _waited(run: nbagent.Run) -> float:
    return run._watcher.used()["max_wait_seconds"] if run._watcher is not None else 0.0


def _send(to: str) -> str:
    """Send a message.

    Args:
        to: who gets it.
    """
    return f"sent to {to}"


def test_max_wait_seconds_bounds_the_total_wait_for_approvals():
    send = nbagent.tool(name="send", requires_approval=True)(_send)
    model = fast_model([[ToolCall("send", {"to": "ops"})], "sent"])
    record = nbagent.run(nbagent.Agent(model, tools=[send]), "send", limits=Limits(max_wait_seconds=0.3))
    assert record.status == "limit" and record.stop_reason == "max_wait_seconds"
    call = record.tool_calls[0]
    assert call.status == "cancelled" and call.result is None
    assert call.approval_wait_s >= 0.3


def test_tool_call_limit_stops_before_the_call_over_the_budget_runs():
    ran: list[int] = []

    @nbagent.tool
    def note(n: int) -> int:
        """Note a number.

        Args:
            n: the number.
        """
        ran.append(n)
        return n

    calls = [ToolCall("note", {"n": n}) for n in range(3)]
    record = nbagent.run(
        nbagent.Agent(fast_model([calls, "done"]), tools=[note]), "note", limits=Limits(max_tool_calls=2)
    )
    assert record.status == "limit" and record.stop_reason == "max_tool_calls"
    assert ran == [0, 1]
    assert [c.status for c in record.tool_calls] == ["ok", "ok", "cancelled"]


def test_step_limit_ends_limit_but_the_agents_own_step_limit_still_ends_max_steps():
    def loop(messages):
        return [ToolCall("add", {"a": 1, "b": 1})]

    record = nbagent.run(nbagent.Agent(fast_model(loop), tools=[add]), "loop", limits=Limits(max_steps=2))
    assert record.status == "limit" and record.stop_reason == "max_steps" and len(record.steps) == 2
    own = nbagent.run(nbagent.Agent(fast_model(loop), tools=[add], max_steps=2), "loop")
    assert own.status == "max_steps" and own.stop_reason == "max_steps"


def test_a_final_answer_in_the_last_allowed_step_still_succeeds():
    model = fast_model([[ToolCall("add", {"a": 1, "b": 1})], "two"])
    record = nbagent.run(nbagent.Agent(model, tools=[add]), "add", limits=Limits(max_steps=2))
    assert record.status == "success" and record.output == "two"


def test_configured_limits_apply_to_every_run_and_start_overrides_them():
    nbagent.configure(limits=Limits(max_output_tokens=20))
    try:
        record = nbagent.run(nbagent.Agent(streaming([LONG])), "talk")
        assert record.status == "limit"
        record = nbagent.run(nbagent.Agent(fast_model(["short"])), "talk", limits=Limits(max_steps=5))
        assert record.status == "success"
    finally:
        nbagent.configure(limits=None)


def test_stop_reason_is_a_runs_frame_column_for_every_end():
    def loop(messages):
        return [ToolCall("add", {"a": 1, "b": 1})]

    user = nbagent.start(nbagent.Agent(streaming([LONG], tokens_per_s=50)), "talk")
    wait_until(lambda: user.record.steps)
    user.interrupt()
    records = [
        user.wait(timeout=20),
        nbagent.run(nbagent.Agent(streaming([LONG])), "t", limits=Limits(max_output_tokens=10)),
        nbagent.run(nbagent.Agent(fast_model(loop), tools=[add], max_steps=1), "t"),
        nbagent.run(nbagent.Agent(fast_model([])), "t"),
        nbagent.run(nbagent.Agent(fast_model(["ok"])), "t"),
    ]
    frame = nbagent.analytics.runs_frame(records)
    assert list(frame.status) == ["interrupted", "limit", "max_steps", "error", "success"]
    assert list(frame.stop_reason.fillna("-")) == ["user", "max_output_tokens", "max_steps", "error", "-"]


@pytest.mark.parametrize(
    "options",
    [
        {"max_tokens": 0},
        {"max_tokens": 1.5},
        {"max_cost_usd": -1},
        {"max_seconds": math.inf},
        {"max_steps": True},
    ],
)
def test_bad_limits_are_refused_with_a_clear_error(options):
    with pytest.raises(ValueError, match=f"Limits.{next(iter(options))} must be"):
        Limits(**options)


def test_limits_must_be_a_limits_object():
    with pytest.raises(TypeError, match=r"limits must be nbagent\.Limits"):
        nbagent.start(nbagent.Agent(fast_model(["x"])), "t", limits={"max_tokens": 5})


def test_the_model_call_end_is_recorded_between_the_step_start_and_its_tools():
    model = ScriptedModel([Reply("let me add", [ToolCall("add", {"a": 1, "b": 2})]), "3"], first_token_s=0.01)
    record = nbagent.run(nbagent.Agent(model, tools=[add]), "add")
    first, last = record.steps
    assert first.started_at < first.model_ended_at <= first.tool_calls[0].started_at <= first.ended_at
    assert last.started_at < last.model_ended_at <= last.ended_at
    assert first.model_ended_at.tzinfo is not None
    frame = nbagent.analytics.steps_frame(record)
    assert list(frame.model_ended_at) == [s.model_ended_at for s in record.steps]


def test_a_reply_cut_by_a_stop_has_no_model_end():
    run = nbagent.start(nbagent.Agent(streaming([LONG], tokens_per_s=50)), "talk")
    wait_until(lambda: run.record.steps and run.live_text(1))
    run.interrupt()
    record = run.wait(timeout=20)
    assert record.steps[0].model_ended_at is None
