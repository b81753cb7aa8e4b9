"""Runs end with a complete record however their parts misbehave, and one agent's runs take turns."""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
from datetime import datetime, timezone

import pytest
from support import fast_model, run_threads, wait_until

import nbagent
from nbagent import events as ev
from nbagent.models import ScriptedModel, ToolCall
from nbagent.recorder import Recorder


def test_a_tool_raising_system_exit_is_a_tool_error_and_the_loop_lives_on():
    @nbagent.tool
    def quits() -> str:
        """Calls sys.exit."""
        raise SystemExit(3)

    record = nbagent.run(nbagent.Agent(fast_model([[ToolCall("quits")], "still here"]), tools=[quits]), "t")
    assert record.status == "success" and record.output == "still here"
    call = record.tool_calls[0]
    assert call.status == "error" and "SystemExit" in call.error
    assert nbagent.runtime.loop.LoopThread.thread().is_alive()


def test_a_model_raising_system_exit_ends_the_run_as_an_error():
    def exits(messages):
        raise SystemExit("model quit")

    record = nbagent.run(nbagent.Agent(fast_model(exits)), "t")
    assert record.status == "error" and "SystemExit" in record.error
    assert nbagent.run(nbagent.Agent(fast_model(["next run works"])), "t").output == "next run works"


def test_a_sync_tool_past_its_timeout_is_an_error_not_an_interrupt():
    release = threading.Event()

    @nbagent.tool(timeout_s=0.05)
    def slow() -> str:
        """Blocks past its timeout."""
        release.wait(60)
        return "late"

    try:
        record = nbagent.run(nbagent.Agent(fast_model([[ToolCall("slow")], "went on"]), tools=[slow]), "t")
    finally:
        release.set()
    assert record.status == "success" and record.output == "went on"
    call = record.tool_calls[0]
    assert call.status == "error" and "timed out after 0.05 s" in call.error
    wait_until(lambda: not run_threads())


def test_a_stop_that_lands_as_a_tool_returns_stops_before_the_next_tool():
    started = []

    @nbagent.tool(timeout_s=30)
    async def record_call(name: str) -> str:
        """Notes that it ran."""
        started.append(name)
        return name

    def stop_after_first_tool(event):
        if isinstance(event, ev.ToolCallFinished):
            run.interrupt()  # on the loop thread, as the first tool hands back its result

    calls = [ToolCall("record_call", {"name": "first"}), ToolCall("record_call", {"name": "second"})]
    run = nbagent.Run(
        nbagent.Agent(fast_model([calls, "done"]), tools=[record_call]), "t", sinks=[stop_after_first_tool]
    )
    run.launch()
    record = run.wait(timeout=10)
    assert record.status == "interrupted"
    assert started == ["first"]


def test_a_run_started_while_the_last_one_unwinds_waits_so_memory_stays_a_valid_chat():
    started, release = threading.Event(), threading.Event()
    seen: list[list[str]] = []

    @nbagent.tool
    def stubborn() -> str:
        """Ignores Stop until released."""
        started.set()
        release.wait(60)
        return "late"

    def policy(messages):
        seen.append([m["role"] for m in messages])
        return [ToolCall("stubborn")] if len(seen) == 1 else "answer"

    agent = nbagent.Agent(ScriptedModel(policy, tokens_per_s=1e9, first_token_s=0), tools=[stubborn])
    try:
        first = nbagent.start(agent, "first")
        assert started.wait(10)
        first.interrupt()
        second = nbagent.start(agent, "second", reset=False)  # at once, while the first unwinds
        assert first.wait(timeout=10).status == "interrupted"
        assert second.wait(timeout=10).status == "success"
    finally:
        release.set()
    assert seen[1] == ["user", "assistant", "tool", "user"]


def test_ctrl_c_while_run_is_launching_does_not_hang(monkeypatch):
    def pressed():
        raise KeyboardInterrupt

    monkeypatch.setattr(nbagent.runtime.run_loop, "runner_loop", pressed)
    with pytest.raises(KeyboardInterrupt):
        nbagent.run(nbagent.Agent(fast_model(["never"])), "t")


def test_a_cooperative_tool_stopped_by_interrupt_logs_nothing(caplog):
    started = threading.Event()

    @nbagent.tool
    def polite() -> str:
        """Checks for a Stop every millisecond."""
        started.set()
        while True:
            nbagent.check_interrupt()
            time.sleep(0.001)

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        run = nbagent.start(nbagent.Agent(fast_model([[ToolCall("polite")]]), tools=[polite]), "t")
        assert started.wait(10)
        run.interrupt()
        assert run.wait(timeout=10).tool_calls[0].status == "cancelled"
        wait_until(lambda: not run_threads())
        del run
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0), nbagent.runtime.loop.runner_loop()).result(5)
        gc.collect()
    assert "never retrieved" not in caplog.text


def _usage_of(parts):
    recorder = Recorder()
    recorder.apply(ev.RunStarted("r", 0, 0.0, "t", "a", "m", datetime.now(timezone.utc)))
    recorder.apply(ev.StepStarted("r", 1, 0.0, "action"))
    for source, tokens in parts:
        recorder.apply(ev.Usage("r", 1, 0.0, tokens, tokens, source))
    recorder.apply(ev.RunFinished("r", 1, 1.0, "success"))
    return recorder.snapshot()


@pytest.mark.parametrize(
    ("parts", "tokens", "source", "complete"),
    [
        ([("reported", 100)], 100, "reported", True),
        ([("reported", 100), ("reported", 50)], 150, "reported", True),
        ([("estimated", 100), ("reported", 100)], 200, "estimated", True),
        ([("reported", 100), ("unknown", None)], 100, "unknown", False),
        ([("unknown", None)], None, "unknown", False),
        ([], None, "unknown", False),
    ],
)
def test_a_step_usage_is_as_good_as_its_weakest_part(parts, tokens, source, complete):
    record = _usage_of(parts)
    step = record.steps[0]
    assert step.input_tokens == tokens and step.usage_source == source
    assert record.usage_complete is complete
    assert record.input_tokens == tokens


def test_a_model_or_tool_task_cancelled_before_it_ran_leaves_no_never_awaited_coroutine() -> None:
    # A Stop (or the loop unwinding at exit) right as the reader task was made used to leave
    # "coroutine 'Agent._read_reply' was never awaited" on a script's stderr.
    import warnings

    from nbagent.errors import ToolError
    from nbagent.runtime.tasks import spawn_contained

    async def work() -> str:
        return "done"

    async def main() -> bool:
        task = spawn_contained(work(), lambda exc: ToolError(str(exc)))
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return task.cancelled()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert asyncio.run(main()) is True
        gc.collect()
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []
