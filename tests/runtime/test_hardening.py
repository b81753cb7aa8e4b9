"""Stop always works and nothing is lost: whatever a tool, a model or a sink raises or returns.

Each test is one hole found by hostile inputs: a BaseException anywhere, a tool that swallows its
cancel, a run inside a tool, values that cannot be rendered, text that is not UTF-8, bad usage.
"""

from __future__ import annotations

import _thread
import asyncio
import contextlib
import sys
import threading

import pytest
from support import fast_model, wait_until

import nbagent
from nbagent import events as ev
from nbagent.analytics import runs_frame, steps_frame, tool_calls_frame
from nbagent.errors import StoppedByKeyboard
from nbagent.models import Model, ModelText, ModelUsage, ScriptedModel, ToolCall


class Custom(BaseException):
    """A BaseException of the user's own, neither Exception nor one asyncio knows."""


BASE_EXCEPTIONS = [SystemExit(2), KeyboardInterrupt(), GeneratorExit(), Custom("boom")]


def _next_runs_are_fine(agent: nbagent.Agent) -> None:
    """After a misbehaving run: the same agent runs again, and so does an unrelated one, at once."""
    other = nbagent.start(nbagent.Agent(fast_model(["other done"])), "other")
    again = nbagent.run(agent, "again")
    assert again.status == "success" and again.output == "again done"
    assert other.wait(timeout=20).output == "other done"
    assert nbagent.runtime.loop.LoopThread.thread().is_alive()


@pytest.mark.parametrize("exc", BASE_EXCEPTIONS, ids=lambda e: type(e).__name__)
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_base_exception_in_a_tool_is_a_tool_error_sync_and_async_alike(exc, kind):
    if kind == "sync":

        def raises() -> str:
            """Raises."""
            raise exc
    else:

        async def raises() -> str:
            """Raises."""
            raise exc

    model = fast_model([[ToolCall("raises")], "still here", "again done"])
    agent = nbagent.Agent(model, tools=[nbagent.tool(raises)])
    record = nbagent.run(agent, "t")
    assert record.status == "success" and record.output == "still here"
    call = record.tool_calls[0]
    assert call.status == "error" and type(exc).__name__ in call.error
    _next_runs_are_fine(agent)


class _RaisingModel(Model):
    """Streams a little text, then raises ``exc``; later calls answer normally."""

    name = "raising"

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc
        self.calls = 0

    async def stream(self, messages, tools):
        self.calls += 1
        if self.calls == 1:
            yield ModelText("half a ")
            raise self.exc
        yield ModelText("again done")
        yield ModelUsage(3, 2)


@pytest.mark.parametrize("exc", BASE_EXCEPTIONS, ids=lambda e: type(e).__name__)
def test_a_base_exception_from_a_model_stream_ends_the_run_as_an_error_record(exc):
    agent = nbagent.Agent(_RaisingModel(exc))
    record = nbagent.run(agent, "t")
    assert record.status == "error" and type(exc).__name__ in record.error
    assert record.steps[0].model_output == "half a "
    _next_runs_are_fine(agent)


@pytest.mark.parametrize("exc", BASE_EXCEPTIONS, ids=lambda e: type(e).__name__)
def test_a_base_exception_from_a_sink_is_reported_once_and_the_run_goes_on(exc):
    def sink(event: ev.RunEvent) -> None:
        raise exc

    agent = nbagent.Agent(fast_model(["done", "again done"]))
    run = nbagent.start(agent, "t", sinks=[sink])
    record = run.wait(timeout=20)
    assert record.status == "success" and record.output == "done"
    assert len(run.sink_errors) == 1 and type(exc).__name__ in run.sink_errors[0]
    _next_runs_are_fine(agent)


