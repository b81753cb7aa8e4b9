"""End states of a native run, and interrupts in every phase of it."""

from __future__ import annotations

import _thread
import asyncio
import sys
import threading
import time
from datetime import timezone

import pytest
from support import add, fast_model, run_threads, wait_until

import nbagent
from nbagent import events as ev
from nbagent.errors import StoppedByKeyboard
from nbagent.models import Reply, ScriptedModel, ToolCall


def test_success_record_is_complete():
    agent = nbagent.Agent(fast_model([[ToolCall("add", {"a": 2, "b": 3})], "The sum is 5."]), tools=[add])
    record = nbagent.run(agent, "add 2 and 3")
    assert record.status == "success"
    assert record.output == "The sum is 5."
    assert record.error is None
    assert [s.kind for s in record.steps] == ["action", "final"]
    assert record.steps[0].tool_calls[0].result == 5
    assert record.steps[0].tool_calls[0].status == "ok"
    assert record.started_at.tzinfo == timezone.utc
    assert record.ended_at >= record.started_at
    assert record.duration_s >= 0
    assert all(s.usage_source == "reported" for s in record.steps)
    assert record.input_tokens == sum(s.input_tokens for s in record.steps)
    assert record.output_tokens == sum(s.output_tokens for s in record.steps)
    assert record.usage_complete
    assert record.raise_for_status() is record


def test_model_error_ends_run_with_error_and_keeps_steps():
    agent = nbagent.Agent(fast_model([[ToolCall("add", {"a": 1, "b": 1})]]), tools=[add])
    record = nbagent.run(agent, "the script runs out in step 2")
    assert record.status == "error"
    assert record.error_type == "ModelError"
    assert "no turn 2" in record.error
    assert len(record.steps) == 2
    assert record.steps[0].tool_calls[0].status == "ok"
    assert record.steps[1].error == record.error
    with pytest.raises(nbagent.ModelError) as caught:
        record.raise_for_status()
    assert caught.value.record is record


def test_model_that_raises_unexpectedly_becomes_model_error():
    def broken(messages):
        raise RuntimeError("reply was not JSON")

    record = nbagent.run(nbagent.Agent(fast_model(broken)), "task")
    assert record.status == "error"
    assert record.error_type == "ModelError"
    assert "reply was not JSON" in record.error


def test_max_steps_is_its_own_end_state():
    model = fast_model(lambda messages: [ToolCall("add", {"a": 1, "b": 2})])
    record = nbagent.run(nbagent.Agent(model, tools=[add], max_steps=3), "loop forever")
    assert record.status == "max_steps"
    assert len(record.steps) == 3
    assert all(not s.interrupted for s in record.steps)
    with pytest.raises(nbagent.MaxStepsReached):
        record.raise_for_status()


def slow_agent(turns, tools=(), tokens_per_s=200.0, first_token_s=0.0, **options):
    return nbagent.Agent(
        ScriptedModel(turns, tokens_per_s=tokens_per_s, first_token_s=first_token_s), tools=tools, **options
    )


def test_interrupt_before_first_token():
    run = nbagent.start(slow_agent(["never seen"], first_token_s=30), "task")
    wait_until(lambda: run.record is not None and len(run.record.steps) == 1)
    assert run.interrupt() is True
    record = run.wait(timeout=10)
    assert record.status == "interrupted"
    step = record.steps[0]
    assert step.interrupted and step.model_output == ""
    assert step.input_tokens is None and step.usage_source == "unknown"
    assert record.input_tokens is None and not record.usage_complete
    with pytest.raises(nbagent.AgentInterrupted):
        record.raise_for_status()


def test_interrupt_mid_stream_keeps_the_text_so_far():
    run = nbagent.start(slow_agent(["word " * 2000], tokens_per_s=100), "task")
    wait_until(lambda: len(run.live_text(1)) >= 25)
    run.interrupt()
    record = run.wait(timeout=10)
    assert record.status == "interrupted"
    text = record.steps[0].model_output
    assert text.startswith("word word word word word")
    assert len(text) < len("word " * 2000)
    assert record.steps[0].interrupted


def test_interrupt_mid_async_tool_cancels_it():
    started = threading.Event()

    @nbagent.tool
    async def wait_forever() -> str:
        """Never returns by itself."""
        started.set()
        await asyncio.sleep(3600)
        return "unreachable"

    run = nbagent.start(slow_agent([[ToolCall("wait_forever")], "done"], tools=[wait_forever]), "task")
    assert started.wait(10)
    run.interrupt()
    record = run.wait(timeout=10)
    assert record.status == "interrupted"
    call = record.steps[0].tool_calls[0]
    assert call.status == "cancelled" and call.end_s is not None
    assert record.steps[0].interrupted


