"""Batches: run an agent over many tasks with one live table, one Stop, a resume, and Ray.

``batch(make_agent, tasks)`` returns a ``Batch`` at once (like ``start``): ``await batch`` gives
one row per task; ``run_batch`` blocks (Ctrl-C stops the batch). The pieces:

- ``nbagent.batches.tasks``: a list of strings or dicts, or a DataFrame with a ``task`` column,
  as keyed items;
- ``nbagent.batches.handle``: the ``Batch`` (one Stop path: the batch's mark, then each run's
  own ``interrupt``; the waits are a run's) and what any thread may read of it (records,
  progress, frames);
- ``nbagent.batches.scheduler``: its scheduler on the runner's loop (a coroutine per live task,
  none per queued one), and how each task ends;
- ``nbagent.batches.threads``: the batch's own threads for factories and scores;
- ``nbagent.batches.guards``: one live batch per name and store, one live run per agent object;
- ``nbagent.batches.resume``: what a named batch in a store finds of its earlier attempts;
- ``nbagent.batches.local`` / ``nbagent.batches.ray``: where the runs happen (``Backend``);
- ``nbagent.batches.table``: the live widget table and the terminal's progress line.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from nbagent.agent import Agent
from nbagent.batches.handle import Batch
from nbagent.batches.local import LocalBackend
from nbagent.batches.resume import DEFAULT_SKIP, check_skip
from nbagent.batches.state import (
    Backend,
    BatchStoppedByKeyboard,
    Progress,
    TaskRun,
    check_concurrency,
    deadline_limits,
)
from nbagent.batches.tasks import TaskItem, task_items
from nbagent.lazy import lazy_attributes
from nbagent.records import RunRecord

if TYPE_CHECKING:
    import pandas as pd

    from nbagent.batches.ray import RayBackend

__all__ = [
    "Backend",
    "Batch",
    "BatchStoppedByKeyboard",
    "LocalBackend",
    "Progress",
    "RayBackend",
    "TaskItem",
    "TaskRun",
    "batch",
    "run_batch",
    "task_items",
]

_REFUSED_OPTIONS = ("store", "display", "sinks")


def batch(
    make_agent: Callable[..., Any],
    tasks: Any,
    *,
    concurrency: int = 8,
    store: Any = None,
    name: str | None = None,
    score: Callable[[RunRecord, dict[str, Any]], Any] | None = None,
    backend: Backend | None = None,
    timeout_s: float | None = None,
    skip: Iterable[str] | str = DEFAULT_SKIP,
    key: str | None = None,
    display: bool | None = None,
    **start_options: Any,
) -> Batch:
    """Run ``make_agent()``'s agents over ``tasks`` in the background; return the ``Batch`` at once.

    ``frame = await batch`` waits without blocking the kernel (■ Interrupt stops the batch);
    ``batch.interrupt()`` is Stop all, ``batch.interrupt("after_step")``
    lets the live runs finish and starts no more.

    Args:
        make_agent: builds a fresh agent per task (agents keep memory): ``make_agent()``, or
            ``make_agent(row)`` when it takes a parameter (the task's row as a dict). An agent
            object already in a live run of the batch is refused (that task ends ``"error"``).
        tasks: a list of task strings, a list of dicts with a ``task`` key, or a DataFrame with a
            ``task`` column; the other columns travel with each row into the frame.
        concurrency: how many runs may be live at once.
        store: a ``RunStore`` every run is written to (default: ``configure(store=)``); a
            read-only one is refused at once (``ReadOnlyStoreError``).
        name: with a store, the batch's name: a later batch of the same name skips the tasks
            whose latest attempt ended in a ``skip`` status. A second batch of the same name and
            store is refused while the first is live in this process.
        score: ``score(record, row)`` for a ``score`` column (an exception marks ``score_error``),
            on the batch's own threads; a run cut short (interrupted, stopped by a limit) is not
            scored (NA), and a score still running a moment after Stop all is abandoned.
        backend: where the runs happen: ``LocalBackend()`` (default) or ``RayBackend(...)``.
        timeout_s: deprecated: ``limits=nbagent.Limits(max_seconds=...)`` says the same, and is
            what it now sets (tightened into the runs' limits; a task it cuts ends ``"limit"``,
            ``stop_reason == "max_seconds"``).
        skip: the end states a resume skips (``"success"``; add ``"error"``, ``"max_steps"``...).
        key: the column that identifies a task for a resume (default ``id`` if every row has
            one, else the task text).
        display: show the live table (a terminal gets one progress line); default as ``start``.
        **start_options: passed to every run's ``start`` (``limits``, ``tags``, ``metadata``,
            ``max_steps``, and any other option ``start`` takes): a batch takes what a run takes.
    """
    from nbagent.config import settings

    refused = [k for k in _REFUSED_OPTIONS if k in start_options]
    if refused:
        raise TypeError(f"batch() takes no {', '.join(refused)} for its runs: the batch owns its runs' sinks")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a str, not {type(name).__name__}")
    if not callable(make_agent):
        raise TypeError(
            f"make_agent must be a function that returns a fresh agent, not a {type(make_agent).__name__} "
            "(agents keep memory, so each task needs its own: pass `lambda: make(...)`)"
        )
    if isinstance(make_agent, type) and make_agent.__init__ is Agent.__init__:
        raise TypeError(  # called with a task's row, it would fail on every task
            f"make_agent is the class {make_agent.__name__}, which needs a model: pass a function that "
            f"builds one, such as `lambda: {make_agent.__name__}(model, tools=[...])`"
        )
    from nbagent.batches.guards import batch_store

    items, concurrency, skip = task_items(tasks, key=key), check_concurrency(concurrency), check_skip(skip)
    store = batch_store(store if store is not None else settings.store, configured=store is None)
    if timeout_s is not None:  # checked like the rest before it warns
        fold_timeout(start_options, timeout_s, stacklevel=3)
    handle = Batch(
        make_agent,
        items,
        backend=backend if backend is not None else LocalBackend(),
        concurrency=concurrency,
        store=store,
        name=name,
        score=score,
        skip=skip,
        start_options=start_options,
    )
    handle.hold_name()
    try:
        if display is None:
            display = settings.display if settings.display is not None else True
        if display:
            from nbagent.batches.table import show_batch

            show_batch(handle)
        handle.launch()
    except BaseException:
        handle.free_name()
        raise
    return handle


def run_batch(make_agent: Callable[..., Any], tasks: Any, **options: Any) -> pd.DataFrame:
    """``batch(...)`` and wait for its frame, blocking (arguments as for ``batch``). Ctrl-C stops
    the batch (every live run interrupted, the rest skipped), waits for the records, then raises
    ``BatchStoppedByKeyboard`` (a ``KeyboardInterrupt`` whose ``.batch`` has the frame)."""
    timeout_s = options.pop("timeout_s", None)
    if timeout_s is not None:
        fold_timeout(options, timeout_s, stacklevel=3)
    return batch(make_agent, tasks, **options).wait()


def fold_timeout(start_options: dict[str, Any], timeout_s: float, *, stacklevel: int) -> None:
    """The deprecated ``timeout_s`` as what it now is, a deadline in the runs' limits (on top of
    the ``limits`` given, else the ``configure(limits=)`` default); warns the caller of
    ``batch``/``run_batch`` (``stacklevel``)."""
    from nbagent.config import settings

    given = start_options.get("limits")
    start_options["limits"] = deadline_limits(settings.limits if given is None else given, timeout_s)
    warnings.warn(
        "batch(timeout_s=) is deprecated: pass limits=nbagent.Limits(max_seconds=...), which it now "
        "sets; a task it cuts ends 'limit' with stop_reason 'max_seconds' (was 'interrupted' / "
        "'timeout'), and a wait for a person's approval no longer counts",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


__getattr__, __dir__ = lazy_attributes(__name__, {"RayBackend": "ray"})
"""``RayBackend`` imports nothing of Ray until a backend is built."""
