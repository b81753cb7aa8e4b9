"""What the run browser lists (``run_source``): the reading itself is ``nbagent.analytics.runs``
(one ``RunSource`` interface, implemented by ``nbagent.history``, ``RunStore`` and ``RecordRuns``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nbagent.analytics.runs import PAGE_COLUMNS, SORTABLE, Page, RecordRuns, RunQuery, RunSource
from nbagent.records import RunRecord

__all__ = ["PAGE_COLUMNS", "SORTABLE", "Page", "RecordRuns", "RunQuery", "RunSource", "run_source"]


def run_source(runs: Any = None) -> RunSource:
    """What ``browse`` lists: a ``RunStore`` (or the path of one), a list of records, or, by
    default, the configured store if there is one, else this process's history."""
    from nbagent.analytics import history
    from nbagent.analytics.store import RunStore
    from nbagent.config import settings

    if runs is None:
        runs = settings.store if settings.store is not None else history.records()
    if isinstance(runs, RunStore):
        return runs
    if isinstance(runs, (str, Path)):
        return RunStore(runs, readonly=True)
    if isinstance(runs, RunRecord):
        return RecordRuns([runs])
    if isinstance(runs, RecordRuns):
        return runs
    return RecordRuns(runs)
