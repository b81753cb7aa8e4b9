"""Compatibility: each scenario of tests/openai_agents_scenarios.py (modelled on the OpenAI Agents
SDK's own runner, guardrail, handoff, tool-use, max-turns and approval tests) is run plainly, with
``Runner.run_streamed`` and ``Runner.run``, and through nbagent; all must agree on the final output,
the status, the error (type and message), the usage (requests and tokens), the tool calls and their
results, the handoffs, and the history a continued run sends (``reset=False`` must send what
``result.to_input_list()`` plus the new input sends)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import pytest
from agents import Agent, Runner, set_tracing_disabled
from agents.exceptions import MaxTurnsExceeded
from agents.testing import ScriptedModel, assistant_message
from openai import APIError
from openai_agents_scenarios import SCENARIOS, Case, says, scripted
from support import wait_until

import nbagent
from nbagent.errors import describe
from nbagent.records import RunRecord

pytestmark = pytest.mark.needs("openai-agents")

THEN = "and then?"


@pytest.fixture(autouse=True, scope="module")
def no_trace_export():
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(False)


@dataclass
class Outcome:
    output: Any
    status: str
    error: tuple[str, str] | None
    usage: tuple[int, int, int]
    """Requests, input tokens, output tokens."""
    calls: list[str]
    """The tools (and handoffs) the model called, in order."""
    results: dict[str, Any]
    """Call id -> result, for the calls that returned."""
    final_agent: str


def error_of(exc: BaseException | None, model: str) -> tuple[str, str] | None:
    """The record's (error type, error text) for the SDK's exception, by nbagent's documented
    mapping: ``MaxTurnsExceeded`` is ``MaxStepsReached``, an ``openai.APIError`` is ``ModelError``
    naming the ``model`` once, then the SDK's type and message; anything else is the SDK's own."""
    if exc is None:
        return None
    if isinstance(exc, MaxTurnsExceeded):  # nbagent's name for it, with the SDK's message
        return "MaxStepsReached", f"MaxStepsReached: {exc}"
    if isinstance(exc, APIError):
        return "ModelError", f"ModelError: {model}: {type(exc).__name__}: {exc}"
    return type(exc).__name__, describe(exc)


def status_of(exc: BaseException | None) -> str:
    return "success" if exc is None else "max_steps" if isinstance(exc, MaxTurnsExceeded) else "error"


def plain_outcome(result: Any, exc: BaseException | None, rejected: set[str], model: str) -> Outcome:
    usage = result.context_wrapper.usage
    names = [
        out.name
        for response in result.raw_responses
        for out in response.output
        if out.type == "function_call"
    ]
    results = {}
    for item in result.new_items:
        if item.type == "tool_call_output_item" and item.raw_item["call_id"] not in rejected:
            results[item.raw_item["call_id"]] = item.output
    counts = (usage.requests, usage.input_tokens, usage.output_tokens)
    return Outcome(
        result.final_output,
        status_of(exc),
        error_of(exc, model),
        counts,
        names,
        results,
        result.last_agent.name,
    )


async def run_plainly(case: Case, streamed: bool) -> tuple[Any, BaseException | None, set[str]]:
    """``Runner.run_streamed`` (or ``Runner.run``), resumed through ``RunState`` while it pauses
    for approval, deciding as ``case.decisions`` say."""
    decisions = iter(case.decisions)
    rejected: set[str] = set()
    run_input = case.input
    while True:
        if streamed:
            result = Runner.run_streamed(case.agent, run_input, **case.options)
            try:
                async for _ in result.stream_events():
                    pass
            except Exception as exc:
                return result, exc, rejected
        else:
            try:
                result = await Runner.run(case.agent, run_input, **case.options)
            except Exception as exc:
                return None, exc, rejected
        if not result.interruptions or not case.decisions:  # no one decides: it ends paused
            return result, None, rejected
        state = result.to_state()
        for item in result.interruptions:
            verdict, message = next(decisions)
            if verdict == "approve":
                state.approve(item)
            else:
                rejected.add(item.raw_item.call_id)
                state.reject(item, rejection_message=message)
        run_input = state


def through_nbagent(case: Case, task: Any = None, reset: bool = True) -> RunRecord:
    """``nbagent.start``, deciding each call shown in the approval panel as ``case.decisions`` say.
    A run with decisions shows in a view (a person decides there); one without shows in none, so
    a call needing approval is handed back as ``Runner.run`` hands it back."""
    deciding = bool(case.decisions) and task is None
    run = nbagent.start(
        case.agent, case.input if task is None else task, reset=reset, display=deciding, **case.options
    )
    decided: set[str] = set()
    for verdict, message in case.decisions if task is None else ():

        def waiting() -> list[Any]:
            return [p for p in run.pending_approvals if p.call_id not in decided]

        wait_until(lambda: waiting() or run.done())
        if run.done():
            break
        pending = waiting()[0]
        decided.add(pending.call_id)
        assert run.approve(pending.call_id) if verdict == "approve" else run.deny(pending.call_id, message)
    return run.wait(timeout=30)


def nbagent_outcome(record: RunRecord, start: Agent) -> Outcome:
    calls = [call for step in record.steps for call in step.tool_calls]
    final_agent = start.name
    for call in calls:
        if is_handoff(call):
            final_agent = str(call.result).removeprefix("handoff to ")
    error = None if record.status == "success" else (record.error_type, record.error)
    # a model call whose reply never began is a step of ours and no request the SDK counts
    answered = [s for s in record.steps if not unanswered(s)]
    counts = (len(answered), record.input_tokens or 0, record.output_tokens or 0)
    # what each call answered the model (a raising tool's call failed, yet answered the SDK's text)
    answers = [c for c in calls if c.status in ("ok", "error") and c.result is not None and not is_handoff(c)]
    results = {c.call_id.split(":", 1)[1]: c.result for c in answers}
    return Outcome(record.output, record.status, error, counts, [c.tool for c in calls], results, final_agent)


def unanswered(step: Any) -> bool:
    replied = step.model_ended_at is not None or step.usage_known
    return not (replied or step.model_output or step.tool_calls)


def is_handoff(call: Any) -> bool:
    return call.status == "ok" and str(call.result).startswith("handoff to ")


def model_of(case: Case) -> ScriptedModel:
    config = case.options.get("run_config")
    model = getattr(config, "model", None) or case.agent.model
    assert isinstance(model, ScriptedModel)
    return model


def sent(model: ScriptedModel) -> str:
    """What the model was sent last, comparable across runs."""
    return json.dumps(
        model.last_call and model.last_call.input,
        default=lambda o: o.model_dump(exclude_unset=True) if hasattr(o, "model_dump") else repr(o),
        sort_keys=True,
    )


@pytest.fixture(autouse=True)
def undisplayed_views(views):
    """A shown run gets a view that is never displayed (``conftest.views``)."""


@pytest.mark.parametrize("name", SCENARIOS)
def test_a_scenario_gives_what_the_sdk_gives(name):
    plain_case = SCENARIOS[name]()
    result, exc, rejected = asyncio.run(run_plainly(plain_case, streamed=True))

    ours_case = SCENARIOS[name]()
    record = through_nbagent(ours_case)
    ours = nbagent_outcome(record, ours_case.agent)
    expected = plain_outcome(result, exc, rejected, record.model)

    assert (ours.output, ours.status, ours.error) == (expected.output, expected.status, expected.error)
    requests, tokens_in, tokens_out = expected.usage
    assert ours.usage == (requests - ours_case.requests_elsewhere, tokens_in, tokens_out)
    assert ours.final_agent == expected.final_agent
    # the SDK keeps no response for a turn its error ended: the calls of that turn are ours alone
    unanswered = ("error", "cancelled")
    failed = [c.tool for step in record.steps for c in step.tool_calls if c.status in unanswered]
    assert ours.calls == expected.calls or (exc is not None and ours.calls == expected.calls + failed)
    assert ours.results == expected.results
    statuses = [c.status for step in record.steps for c in step.tool_calls]
    assert set(statuses) <= {"ok", "denied", "error", "cancelled", "deferred"}
    assert statuses.count("deferred") == len(result.interruptions)  # handed back, as the SDK does
    # a call is cancelled only beside the call that raised the run's error (the SDK cancelled it)
    assert "cancelled" not in statuses or statuses.count("error") == 1

    # Runner.run (not streamed) ends the same way.
    run_case = SCENARIOS[name]()
    _, run_exc, _ = asyncio.run(run_plainly(run_case, streamed=False))
    assert error_of(run_exc, record.model) == expected.error

    # Continuing: nbagent's reset=False sends what to_input_list() plus the new input sends.
    model_of(plain_case).enqueue([assistant_message("continued")])
    again = Case(
        plain_case.agent, [*result.to_input_list(), {"role": "user", "content": THEN}], plain_case.options
    )
    more, more_exc, _ = asyncio.run(run_plainly(again, streamed=True))
    model_of(ours_case).enqueue([assistant_message("continued")])
    continued = through_nbagent(ours_case, THEN, reset=False)
    assert (continued.output, continued.status) == (more.final_output, status_of(more_exc))
    assert sent(model_of(ours_case)) == sent(model_of(plain_case))


def test_there_are_at_least_forty_scenarios():
    assert len(SCENARIOS) >= 40


def test_concurrent_runs_of_one_agent_each_give_the_sdks_answer():
    async def slow_echo(call):
        await asyncio.sleep(0.05)  # the runs overlap
        return [assistant_message(f"echo {call.input[-1]['content']}")]

    from agents.testing import ModelStep

    model = ScriptedModel([ModelStep.respond(slow_echo) for _ in range(10)])
    agent = Agent(name="echo", model=model)

    async def all_at_once():
        return await asyncio.gather(*(Runner.run(agent, f"task {i}") for i in range(5)))

    plain = asyncio.run(all_at_once())
    runs = [nbagent.start(agent, f"task {i}") for i in range(5)]
    records = [run.wait(timeout=30) for run in runs]
    assert [r.output for r in records] == [r.final_output for r in plain]
    assert all(r.status == "success" for r in records)
    # they ran side by side: none waited for another
    assert all(r.queued_after is None and r.queued_s == 0.0 for r in records)


def test_a_run_state_with_reset_false_is_refused_clearly():
    case = SCENARIOS["resume_a_run_state"]()
    nbagent.run(Agent(name="other", model=scripted(says("hi"))), "hi")
    record = nbagent.run(case.agent, case.input, reset=False)
    assert record.status == "error" and record.error_type == "TypeError"
    assert "RunState carries its own history" in record.error


def test_a_task_of_another_type_is_refused_at_start():
    with pytest.raises(TypeError, match="a str, a list of input items or a RunState, not int"):
        nbagent.start(Agent(name="x", model=scripted(says("hi"))), 42)


def test_every_run_streamed_keyword_is_accepted():
    from nbagent.adapters.openai_agents.source import run_keywords

    assert {"error_handlers", "auto_previous_response_id", "max_turns", "session"} <= set(run_keywords())
    with pytest.raises(TypeError, match="error_handlers"):
        nbagent.start(Agent(name="x", model=scripted(says("hi"))), "hi", max_steps=3)


def test_the_record_of_a_plain_run_tells_what_a_run_through_nbagent_records():
    """``records_from_openai_agents`` over ``Runner.run``'s result, in every scenario that ends
    with one (no approvals, no exception): the same end, output, usage and tool calls (status and
    result) as nbagent's own record of the same scenario."""
    from nbagent.adapters import records_from_openai_agents

    def seen(record: RunRecord) -> tuple[Any, ...]:
        calls = [[(c.tool, c.status, c.result) for c in step.tool_calls] for step in record.steps]
        return record.status, record.output, record.input_tokens, record.output_tokens, calls

    compared, different = 0, []
    for name, make in SCENARIOS.items():
        if make().decisions:
            continue
        result, exc, _ = asyncio.run(run_plainly(make(), streamed=False))
        if exc is not None:
            continue
        (plain,) = records_from_openai_agents(result)
        ours = through_nbagent(make())
        compared += 1
        if seen(plain) != seen(ours):
            different.append(f"{name}: plain {seen(plain)} != nbagent {seen(ours)}")
    assert not different, "\n".join(different)
    assert compared >= 30
