"""A Stop is a cancel, not a wrecking ball: the user's cleanup after a Stop runs to its end.

A tool that catches its cancel and cleans up (closes a file, rolls back a transaction), a
``finally`` block that saves through ``asyncio.shield``, and a task started in cleanup to outlive
the step each finish, under every source whose tools can be async, as they do under a plain
``task.cancel()``. The other side (a cancel that was lost is still delivered) is held by
``test_langgraph_http`` (ChatOpenAI's chunk ``wait_for``) and ``test_langgraph_edges`` (a node that
swallowed its first cancel).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from support import HANG_S, fast_model, wait_until

import nbagent
from nbagent.models import ToolCall

CLEANUP_S = 0.3
"""Longer than several redelivery sweeps (``REDELIVER_S``): a sweep would cut it."""
LATE_S = 0.05
"""Cleanup that begins this long after the Stop: past the at-birth window."""

ToolBody = Callable[[], Awaitable[str]]
_kept: set[asyncio.Task[Any]] = set()


class Journal:
    """What the tool did, readable from the test's thread."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.entries: list[str] = []

    def note(self, entry: str) -> None:
        self.entries.append(entry)


def catches_and_cleans_up(journal: Journal) -> ToolBody:
    async def slow() -> str:
        journal.started.set()
        try:
            await asyncio.sleep(HANG_S)
        except asyncio.CancelledError:
            await asyncio.sleep(CLEANUP_S)  # closing a file, rolling back a transaction
            journal.note("cleaned up")
            raise
        return "never"

    return slow


def saves_through_shield_in_finally(journal: Journal) -> ToolBody:
    async def save() -> None:
        await asyncio.sleep(LATE_S)
        journal.note("saved")

    async def slow() -> str:
        journal.started.set()
        try:
            await asyncio.sleep(HANG_S)
        finally:
            await asyncio.sleep(LATE_S)
            await asyncio.shield(save())
        return "never"

    return slow


def starts_a_task_in_cleanup(journal: Journal) -> ToolBody:
    async def notify() -> None:
        await asyncio.sleep(LATE_S)
        journal.note("notified")

    async def slow() -> str:
        journal.started.set()
        try:
            await asyncio.sleep(HANG_S)
        except asyncio.CancelledError:
            await asyncio.sleep(LATE_S)
            task = asyncio.get_running_loop().create_task(notify())
            _kept.add(task)
            task.add_done_callback(_kept.discard)
            raise
        return "never"

    return slow


def native_agent(body: ToolBody) -> Any:
    slow = nbagent.tool(body)
    return nbagent.Agent(fast_model([[ToolCall("slow", {})], "done"]), tools=[slow])


def pydantic_ai_agent(body: ToolBody) -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

    async def stream(messages: list[Any], info: AgentInfo):
        if messages[-1].parts[-1].part_kind == "user-prompt":
            yield {0: DeltaToolCall(name="slow", json_args="{}", tool_call_id="c1")}
        else:
            yield "done"

    agent = Agent(FunctionModel(stream_function=stream))
    agent.tool_plain(name="slow")(body)
    return agent


def langgraph_agent(body: ToolBody) -> Any:
    from langchain.agents import create_agent
    from langchain_core.tools import StructuredTool
    from langgraph_fakes import ScriptedChatModel, reply

    tool = StructuredTool.from_function(coroutine=body, name="slow", description="Takes a while.")
    model = ScriptedChatModel(replies=[reply("", [("slow", {})]), reply("done")])
    return create_agent(model, tools=[tool])


SOURCES = {"native": native_agent, "pydantic-ai": pydantic_ai_agent, "langgraph": langgraph_agent}
SOURCE_PARAMS = [
    pytest.param("native"),
    pytest.param("pydantic-ai", marks=pytest.mark.needs("pydantic-ai")),
    pytest.param("langgraph", marks=pytest.mark.needs("langgraph")),
]
CLEANUPS = {
    "cleanup": (catches_and_cleans_up, "cleaned up"),
    "shield-in-finally": (saves_through_shield_in_finally, "saved"),
    "task-started-in-cleanup": (starts_a_task_in_cleanup, "notified"),
}


@pytest.mark.parametrize("source", SOURCE_PARAMS)
@pytest.mark.parametrize("cleanup", CLEANUPS)
def test_a_stop_mid_tool_lets_the_tools_own_cleanup_run_to_its_end(source: str, cleanup: str) -> None:
    journal = Journal()
    make_body, last_entry = CLEANUPS[cleanup]
    run = nbagent.start(SOURCES[source](make_body(journal)), "go")
    wait_until(journal.started.is_set)
    assert run.interrupt() is True
    record = run.wait(timeout=30)
    assert record.status == "interrupted" and record.stop_reason == "user"
    wait_until(lambda: last_entry in journal.entries, timeout=10)
    assert journal.entries == [last_entry]
