"""Cancels lost on the way, delivered again: a Stop that reaches every task of the run.

A Stop cancels the run's task once, and asyncio passes that cancel down the chain of awaits. It can
be lost on the way: CPython 3.11's ``asyncio.wait_for`` returns the inner result when the cancel
lands just as the inner future completes (langchain-openai wraps every streamed chunk in one, so a
fast stream loses about one cancel in six), a bare ``except`` in a retry loop swallows it, and the
cancelled task carries on. LangGraph then waits for that node to finish, so the Stop waits for the
whole reply and the model's connection stays open (measured: 3 of 20 plain LangGraph cancels at
2000 tokens/s ran to the end of a 10 s reply).

So every task started inside a run is noted (``TaskTree.add``, from the runner loop's task
factory), and once the run is stopped:

- a task that a task *told to stop* starts more than ``REDELIVER_S`` after the Stop is cancelled
  before it runs. That is the lost ``wait_for`` cancel: the carrying-on task starts a new task per
  chunk, and cancelling that one ends the carrying-on task the ordinary way, so its cleanup (closing
  the HTTP response) is not interrupted;
- every ``REDELIVER_S`` a sweep cancels again each task of the run that was cancelled, still runs,
  awaits no other task (the cancel reaches the innermost one; its callers follow as it ends) and
  received no cancel since the last sweep: it had a whole interval to end and did not.

Run tasks themselves (``mark_run_task``) are never cancelled a second time: their cleanup writes
the run's record. The sweeps end with the run's task. Both rules read ``Task.cancelling()``
(Python 3.11+); on Python 3.10 nothing is delivered again.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

REDELIVER_S = 0.02
"""How long a cancelled task gets to end before its cancel counts as lost and is delivered again."""
SLOW_AFTER = 150
"""Sweeps at ``REDELIVER_S``; after that many (3 s), one every ``SLOW_S``."""
SLOW_S = 0.25

_run_tasks: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()


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
        """Note ``task``; cancel it at once if a task told to stop is still starting work."""
        self._tasks.add(task)
        if (
            self._stopped_at is not None
            and creator is not None
            and creator not in _run_tasks
            and _cancels(creator)
            and task.get_loop().time() - self._stopped_at >= REDELIVER_S
        ):
            task.cancel()

    def stopped(self, run_task: asyncio.Task[Any]) -> None:
        """The run was stopped (its task was just cancelled): watch for lost cancels."""
        loop = run_task.get_loop()
        self._stopped_at = loop.time()
        loop.call_later(REDELIVER_S / 2, self._sweep, run_task, 1)

    def _sweep(self, run_task: asyncio.Task[Any], count: int) -> None:
        if run_task.done():
            return
        for task in list(self._tasks):
            cancels = _cancels(task)
            if task.done() or not cancels or task in _run_tasks or _awaits_a_task(task):
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


def _awaits_a_task(task: asyncio.Task[Any]) -> bool:
    """True if ``task`` is suspended on another task, which a cancel of it would reach anyway."""
    waiter = getattr(task, "_fut_waiter", None)  # both asyncio Task implementations have it
    return isinstance(waiter, asyncio.Task) and not waiter.done()
