"""Batches on the local backend: every end state per task, one Stop for all, Stop after current,
the concurrency bound, a failing factory, a task timeout, scores, smolagents agents, Ctrl-C, and
the input a batch refuses."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading

import pandas as pd
import pytest
from support import add, fast_model, wait_until

import nbagent
from nbagent.batches import BatchStoppedByKeyboard, batch, run_batch
from nbagent.batches.state import deadline_limits
from nbagent.models import ScriptedModel, ToolCall
from nbagent.models.base import Model, ModelText, ModelUsage

pytestmark = pytest.mark.timeout(120)


def slow_agent(words: int = 400, tokens_per_s: float = 100.0) -> nbagent.Agent:
    """An agent whose one reply streams for a while (``words / tokens_per_s`` seconds)."""
    return nbagent.Agent(ScriptedModel(["word " * words], tokens_per_s=tokens_per_s, first_token_s=0.0))


def quick_agent() -> nbagent.Agent:
    return nbagent.Agent(fast_model([[ToolCall("add", {"a": 2, "b": 3})], "5"]), tools=[add], name="adder")


def agent_for(row: dict) -> nbagent.Agent:
    kind = row["kind"]
    if kind == "success":
        return quick_agent()
    if kind == "error":  # the script runs out in step 2: the model raises
        return nbagent.Agent(fast_model([[ToolCall("add", {"a": 1, "b": 2})]]), tools=[add])
    if kind == "max_steps":
        return nbagent.Agent(fast_model([[ToolCall("add", {"a": 1, "b": 2})]] * 3), tools=[add], max_steps=2)
    if kind == "slow":
        return slow_agent(words=5000, tokens_per_s=200)
    if kind == "agent_stops":  # the agent's own code stops the run: interrupted, stop_reason "agent"
        return nbagent.Agent(fast_model([[ToolCall("stop_me", {})], "unreachable"]), tools=[stop_me])
    raise ValueError(f"no agent for {kind!r}")


@nbagent.tool
def stop_me() -> str:
    """Raise AgentInterrupted, as the agent's own code may."""
    raise nbagent.AgentInterrupted("the agent stopped itself")


def test_every_task_ends_with_a_record_in_its_end_state_and_keeps_its_row():
    kinds = ["success", "error", "max_steps", "slow", "factory_fails", "success"]
    tasks = pd.DataFrame({"id": [f"t{i}" for i in range(len(kinds))], "task": kinds, "kind": kinds})
    handle = batch(
        agent_for,
        tasks,
        concurrency=3,
        limits=nbagent.Limits(max_seconds=0.5),
        score=lambda record, row: record.status == "success" and row["kind"] == "success",
    )
    frame = handle.wait(timeout=60)
    assert frame["task_key"].tolist() == [f"t{i}" for i in range(len(kinds))]
    assert frame["kind"].tolist() == kinds  # the task's own columns travel with it
    assert frame["status"].tolist() == ["success", "error", "max_steps", "limit", "error", "success"]
    slow = frame.iloc[3]
    assert slow["stop_reason"] == "max_seconds" and "max_seconds reached" in slow["error"]
    failed = frame.iloc[4]
    assert "the agent factory failed" in failed["error"] and "no agent for 'factory_fails'" in failed["error"]
    assert failed["n_steps"] == 0 and failed["error_type"] == "ValueError"
    # the run cut by its time limit did not finish: its score is NA, not False (the scorer is not asked)
    assert [None if pd.isna(v) else v for v in frame["score"]] == [True, False, False, None, False, True]
    assert frame["run_id"].notna().all() and frame["run_id"].is_unique
    assert handle.status == "done"
    cut = handle.record_of("t3")
    assert cut.steps[-1].interrupted and cut.steps[-1].model_output.startswith("word")
    steps = handle.steps()
    assert set(steps["task_key"]) == {"t0", "t1", "t2", "t3", "t5"}


