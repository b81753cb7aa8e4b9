"""Jupyter's interrupt and blocking waits, as they meet a run.

Two kernel facts shape this module (measured on ipykernel 7.4; see docs/architecture.md):

- While a cell *blocks* (``run.wait()``, ``nbagent.run``) the kernel takes no comm message, so a
  click on the view's Stop button waits until the cell has ended, when it is useless. (ipykernel
  7.4 can be made to route one comm to a subshell thread, but only through two private names
  that 7.3 lacks; 6.x has no subshells.) So ``blocking_wait(run)`` makes the view say so at once:
  its buttons are disabled, with a notice naming what works instead (Jupyter's ■ Interrupt, which
  the blocking wait turns into an interrupt of the run, or ``await run``), and a warning is shown
  once per process. When the wait ends with the run still live (a ``TimeoutError``), the buttons
  come back.

- While a cell *awaits*, ipykernel's SIGINT handler queues a cancel of the cell on the kernel's
  loop without waking the loop, so the cell stops only when what it awaits ends: ``await run``
  ended with the run, recorded ``success``, then a bare ``CancelledError``. ``sigint_stops(run)``
  installs a handler for the length of the await that interrupts the run at once (the run's end
  then wakes the kernel's loop) and sets the flag's ``pressed``, so the runner raises
  ``StoppedByKeyboard`` (a ``KeyboardInterrupt``) once the record is complete: the cell fails and
  the cells queued after it are aborted. A second SIGINT while the run is still stopping goes to
  the handler that was there before (the kernel's, which cancels the cell).

Who may raise. A ``KeyboardInterrupt`` raised in an asyncio task other than the cell's own
(``asyncio.gather(run_a, run_b)`` wraps each await in a task) escapes the kernel's event loop and
wedges the kernel. So ``pressed`` is set only for an await in the cell's own task (or outside
IPython, where a ``KeyboardInterrupt`` ending the loop is what Ctrl-C means). For any other await
the handler interrupts the run and then calls the kernel's handler, which cancels the cell: it
fails with ``CancelledError``, and the records are complete a moment later.

Waking the loop. Python runs a signal handler on the main thread, at its next bytecode; but the
OS may deliver SIGINT to any thread, and then a main thread asleep in the loop's ``select()``
does not wake, so the handler ran only when the awaited run ended (seen about once in 30 tries).
So while a handler is installed, a ``signal.set_wakeup_fd`` socket read by the awaiting loop
wakes it whichever thread takes the signal; whatever wakeup fd was set before gets the same bytes
and is put back at the end. The awaits and the cell (below) share one such socket, counted, since
they end in any order (a cancelled cell ends before the awaits of its gathered tasks).

Any other await in a cell (``await asyncio.sleep(2.5)`` while a run goes on in the background):
ipykernel's handler cancels the cell, which failed with a bare ``CancelledError`` while the runs
it started went on. ``watch_cells()`` (from the first run in a kernel on) wraps the kernel's
handler at the start of each cell that awaits: ■ Interrupt then stops the runs this cell started
(reason ``keyboard``; those live when the cell began are left alone) and cancels the cell with a
message that names what was stopped and what goes on. A second press goes straight to the
kernel's handler. With no run live, the kernel's handler is all that runs.

Several awaits at once share one handler: the first to start installs it, the last to end puts
back what was there before (unless something else replaced it meanwhile), in whatever order they
end. Only the main thread can own a SIGINT handler, so elsewhere these are no-ops. The handler
runs on the main thread between two bytecodes, possibly in the middle of this module's own code,
so the registry is a plain list changed by single operations and read as a snapshot, never under
a lock (the handler would deadlock on a lock its own thread holds).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import threading
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nbagent.runtime.handle import Run
    from nbagent.runtime.source import Sink


class BlockingWaitWarning(UserWarning):
    """A cell blocks on a run whose live view is shown, so its Stop buttons cannot work."""


BLOCKING_WARNING = (
    "nbagent: this cell blocks until the run ends, and the kernel takes no widget click meanwhile, "
    "so the view's Stop buttons are disabled. To stop the run use Jupyter's ■ Interrupt (Kernel → "
    "Interrupt); to keep Stop working, start the run with `run = nbagent.start(...)` and wait with "
    "`record = await run`. (Shown once.)"
)


@dataclass
class KeyboardFlag:
    """What the SIGINT handler did to one awaited run. ``pressed``: the run was interrupted by
    Ctrl-C / Jupyter's interrupt, and the await may raise ``StoppedByKeyboard`` once it has the
    record."""

    pressed: bool = False


@dataclass(eq=False)
class _Await:
    run: Run
    flag: KeyboardFlag
    loop: asyncio.AbstractEventLoop
    may_raise: bool
    stopped: bool = False
    """The handler has interrupted this run: the next SIGINT goes to the previous handler."""


class _Wake:
    """Wakes ``loop`` when a signal arrives on any thread (see "Waking the loop" above)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.reader, self.writer = socket.socketpair()
        self.previous_fd: int | None = None
        """The wakeup fd we replaced; ``None`` until ours is set."""
        try:
            self.reader.setblocking(False)
            self.writer.setblocking(False)
            loop.add_reader(self.reader.fileno(), self._drain)
            self.previous_fd = signal.set_wakeup_fd(self.writer.fileno(), warn_on_full_buffer=False)
        except BaseException:
            self.close()
            raise

    def _drain(self) -> None:
        with contextlib.suppress(OSError):
            data = self.reader.recv(4096)
            if data and self.previous_fd not in (None, -1):
                os.write(self.previous_fd, data)  # its owner still learns of its signals

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.loop.remove_reader(self.reader.fileno())
        if self.previous_fd is not None:
            with contextlib.suppress(ValueError):
                current = signal.set_wakeup_fd(self.previous_fd)
                if current != self.writer.fileno():  # someone set theirs meanwhile: leave it
                    signal.set_wakeup_fd(current)
        self.reader.close()
        self.writer.close()


