"""Ctrl-C and blocking waits meeting a run, in-process: the SIGINT handler of an ``await`` and the
live view's honest buttons during a blocking wait. (The same in a real kernel: test_kernel_stop.)"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import warnings
from collections.abc import Iterator

import pytest
from kernel_support import html_text
from support import fast_model, wait_until

import nbagent
from nbagent.errors import StoppedByKeyboard
from nbagent.models import ScriptedModel
from nbagent.runtime import interrupts
from nbagent.view import display
from nbagent.view.live import BLOCKING_NOTICE, BLOCKING_TOOLTIP, LiveView


def talker(words: int = 3000) -> nbagent.Agent:
    """One step that streams ``words`` words at 400 tokens/s (7.5 s for 3000)."""
    return nbagent.Agent(ScriptedModel(["word " * words], tokens_per_s=400, first_token_s=0.0), name="talker")


def wakeup_fd() -> int:
    fd = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(fd)
    return fd


@pytest.fixture
def original_sigint() -> Iterator[object]:
    """The SIGINT handler (and wakeup fd) before the test; the test must leave exactly them."""
    before, fd = signal.getsignal(signal.SIGINT), wakeup_fd()
    yield before
    assert (signal.getsignal(signal.SIGINT), wakeup_fd()) == (before, fd)
    signal.signal(signal.SIGINT, before)


def sigint_once_our_handler_is_in(to_this_process: bool) -> threading.Thread:
    """Send SIGINT from another thread as soon as the handler of an await is installed: to the
    process, as a terminal does (the OS picks a thread), or to that other thread itself, which
    leaves a main thread asleep in ``select()`` unwoken unless the wakeup fd does it."""

    def send() -> None:
        wait_until(lambda: signal.getsignal(signal.SIGINT) is interrupts._on_sigint)
        if to_this_process:
            os.kill(os.getpid(), signal.SIGINT)
        else:
            signal.pthread_kill(threading.get_ident(), signal.SIGINT)

    thread = threading.Thread(target=send, name="test-sigint")
    thread.start()
    return thread


@pytest.mark.parametrize("to_this_process", [True, False], ids=["to the process", "to another thread"])
def test_ctrl_c_during_await_interrupts_the_run_at_once_and_raises_after_the_record(
    original_sigint, to_this_process: bool
) -> None:
    async def main() -> nbagent.RunRecord:
        run = nbagent.start(talker(), "talk")
        while not run.record.steps:  # so the press cuts a step, not the run's very start
            await asyncio.sleep(0.01)
        sender = sigint_once_our_handler_is_in(to_this_process)
        try:
            return await run
        finally:
            sender.join()

    try:
        asyncio.run(main())
    except StoppedByKeyboard as stopped:
        record = stopped.record
    except KeyboardInterrupt:  # asyncio's own handler got it: ours ran late (after the run) or never
        pytest.fail("Ctrl-C did not interrupt the awaited run")
    else:
        pytest.fail("the await did not raise StoppedByKeyboard")
    assert (record.status, record.stop_reason, record.steps[-1].interrupted) == (
        "interrupted",
        "keyboard",
        True,
    )
    assert record.duration_s is not None and record.duration_s < 5  # not the 7.5 s the run would take
    assert nbagent.history.last().run_id == record.run_id


def test_two_awaits_share_one_handler_and_the_last_to_end_puts_the_old_one_back(original_sigint) -> None:
    seen: list[object] = []

    async def main() -> None:
        short = nbagent.start(nbagent.Agent(fast_model(["quick"])), "short")
        long = nbagent.start(talker(), "long")
        first, second = asyncio.ensure_future(short), asyncio.ensure_future(long)  # a wraps b: not LIFO
        await first
        await asyncio.sleep(0)
        seen.append(signal.getsignal(signal.SIGINT))  # the long await still needs the handler
        long.interrupt()
        await second
        seen.append(signal.getsignal(signal.SIGINT))

    asyncio.run(main())
    assert seen[0] is interrupts._on_sigint
    assert seen[1] is not interrupts._on_sigint


class FakeRun:
    """Stands in for a ``Run`` that takes its time to stop."""

    def __init__(self) -> None:
        self.interrupts: list[str] = []
        self.finished = False

    def interrupt(self, mode: str = "now", *, reason: str = "user") -> bool:
        self.interrupts.append(reason)
        return True

    def done(self) -> bool:
        return self.finished


@pytest.fixture
def previous_handler(original_sigint) -> Iterator[list[int]]:
    """A Python SIGINT handler in place before the await, recording what it is handed."""
    calls: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: calls.append(signum))
    yield calls
    signal.signal(signal.SIGINT, original_sigint)


def test_a_second_ctrl_c_while_the_run_is_stopping_goes_to_the_previous_handler(previous_handler) -> None:
    run = FakeRun()

    async def main() -> bool:
        with interrupts.sigint_stops(run) as flag:  # type: ignore[arg-type]
            signal.raise_signal(signal.SIGINT)
            assert (run.interrupts, flag.pressed, previous_handler) == (["keyboard"], True, [])
            signal.raise_signal(signal.SIGINT)
            await asyncio.sleep(0)
            return flag.pressed

    assert asyncio.run(main()) is True
    assert run.interrupts == ["keyboard"]  # interrupted once; the second press was handed on
    assert previous_handler == [signal.SIGINT]


def test_an_await_that_may_not_raise_interrupts_its_run_and_hands_the_press_on(
    previous_handler, monkeypatch
) -> None:
    monkeypatch.setattr(
        interrupts, "_in_cell_task", lambda: False
    )  # as in a task of asyncio.gather in a kernel
    run = FakeRun()

    async def main() -> bool:
        with interrupts.sigint_stops(run) as flag:  # type: ignore[arg-type]
            signal.raise_signal(signal.SIGINT)
            await asyncio.sleep(0)
            return flag.pressed

    assert asyncio.run(main()) is False  # a KeyboardInterrupt from such a task would wedge the kernel
    assert run.interrupts == ["keyboard"] and previous_handler == [signal.SIGINT]


def test_no_handler_off_the_main_thread_or_when_ctrl_c_is_ignored(original_sigint) -> None:
    run = FakeRun()

    async def inside() -> object:
        with interrupts.sigint_stops(run):  # type: ignore[arg-type]
            return signal.getsignal(signal.SIGINT)

    result: list[object] = []
    thread = threading.Thread(target=lambda: result.append(asyncio.run(inside())))
    thread.start()
    thread.join()
    assert result == [original_sigint]
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        assert asyncio.run(inside()) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, original_sigint)


# -- the live view during a blocking wait ------------------------------------------------------


@pytest.fixture
def views(views, monkeypatch) -> list[LiveView]:
    """The shared undisplayed views (conftest), with the once-per-process warning re-armed."""
    monkeypatch.setattr(interrupts, "_warned", False)
    return views


def button_states(view: LiveView) -> list[tuple[bool, str]]:
    return [(b.disabled, b.tooltip) for b in (view.stop_button, view.after_step_button)]


def test_a_blocking_wait_disables_the_buttons_with_a_notice_and_a_timeout_gives_them_back(views) -> None:
    run = nbagent.start(talker(), "talk", display=True)
    (view,) = views
    seen: list[tuple[str, object]] = []
    for widget in (view.head, view.stop_button):
        widget.observe(
            lambda c: seen.append((threading.current_thread().name, c["new"])), ["value", "disabled"]
        )
    with pytest.warns(interrupts.BlockingWaitWarning, match="Interrupt"), pytest.raises(TimeoutError):
        run.wait(timeout=0.5)
    wait_until(lambda: button_states(view)[0][0] is False)
    assert button_states(view) == [(False, "Stop the run now, mid model call or tool"),
                                   (False, "Let the current step finish, then stop")]  # fmt: skip
    assert BLOCKING_NOTICE not in html_text(view.head.value)
    assert (threading.current_thread().name, True) not in seen  # never written from the waiting thread
    assert ("nbagent-loop", True) in seen and ("nbagent-loop", False) in seen
    assert any(isinstance(v, str) and BLOCKING_NOTICE in html_text(v) for _, v in seen)
    with warnings.catch_warnings(record=True) as later:
        warnings.simplefilter("always")
        with pytest.raises(TimeoutError):
            run.wait(timeout=0.2)
    assert [w for w in later if issubclass(w.category, interrupts.BlockingWaitWarning)] == []  # once
    run.interrupt()
    assert run.wait(timeout=30).status == "interrupted"


def test_while_a_blocking_wait_holds_the_kernel_the_buttons_say_why(views) -> None:
    run = nbagent.start(talker(), "talk", display=True)
    (view,) = views
    with pytest.warns(interrupts.BlockingWaitWarning), interrupts.blocking_wait(run):
        wait_until(lambda: button_states(view) == [(True, BLOCKING_TOOLTIP)] * 2)
        wait_until(lambda: BLOCKING_NOTICE in html_text(view.head.value))
        assert "● running" in html_text(view.head.value)
        run.interrupt()
        wait_until(run.done)
    final = run.wait()
    assert final.status == "interrupted"
    wait_until(lambda: "■ interrupted" in html_text(view.head.value))
    assert BLOCKING_NOTICE not in html_text(view.head.value)
    assert [d for d, _ in button_states(view)] == [True, True]  # the end disables them for good


def test_a_blocking_wait_off_the_main_thread_or_outside_a_kernel_changes_nothing(views, monkeypatch) -> None:
    run = nbagent.start(talker(), "talk", display=True)
    (view,) = views
    changes: list[object] = []
    view.stop_button.observe(lambda c: changes.append(c["new"]), "disabled")
    view.head.observe(lambda c: changes.append(BLOCKING_NOTICE in html_text(c["new"])), "value")
    errors: list[BaseException] = []

    def wait_in_a_thread() -> None:
        try:
            run.wait(timeout=0.3)
        except TimeoutError:
            pass
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=wait_in_a_thread)
    thread.start()
    thread.join()
    monkeypatch.setattr(display, "in_kernel", lambda: False)
    with warnings.catch_warnings(record=True) as seen, pytest.raises(TimeoutError):
        warnings.simplefilter("always")
        run.wait(timeout=0.3)
    assert errors == [] and seen == []
    assert True not in changes  # neither disabled nor a notice: a click would still work here
    run.interrupt()
    run.wait(timeout=30)


def test_a_ctrl_c_that_lands_as_the_views_say_blocking_still_stops_the_run(monkeypatch):
    """The views say "this cell is blocking" before the wait's own Ctrl-C handling begins: a
    Ctrl-C pressed the moment the notice shows lands in between, and must stop the run all the
    same (``StoppedByKeyboard`` after the record), never leave it running behind a bare
    ``KeyboardInterrupt``."""
    import contextlib

    from nbagent.runtime import waiting

    @contextlib.contextmanager
    def notice_then_ctrl_c(run, sinks=None):
        raise KeyboardInterrupt
        yield

    monkeypatch.setattr(waiting, "blocking_wait", notice_then_ctrl_c)
    run = nbagent.start(nbagent.Agent(ScriptedModel(["a long answer " * 200], tokens_per_s=50)), "go")
    with pytest.raises(StoppedByKeyboard) as stopped:
        run.wait(timeout=30)
    assert stopped.value.record.status == "interrupted"
    assert stopped.value.record.stop_reason == "keyboard"