def test_interrupt_mid_sync_tool_that_checks_is_cancelled():
    started = threading.Event()

    @nbagent.tool
    def busy() -> str:
        """Works in small slices and checks for a Stop between them."""
        started.set()
        while True:
            nbagent.check_interrupt()
            time.sleep(0.001)

    run = nbagent.start(slow_agent([[ToolCall("busy")], "done"], tools=[busy]), "task")
    assert started.wait(10)
    run.interrupt()
    record = run.wait(timeout=10)
    assert record.status == "interrupted"
    assert record.steps[0].tool_calls[0].status == "cancelled"
    wait_until(lambda: not run_threads())


def test_interrupt_mid_sync_tool_that_ignores_it_abandons_it():
    started, release = threading.Event(), threading.Event()

    @nbagent.tool
    def stubborn() -> str:
        """Blocks until the test releases it, ignoring any Stop."""
        started.set()
        release.wait(60)
        return "late result"

    try:
        run = nbagent.start(slow_agent([[ToolCall("stubborn")], "done"], tools=[stubborn]), "task")
        assert started.wait(10)
        run.interrupt()
        record = run.wait(timeout=10)  # returns while the tool's thread is still blocked
        assert not release.is_set()
        assert record.status == "interrupted"
        call = record.steps[0].tool_calls[0]
        assert call.status == "abandoned" and call.result is None
    finally:
        release.set()
    wait_until(lambda: not run_threads())
    assert run.record.steps[0].tool_calls[0].result is None  # the late result is discarded


def test_interrupt_after_step_lets_the_step_finish():
    turns = [Reply("first I add " * 20, [ToolCall("add", {"a": 1, "b": 2})]), "never reached"]
    run = nbagent.start(slow_agent(turns, tools=[add], tokens_per_s=200), "task")
    wait_until(lambda: len(run.live_text(1)) > 0)
    assert run.interrupt(mode="after_step") is True
    record = run.wait(timeout=10)
    assert record.status == "interrupted"
    assert len(record.steps) == 1
    step = record.steps[0]
    assert not step.interrupted
    assert step.tool_calls[0].status == "ok" and step.tool_calls[0].result == 3
    assert step.input_tokens is not None  # the finished step keeps its usage


def test_interrupt_at_the_moment_of_the_final_answer_wins():
    outcome = {}

    def stop_on_final(event):
        if isinstance(event, ev.StepFinished) and event.kind == "final":
            outcome["accepted"] = run.interrupt()

    agent = nbagent.Agent(fast_model(["the answer"]))
    run = nbagent.Run(agent, "task", sinks=[stop_on_final])
    run.launch()
    record = run.wait(timeout=10)
    assert outcome["accepted"] is True
    assert record.status == "interrupted"
    assert record.output is None
    assert record.steps[-1].model_output == "the answer"  # nothing is lost


def test_second_interrupt_is_harmless():
    events = []
    run = nbagent.start(slow_agent(["word " * 2000]), "task", sinks=[events.append])
    wait_until(lambda: run.live_text(1))
    assert run.interrupt() is True
    run.interrupt()
    run.interrupt(mode="after_step")
    record = run.wait(timeout=10)
    assert record.status == "interrupted"
    assert sum(isinstance(e, ev.RunFinished) for e in events) == 1


def test_interrupt_after_the_end_changes_nothing():
    agent = nbagent.Agent(fast_model(["done"]))
    run = nbagent.start(agent, "task")
    record = run.wait(timeout=10)
    assert run.interrupt() is False
    assert run.interrupt(mode="after_step") is False
    assert run.status == "success" and run.record is record and record.output == "done"


def test_continue_after_interrupt_with_the_same_memory():
    seen = []

    def policy(messages):
        seen.append([m["role"] for m in messages])
        if len(seen) == 1:
            return [ToolCall("stall")]
        return "continued"

    release = threading.Event()

    @nbagent.tool
    async def stall() -> str:
        """Waits for the test."""
        await asyncio.sleep(3600)
        return ""

    agent = nbagent.Agent(ScriptedModel(policy, tokens_per_s=1e9, first_token_s=0), tools=[stall])
    run = nbagent.start(agent, "first task")
    wait_until(lambda: run.record.steps and run.record.steps[0].tool_calls)
    run.interrupt()
    assert run.wait(timeout=10).status == "interrupted"
    release.set()
    record = nbagent.run(agent, "go on", reset=False)
    assert record.status == "success" and record.output == "continued"
    # The interrupted tool call was answered, so the history stays a valid chat.
    assert seen[1] == ["user", "assistant", "tool", "user"]
    assert agent.memory[2]["content"] == nbagent.agent.INTERRUPTED_TOOL_RESULT


def test_a_failing_sink_is_reported_once_and_the_run_goes_on():
    def broken(event):
        raise ValueError("sink bug")

    run = nbagent.start(nbagent.Agent(fast_model(["fine"])), "task", sinks=[broken])
    record = run.wait(timeout=10)
    assert record.status == "success"
    assert len(run.sink_errors) == 1 and "sink bug" in run.sink_errors[0]