def test_stop_all_interrupts_every_live_run_and_skips_the_queued_tasks():
    handle = batch(lambda: slow_agent(), [f"task {i}" for i in range(12)], concurrency=4)
    wait_until(lambda: sum(1 for s in handle.running() if s.run.record.steps) == 4)
    assert handle.interrupt() is True
    assert handle.interrupt() is False  # idempotent
    frame = handle.wait(timeout=30)
    assert frame["status"].value_counts().to_dict() == {"skipped": 8, "interrupted": 4}
    live = frame[frame.status == "interrupted"]
    assert (live["stop_reason"] == "user").all()
    for key in live["task_key"]:
        record = handle.record_of(key)
        assert record.done and record.ended_at is not None and record.steps[-1].interrupted
    skipped = frame[frame.status == "skipped"]
    assert skipped["run_id"].isna().all() and (skipped["attempts"] == 0).all()
    assert handle.status == "stopped"


def test_stop_after_step_lets_the_live_runs_finish_and_starts_no_more():
    gate = threading.Event()

    @nbagent.tool
    def hold() -> str:
        """Wait for the test."""
        gate.wait(30)
        return "ok"

    def make():
        return nbagent.Agent(fast_model([[ToolCall("hold", {})], "done"]), tools=[hold])

    handle = batch(make, [f"task {i}" for i in range(9)], concurrency=3)
    wait_until(lambda: len(handle.running()) == 3)
    handle.interrupt("after_step")
    gate.set()
    frame = handle.wait(timeout=30)
    assert frame["status"].value_counts().to_dict() == {"skipped": 6, "success": 3}


class CountingModel(Model):
    """Counts the model calls in flight across every agent of a batch."""

    live = 0
    most = 0
    lock = threading.Lock()
    name = "counting"

    async def stream(self, messages, tools):
        cls = CountingModel
        with cls.lock:
            cls.live += 1
            cls.most = max(cls.most, cls.live)
        try:
            await asyncio.sleep(0.02)
            yield ModelText("done")
        finally:
            with cls.lock:
                cls.live -= 1
        yield ModelUsage(5, 1)


def test_concurrency_bounds_the_live_runs():
    frame = run_batch(lambda: nbagent.Agent(CountingModel()), [f"t{i}" for i in range(40)], concurrency=5)
    assert (frame["status"] == "success").all()
    assert CountingModel.most == 5


def test_a_task_list_may_repeat_a_task_and_a_factory_may_take_the_row():
    seen = []

    def make(row):
        seen.append(row["task"])
        return quick_agent()

    frame = run_batch(make, ["same", "same", {"task": "other", "answer": 5}], concurrency=2)
    assert frame["task_key"].tolist() == ["same", "same#2", "other"]
    assert sorted(seen) == ["other", "same", "same"]
    assert frame["answer"].iloc[2] == 5 and pd.isna(frame["answer"].iloc[0])


def test_a_score_that_raises_marks_its_row_and_the_batch_goes_on():
    frame = run_batch(quick_agent, ["a", "b"], score=lambda record, row: 1 / 0)
    assert (frame["status"] == "success").all()
    assert frame["score"].isna().all()
    assert frame["score_error"].str.contains("ZeroDivisionError").all()


def test_start_options_reach_every_run():
    frame = run_batch(
        lambda: nbagent.Agent(fast_model([[ToolCall("add", {"a": 1, "b": 2})]] * 5), tools=[add]),
        ["x", "y"],
        max_steps=2,
        tags=["eval"],
        metadata={"suite": "smoke"},
    )
    assert frame["status"].tolist() == ["max_steps", "max_steps"]
    assert all("eval" in tags for tags in frame["tags"])
    assert all('"suite": "smoke"' in m for m in frame["metadata"])


def main_thread_in(function) -> bool:
    """Whether the main thread is inside ``function`` now (so a SIGINT lands in it)."""
    frame = sys._current_frames().get(threading.main_thread().ident)
    while frame is not None:
        if frame.f_code is function.__code__:
            return True
        frame = frame.f_back
    return False