def test_if_the_loop_stops_every_live_run_ends_as_an_error_and_the_next_start_gets_a_new_loop():
    slow = nbagent.Agent(ScriptedModel(["word " * 5000], tokens_per_s=50, first_token_s=0))
    runs = [nbagent.start(slow, "a"), nbagent.start(nbagent.Agent(ScriptedModel(["x " * 5000])), "b")]
    wait_until(lambda: all(r.record.steps for r in runs))
    old = nbagent.runtime.loop.runner_loop()
    old.call_soon_threadsafe(old.stop)  # a misbehaving callback stops the runner's loop
    for r in runs:
        record = r.wait(timeout=20)
        assert record.status == "error" and "event loop stopped" in record.error
        assert record.steps and record.steps[0].ended_at is not None
    record = nbagent.run(nbagent.Agent(fast_model(["fresh"])), "t")
    assert record.output == "fresh" and nbagent.runtime.loop.runner_loop() is not old
    # The agent whose run died with the loop is not left locked: its next run works.
    slow.model = fast_model(["alive"])
    assert nbagent.run(slow, "again").output == "alive"
    wait_until(old.is_closed)  # retired: unwound on its own thread, then closed


def test_an_async_tool_that_swallows_its_cancel_is_abandoned_after_the_grace():
    entered = threading.Event()

    @nbagent.tool
    async def stubborn() -> str:
        """Retries until the test is over, whatever happens."""
        entered.set()
        while not over.is_set():
            with contextlib.suppress(BaseException):  # swallows every cancel, as found in the field
                await asyncio.sleep(0.01)
        return "late"

    over = threading.Event()
    try:
        run = nbagent.start(nbagent.Agent(fast_model([[ToolCall("stubborn")]]), tools=[stubborn]), "t")
        assert entered.wait(20)
        run.interrupt()
        record = run.wait(timeout=20)
        assert record.status == "interrupted"
        assert record.tool_calls[0].status == "abandoned"
    finally:
        over.set()  # the abandoned task ends, so later tests find the loop empty


def test_an_async_tool_cancelled_by_someone_else_is_a_tool_error_not_a_stop():
    @nbagent.tool
    async def awaits_a_cancelled_future() -> str:
        """Awaits something another party cancels."""
        future = asyncio.get_running_loop().create_future()
        future.cancel()
        return await future

    model = fast_model([[ToolCall("awaits_a_cancelled_future")], "carried on"])
    record = nbagent.run(nbagent.Agent(model, tools=[awaits_a_cancelled_future]), "t")
    assert record.status == "success" and record.output == "carried on"
    call = record.tool_calls[0]
    assert call.status == "error" and "not by a Stop" in call.error


def _main_thread_waits() -> bool:
    """True while the main thread waits on the run's future inside ``Run.wait``."""
    frame = sys._current_frames().get(threading.main_thread().ident)
    names = set()
    while frame is not None:
        names.add((frame.f_code.co_name, frame.f_code.co_filename.rsplit("/", 1)[-1]))
        frame = frame.f_back
    return ("wait", "handle.py") in names and ("result", "_base.py") in names


def test_a_second_ctrl_c_while_the_run_is_still_stopping_raises_at_once():
    release = threading.Event()

    @nbagent.tool
    def deaf() -> str:
        """Ignores the Stop for a while, then returns."""
        release.wait(20)
        return "late"

    deaf.grace_s = 30.0  # the run takes long to stop: its record is not there yet
    agent = nbagent.Agent(fast_model([[ToolCall("deaf")]]), tools=[deaf])

    def press_twice() -> None:
        wait_until(_main_thread_waits)
        _thread.interrupt_main()
        wait_until(lambda: run_holder and run_holder[0].scope.interrupted)
        _thread.interrupt_main()

    run_holder: list[nbagent.Run] = []
    run = nbagent.start(agent, "t")
    run_holder.append(run)
    threading.Thread(target=press_twice, daemon=True).start()
    with pytest.raises(KeyboardInterrupt) as pressed:
        run.wait()
    # Raised at once: the run is stopping (its tool holds it) but its record is not there yet.
    assert not isinstance(pressed.value, StoppedByKeyboard)
    assert run.scope.interrupted and not run.done()
    release.set()
    assert run.wait(timeout=20).status == "interrupted"


def test_stopping_a_parent_stops_the_child_run_a_sync_tool_started():
    child_started = threading.Event()
    child_runs: list[nbagent.Run] = []

    @nbagent.tool
    def delegate(question: str) -> str:
        """Asks a slower agent.

        Args:
            question: what to ask.
        """
        child = nbagent.start(nbagent.Agent(ScriptedModel(["word " * 5000], first_token_s=0)), question)
        child_runs.append(child)
        child_started.set()
        return child.wait().output or "none"

    parent = nbagent.start(
        nbagent.Agent(fast_model([[ToolCall("delegate", {"question": "q"})]]), tools=[delegate]), "t"
    )
    assert child_started.wait(20)
    parent.interrupt()
    child = child_runs[0].wait(timeout=20)
    assert parent.wait(timeout=20).status == "interrupted"
    assert child.status == "interrupted" and child.stop_reason == "parent"
    assert child.parent_run_id == parent.run_id and parent.record.parent_run_id is None