@dataclass
class _Handler:
    awaits: list[_Await] = field(default_factory=list)
    previous: Any = None
    """The SIGINT handler to defer to and to put back when the last await ends."""


_handler = _Handler()
_warned = False
_wake: _Wake | None = None
_wake_users = 0


def _wake_up(loop: asyncio.AbstractEventLoop) -> None:
    """One more user of the wakeup socket (the first makes it for ``loop``)."""
    global _wake, _wake_users
    _wake_users += 1
    if _wake is None:
        with contextlib.suppress(Exception):  # a loop without add_reader (Windows' proactor)
            _wake = _Wake(loop)


def _wake_down() -> None:
    """One user fewer: the last puts back the wakeup fd that was there before."""
    global _wake, _wake_users
    _wake_users -= 1
    if _wake_users == 0:
        wake, _wake = _wake, None
        if wake is not None:
            wake.close()


def _nothing() -> None:
    pass


def _defer(signum: int, frame: FrameType | None, awaits: list[_Await]) -> None:
    """Hand a SIGINT to the handler that was there before ours."""
    # ipykernel's handler queues its cancel with a plain call_soon, which does not wake a loop
    # asleep in select(): wake the awaiting loops so the cancel runs now, not when a timer fires.
    for loop in {a.loop for a in awaits}:
        with contextlib.suppress(RuntimeError):  # a closed loop
            loop.call_soon_threadsafe(_nothing)
    previous = _handler.previous
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:
        raise KeyboardInterrupt  # SIG_DFL: what Python does by default


def _interrupt_soon(run: Run) -> None:
    """Interrupt ``run`` from a signal handler without taking a lock here: the handler may have
    interrupted this very thread inside the run's cancel scope (or an ``Event.set`` in it), so the
    interrupt is handed to the run's loop, which is another thread and takes it within a moment."""
    run.keyboard_pressed = True  # a plain attribute: no lock; the await's own cancel reads it
    loop = getattr(run, "_loop", None)
    try:
        if loop is None:
            raise RuntimeError("not started")
        loop.call_soon_threadsafe(lambda: run.interrupt("now", reason="keyboard"))
    except RuntimeError:  # no loop, or a closed one: nothing else can hold its locks now
        run.interrupt("now", reason="keyboard")


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    awaits = list(_handler.awaits)
    fresh = [a for a in awaits if not a.stopped and not a.run.done()]
    if not fresh:  # a second press while the runs are stopping, or nothing left to stop
        _defer(signum, frame, awaits)
        return
    defer = False
    for entry in fresh:
        entry.stopped = True
        _interrupt_soon(entry.run)
        if entry.may_raise:
            entry.flag.pressed = True
        else:
            defer = True
    if defer:
        _defer(signum, frame, awaits)


