"""The runs of this process, in the order they ended, and their analytics.

The runner adds every finished run here (success, interrupted, error or max steps), so
``nbagent.history.runs()`` / ``steps()`` / ``tool_calls()`` are this kernel session's runs as
DataFrames, ``summary()`` sums them up per agent and model, and the ``plot_*`` functions draw
them. For runs across kernel restarts, use a ``RunStore``: it has the same frames.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from .records import RunRecord

if TYPE_CHECKING:
    import pandas as pd

_records: list[RunRecord] = []
_lock = threading.Lock()


def add(record: RunRecord) -> None:
    with _lock:
        _records.append(record)


def records() -> list[RunRecord]:
    """Every finished run of this process, oldest first."""
    with _lock:
        return list(_records)


def clear() -> None:
    """Forget the runs of this process (a store keeps what it stored)."""
    with _lock:
        _records.clear()


def last() -> RunRecord:
    """The run that ended last; ``LookupError`` before any run ended."""
    with _lock:
        if not _records:
            raise LookupError("no run has finished in this process yet")
        return _records[-1]


def runs() -> pd.DataFrame:
    """One row per run (see ``nbagent.frames`` for the columns)."""
    from .frames import runs_frame

    return runs_frame(records())


def steps() -> pd.DataFrame:
    """One row per step of every run."""
    from .frames import steps_frame

    return steps_frame(records())


def tool_calls() -> pd.DataFrame:
    """One row per tool call of every run."""
    from .frames import tool_calls_frame

    return tool_calls_frame(records())


def summary(**options: Any) -> pd.DataFrame:
    """Per agent and model: runs, success and interrupt rates, durations, tokens per step, cost.

    ``options`` go to ``nbagent.analysis.summary`` (e.g. ``by="task"``).
    """
    from .analysis import summary as summarize

    return summarize(records(), **options)


def plot_timeline(run_id: str | None = None, ax: Any = None) -> Any:
    """Gantt chart of steps and tool calls: of one run, or of every run side by side."""
    from .plots import timeline

    return timeline(records(), run_id=run_id, ax=ax)


def plot_tokens(run_id: str | None = None, ax: Any = None) -> Any:
    """Input and output tokens per step: of one run, or the mean over runs by step number."""
    from .plots import tokens

    return tokens(records(), run_id=run_id, ax=ax)


def plot_durations(of: str = "runs", by: str | None = None, ax: Any = None) -> Any:
    """Histogram of the durations of runs, steps or tool calls, split by status or kind."""
    from .plots import durations

    return durations(records(), of=of, by=by, ax=ax)