def test_stopping_a_parent_stops_the_child_run_an_async_tool_awaits():
    children: list[str] = []

    @nbagent.tool
    async def delegate() -> str:
        """Asks a slower agent."""
        record = await nbagent.start(nbagent.Agent(ScriptedModel(["word " * 5000], first_token_s=0)), "q")
        children.append(record.run_id)
        return str(record.output)

    parent = nbagent.start(nbagent.Agent(fast_model([[ToolCall("delegate")]]), tools=[delegate]), "t")
    wait_until(lambda: any(r.parent_run_id == parent.run_id for r in nbagent.runtime.handle.live_runs()))
    parent.interrupt()
    assert parent.wait(timeout=20).status == "interrupted"
    wait_until(lambda: any(r.parent_run_id == parent.run_id for r in nbagent.history.records()))
    child = next(r for r in nbagent.history.records() if r.parent_run_id == parent.run_id)
    assert child.status == "interrupted" and child.stop_reason == "parent"


class _Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")


@pytest.mark.parametrize("value", [2**20000, _Unprintable()], ids=["huge-int", "raising-repr"])
def test_a_result_that_cannot_be_rendered_stays_ok_and_nothing_downstream_raises(value):
    @nbagent.tool
    def odd() -> object:
        """Returns an odd value."""
        return value

    seen: list[str] = []

    def policy(messages):
        if messages[-1]["role"] == "tool":
            seen.append(messages[-1]["content"])
            return "done"
        return [ToolCall("odd")]

    record = nbagent.run(nbagent.Agent(fast_model(policy), tools=[odd]), "t")
    assert record.status == "success" and record.tool_calls[0].status == "ok"
    assert "<unprintable" in seen[0]
    assert str(record) and record._repr_html_() and repr(record)
    assert len(runs_frame([record])) == 1 and len(tool_calls_frame([record])) == 1


def test_lone_surrogates_anywhere_are_escaped_once_where_text_enters_the_record():
    bad = "bad \ud800 text"

    @nbagent.tool
    def echo(text: str) -> str:
        """Echoes.

        Args:
            text: what to echo.
        """
        raise ValueError(text)

    model = fast_model([[ToolCall("echo", {"text": bad})], bad])
    record = nbagent.run(nbagent.Agent(model, tools=[echo]), bad)
    for text in (
        record.task,
        record.output,
        record.tool_calls[0].arguments["text"],
        record.tool_calls[0].error,
    ):
        text.encode("utf-8")  # valid UTF-8 now
        assert "\\ud800" in text
    frames = (runs_frame([record]), steps_frame([record]), tool_calls_frame([record]))
    assert all(len(f) for f in frames)
    assert len(nbagent.history.runs()) >= 1


def test_history_is_bounded_and_says_so(caplog):
    nbagent.history.clear()
    nbagent.configure(history_limit=3)
    try:
        agent = nbagent.Agent(fast_model(lambda messages: "ok"))
        ids = [nbagent.run(agent, f"t{i}").run_id for i in range(5)]
        assert [r.run_id for r in nbagent.history.records()] == ids[-3:]
        assert nbagent.history.dropped() == 2
        assert "keeps the last 3 runs" in caplog.text
    finally:
        nbagent.configure(history_limit=1000)


def test_clear_errors_for_duplicate_tools_and_a_json_list_of_arguments():
    with pytest.raises(ValueError, match="two tools are named 'add'"):
        nbagent.Agent(fast_model([]), tools=[_add, _add])
    model = fast_model([[ToolCall("add", "[1, 2]")], "gave up"])
    record = nbagent.run(nbagent.Agent(model, tools=[_add]), "t")
    assert "must be a JSON object of named parameters, not a JSON list" in record.tool_calls[0].error