def test_ctrl_c_stops_a_blocking_batch_once_every_record_is_in():
    handle = batch(lambda: slow_agent(), [f"t{i}" for i in range(6)], concurrency=2)

    def press_ctrl_c_when_both_stream():
        wait_until(lambda: sum(1 for s in handle.running() if s.run.record.steps) == 2, timeout=30)
        wait_until(lambda: main_thread_in(handle.wait), timeout=30)
        os.kill(os.getpid(), signal.SIGINT)

    thread = threading.Thread(target=press_ctrl_c_when_both_stream, daemon=True)
    thread.start()
    with pytest.raises(BatchStoppedByKeyboard) as stopped:
        handle.wait()  # what run_batch does
    thread.join(30)
    assert stopped.value.batch is handle and handle.done()
    frame = handle.frame()
    assert frame["status"].value_counts().to_dict() == {"skipped": 4, "interrupted": 2}


@pytest.mark.needs("smolagents")
def test_a_batch_of_smolagents_agents():
    from smolagents import CodeAgent
    from smolagents_fakes import ScriptedSmolModel, code

    def make(row):
        model = ScriptedSmolModel([code(f"final_answer({row['n']} * 2)")])
        return CodeAgent(tools=[], model=model)

    tasks = [{"task": f"double {n}", "n": n} for n in range(4)]
    frame = run_batch(make, tasks, concurrency=2, score=lambda record, row: record.output == row["n"] * 2)
    assert (frame["status"] == "success").all()
    assert frame["score"].tolist() == [True] * 4
    assert (frame["agent"] == "CodeAgent").all()


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: batch(quick_agent, "one string"), TypeError, "tasks must be a list"),
        (lambda: batch(quick_agent, [1, 2]), TypeError, "task 0 is a int"),
        (lambda: batch(quick_agent, pd.DataFrame({"q": ["a"]})), ValueError, "needs a 'task' column"),
        (
            lambda: batch(quick_agent, [{"id": 1, "task": "a"}, {"id": 1, "task": "b"}]),
            ValueError,
            "same 'id'",
        ),
        (lambda: batch(quick_agent, ["a"], concurrency=0), ValueError, "concurrency"),
        (lambda: batch(quick_agent, ["a"], skip=["done"]), ValueError, "skip takes end states"),
        (lambda: batch(quick_agent(), ["a"]), TypeError, "make_agent must be a function"),
        (lambda: batch(nbagent.Agent, ["a"]), TypeError, "make_agent is the class Agent, which needs"),
        (lambda: batch(quick_agent, ["a"], display=True, sinks=[]), TypeError, "takes no sinks"),
        (lambda: batch(quick_agent, ["a"], timeout_s=-1), ValueError, "timeout_s"),
    ],
)
def test_bad_input_is_refused_before_anything_runs(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_the_deprecated_timeout_s_is_a_deadline_of_the_runs_limits():
    own = nbagent.Limits(max_seconds=30, max_tool_calls=3)
    with pytest.warns(DeprecationWarning, match=r"pass limits=nbagent.Limits\(max_seconds=...\)"):
        handle = batch(lambda: slow_agent(words=5000, tokens_per_s=200), ["slow"], timeout_s=0.3, limits=own)
    row = handle.wait(timeout=60).iloc[0]
    assert (row["status"], row["stop_reason"]) == ("limit", "max_seconds")
    # the deadline tightens the run's own limits and keeps the rest of them
    assert handle.run_of(0).limits == nbagent.Limits(max_seconds=0.3, max_tool_calls=3)
    assert deadline_limits(nbagent.Limits(max_seconds=0.1), 5) == nbagent.Limits(max_seconds=0.1)
    assert deadline_limits(None, 5) == nbagent.Limits(max_seconds=5)


def test_timeout_s_keeps_the_configured_limits_and_warns_the_line_that_wrote_it():
    nbagent.configure(limits=nbagent.Limits(max_tool_calls=3))
    try:
        with pytest.warns(DeprecationWarning) as caught:
            handle = batch(quick_agent, ["a"], timeout_s=30, limits=None)  # None: the default
            run_batch(quick_agent, ["b"], timeout_s=30)
        handle.wait(timeout=60)
    finally:
        nbagent.configure(limits=None)
    assert handle.run_of(0).limits == nbagent.Limits(max_seconds=30, max_tool_calls=3)
    assert [w.filename for w in caught] == [__file__, __file__]


def test_an_empty_batch_is_done_at_once():
    frame = run_batch(quick_agent, [])
    assert len(frame) == 0 and "status" in frame.columns
