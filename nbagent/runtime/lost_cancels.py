"""Cancels lost on the way, delivered again: a Stop that reaches every task of the run, and no
further than a plain cancel would.

A Stop cancels the run's task once, and asyncio passes that cancel down the chain of awaits. It can
be lost on the way: CPython 3.11's ``asyncio.wait_for`` returns the inner result when the cancel
lands just as the inner future completes (langchain-openai wraps every streamed chunk in one, so a
fast stream loses about one cancel in six), a bare ``except`` in a retry loop swallows it, and the
cancelled task carries on. LangGraph then waits for that node to finish, so the Stop waits for the
whole reply and the model's connection stays open (measured: 3 of 20 plain LangGraph cancels at
2000 tokens/s ran to the end of a 10 s reply).

So every task started inside a run is noted (``TaskTree.add``, from the runner loop's task
factory), and once the run is stopped a cancel is delivered again only where it provably was lost:

- a task that ``asyncio.wait_for`` starts, more than ``REDELIVER_S`` after the Stop, for a task
  *told to stop* that is not handling an exception, is cancelled before it runs. That is the lost
  ``wait_for`` cancel: the carrying-on task starts a new ``wait_for`` per chunk, and cancelling that
  one ends the carrying-on task the ordinary way, so its cleanup (closing the HTTP response) runs;
- every ``REDELIVER_S`` a sweep cancels again each task of the run that was cancelled, still runs,
  awaits no other task (the cancel reaches the innermost one; its callers follow as it ends),
  received no cancel since the last sweep, and does not wait on cleanup.

Who wins between a Stop and the user's cleanup: the cleanup. Work begun while the code is handling
an exception (an ``except CancelledError`` or ``finally`` block that the cancel entered) is cleanup:
a future created then (``asyncio.sleep``, a thread's result, ``asyncio.shield``'s outer future) is
noted, and a task waiting on one is never cancelled again; a task started then is never cancelled at
birth; tasks the user's code starts in ordinary code (to outlive a step) are not touched either. The
run still ends on time (a tool that does not end is abandoned after a grace: ``nbagent.tools``); what
outlives it is the user's, as in plain asyncio.

Run tasks themselves (``mark_run_task``) are never cancelled a second time: their cleanup writes
the run's record. The sweeps end with the run's task. Both rules read ``Task.cancelling()``
(Python 3.11+); on Python 3.10 nothing is delivered again.
"""

from __future__ import annotations

import asyncio
import sys
import weakref
from typing import Any

REDELIVER_S = 0.02
"""How long a cancelled task gets to end before its cancel counts as lost and is delivered again."""
SLOW_AFTER = 150
"""Sweeps at ``REDELIVER_S``; after that many (3 s), one every ``SLOW_S``."""
SLOW_S = 0.25

_run_tasks: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()
_cleanup_waits: weakref.WeakSet[asyncio.Future[Any]] = weakref.WeakSet()
"""Futures created while an exception was being handled: what a task in its cleanup waits on."""
_watched_loops: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()
_WAIT_FOR = asyncio.wait_for.__code__
_AWAITS_TASKS: tuple[type, ...] = (asyncio.Task, getattr(asyncio.tasks, "_GatheringFuture", asyncio.Task))
"""A task waiting on one of these waits on tasks (``gather``'s future cancels its children)."""
_FACTORY_DEPTH = 8
"""How many frames above the task factory ``asyncio.wait_for`` may be (3.11: five)."""


def mark_run_task(task: asyncio.Task[Any]) -> None:
    """``task`` runs a whole run: it is never cancelled again from here."""
    _run_tasks.add(task)


class TaskTree:
    """The tasks started inside one run. Used on the loop thread only."""

    def __init__(self) -> None:
        self._tasks: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()
        self._seen: weakref.WeakKeyDictionary[asyncio.Task[Any], int] = weakref.WeakKeyDictionary()
        self._stopped_at: float | None = None

    def add(self, task: asyncio.Task[Any], creator: asyncio.Task[Any] | None) -> None:
        """Note ``task``; cancel it at once if it is the next chunk's ``wait_for`` of a task that
        lost its cancel. Called by the task factory, so in the creator's frame."""
        self._tasks.add(task)
        if (
            self._stopped_at is not None
            and creator is not None
            and creator not in _run_tasks
            and _cancels(creator)
            and task.get_loop().time() - self._stopped_at >= REDELIVER_S
            and sys.exc_info()[1] is None  # not cleanup: no except/finally block is running
            and _started_by_wait_for()
        ):
            task.cancel()

    def stopped(self, run_task: asyncio.Task[Any]) -> None:
        """The run was stopped (its task was just cancelled): watch for lost cancels."""
        loop = run_task.get_loop()
        _note_cleanup_waits(loop)
        self._stopped_at = loop.time()
        loop.call_later(REDELIVER_S / 2, self._sweep, run_task, 1)

    def _sweep(self, run_task: asyncio.Task[Any], count: int) -> None:
        if run_task.done():
            return
        for task in list(self._tasks):
            cancels = _cancels(task)
            if task.done() or not cancels or task in _run_tasks or _awaits_a_task_or_cleanup(task):
                continue
            if self._seen.get(task) == cancels:  # an interval without ending or a new cancel
                task.cancel()
                cancels += 1
            self._seen[task] = cancels
        delay = REDELIVER_S if count < SLOW_AFTER else SLOW_S
        run_task.get_loop().call_later(delay, self._sweep, run_task, count + 1)


def _cancels(task: asyncio.Task[Any]) -> int:
    """The cancels requested of ``task`` and not taken back (``Task.cancelling``, Python 3.11+; on
    3.10, where a task cannot say, 0: nothing is delivered again there)."""
    cancelling = getattr(task, "cancelling", None)
    return cancelling() if cancelling is not None else 0


def _awaits_a_task_or_cleanup(task: asyncio.Task[Any]) -> bool:
    """True if ``task`` is suspended on other tasks (one, or a ``gather`` of them: a cancel of it
    would reach them, and they are swept themselves), or on a future its cleanup created (it
    received its cancel and is handling it)."""
    waiter = getattr(task, "_fut_waiter", None)  # both asyncio Task implementations have it
    if waiter is None or waiter.done():
        return False
    return isinstance(waiter, _AWAITS_TASKS) or waiter in _cleanup_waits


def _started_by_wait_for() -> bool:
    """True if the task being created comes from ``asyncio.wait_for`` (read from the frames above
    the task factory; only asked for tasks created after a Stop)."""
    frame = sys._getframe(1)
    for _ in range(_FACTORY_DEPTH):
        if frame is None:
            return False
        if frame.f_code is _WAIT_FOR:
            return True
        frame = frame.f_back
    return False


def _note_cleanup_waits(loop: asyncio.AbstractEventLoop) -> None:
    """From the first Stop on, note each future ``loop`` creates while an exception is handled.

    The loop is nbagent's own runner loop (the user's objects are not touched); asyncio's waits
    (``sleep``, ``shield``, ``wait``, locks, a thread's result) all create their futures through it.
    """
    if loop in _watched_loops:
        return
    _watched_loops.add(loop)
    create_future = loop.create_future

    def create_noting_cleanup() -> asyncio.Future[Any]:
        future = create_future()
        if sys.exc_info()[1] is not None:
            _cleanup_waits.add(future)
        return future

    loop.create_future = create_noting_cleanup  # type: ignore[method-assign]