@nbagent.tool(name="add")
def _add(a: int, b: int) -> int:
    """Adds.

    Args:
        a: one.
        b: two.
    """
    return a + b


@pytest.mark.parametrize("bad", [-1, 2.5, "7"])
def test_a_model_reporting_invalid_usage_gets_a_model_error_naming_it(bad):
    class BadUsage(Model):
        name = "bad-usage"

        async def stream(self, messages, tools):
            yield ModelText("hi")
            yield ModelUsage(bad, 1)

    record = nbagent.run(nbagent.Agent(BadUsage()), "t")
    assert record.status == "error" and record.error_type == "ModelError"
    assert f"input_tokens={bad}" in record.error and "non-negative int" in record.error
    assert len(steps_frame([record])) == 1


class Subclassed(nbagent.Agent):
    """A user's own agent class."""


def _start(agent, task):
    return nbagent.start(agent, task)


def _run(agent, task):
    return nbagent.run(agent, task)


def _arun(agent, task):
    return asyncio.run(nbagent.arun(agent, task))


@pytest.mark.parametrize("call", [_start, _run, _arun], ids=["start", "run", "arun"])
@pytest.mark.parametrize(
    ("agent", "task", "message"),
    [
        (nbagent.Agent, "hi", r"not the class Agent: pass an instance, such as Agent\(\.\.\.\)"),
        (Subclassed, "hi", r"not the class Subclassed: pass an instance"),
        (nbagent.demo_agent, "hi", r"demo_agent is a function: call it\): pass an nbagent\.Agent"),
        (None, "hi", r"cannot run NoneType: pass an nbagent\.Agent"),
        ("hi", "task", r"cannot run str: pass an nbagent\.Agent"),
        ("agent", None, r"cannot run str: pass an nbagent\.Agent"),
        (nbagent.demo_agent(), 42, r"task must be a str, not int"),
        (nbagent.demo_agent(), b"hi", r"task must be a str, not bytes"),
    ],
    ids=["the-class", "a-subclass", "a-factory", "none", "a-task-as-agent", "text", "int-task", "bytes-task"],
)
def test_a_wrong_type_of_agent_or_task_is_a_type_error_at_start_that_says_what_to_pass(
    call, agent, task, message
):
    before = len(nbagent.history.records())
    with pytest.raises(TypeError, match=message):
        call(agent, task)
    assert len(nbagent.history.records()) == before  # refused before any run began


def test_construction_mistakes_fail_at_once_with_a_hint():
    with pytest.raises(TypeError, match=r"pass e\.g\. nbagent\.models\.OpenAIChatModel"):
        nbagent.Agent("gpt-4.1-mini")
    with pytest.raises(TypeError, match="task must be a str"):
        nbagent.start(nbagent.Agent(fast_model(["x"])), None)
    with pytest.raises(ValueError, match="not a valid tool name"):
        nbagent.tool(lambda x: x)
    with pytest.warns(UserWarning, match="no docstring"):
        nbagent.tool(_undocumented)
    with pytest.warns(UserWarning, match="no type hint for x"):
        nbagent.tool(_untyped)
    with pytest.raises(TypeError, match="names something undefined"):
        nbagent.tool(_undefined_hint)
    with pytest.raises(TypeError, match="take no 'images'"):
        nbagent.start(nbagent.Agent(fast_model(["x"])), "t", images=[])


def _undocumented(x: int) -> int:
    return x


def _untyped(x):
    """Untyped."""
    return x


def _undefined_hint(x: NoSuchType) -> int:  # type: ignore[name-defined]  # noqa: F821
    """Hint names nothing."""
    return 1


def test_model_errors_name_their_type_once():
    def fails(messages):
        raise nbagent.ModelError("ModelError: the server said no")

    record = nbagent.run(nbagent.Agent(fast_model(fails)), "t")
    assert record.error.count("ModelError") == 1


def test_a_per_run_max_steps_overrides_the_agents():
    agent = nbagent.Agent(fast_model(lambda messages: [ToolCall("add", {"a": 1, "b": 1})]), tools=[_add])
    record = nbagent.run(agent, "t", max_steps=2)
    assert record.status == "max_steps" and len(record.steps) == 2 and record.stop_reason == "max_steps"


