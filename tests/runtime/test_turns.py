"""Runs of one agent: who waits for whom (``nbagent.runtime.turns``), for every kind of source."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from support import wait_until

import nbagent
from nbagent.context import RunContext
from nbagent.runtime.source import Source


class GatedSource(Source):
    """A source whose runs end when their gate opens; records the order runs started driving."""

    name = "gated"
    model_name = "none"

    def __init__(self, takes_turns: bool) -> None:
        self.takes_turns = takes_turns
        self.gates: dict[str, threading.Event] = {}
        self.driving: list[str] = []
        self.continued: dict[str, Any] = {}

    def gate(self, task: str) -> threading.Event:
        return self.gates.setdefault(task, threading.Event())

    async def drive(self, task: str, ctx: RunContext, reset: bool = True) -> Any:
        self.driving.append(task)
        self.continued[task] = ctx.kept_history
        ctx.start_step("action")
        gate = self.gate(task)
        while not gate.is_set():
            await asyncio.sleep(0.002)
        ctx.keep_history([*(ctx.kept_history or []), task])
        ctx.finish_step(model_output=task, kind="final")
        return task


def test_runs_of_an_agent_with_memory_take_turns_in_order():
    source = GatedSource(takes_turns=True)
    runs = [nbagent.start(source, task) for task in ("a", "b", "c")]
    wait_until(lambda: runs[2].record.queued_after is not None)
    assert source.driving == ["a"]
    assert runs[1].record.queued_after == runs[0].run_id
    assert runs[2].record.queued_after == runs[1].run_id
    for task in ("a", "b", "c"):
        source.gate(task).set()
    records = [run.wait(timeout=20) for run in runs]
    assert [r.output for r in records] == ["a", "b", "c"]
    assert source.driving == ["a", "b", "c"]
    assert records[0].queued_s == 0 and records[1].queued_s > 0 and records[2].queued_s > 0


def test_fresh_runs_of_a_stateless_agent_run_side_by_side():
    source = GatedSource(takes_turns=False)
    runs = [nbagent.start(source, f"t{i}") for i in range(5)]
    wait_until(lambda: len(source.driving) == 5)  # none waits for another
    assert all(run.record.queued_after is None for run in runs)
    for i in range(5):
        source.gate(f"t{i}").set()
    assert [run.wait(timeout=20).status for run in runs] == ["success"] * 5


def test_a_continued_run_of_a_stateless_agent_waits_for_the_run_it_continues():
    source = GatedSource(takes_turns=False)
    first = nbagent.start(source, "first")
    wait_until(lambda: source.driving == ["first"])
    follow = nbagent.start(source, "follow", reset=False)
    wait_until(lambda: follow.record.queued_after == first.run_id)
    assert source.driving == ["first"]
    source.gate("first").set()
    source.gate("follow").set()
    assert follow.wait(timeout=20).status == "success"
    assert source.continued["follow"] == ["first"]
    assert follow.record.continues_run_id == first.run_id


def test_history_of_an_earlier_run_never_replaces_a_later_ones():
    source = GatedSource(takes_turns=False)
    early = nbagent.start(source, "early")
    late = nbagent.start(source, "late")
    wait_until(lambda: len(source.driving) == 2)
    source.gate("late").set()
    late.wait(timeout=20)
    source.gate("early").set()  # ends last, but started first
    early.wait(timeout=20)
    source.gate("next").set()
    nbagent.run(source, "next", reset=False)
    assert source.continued["next"] == ["late"]


def test_stop_after_step_ends_a_queued_run_of_any_agent():
    for takes_turns in (True, False):
        source = GatedSource(takes_turns=takes_turns)
        first = nbagent.start(source, "first")
        wait_until(lambda source=source: source.driving == ["first"])
        queued = nbagent.start(source, "queued", reset=False)
        wait_until(lambda queued=queued: queued.record.queued_after is not None)
        queued.interrupt("after_step")
        record = queued.wait(timeout=20)
        assert record.status == "interrupted" and record.stop_reason == "user_after_step"
        assert "queued" not in source.driving
        source.gate("first").set()
        assert first.wait(timeout=20).status == "success"


def test_a_run_behind_a_stopped_queued_run_never_overtakes_the_live_one():
    source = GatedSource(takes_turns=True)
    nbagent.start(source, "first")
    wait_until(lambda: source.driving == ["first"])
    second = nbagent.start(source, "second")
    third = nbagent.start(source, "third")
    wait_until(lambda: third.record.queued_after == second.run_id)
    second.interrupt()
    assert second.wait(timeout=20).status == "interrupted"
    assert not third.done() and source.driving == ["first"]  # still behind "first", which is live
    source.gate("first").set()
    source.gate("third").set()
    assert third.wait(timeout=20).status == "success"
    assert source.driving == ["first", "third"]


def test_a_queued_continued_run_gets_the_history_of_the_run_it_continues():
    source = GatedSource(takes_turns=False)
    first = nbagent.start(source, "A")
    wait_until(lambda: source.driving == ["A"])
    follow = nbagent.start(source, "B", reset=False)
    wait_until(lambda: follow.record.queued_after == first.run_id)
    other = nbagent.start(source, "C")  # a quick unrelated question, asked meanwhile
    wait_until(lambda: "C" in source.driving)
    source.gate("C").set()
    other.wait(timeout=20)
    source.gate("A").set()
    source.gate("B").set()
    assert follow.wait(timeout=20).status == "success"
    assert source.continued["B"] == ["A"]


def test_a_run_continuing_one_stopped_while_queued_gets_the_history_that_one_waited_for():
    source = GatedSource(takes_turns=False)
    first = nbagent.start(source, "A")
    wait_until(lambda: source.driving == ["A"])
    queued = nbagent.start(source, "B", reset=False)
    wait_until(lambda: queued.record.queued_after == first.run_id)
    queued.interrupt()
    queued.wait(timeout=20)
    source.gate("A").set()
    first.wait(timeout=20)
    source.gate("C").set()
    record = nbagent.run(source, "C", reset=False)
    assert record.continues_run_id == queued.run_id and queued.record.continues_run_id == first.run_id
    assert source.continued["C"] == ["A"]


def test_a_run_joining_behind_a_stopped_queued_run_names_the_live_run_it_waits_for():
    source = GatedSource(takes_turns=True)
    first = nbagent.start(source, "first")
    wait_until(lambda: source.driving == ["first"])
    second = nbagent.start(source, "second")
    wait_until(lambda: second.record.queued_after == first.run_id)
    second.interrupt()
    second.wait(timeout=20)
    third = nbagent.start(source, "third")
    wait_until(lambda: third.record.queued_after is not None)
    assert third.record.queued_after == first.run_id
    source.gate("first").set()
    source.gate("third").set()
    assert third.wait(timeout=20).status == "success"


def test_runs_passed_as_a_source_wrapping_the_agent_share_its_line():
    class Wrapper(GatedSource):
        def __init__(self, agent: GatedSource) -> None:
            self.agent = agent
            self.takes_turns = agent.takes_turns

        async def drive(self, task: str, ctx: RunContext, reset: bool = True) -> Any:
            return await self.agent.drive(task, ctx, reset)

    agent = GatedSource(takes_turns=True)
    first = nbagent.start(Wrapper(agent), "one")
    wait_until(lambda: agent.driving == ["one"])
    second = nbagent.start(Wrapper(agent), "two")
    wait_until(lambda: second.record.queued_after == first.run_id)
    agent.gate("one").set()
    agent.gate("two").set()
    assert second.wait(timeout=20).status == "success"


@pytest.mark.needs("pydantic-ai")
def test_a_pydantic_ai_run_continuing_one_stopped_while_queued_continues_the_live_runs_conversation():
    from pydantic_ai import Agent
    from pydantic_ai.models.function import FunctionModel

    release = threading.Event()
    seen: dict[str, list[str]] = {}

    async def stream(messages, info):
        prompts = [p.content for m in messages for p in m.parts if p.part_kind == "user-prompt"]
        seen[prompts[-1]] = prompts
        if prompts[-1] == "one":
            while not release.is_set():
                await asyncio.sleep(0.005)
        yield f"answer to {prompts[-1]}"

    agent = Agent(FunctionModel(stream_function=stream))
    first = nbagent.start(agent, "one", display=False)
    wait_until(lambda: "one" in seen)
    second = nbagent.start(agent, "two", reset=False, display=False)
    wait_until(lambda: second.record.queued_after == first.run_id)
    second.interrupt()
    assert second.wait(timeout=20).status == "interrupted"
    third = nbagent.start(agent, "three", reset=False, display=False)
    wait_until(lambda: third.record.queued_after is not None or "three" in seen)
    assert "three" not in seen  # it waits for the conversation it continues to be kept
    assert third.record.queued_after == first.run_id  # the live run, not the stopped one
    release.set()
    assert first.wait(timeout=20).status == "success"
    assert third.wait(timeout=20).status == "success"
    assert seen["three"] == ["one", "three"]