def _in_cell_task() -> bool:
    """True when this await may end in a ``KeyboardInterrupt``: it runs in the task of an IPython
    cell (whose ``run_code`` catches it), or outside IPython altogether."""
    shell = None
    with contextlib.suppress(ImportError):
        from IPython import get_ipython

        shell = get_ipython()
    if shell is None:
        return True
    task = asyncio.current_task()
    coro = task.get_coro() if task is not None else None
    return getattr(coro, "__qualname__", "").endswith("run_cell_async")


def _register(run: Run, flag: KeyboardFlag) -> _Await | None:
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    current = signal.getsignal(signal.SIGINT)
    ours = current is _on_sigint
    if not ours and not callable(current):
        return None  # Ctrl-C is ignored (SIG_IGN), fatal (SIG_DFL) or not Python's: leave it so
    entry = _Await(run, flag, loop, _in_cell_task())
    _handler.awaits.append(entry)
    _wake_up(loop)
    if not ours:
        _handler.previous = current
        signal.signal(signal.SIGINT, _on_sigint)
    return entry


def _unregister(entry: _Await) -> None:
    with contextlib.suppress(ValueError):
        _handler.awaits.remove(entry)
    _wake_down()
    if not _handler.awaits and signal.getsignal(signal.SIGINT) is _on_sigint:
        signal.signal(signal.SIGINT, _handler.previous)


@contextlib.contextmanager
def sigint_stops(run: Run) -> Iterator[KeyboardFlag]:
    """For the length of an ``await`` of ``run`` on the main thread: SIGINT (Ctrl-C, Jupyter's
    ■ Interrupt) interrupts the run at once, and the yielded flag says whether the await may then
    raise ``StoppedByKeyboard``. Elsewhere (another thread, no running loop, SIGINT ignored) it
    does nothing and the flag stays unset. Any handle with ``interrupt(mode, reason=)``,
    ``done()``, ``keyboard_pressed`` and the ``_loop`` that takes its interrupts serves as
    ``run`` (a ``Batch`` does)."""
    flag = KeyboardFlag()
    entry = _register(run, flag)
    try:
        yield flag
    finally:
        if entry is not None:
            _unregister(entry)


def _held_views(run: Run, sinks: Iterable[Sink]) -> list[Sink]:
    """The ``sinks`` of ``run`` that a blocking wait on this thread makes unclickable
    (``Sink.block`` says whether it held anything): in a kernel, clicks reach only an idle main
    thread (each view knows whether it is in one)."""
    if threading.current_thread() is not threading.main_thread() or run.done():
        return []
    return [sink for sink in sinks if sink.block()]


_OURS = ("nbagent", "contextlib")


def _user_stacklevel() -> int:
    """The ``stacklevel`` of the first frame outside nbagent, so a warning names the user's line."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] in _OURS:
        frame, level = frame.f_back, level + 1
    return level


def _warn_once() -> None:
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(BLOCKING_WARNING, BlockingWaitWarning, stacklevel=_user_stacklevel())


@contextlib.contextmanager
def blocking_wait(run: Run, sinks: Iterable[Sink] | None = None) -> Iterator[None]:
    """Around a blocking wait for ``run``: on a kernel's main thread, its live views disable their
    Stop buttons and say why until the wait ends, and a warning says so once per process. Clicks
    cannot reach a kernel whose main thread blocks; Jupyter's ■ Interrupt can, and the wait turns
    it into an interrupt of the run. Elsewhere it does nothing. ``sinks``: the views to hold
    (default ``run.sinks``; a batch, whose rows are not sinks, holds none)."""
    views = _held_views(run, run.sinks if sinks is None else sinks)
    if views:
        _warn_once()
    try:
        yield
    finally:
        for view in views:
            view.unblock()


# -- ■ Interrupt during any other await of a cell ---------------------------------------------


@dataclass(eq=False)
class _Cell:
    """The cell running now, as the SIGINT handler needs it."""

    task: asyncio.Task[Any]
    loop: asyncio.AbstractEventLoop
    kernel_handler: Any
    """The handler ipykernel set for this cell (it cancels the cell)."""
    before: frozenset[str]
    """The runs live when the cell began: not this cell's to stop."""
    pressed: bool = False
    ended: bool = False
    """The cell has ended; the kernel puts its own handler back a moment later."""