def test_a_model_that_swallows_its_cancel_is_abandoned_and_its_late_text_dropped():
    over = threading.Event()

    class Stubborn(Model):
        name = "stubborn"

        def __init__(self) -> None:
            self.entered = threading.Event()

        async def stream(self, messages, tools):
            self.entered.set()
            while not over.is_set():
                with contextlib.suppress(BaseException):  # a retry loop that swallows the cancel
                    await asyncio.sleep(0.005)
            yield ModelText("late text")

    model = Stubborn()
    try:
        run = nbagent.start(nbagent.Agent(model), "t")
        assert model.entered.wait(20)
        run.interrupt()
        record = run.wait(timeout=20)
        assert record.status == "interrupted" and record.steps[0].model_output == ""
    finally:
        over.set()  # the abandoned stream ends; what it yields then reaches no record
    wait_until(lambda: _loop_is_idle())
    assert run.record.steps[0].model_output == ""


def _loop_is_idle() -> bool:
    async def count() -> int:
        return len(asyncio.all_tasks()) - 1

    return asyncio.run_coroutine_threadsafe(count(), nbagent.runtime.loop.runner_loop()).result(5) == 0


def test_a_child_started_by_a_tool_abandoned_after_its_parent_stopped_is_stopped_and_linked():
    stopped = threading.Event()
    children: list[nbagent.Run] = []

    @nbagent.tool
    def late_delegate() -> str:
        """Starts a child run after its parent was stopped."""
        stopped.wait(20)
        children.append(nbagent.start(nbagent.Agent(ScriptedModel(["word " * 5000], first_token_s=0)), "q"))
        return "started"

    parent = nbagent.start(
        nbagent.Agent(fast_model([[ToolCall("late_delegate")]]), tools=[late_delegate]), "t"
    )
    wait_until(lambda: parent.record.tool_calls)
    parent.interrupt()
    assert parent.wait(timeout=20).tool_calls[0].status == "abandoned"
    stopped.set()
    wait_until(lambda: children)
    child = children[0].wait(timeout=20)
    assert child.status == "interrupted" and child.stop_reason == "parent"
    assert child.parent_run_id == parent.run_id


def test_an_interrupt_raised_by_user_code_without_a_stop_is_not_a_user_stop():
    @nbagent.tool
    def checks_another_run() -> str:
        """Re-raises another run's interrupted record."""
        raise nbagent.AgentInterrupted("another run was stopped")

    model = fast_model([[ToolCall("checks_another_run")], "carried on"])
    record = nbagent.run(nbagent.Agent(model, tools=[checks_another_run]), "t")
    assert record.status == "success" and record.tool_calls[0].status == "error"

    class CancelsItself(Model):
        name = "cancels-itself"

        async def stream(self, messages, tools):
            yield ModelText("a")
            raise asyncio.CancelledError()

    record = nbagent.run(nbagent.Agent(CancelsItself()), "t")
    assert record.status == "error" and record.stop_reason == "error"
    assert "not by a Stop" in record.error


def test_a_run_stopped_while_queued_counts_its_wait_as_queued_not_as_run_time():
    agent = nbagent.Agent(ScriptedModel(["word " * 5000, "second"], first_token_s=0))
    first = nbagent.start(agent, "first")
    second = nbagent.start(agent, "second")
    wait_until(lambda: second.record.queued_after == first.run_id)
    second.interrupt()
    record = second.wait(timeout=20)
    first.interrupt()
    assert record.status == "interrupted" and record.steps == []
    assert record.queued_s > 0 and record.duration_s == 0.0


class _ExitingRepr:
    def __repr__(self) -> str:
        raise SystemExit("from a repr")


def test_a_repr_raising_a_base_exception_breaks_no_view_frame_or_store(tmp_path):
    @nbagent.tool
    def odd() -> object:
        """Returns an odd value."""
        return _ExitingRepr()

    store = nbagent.RunStore(tmp_path / "runs.db")
    model = fast_model([[ToolCall("odd")], "done"])
    record = nbagent.run(nbagent.Agent(model, tools=[odd]), "t", store=store, metadata={"x": _ExitingRepr()})
    assert record.status == "success"
    assert str(record) and record._repr_html_() and len(runs_frame([record])) == 1
    assert store.record(record.run_id).status == "success"
    store.close()
