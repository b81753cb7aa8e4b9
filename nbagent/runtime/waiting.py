"""Waiting for a run's record from the caller's side: blocking in slices, or awaiting.

Part of ``Run`` (``nbagent.runtime.handle``), kept apart so each file reads in one sitting. A
blocking wait takes the record from the handle's future in 0.1 s slices, so Jupyter's interrupt
(``KeyboardInterrupt`` in the main thread) lands between slices and becomes an interrupt of the run;
``StoppedByKeyboard`` is raised only once the interrupted record is complete. An ``await`` waits on
the caller's loop without blocking it; cancelling that await interrupts the run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from typing import TYPE_CHECKING

from nbagent.errors import StoppedByKeyboard
from nbagent.records import RunRecord
from nbagent.runtime.interrupts import blocking_wait, sigint_stops
from nbagent.runtime.loop import LoopThread

if TYPE_CHECKING:
    from nbagent.runtime.handle import Run

CANCELLED_AWAIT_GRACE_S = 5.0
"""When an ``await run`` is cancelled, how long it waits for the interrupted record before the
cancel propagates (a second cancel propagates at once)."""


def wait_blocking(run: Run, timeout: float | None = None) -> RunRecord:
    """``Run.wait``: block until the run ends (see its docstring)."""
    if threading.current_thread() is LoopThread.thread():
        raise RuntimeError("wait() on the runner's own thread would deadlock: use `await run` in a tool")
    deadline = None if timeout is None else time.monotonic() + timeout
    pressed = False
    with blocking_wait(run):
        while True:
            try:  # the outer try also covers the inner handler: a Ctrl-C may land anywhere
                try:
                    remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                    record = run._future.result(timeout=0.1 if remaining is None else min(0.1, remaining))
                    break
                except concurrent.futures.TimeoutError:
                    if deadline is not None and time.monotonic() >= deadline:
                        raise TimeoutError(f"run {run.run_id} still running after {timeout} s") from None
            except KeyboardInterrupt:
                if pressed:
                    raise KeyboardInterrupt(
                        f"run {run.run_id} is still stopping; its record will be in nbagent.history"
                    ) from None
                pressed = True
                run.interrupt(reason="keyboard")
    if pressed:
        raise StoppedByKeyboard(record)
    return record


async def wait_async(run: Run) -> RunRecord:
    """``await run``: wait on the caller's loop; a cancelled await interrupts the run."""
    waiter = asyncio.wrap_future(run._future)
    with sigint_stops(run) as keyboard:
        try:
            record = await asyncio.shield(waiter)
        except asyncio.CancelledError:
            # The awaiting task was cancelled: stop the run and, unless cancelled again, let
            # its interrupted record complete (and reach the store) before the cancel goes on.
            run.interrupt(reason="keyboard" if run.keyboard_pressed else "user")
            await asyncio.wait({waiter}, timeout=CANCELLED_AWAIT_GRACE_S)
            raise
    if keyboard.pressed:
        raise StoppedByKeyboard(record)
    return record