_cell: _Cell | None = None
_watching = False


def watch_cells() -> None:
    """In a Jupyter kernel, on the main thread: from now on ■ Interrupt during a cell's await of
    anything but a run stops the runs that cell started and says so (see the module docstring).
    Once; elsewhere it does nothing."""
    global _watching
    if _watching or threading.current_thread() is not threading.main_thread():
        return
    shell = _kernel_shell()
    if shell is None:
        return
    _watching = True
    shell.events.register("pre_run_cell", _cell_began)
    shell.events.register("post_run_cell", _cell_ended)
    _cell_began()  # the cell running now, which is starting the first run


def _kernel_shell() -> Any:
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell if getattr(shell, "kernel", None) is not None else None


def _cell_ended(result: object = None) -> None:
    cell = _cell
    if cell is not None and not cell.ended:
        cell.ended = True
        _wake_down()


def _cell_began(info: object = None) -> None:
    """At the start of a cell (IPython's ``pre_run_cell``): wrap the kernel's handler if it awaits."""
    global _cell
    _cell_ended()
    _cell = None
    if threading.current_thread() is not threading.main_thread() or not _in_cell_task():
        return  # a cell without top-level await runs blocking: SIGINT is a KeyboardInterrupt there
    task = asyncio.current_task()
    handler = signal.getsignal(signal.SIGINT)
    if task is None or not callable(handler) or handler in (_on_sigint, _on_cell_sigint):
        return
    from nbagent.runtime.handle import live_runs

    _cell = _Cell(task, task.get_loop(), handler, frozenset(run.run_id for run in live_runs()))
    signal.signal(signal.SIGINT, _on_cell_sigint)
    _wake_up(_cell.loop)  # a SIGINT taken by another thread wakes the loop (see "Waking the loop")


def _on_cell_sigint(signum: int, frame: FrameType | None) -> None:
    cell = _cell
    if cell is None:  # never installed without a cell; a KeyboardInterrupt here would wedge the kernel
        return
    if cell.pressed or cell.ended or cell.task.done():
        cell.kernel_handler(signum, frame)
        return
    cell.pressed = True
    # Not here: the handler may have interrupted this thread inside the runs' lock.
    cell.loop.call_soon_threadsafe(_stop_cell, cell, signum)


def _stop_cell(cell: _Cell, signum: int) -> None:
    """On the kernel's loop: stop this cell's runs and cancel the cell, saying what happened."""
    from nbagent.runtime.handle import live_runs

    runs = [run for run in live_runs() if not run.done()]
    if not runs or cell.task.done():
        cell.kernel_handler(signum, None)
        return
    mine = [run for run in runs if run.run_id not in cell.before]
    for run in mine:
        run.interrupt("now", reason="keyboard")
    cell.task.cancel(_stopped_message(mine, [run for run in runs if run.run_id in cell.before]))


def _stopped_message(stopped: list[Run], going: list[Run]) -> str:
    """What a cell cancelled by ■ Interrupt says about the runs."""
    parts = ["■ Interrupt cancelled this cell"]
    if stopped:
        parts.append(f"stopped {_runs(stopped)} it started (records in nbagent.history)")
    if going:
        them = "it" if len(going) == 1 else "them"
        parts.append(
            f"{_runs(going)} started by earlier cells {'goes' if len(going) == 1 else 'go'} on "
            f"(stop {them} with the Stop button or run.interrupt())"
        )
    return "; ".join(parts)


def _runs(runs: list[Run]) -> str:
    ids = ", ".join(run.run_id for run in runs)
    return f"run {ids}" if len(runs) == 1 else f"{len(runs)} runs ({ids})"
