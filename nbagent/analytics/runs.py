"""One way to read runs, wherever they live: ``RunSource`` (a page, filter menus, a record, all
records, the runs frame), implemented by ``nbagent.history``, by ``RunStore`` (in SQL, inside
``nbagent.analytics.store``) and by ``RecordRuns`` over any list of records (in pandas).

A page never loads every run: a query names its filters, its sort and its page, and the source
answers with that page's rows (``PAGE_COLUMNS``) and the number of runs that match.

Every source answers a query alike. Text search matches each of ``SEARCHED`` on its own (a
needle never spans two of them), as the frames show it (the output as text, not as stored JSON),
case folded with Python's ``str.casefold`` on both sides, in SQL as in pandas: so "ÉCOLE" finds
"école", and a quote, a backslash, a newline, ``%`` or ``_`` is just a character, in a store as
in history.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from nbagent.records import RunRecord

if TYPE_CHECKING:
    import pandas as pd

SORTABLE = ("started_at", "duration_s", "cost_usd", "status", "agent", "model", "task")
"""Columns a page can be sorted by (all of them columns of the runs table)."""

PAGE_COLUMNS = (
    "run_id",
    "started_at",
    "status",
    "agent",
    "model",
    "task",
    "n_steps",
    "duration_s",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "forked_from_run_id",
    "forked_at_step",
)
"""The columns of a page, in order (a fork's original and step: ``nbagent.fork``; none in a store
of a schema before forks)."""

SEARCHED = ("task", "output", "error", "run_id")
"""The columns ``RunQuery.text`` searches."""


@dataclass(frozen=True)
class RunQuery:
    """Which runs to list and how: every filter is optional; ``text`` matches the task, the
    output, the error and the run id (case-insensitive substring)."""

    status: str | None = None
    agent: str | None = None
    model: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    text: str | None = None
    sort: str = "started_at"
    descending: bool = True
    page: int = 0
    page_size: int = 25

    def __post_init__(self) -> None:
        if self.sort not in SORTABLE:
            raise ValueError(f"sort must be one of {', '.join(SORTABLE)}, not {self.sort!r}")
        if self.page < 0 or self.page_size < 1:
            raise ValueError("page must be >= 0 and page_size >= 1")

    def with_(self, **changes: Any) -> RunQuery:
        return replace(self, **changes)


@dataclass(frozen=True)
class Page:
    """One page of runs: its rows (``PAGE_COLUMNS``) and how many runs match in all."""

    rows: pd.DataFrame
    total: int
    query: RunQuery

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.query.page_size))


class RunSource(Protocol):
    """Where runs are read from: ``nbagent.history``, a ``RunStore``, or any list of records
    (``RecordRuns``). The run browser, ``show`` and ``compare`` read through it alone."""

    def page(self, query: RunQuery) -> Page:
        """One page of the runs ``query`` selects, filtered and sorted where the runs live."""
        ...

    def choices(self) -> dict[str, list[str]]:
        """The distinct statuses, agents and models (for filter menus)."""
        ...

    def record(self, run_id: str) -> RunRecord:
        """One run's record; ``KeyError`` if there is none."""
        ...

    def records(self) -> list[RunRecord]:
        """Every run's record."""
        ...

    def runs(self) -> pd.DataFrame:
        """One row per run (``nbagent.analytics.frames.runs_frame``)."""
        ...


def fold(text: str | None) -> str | None:
    """``text`` with its case folded for a case-insensitive search (``None`` stays ``None``)."""
    return None if text is None else str(text).casefold()


def page_frame(rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    import pandas as pd

    frame = pd.DataFrame(rows, columns=list(PAGE_COLUMNS))
    return frame.astype(
        {
            "run_id": "string",
            "status": "string",
            "agent": "string",
            "model": "string",
            "task": "string",
            "n_steps": "Int64",
            "duration_s": "Float64",
            "input_tokens": "Int64",
            "output_tokens": "Int64",
            "cost_usd": "Float64",
            "forked_from_run_id": "string",
            "forked_at_step": "Int64",
        }
    ).assign(started_at=pd.to_datetime(frame["started_at"], utc=True, format="ISO8601"))


class RecordRuns:
    """Pages of a list of records (``nbagent.history``), with pandas."""

    def __init__(self, records: Iterable[RunRecord]) -> None:
        from nbagent.analytics.frames import runs_frame

        self._records = {r.run_id: r for r in records}
        frame = runs_frame(list(self._records.values()))
        self._frame = frame
        self._folded = {column: frame[column].fillna("").str.casefold() for column in SEARCHED}

    def page(self, query: RunQuery) -> Page:
        import pandas as pd

        from nbagent.analytics.store.schema import iso

        frame = self._frame
        mask = pd.Series(True, index=frame.index)
        for column in ("status", "agent", "model"):
            value = getattr(query, column)
            if value:
                mask &= frame[column] == value
        if query.since is not None:
            mask &= frame["started_at"] >= pd.Timestamp(iso(query.since))
        if query.until is not None:
            mask &= frame["started_at"] < pd.Timestamp(iso(query.until))
        if query.text:
            needle = fold(query.text)
            found = pd.Series(False, index=frame.index)
            for folded in self._folded.values():
                found |= folded.str.contains(needle, regex=False)
            mask &= found
        chosen = frame[mask.fillna(False).astype(bool)]
        chosen = chosen.sort_values(
            [query.sort, "run_id"], ascending=not query.descending, na_position="last", kind="stable"
        )
        start = query.page * query.page_size
        rows = chosen.iloc[start : start + query.page_size][list(PAGE_COLUMNS)].reset_index(drop=True)
        return Page(rows, len(chosen), query)

    def choices(self) -> dict[str, list[str]]:
        return {c: sorted(self._frame[c].dropna().unique().tolist()) for c in ("status", "agent", "model")}

    def record(self, run_id: str) -> RunRecord:
        try:
            return self._records[run_id]
        except KeyError:
            raise KeyError(f"no run {run_id!r} in these records") from None

    def records(self) -> list[RunRecord]:
        return list(self._records.values())

    def runs(self) -> pd.DataFrame:
        return self._frame.copy()
