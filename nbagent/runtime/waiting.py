"""Waiting for a handle's end from the caller's side: blocking in slices, or awaiting.

Part of ``Run`` (``nbagent.runtime.handle``), kept apart so each file reads in one sitting; a
``Batch`` (``nbagent.batches.handle``) waits through the same two functions, so Ctrl-C and
Jupyter's ■ Interrupt stop a batch as they stop a run. A blocking wait takes the result from the
handle's future in 0.1 s slices, so Jupyter's interrupt (``KeyboardInterrupt`` in the main thread)
lands between slices and becomes an interrupt of the handle; the keyboard's exception
(``StoppedByKeyboard`` for a run) is raised only once the interrupted handle has ended. An
``await`` waits on the caller's loop without blocking it; cancelling that await, or SIGINT
during it (``nbagent.runtime.interrupts.sigint_stops``), interrupts the handle.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from nbagent.errors import StoppedByKeyboard
from nbagent.runtime.interrupts import blocking_wait, sigint_stops
from nbagent.runtime.loop import LoopThread

if TYPE_CHECKING:
    from nbagent.events import Stopper
    from nbagent.runtime.cancel import InterruptMode
    from nbagent.runtime.handle import Run
    from nbagent.runtime.source import Sink

CANCELLED_AWAIT_GRACE_S = 5.0
"""When an ``await run`` is cancelled, how long it waits for the interrupted record before the
cancel propagates (a second cancel propagates at once)."""


class Waitable(Protocol):
    """What the waits need of a handle: a ``Run``, a ``Batch``."""

    completion: concurrent.futures.Future[Any]
    keyboard_pressed: bool
    """Set by the SIGINT handler before it interrupts the handle."""

    def done(self) -> bool: ...

    def interrupt(self, mode: InterruptMode = "now", *, reason: Stopper = "user") -> bool: ...


@dataclass(frozen=True)
class WaitEnds:
    """How a wait on one kind of handle reads and ends."""

    name: str
    """The handle in messages: ``run 1a2b...``, ``batch 'qa'``."""
    instead: str
    """What to do instead of a blocking wait on the runner's own thread."""
    still_stopping: str
    """The ``KeyboardInterrupt`` of a second press while the handle is still stopping."""
    result: Callable[[Any], Any]
    """What the wait returns, from the value of the handle's future."""
    stopped: Callable[[Any], BaseException]
    """What the wait raises, from that value, when the keyboard stopped the handle."""
    views: tuple[Sink, ...] = ()
    """The sinks a blocking wait holds (``Sink.block``): a run's views; a batch has none."""


def run_ends(run: Run) -> WaitEnds:
    return WaitEnds(
        name=f"run {run.run_id}",
        instead="use `await run` in a tool",
        still_stopping=f"run {run.run_id} is still stopping; its record will be in nbagent.history",
        result=_same,
        stopped=StoppedByKeyboard,
        views=run.sinks,
    )


def _same(value: Any) -> Any:
    return value


def wait_blocking(run: Waitable, timeout: float | None = None, ends: WaitEnds | None = None) -> Any:
    """``Run.wait`` and ``Batch.wait``: block until the handle ends (see their docstrings)."""
    ends = ends if ends is not None else run_ends(run)  # type: ignore[arg-type]
    if threading.current_thread() is LoopThread.thread():
        raise RuntimeError(f"wait() on the runner's own thread would deadlock: {ends.instead}")
    deadline = None if timeout is None else time.monotonic() + timeout
    pressed = held = False
    with contextlib.ExitStack() as views:
        while True:
            try:  # the outer try also covers the inner handler: a Ctrl-C may land anywhere
                try:
                    if not held:  # inside the try: a Ctrl-C as the views say "blocking" stops the run
                        held = True
                        views.enter_context(blocking_wait(run, ends.views))
                    remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                    value = run.completion.result(timeout=0.1 if remaining is None else min(0.1, remaining))
                    break
                except concurrent.futures.TimeoutError:
                    if deadline is not None and time.monotonic() >= deadline:
                        raise TimeoutError(f"{ends.name} still running after {timeout} s") from None
            except KeyboardInterrupt:
                if pressed:
                    raise KeyboardInterrupt(ends.still_stopping) from None
                pressed = True
                run.interrupt(reason="keyboard")
    if pressed:
        __tracebackhide__ = True  # IPython and pytest show the user's line, not this frame
        raise ends.stopped(value)
    return ends.result(value)


async def wait_async(run: Waitable, ends: WaitEnds | None = None) -> Any:
    """``await run`` / ``await batch``: wait on the caller's loop; a cancelled await interrupts."""
    ends = ends if ends is not None else run_ends(run)  # type: ignore[arg-type]
    waiter = asyncio.wrap_future(run.completion)
    with sigint_stops(run) as keyboard:
        try:
            value = await asyncio.shield(waiter)
        except asyncio.CancelledError:
            # The awaiting task was cancelled: stop the handle and, unless cancelled again, let
            # its interrupted record complete (and reach the store) before the cancel goes on.
            run.interrupt(reason="keyboard" if run.keyboard_pressed else "user")
            await asyncio.wait({waiter}, timeout=CANCELLED_AWAIT_GRACE_S)
            raise
    if keyboard.pressed:
        __tracebackhide__ = True
        raise ends.stopped(value)
    return ends.result(value)
