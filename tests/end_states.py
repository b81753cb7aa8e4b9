"""Real runs in every end state, for the analytics tests (frames, store, summaries).

Each comes from ``nbagent.run``/``start`` with a fast ``ScriptedModel``, so the records are what
the runner really produces, not hand-made look-alikes.
"""

from __future__ import annotations

import asyncio
from typing import Any

from support import add, wait_until

import nbagent
from nbagent.models import ScriptedModel, ToolCall
from nbagent.records import RunRecord


@nbagent.tool
async def wait_forever() -> str:
    """Wait until cancelled (stands in for a slow search)."""
    await asyncio.sleep(3600)
    return "never"


def fast(turns: Any, name: str = "scripted") -> ScriptedModel:
    return ScriptedModel(turns, tokens_per_s=1000, first_token_s=0.0, name=name)


def success(agent_name: str = "adder", model: str = "scripted", **options: Any) -> RunRecord:
    turns = [[ToolCall("add", {"a": 2, "b": 3})], "The sum is 5."]
    agent = nbagent.Agent(fast(turns, model), tools=[add], name=agent_name)
    return nbagent.run(agent, "add 2 and 3", display=False, **options)


def interrupted_mid_stream(model: str = "scripted", **options: Any) -> RunRecord:
    """Stopped while the model streams its first reply: the cut step's usage is unknown."""
    slow = ScriptedModel(["word " * 500], tokens_per_s=200, first_token_s=0.0, name=model)
    run = nbagent.start(nbagent.Agent(slow, name="talker"), "talk", display=False, **options)
    wait_until(lambda: run.live_text(1) != "")
    run.interrupt()
    return run.wait(timeout=20)


def interrupted_mid_tool(**options: Any) -> RunRecord:
    """Stopped while a tool runs: the call is cancelled, the step is cut, its usage is known."""
    turns = [[ToolCall("add", {"a": 1, "b": 1})], [ToolCall("wait_forever", {})], "unreachable"]
    agent = nbagent.Agent(fast(turns), tools=[add, wait_forever], name="waiter")
    run = nbagent.start(agent, "wait", display=False, **options)
    wait_until(lambda: any(c.tool == "wait_forever" for c in run.record.tool_calls))
    run.interrupt()
    return run.wait(timeout=20)


def error(**options: Any) -> RunRecord:
    """The script runs out after one tool call: the model raises ModelError in step 2."""
    agent = nbagent.Agent(fast([[ToolCall("add", {"a": 1, "b": 2})]]), tools=[add], name="broken")
    return nbagent.run(agent, "add", display=False, **options)


def max_steps(**options: Any) -> RunRecord:
    agent = nbagent.Agent(fast([[ToolCall("add", {"a": 1, "b": 2})]]), tools=[add], max_steps=1, name="short")
    return nbagent.run(agent, "add", display=False, **options)


def every_end_state(**options: Any) -> dict[str, RunRecord]:
    records = {
        "success": success(**options),
        "interrupted_mid_stream": interrupted_mid_stream(**options),
        "interrupted_mid_tool": interrupted_mid_tool(**options),
        "error": error(**options),
        "max_steps": max_steps(**options),
    }
    expected = {
        "success": "success",
        "interrupted_mid_stream": "interrupted",
        "interrupted_mid_tool": "interrupted",
        "error": "error",
        "max_steps": "max_steps",
    }
    assert {k: r.status for k, r in records.items()} == expected
    return records
