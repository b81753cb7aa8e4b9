"""The runs of this process, in the order they ended, and their analytics.

The runner adds every finished run here (success, interrupted, error or max steps), so
``nbagent.history.runs()`` / ``steps()`` / ``tool_calls()`` are this kernel session's runs as
DataFrames, ``summary()`` sums them up per agent and model, and the ``plot_*`` functions draw
them. For runs across kernel restarts, use a ``RunStore``: it has the same frames.
"""

from __future__ import annotations

import logging as _logging
import threading as _threading
from collections import deque as _deque
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from nbagent.config import settings as _settings
from nbagent.records import RunRecord

if _TYPE_CHECKING:
    import pandas as pd

    from nbagent.analytics.runs import Page, RunQuery

__all__ = [
    "add",
    "choices",
    "clear",
    "dropped",
    "last",
    "page",
    "plot_durations",
    "plot_timeline",
    "plot_tokens",
    "record",
    "records",
    "runs",
    "steps",
    "summary",
    "tool_calls",
    "trim",
]

_records: _deque[RunRecord] = _deque()
_lock = _threading.Lock()
_dropped = 0
_logger = _logging.getLogger("nbagent")


def add(record: RunRecord) -> None:
    """Keep a finished run (the runner calls this), dropping the oldest past the history limit."""
    with _lock:
        _records.append(record)
    trim()


def trim() -> None:
    """Drop the oldest runs past ``configure(history_limit=...)`` (1000 by default)."""
    global _dropped
    limit = _settings.history_limit
    with _lock:
        if limit is None or len(_records) <= limit:
            return
        first = _dropped == 0
        while len(_records) > limit:
            _records.popleft()
            _dropped += 1
    if first:
        _logger.warning(
            "nbagent: history keeps the last %d runs in memory and drops older ones; "
            "a RunStore keeps every run (nbagent.configure(store=..., history_limit=...))",
            limit,
        )


def dropped() -> int:
    """How many runs this process dropped from the history to keep within its limit."""
    return _dropped


def records() -> list[RunRecord]:
    """Every finished run of this process, oldest first."""
    with _lock:
        return list(_records)


def clear() -> None:
    """Forget the runs of this process (a store keeps what it stored)."""
    global _dropped
    with _lock:
        _records.clear()
        _dropped = 0


def last() -> RunRecord:
    """The run that ended last; ``LookupError`` before any run ended."""
    with _lock:
        if not _records:
            raise LookupError("no run has finished in this process yet")
        return _records[-1]


def record(run_id: str) -> RunRecord:
    """This process's run ``run_id`` (the latest, if it ran more than once); ``KeyError`` if none."""
    with _lock:
        found = next((r for r in reversed(_records) if r.run_id == run_id), None)
    if found is None:
        raise KeyError(run_id)
    return found


def page(query: RunQuery) -> Page:
    """One page of this process's runs, filtered and sorted with pandas (``nbagent.analytics.runs``:
    the interface a ``RunStore`` shares)."""
    from nbagent.analytics.runs import RecordRuns

    return RecordRuns(records()).page(query)


def choices() -> dict[str, list[str]]:
    """The distinct statuses, agents and models of this process's runs (for filter menus)."""
    from nbagent.analytics.runs import RecordRuns

    return RecordRuns(records()).choices()


def runs() -> pd.DataFrame:
    """One row per run (see ``nbagent.analytics.frames`` for the columns)."""
    from nbagent.analytics.frames import runs_frame

    return runs_frame(records())


def steps() -> pd.DataFrame:
    """One row per step of every run."""
    from nbagent.analytics.frames import steps_frame

    return steps_frame(records())


def tool_calls() -> pd.DataFrame:
    """One row per tool call of every run."""
    from nbagent.analytics.frames import tool_calls_frame

    return tool_calls_frame(records())


def summary(**options: _Any) -> pd.DataFrame:
    """Per agent and model: runs, success and interrupt rates, durations, tokens per step, cost.

    ``options`` go to ``nbagent.analytics.analysis.summary`` (e.g. ``by="task"``).
    """
    from nbagent.analytics.analysis import summary as summarize

    return summarize(records(), **options)


def plot_timeline(run_id: str | None = None, ax: _Any = None) -> _Any:
    """Gantt chart of steps and tool calls: of one run, or of every run side by side."""
    from nbagent.analytics.plots import timeline

    return timeline(records(), run_id=run_id, ax=ax)


def plot_tokens(run_id: str | None = None, ax: _Any = None) -> _Any:
    """Input and output tokens per step: of one run, or the mean over runs by step number."""
    from nbagent.analytics.plots import tokens

    return tokens(records(), run_id=run_id, ax=ax)


def plot_durations(of: str = "runs", by: str | None = None, ax: _Any = None) -> _Any:
    """Histogram of the durations of runs, steps or tool calls, split by status or kind."""
    from nbagent.analytics.plots import durations

    return durations(records(), of=of, by=by, ax=ax)


def __dir__() -> list[str]:
    return list(__all__)
