"""Compatibility: scenarios in the style of LangGraph's and LangChain's own agent tests
(``tests/langgraph_scenarios.py``), run plainly (``graph.ainvoke``, ``Command(resume=...)``) and
through nbagent, compared on what ``ainvoke`` returns (``run.result``), the output, the usage,
the tool calls (``record.tool_calls`` holds the model's calls and nothing else) and the
thread's state afterwards."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from langgraph.types import Command
from langgraph_scenarios import Scenario, all_scenarios
from support import wait_until

import nbagent
from nbagent.adapters.langgraph.records import content_text, message_type, output_of

pytestmark = pytest.mark.needs("langgraph")

SCENARIOS = all_scenarios()


def _norm(value: Any) -> Any:
    """A state with message ids and other per-run identifiers left out."""
    if message_type(value) is not None:
        calls = [(c["name"], c["args"], c["id"]) for c in getattr(value, "tool_calls", None) or []]
        usage = getattr(value, "usage_metadata", None)
        tokens = (usage["input_tokens"], usage["output_tokens"]) if usage else None
        return (message_type(value), content_text(value.content), calls, getattr(value, "tool_call_id", None),
                getattr(value, "status", None), tokens)  # fmt: skip
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items() if k != "__interrupt__"}
    if isinstance(value, (list, tuple)):
        return [_norm(v) for v in value]
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if type(value).__name__ == "Interrupt":
        return ("interrupt", json.dumps(value.value, default=str))
    return value


def _usage(messages: list[Any], seen: set[str]) -> tuple[int, int]:
    tokens_in = tokens_out = 0
    for message in messages:
        usage = getattr(message, "usage_metadata", None)
        if message_type(message) == "ai" and usage and id(message) not in seen:
            tokens_in, tokens_out = tokens_in + usage["input_tokens"], tokens_out + usage["output_tokens"]
    return tokens_in, tokens_out


def _config(turn: Any, thread: str) -> dict[str, Any]:
    return {**turn.config, "configurable": {"thread_id": thread}}


def _plain_input(graph: Any, task: Any) -> Any:
    """What a LangGraph user passes for the same input: a string is one user message, a list the
    messages of a graph that has them."""
    if isinstance(task, str):
        return {"messages": [{"role": "user", "content": task}]}
    if isinstance(task, list) and "messages" in graph.channels:
        return {"messages": task}
    return task


def _checkpointed(graph: Any) -> bool:
    return graph.checkpointer not in (None, False, True)


async def _plain(scenario: Scenario) -> dict[str, Any]:
    graph = scenario.build()
    outcome: dict[str, Any] = {"outputs": [], "error": None, "thread": None, "next": None}
    for turn in scenario.turns:
        config = _config(turn, "plain")
        kwargs = {"context": turn.context} if turn.context is not None else {}
        try:
            result = await graph.ainvoke(_plain_input(graph, turn.input), config, **kwargs)
            for value in turn.plain_resume:
                value = value(result) if callable(value) else value  # a map of interrupt ids
                result = await graph.ainvoke(Command(resume=value), config, **kwargs)
        except Exception as exc:
            outcome["error"] = type(exc).__name__
            break
        paused = isinstance(result, dict) and "__interrupt__" in result
        outcome["outputs"].append("paused" if paused else output_of(result))
        outcome["final"] = result
    if _checkpointed(graph):
        state = await graph.aget_state(config)
        outcome["thread"], outcome["next"] = state.values, state.next
    return outcome


def _answering(run: nbagent.Run, answers: list[Any]) -> None:
    for answer in answers:
        wait_until(lambda: run.pending_approvals or run.done(), timeout=30)
        if run.done():
            return
        asked = {p.call_id for p in run.pending_approvals}
        answer(run)
        _wait_answered(run, asked)


def _wait_answered(run: nbagent.Run, asked: set[str]) -> None:
    wait_until(lambda: not asked & {p.call_id for p in run.pending_approvals} or run.done(), timeout=30)


def _through_nbagent(scenario: Scenario) -> dict[str, Any]:
    graph = scenario.build()
    outcome: dict[str, Any] = {"outputs": [], "error": None, "records": [], "thread": None, "next": None}
    for index, turn in enumerate(scenario.turns):
        config = _config(turn, "nbagent")
        kwargs = {"context": turn.context} if turn.context is not None else {}
        reset = index == 0 or not _checkpointed(graph)
        run = nbagent.start(graph, turn.input, display=False, reset=reset, config=config, **kwargs)
        _answering(run, turn.answer)
        record = run.wait(timeout=60)
        outcome["records"].append(record)
        if record.status in ("error", "max_steps"):
            outcome["error"] = record.error_type if record.status == "error" else "GraphRecursionError"
            outcome["error_text"] = record.error
            break
        assert record.status == "success", (record.status, record.error)
        paused = isinstance(run.result, dict) and "__interrupt__" in run.result
        outcome["outputs"].append("paused" if paused else record.output)
        outcome["final"] = run.result
    if _checkpointed(graph):
        state = graph.get_state(config)
        outcome["thread"], outcome["next"] = state.values, state.next
    return outcome


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_matches_a_plain_run(name: str) -> None:
    scenario = SCENARIOS[name]
    plain = asyncio.run(_plain(scenario))
    ours = _through_nbagent(scenario)
    assert ours["error"] == plain["error"] == scenario.error, ours.get("error_text")
    assert _norm(ours["thread"]) == _norm(plain["thread"])
    assert ours["next"] == plain["next"]
    if scenario.error is None:
        assert _norm(ours["outputs"]) == _norm(plain["outputs"])
        assert _norm(ours["final"]) == _norm(plain["final"])
    thread = ours["thread"] if ours["thread"] is not None else ours.get("final")
    _check_records(ours["records"], thread, scenario, failed=scenario.error is not None)


def _check_records(records: list[Any], thread: Any, scenario: Scenario, failed: bool) -> None:
    """Usage and tool calls in the records add up to the model replies and tool results the
    thread keeps, in failed runs too (what the thread keeps of them); a call a person edited is
    recorded with the arguments it ran with."""
    messages = thread.get("messages", []) if isinstance(thread, dict) else []
    calls = [
        (c["name"], scenario.edited.get(c["id"], c["args"]))
        for m in messages
        if message_type(m) == "ai"
        for c in m.tool_calls
    ]
    results = {m.tool_call_id: m for m in messages if message_type(m) == "tool"}
    # A call one run handed back (deferred) and a later run ran is that later run's call.
    recorded = [
        call
        for index, record in enumerate(records)
        for call in record.tool_calls
        if not (call.status == "deferred" and any(call.call_id in _ids(r) for r in records[index + 1 :]))
    ]
    assert [(c.tool, c.arguments) for c in recorded] == calls
    for call in recorded:
        answered = results.get(call.call_id)
        if call.status == "denied":
            continue
        if answered is not None:
            assert call.status == ("error" if answered.status == "error" else "ok"), call
        elif failed:  # a run that failed: the call it cut never returned
            assert call.status in ("error", "cancelled"), call
        else:  # the graph ended on it: handed to the caller, as ainvoke hands it
            assert call.status == "deferred", call
    tokens_in, tokens_out = _usage(messages, set())
    tokens_in, tokens_out = tokens_in + scenario.unkept_usage[0], tokens_out + scenario.unkept_usage[1]
    known_in = sum(r.input_tokens or 0 for r in records)
    known_out = sum(r.output_tokens or 0 for r in records)
    assert (known_in, known_out) == (tokens_in, tokens_out)


def _ids(record: Any) -> set[str]:
    return {c.call_id for c in record.tool_calls}


def test_there_are_at_least_sixty_scenarios() -> None:
    assert len(SCENARIOS) >= 60