def test_sinks_see_events_in_order():
    events = []
    record = nbagent.run(
        nbagent.Agent(fast_model([[ToolCall("add", {"a": 1, "b": 1})], "2"]), tools=[add]),
        "t",
        sinks=[events.append],
    )
    kinds = [type(e).__name__ for e in events]
    assert kinds[0] == "RunStarted" and kinds[-1] == "RunFinished"
    assert kinds.index("ToolCallStarted") < kinds.index("ToolCallFinished") < kinds.index("StepFinished")
    assert all(e.run_id == record.run_id for e in events)
    assert [e.t for e in events] == sorted(e.t for e in events)


def test_many_runs_at_once_and_interrupt_all():
    runs = [nbagent.start(slow_agent(["word " * 5000]), f"task {i}") for i in range(8)]
    wait_until(lambda: all(r.live_text(1) for r in runs))
    assert nbagent.interrupt_all() == 8
    records = [r.wait(timeout=10) for r in runs]
    assert {r.status for r in records} == {"interrupted"}
    assert len({r.run_id for r in records}) == 8
    assert nbagent.runtime.handle.live_runs() == []


def test_await_run_from_another_loop():
    async def main():
        run = nbagent.start(nbagent.Agent(fast_model(["async done"])), "task")
        return await run

    assert asyncio.run(main()).output == "async done"


def test_cancelling_an_await_of_start_interrupts_the_run():
    async def awaited():
        return await nbagent.start(slow_agent(["word " * 5000]), "task")

    async def main():
        task = asyncio.ensure_future(awaited())
        await asyncio.sleep(0)
        wait_until(lambda: nbagent.runtime.handle.live_runs())
        (run,) = nbagent.runtime.handle.live_runs()
        wait_until(lambda: run.live_text(1))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert run.done()  # the cancel went on only once the interrupted record was complete
        return await run

    assert asyncio.run(main()).status == "interrupted"


def _main_thread_is_in(function_name: str) -> bool:
    frame = sys._current_frames().get(threading.main_thread().ident)
    while frame is not None:
        if frame.f_code.co_name == function_name and "handle" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


def test_keyboard_interrupt_during_run_interrupts_it_then_stops_the_caller_with_the_record():
    def press_ctrl_c():
        wait_until(lambda: _main_thread_is_in("wait"))
        _thread.interrupt_main()  # what Jupyter's interrupt does to the main thread

    threading.Thread(target=press_ctrl_c, daemon=True).start()
    with pytest.raises(StoppedByKeyboard) as stopped:
        nbagent.run(slow_agent(["word " * 5000]), "task")
    record = stopped.value.record
    assert record.status == "interrupted" and record.stop_reason == "keyboard"
    assert record.steps[0].interrupted
    assert nbagent.history.last() is record
    assert "nbagent.history.last()" in str(stopped.value)


def test_wait_timeout_leaves_the_run_going():
    run = nbagent.start(slow_agent(["word " * 5000]), "task")
    with pytest.raises(TimeoutError):
        run.wait(timeout=0.05)
    assert not run.done()
    run.interrupt()
    assert run.wait(timeout=10).status == "interrupted"


def test_no_thread_but_the_loop_thread_remains():
    before = set(threading.enumerate())

    @nbagent.tool
    def sync_tool(x: int) -> int:
        """Runs on a worker thread."""
        return x * 2

    agent = nbagent.Agent(fast_model([[ToolCall("sync_tool", {"x": 4})], "8"]), tools=[sync_tool])
    assert nbagent.run(agent, "t").status == "success"
    wait_until(lambda: not run_threads())
    extra = {t.name for t in set(threading.enumerate()) - before}
    assert extra <= {"nbagent-loop"}


def test_a_tool_can_run_a_sub_agent_with_await_but_not_with_a_blocking_wait():
    @nbagent.tool
    async def delegate(question: str) -> str:
        """Asks a sub-agent."""
        record = await nbagent.start(nbagent.Agent(fast_model(["sub answer"])), question)
        return record.output

    @nbagent.tool
    def delegate_blocking(question: str) -> str:
        """Would deadlock if it waited on the runner's thread; it runs on its own thread, so it may."""
        return nbagent.run(nbagent.Agent(fast_model(["blocking sub answer"])), question).output

    calls = [ToolCall("delegate", {"question": "q"}), ToolCall("delegate_blocking", {"question": "q"})]
    agent = nbagent.Agent(fast_model([calls, "ok"]), tools=[delegate, delegate_blocking])
    record = nbagent.run(agent, "task")
    assert [c.result for c in record.tool_calls] == ["sub answer", "blocking sub answer"]

    async def wait_on_the_loop():
        run = nbagent.start(nbagent.Agent(fast_model(["x"])), "t")
        try:
            run.wait()
        finally:
            await run

    future = asyncio.run_coroutine_threadsafe(wait_on_the_loop(), nbagent.runtime.loop.runner_loop())
    with pytest.raises(RuntimeError, match="deadlock"):
        future.result(10)
