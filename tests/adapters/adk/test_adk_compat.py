"""Compatibility: each scenario of tests/adk_scenarios.py (modelled on Google ADK's own flow, agent
and runner tests) is run plainly, with ``Runner.run_async`` on an ``InMemoryRunner``, and through
nbagent (``nbagent.start``), then each takes a follow-up turn on its own session (the plain runner's
next ``run_async``; nbagent's ``reset=False``). Both must agree on the final text, the status, the
error type, the token totals, the tool calls (name, arguments, result), the session's history
(author, text, function calls and responses of every event) and state, after the run and after the
follow-up; and ``records_from_adk`` of the plain session must record what nbagent recorded.

A difference is a bug in the adapter, unless nbagent refuses the case at ``start``. The score
test keeps the suite honest as a whole: at least 95% of at least 40 scenarios the same.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import pytest

import nbagent
from nbagent.errors import describe

pytestmark = pytest.mark.needs("adk")

from adk_scenarios import FOLLOW_UP, SCENARIOS, Case  # noqa: E402
from google.adk.agents.invocation_context import LlmCallsLimitExceededError  # noqa: E402
from google.adk.agents.run_config import RunConfig  # noqa: E402
from google.adk.runners import InMemoryRunner  # noqa: E402
from google.genai import types  # noqa: E402

from nbagent.adapters.adk.records import records_from_adk  # noqa: E402
from nbagent.adapters.adk.source import _homes  # noqa: E402

USER = "user"

KNOWN_DIFFERENT: dict[str, str] = {
    "transfer_to_unknown_agent": (
        "records_from_adk reads the plain session as a success: ADK raises ValueError for a transfer "
        "to an agent that does not exist but writes no error event, so the session keeps no trace of "
        "the error (the live runs agree: both 'error', ValueError)"
    ),
}
"""Scenarios nbagent does not give as plain ADK does, each with why. Every other difference the
suite found was a bug in the adapter, and is fixed."""


def message(task: Any) -> types.Content:
    if isinstance(task, types.Content):
        return task
    return types.Content(role="user", parts=[types.Part(text=task)])


def text_of(content: Any) -> str:
    parts = getattr(content, "parts", None) or ()
    return "".join(p.text for p in parts if p.text and not p.thought)


def final_text(events: list[Any]) -> str | None:
    """What a plain ``run_async`` caller reads: the text of the last final response."""
    found = None
    for event in events:
        if (
            event.author != "user"
            and not event.partial
            and event.is_final_response()
            and text_of(event.content)
        ):
            found = text_of(event.content)
    return found


def tokens(events: list[Any]) -> tuple[int, int]:
    """Input and output tokens ADK reported: the prompt, and the candidates plus the thoughts."""
    tokens_in = tokens_out = 0
    for event in events:
        usage = event.usage_metadata
        if event.partial or usage is None:
            continue
        tokens_in += usage.prompt_token_count or 0
        tokens_out += (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)
    return tokens_in, tokens_out


def answer(response: Any) -> tuple[str, Any]:
    """A function response as nbagent documents it: ``{"error": ...}`` an error, ``{"result": x}``
    the result x, anything else the result as it is."""
    if isinstance(response, dict) and "error" in response and "result" not in response:
        return "error", str(response["error"])
    if isinstance(response, dict) and set(response) == {"result"}:
        return "ok", response["result"]
    return "ok", response


def tool_calls(events: list[Any], exc: BaseException | None) -> list[tuple[str, Any, Any]]:
    """(name, arguments, answer) of each function call: None while unanswered, the run's error for
    a call the exception ADK raised cut (a tool that raised: ADK writes no response for it)."""
    answers = {r.id: answer(r.response) for e in events for r in e.get_function_responses()}
    cut = None if exc is None else ("error", describe(exc))
    return [
        (c.name, dict(c.args or {}), answers.get(c.id, cut))
        for e in events
        if not e.partial
        for c in e.get_function_calls()
    ]


def history(session: Any) -> list[tuple[Any, ...]]:
    """The session's events as a model would see them, ids left out (ADK makes new ones)."""
    return [
        (
            e.author,
            text_of(e.content),
            [(c.name, dict(c.args or {})) for c in e.get_function_calls()],
            [(r.name, r.response) for r in e.get_function_responses()],
            e.error_code,
        )
        for e in session.events
    ]


def state_of(session: Any) -> dict[str, Any]:
    return {k: v for k, v in session.state.items() if not k.startswith("_")}


def error_events(events: list[Any]) -> list[Any]:
    """The events that tell of an error: a model's reply that is one (``error_code``: ADK ends the
    agent on it and raises nothing), or what ADK writes before it raises."""
    return [e for e in events if e.error_code and e.error_code != "INVOCATION_ABORTED"]


def status_of(exc: BaseException | None, events: list[Any]) -> str:
    if exc is None:
        return "error" if error_events(events) else "success"
    return "max_steps" if isinstance(exc, LlmCallsLimitExceededError) else "error"


