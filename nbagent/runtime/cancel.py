"""The cancel scope: one per run, the only way a run is stopped.

Design. A run is one asyncio task on the runner's private loop. ``interrupt("now")`` cancels that
task with ``loop.call_soon_threadsafe(task.cancel)``, so every ``await`` in the agent (a streaming
model call, an async tool, the wait on a sync tool's thread) is a cancellation point and the run
stops within one loop iteration, not at the end of the in-flight call. ``interrupt("after_step")``
only raises a flag that sources check between steps; a wait that must end at the request awaits
``after_step_requested()`` beside its own work.

Who wins a race. The runner calls ``close()`` when the source has finished. ``interrupt`` and
``close`` take the same lock: an interrupt accepted before ``close`` (it returned True) always ends
the run ``"interrupted"``, even if the source finished its last step in the meantime; an
interrupt after ``close`` is a no-op that returns False. So ``interrupt("now") is True`` means
exactly "this run ends interrupted".

Children. A run started inside a tool of another run (``nbagent.run`` in a sync tool, ``await start`` in
an async one) finds its parent's scope in the ``current_scope`` context variable and is adopted:
an interrupt("now") of the parent interrupts every live child with the reason ``"parent"``, and a
child adopted after its parent was interrupted is interrupted at once. A closed child leaves its
parent. "after_step" does not propagate: the parent's step, child run included, finishes.

Lost cancels. A cancel swallowed on its way down (CPython 3.11's ``asyncio.wait_for``, a bare
``except``) is delivered again to the run's tasks: see ``nbagent.runtime.lost_cancels``.

Every public method is thread-safe and idempotent; a click handler on any thread may call them.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from typing import Any, Literal

from nbagent import events as ev
from nbagent.errors import AgentInterrupted
from nbagent.runtime.lost_cancels import TaskTree, mark_run_task

InterruptMode = Literal["now", "after_step"]


class CancelScope:
    """Thread-safe, idempotent cancellation for one run."""

    def __init__(self, run_id: str | None = None) -> None:
        self.run_id = run_id
        # Reentrant: a SIGINT handler (Jupyter's ■ Interrupt during ``await run``) may call
        # ``interrupt`` on the main thread while that thread is inside ``interrupt`` already.
        self._lock = threading.RLock()
        self._now = threading.Event()
        self._after_step = threading.Event()
        # Invariant: a waiter is here only while neither flag is set (setting one wakes them all).
        self._step_waiters: list[asyncio.Future[None]] = []
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[object] | None = None
        self._parent: CancelScope | None = None
        self._children: set[CancelScope] = set()
        self.tasks = TaskTree()
        """The tasks started inside the run (loop thread only)."""
        self.requested_at: float | None = None
        """``time.perf_counter()`` when the first accepted interrupt arrived."""
        self.now_reason: ev.Stopper | ev.LimitName | None = None
        """Who asked for the interrupt("now") that was accepted: ``"user"``, ``"parent"``..."""
        self.after_step_reason: ev.Stopper | ev.LimitName | None = None
        self.limit: ev.LimitName | str | None = None
        """The budget that stopped the run (``Limits`` field name), when one did."""
        self.limit_message: str | None = None

    def bind(self, task: asyncio.Task[object]) -> None:
        """Attach the run's task. Called once, on the loop thread, as the task starts."""
        with self._lock:
            self._loop = task.get_loop()
            self._task = task
            mark_run_task(task)
            if self._now.is_set():
                self._cancel()

    def interrupt(self, mode: InterruptMode = "now", reason: ev.Stopper | ev.LimitName = "user") -> bool:
        """Ask the run to stop; True if the run was still live. Idempotent; any thread.

        ``"now"`` returning True guarantees the run ends ``"interrupted"``. ``"after_step"`` stops
        at the next step boundary; if the current step is the final answer the run ends
        ``"success"``, as there is nothing left to stop. ``reason`` ends up in the record's
        ``stop_reason`` (the first accepted one of each mode wins).
        """
        if mode not in ("now", "after_step"):
            raise ValueError(f"mode must be 'now' or 'after_step', not {mode!r}")
        with self._lock:
            if self._closed:
                return False
            if self.requested_at is None:
                self.requested_at = time.perf_counter()
            if mode == "after_step":
                if self.after_step_reason is None:
                    self.after_step_reason = reason
                self._after_step.set()
                self._wake_step_waiters()
                return True
            if self._now.is_set():
                return True
            self.now_reason = reason
            self._now.set()
            self._wake_step_waiters()
            loop, task = self._loop, self._task
            children = list(self._children)
        for child in children:  # first, so a child learns why before its awaiting tool is cancelled
            child.interrupt("now", reason="parent")
        if loop is not None and task is not None:
            with contextlib.suppress(RuntimeError):  # a closing loop: the run is ending anyway
                loop.call_soon_threadsafe(self._cancel)
        return True

    def _wake_step_waiters(self) -> None:
        """Wake every ``after_step_requested`` await, on its own loop (under the lock)."""
        for waiter in self._step_waiters:
            with contextlib.suppress(RuntimeError):  # its loop is closed: nobody awaits it any more
                waiter.get_loop().call_soon_threadsafe(_resolve, waiter)
        self._step_waiters.clear()

    async def after_step_requested(self) -> None:
        """Return once the run should stop at its next step boundary (``stop_after_step``: either
        mode was asked for). What a source or a wait inside a run awaits beside its own work,
        instead of looking at the flag a few times a second; an interrupt from any thread wakes it
        within one loop iteration."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        with self._lock:
            if self.stop_after_step:
                return
            self._step_waiters.append(waiter)
        try:
            await waiter
        finally:
            with self._lock:
                if waiter in self._step_waiters:
                    self._step_waiters.remove(waiter)

    def _cancel(self) -> None:
        """Cancel the run's task (on the loop thread) and watch for a cancel lost on the way."""
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            self.tasks.stopped(task)

    def trip(self, limit: ev.LimitName | str, message: str, mode: InterruptMode = "now") -> bool:
        """Stop the run because the budget ``limit`` was crossed: the run ends ``"limit"``, unless
        a Stop was accepted first (then it stays the user's). Idempotent; any thread."""
        with self._lock:
            if self._closed or self._now.is_set() or self.limit is not None:
                return False
            self.limit, self.limit_message = limit, message
            return self.interrupt(mode, reason=limit)  # type: ignore[arg-type]

    def adopt(self, child: CancelScope) -> None:
        """Make ``child`` (the scope of a run started inside this run) stop when this one does."""
        with self._lock:
            stopped = self._now.is_set()
            if not stopped and not self._closed:
                self._children.add(child)
                child._parent = self
        if stopped:
            child.interrupt("now", reason="parent")

    def close(self) -> bool:
        """Seal the scope as the run ends; True if an interrupt("now") came first. Runner only."""
        with self._lock:
            self._closed = True
            parent, self._parent = self._parent, None
            now = self._now.is_set()
        if parent is not None:
            with parent._lock:
                parent._children.discard(self)
        return now

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def stop_reason(self) -> ev.StopReason | str | None:
        """The ``stop_reason`` of an interrupted run: the reason of the accepted interrupt."""
        if self.limit is not None:
            return self.limit
        if self._now.is_set():
            return self.now_reason
        if self._after_step.is_set() and self.after_step_reason is not None:
            return ev.after_step(self.after_step_reason)
        return None

    @property
    def interrupted(self) -> bool:
        """True once an interrupt("now") was accepted."""
        return self._now.is_set()

    @property
    def stop_after_step(self) -> bool:
        """True when the run should stop at the next step boundary (either mode)."""
        return self._now.is_set() or self._after_step.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until an interrupt("now") arrives (for sync tools on their own thread)."""
        return self._now.wait(timeout)

    def check(self) -> None:
        """Raise ``AgentInterrupted`` if the run was interrupted: for long sync tools to call."""
        if self._now.is_set():
            raise AgentInterrupted("the run was interrupted")


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


current_scope: contextvars.ContextVar[CancelScope | None] = contextvars.ContextVar(
    "nbagent_cancel_scope", default=None
)


def track_task(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
    """The runner loop's task factory: a task started inside a run is noted on the run's scope."""
    task: asyncio.Task[Any] = asyncio.Task(coro, loop=loop, **kwargs)
    context = kwargs.get("context")
    scope = context.get(current_scope) if context is not None else current_scope.get()
    if scope is not None and not scope.closed:
        scope.tasks.add(task, asyncio.current_task(loop))
    return task


def check_interrupt() -> None:
    """Inside a tool: raise ``AgentInterrupted`` if the current run was stopped.

    A long synchronous tool that calls this now and then stops at once instead of being abandoned.
    Outside a run it does nothing.
    """
    scope = current_scope.get()
    if scope is not None:
        scope.check()