def error_type(exc: BaseException | None, events: list[Any]) -> str | None:
    """The exception's type (``MaxStepsReached`` for ADK's ``LlmCallsLimitExceededError``, as
    nbagent documents it); a model's error reply is nbagent's ``ModelError``."""
    if exc is None:
        return "ModelError" if error_events(events) else None
    return "MaxStepsReached" if isinstance(exc, LlmCallsLimitExceededError) else type(exc).__name__


def record_calls(record: Any) -> list[tuple[str, Any, Any]]:
    found = []
    for step in record.steps:
        for call in step.tool_calls:
            if call.status == "ok":
                outcome = ("ok", call.result)
            elif call.status == "error" and call.result is None:
                outcome = ("error", call.error)
            else:
                outcome = None
            found.append((call.tool, call.arguments, outcome))
    return found


def record_seen(record: Any) -> tuple[Any, ...]:
    """What ``records_from_adk`` can know of a run, as nbagent recorded it. A model call that
    failed before it answered is a step only live (the session keeps no trace of the call, only
    of the error): steps with no reply, no tokens and no calls are left out."""
    steps = [s for s in record.steps if s.model_output or s.usage_known or s.tool_calls]
    calls = [[(c.tool, c.status, c.result) for c in step.tool_calls] for step in steps]
    return record.status, record.error_type, record.output, record.input_tokens, record.output_tokens, calls


async def _turn(runner: Any, session_id: str, task: Any, config: RunConfig | None) -> tuple[list, Any]:
    events: list[Any] = []
    try:
        stream = runner.run_async(
            user_id=USER, session_id=session_id, new_message=message(task), run_config=config or RunConfig()
        )
        async for event in stream:
            events.append(event)
    except Exception as exc:
        return events, exc
    return events, None


async def _session(runner: Any, session_id: str) -> Any:
    return await runner.session_service.get_session(
        app_name=runner.app_name, user_id=USER, session_id=session_id
    )


def runner_for(case: Case) -> Any:
    if type(case.agent).__name__ == "App":
        return InMemoryRunner(app=case.agent)
    return InMemoryRunner(agent=case.agent)


def plainly(case: Case) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        runner = runner_for(case)
        session = await runner.session_service.create_session(
            app_name=runner.app_name, user_id=USER, state=case.state
        )
        events, exc = await _turn(runner, session.id, case.task, case.run_config)
        first = await _session(runner, session.id)
        seen = {
            "text": final_text(events) if status_of(exc, events) == "success" else None,
            "status": status_of(exc, events),
            "error_type": error_type(exc, events),
            "tokens": tokens(events),
            "tool_calls": tool_calls(events, exc),
            "history": history(first),
            "state": state_of(first),
            "records_from_adk": record_seen(records_from_adk(first)[0]),
        }
        if case.follow_up:
            more, more_exc = await _turn(runner, session.id, FOLLOW_UP, case.run_config)
            after = await _session(runner, session.id)
            outcome = status_of(more_exc, more)
            seen["follow_up"] = (final_text(more), outcome, history(after), state_of(after))
        return seen

    return asyncio.run(go())


def through_nbagent(case: Case) -> dict[str, Any]:
    options = {"run_config": case.run_config, "state": case.state}
    record = nbagent.start(case.agent, case.task, display=False, **options).wait(timeout=30)
    home = _homes.get(case.agent)
    runner = home.runner
    _, session_id = home.last
    first = asyncio.run(_session(runner, session_id))
    seen = {
        "text": record.output,
        "status": record.status,
        "error_type": record.error_type,
        "tokens": (record.input_tokens or 0, record.output_tokens or 0),
        "tool_calls": record_calls(record),
        "history": history(first),
        "state": state_of(first),
        "records_from_adk": record_seen(record),
    }
    if case.follow_up:
        more = nbagent.start(case.agent, FOLLOW_UP, display=False, reset=False, run_config=case.run_config)
        more_record = more.wait(timeout=30)
        after = asyncio.run(_session(runner, session_id))
        seen["follow_up"] = (more_record.output, more_record.status, history(after), state_of(after))
    return seen


@functools.cache
def differences(name: str) -> tuple[str, ...]:
    """What nbagent gives differently from plain ADK in scenario ``name`` (empty: the same)."""
    expected = plainly(SCENARIOS[name]())
    ours = through_nbagent(SCENARIOS[name]())
    return tuple(
        f"{key}: plain {expected[key]!r} != nbagent {ours.get(key)!r}"
        for key in expected
        if expected[key] != ours.get(key)
    )


@pytest.mark.parametrize("name", SCENARIOS)
def test_a_scenario_gives_what_plain_adk_gives(name):
    if name in KNOWN_DIFFERENT:
        pytest.xfail(KNOWN_DIFFERENT[name])
    assert not differences(name), "\n".join(differences(name))


def test_the_score_stays_at_least_95_percent_of_at_least_forty_scenarios():
    same = [name for name in SCENARIOS if not differences(name)]
    assert len(SCENARIOS) >= 40
    assert len(same) / len(SCENARIOS) >= 0.95, sorted(set(SCENARIOS) - set(same))
    assert set(SCENARIOS) - set(same) <= set(KNOWN_DIFFERENT), "a known difference is not written down"
