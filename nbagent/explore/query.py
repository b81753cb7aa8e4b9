"""One page of runs, filtered and sorted where the runs live: in SQL for a store, in pandas for history.

The run browser never loads every run: tens of thousands of stored runs stay responsive because
the filter, the sort and the page are one ``SELECT run_id ... LIMIT`` on the ``runs`` table (only
the ids are sorted, not whole rows with their outputs), the page's rows are then joined by key,
and the per-run step counts and token sums are computed for the rows of that page only
(correlated subqueries over the steps' primary key). History (this process's runs, at most
``history_limit``) is small enough for pandas over ``runs_frame``.

Reading a store here never goes through its writer: each query opens its own read-only SQLite
connection (``mode=ro``, or ``immutable=1`` in a read-only folder, as ``RunStore(readonly=True)``
opens one), so browsing can neither lock out a live run's writes nor change the file.
Filter values are always bound parameters; the sort column is checked against a fixed list.
Text search folds case with Python's ``str.casefold`` on both sides, in SQL (a function of the
read connection) as in pandas, so "ÉCOLE" finds "école" in a store as in history (SQLite's own
``LIKE`` folds ASCII letters only).
A run still marked ``running`` whose writer process is gone is shown as ``unfinished``, as
``RunStore`` reads it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from contextlib import closing
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from nbagent.analytics.store.schema import iso
from nbagent.records import RunRecord

if TYPE_CHECKING:
    import pandas as pd

    from nbagent.analytics.store import RunStore

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
)
"""The columns of a page, in order."""


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
    """Where the browser gets runs: a store or a list of records."""

    def page(self, query: RunQuery) -> Page: ...

    def choices(self) -> dict[str, list[str]]: ...

    def record(self, run_id: str) -> RunRecord: ...


def fold(text: str | None) -> str | None:
    """``text`` with its case folded for a case-insensitive search (``None`` stays ``None``)."""
    return None if text is None else str(text).casefold()


_NOT_ASCII = f"*[^{chr(1)}-{chr(127)}]*"
"""A GLOB pattern for text with a character past ASCII (or a NUL)."""


def _contains(column: str, folded: str) -> tuple[str, list[Any]]:
    """SQL for "``column``, case folded, contains ``folded``", and its parameters.

    Folding in Python costs a call per row, so it runs on the rows that need it only: text that
    is all ASCII folds as SQLite's ``LIKE`` does (ASCII letters), and a match of an ASCII needle
    by ``LIKE`` is a match after folding too, since folding works character by character."""
    folded_match = f"({column} GLOB ? AND instr(nbagent_fold({column}), ?))"
    if not folded.isascii():
        return folded_match, [_NOT_ASCII, folded]
    escaped = folded.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"({column} LIKE ? ESCAPE '\\' OR {folded_match})", [f"%{escaped}%", _NOT_ASCII, folded]


def _frame(rows: list[tuple[Any, ...]]) -> pd.DataFrame:
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
        }
    ).assign(started_at=pd.to_datetime(frame["started_at"], utc=True, format="ISO8601"))


class StoreRuns:
    """Pages of a ``RunStore``'s runs, straight from SQL (read-only connections)."""

    def __init__(self, store: RunStore | str | Path) -> None:
        from nbagent.analytics.store import RunStore

        self.store = store if isinstance(store, RunStore) else RunStore(store, readonly=True)
        self.path = Path(self.store.path)

    def _connect(self) -> sqlite3.Connection:
        from nbagent.analytics.store.file import connect

        conn = connect(self.path, readonly=True, timeout=10, synchronous="NORMAL")
        conn.create_function("nbagent_fold", 1, fold, deterministic=True)
        return conn

    @staticmethod
    def _where(query: RunQuery) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        if query.status:
            # "unfinished" is a reading of "running" (its writer is gone): both are stored as running,
            # and told apart in Python (``page``).
            clauses.append("status = ?")
            params.append("running" if query.status == "unfinished" else query.status)
        for column in ("agent", "model"):
            value = getattr(query, column)
            if value:
                clauses.append(f"{column} = ?")
                params.append(value)
        if query.since is not None:
            clauses.append("started_at >= ?")
            params.append(iso(query.since))
        if query.until is not None:
            clauses.append("started_at < ?")
            params.append(iso(query.until))
        if query.text:
            matches = [
                _contains(column, fold(query.text)) for column in ("task", "output", "error", "run_id")
            ]
            clauses.append("(" + " OR ".join(sql for sql, _ in matches) + ")")
            params.extend(value for _, values in matches for value in values)
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", params

    @staticmethod
    def _page_sql(query: RunQuery, chosen: str) -> str:
        """The page's rows, joined by key to ``chosen`` (a ``SELECT run_id``), in the query's order."""
        order = "DESC" if query.descending else "ASC"
        return f"""
            SELECT r.run_id, r.started_at, r.status, r.agent, r.model, r.task,
                   (SELECT count(*) FROM steps s WHERE s.run_id = r.run_id),
                   r.duration_s,
                   (SELECT sum(input_tokens) FROM steps s WHERE s.run_id = r.run_id),
                   (SELECT sum(output_tokens) FROM steps s WHERE s.run_id = r.run_id),
                   r.cost_usd, r.writer_host, r.writer_pid, r.writer_start
            FROM ({chosen}) AS chosen
            JOIN runs AS r ON r.run_id = chosen.run_id
            ORDER BY r.{query.sort} {order}, r.run_id {order}
        """

    def page(self, query: RunQuery) -> Page:
        where, params = self._where(query)
        order = "DESC" if query.descending else "ASC"
        ordered = f"SELECT run_id FROM runs{where} ORDER BY {query.sort} {order}, run_id {order}"
        start = query.page * query.page_size
        with closing(self._connect()) as conn:
            if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'runs'").fetchone() is None:
                return Page(_frame([]), 0, query)
            conn.execute("BEGIN")  # the count and the page from one snapshot
            if query.status in ("running", "unfinished"):
                # Stored alike; whether the writer is gone is known here only: split the candidates.
                candidates = conn.execute(
                    f"SELECT run_id, writer_host, writer_pid, writer_start FROM runs{where} "
                    f"ORDER BY {query.sort} {order}, run_id {order}",
                    params,
                ).fetchall()
                want_gone = query.status == "unfinished"
                kept = [row[0] for row in candidates if self._gone(row) == want_gone]
                total = len(kept)
                chosen = "SELECT value AS run_id FROM json_each(?)"
                found = conn.execute(
                    self._page_sql(query, chosen), [json.dumps(kept[start : start + query.page_size])]
                ).fetchall()
            else:
                total = conn.execute(f"SELECT count(*) FROM runs{where}", params).fetchone()[0]
                found = conn.execute(
                    self._page_sql(query, f"{ordered} LIMIT ? OFFSET ?"), [*params, query.page_size, start]
                ).fetchall()
            conn.execute("COMMIT")
        return Page(_frame([self._shown(row) for row in found]), total, query)

    @staticmethod
    def _gone(row: tuple[Any, ...]) -> bool:
        """Whether the writer of a run stored as running, ``(run_id, host, pid, start)``, is gone."""
        from nbagent.analytics.store.identity import writer_gone

        return writer_gone(row[0], (row[1], row[2], row[3]))

    @staticmethod
    def _shown(row: tuple[Any, ...]) -> tuple[Any, ...]:
        values = list(row[:11])
        if values[2] == "running" and StoreRuns._gone((row[0], row[11], row[12], row[13])):
            values[2] = "unfinished"
        return tuple(values)

    def choices(self) -> dict[str, list[str]]:
        """The distinct statuses, agents and models stored (for the filter menus)."""
        with closing(self._connect()) as conn:
            if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'runs'").fetchone() is None:
                return {"status": [], "agent": [], "model": []}
            found = {
                column: [v for (v,) in conn.execute(f"SELECT DISTINCT {column} FROM runs ORDER BY 1")]
                for column in ("status", "agent", "model")
            }
        if "running" in found["status"]:
            found["status"].append("unfinished")
        return found

    def record(self, run_id: str) -> RunRecord:
        return self.store.record(run_id)


class RecordRuns:
    """Pages of a list of records (``nbagent.history``), with pandas."""

    def __init__(self, records: Iterable[RunRecord]) -> None:
        from nbagent.analytics.frames import runs_frame

        self._records = {r.run_id: r for r in records}
        frame = runs_frame(list(self._records.values()))
        self._frame = frame.assign(
            _search=(
                frame["task"].fillna("")
                + "\n"
                + frame["output"].fillna("")
                + "\n"
                + frame["error"].fillna("")
                + "\n"
                + frame["run_id"].fillna("")
            ).str.casefold()
        )

    def page(self, query: RunQuery) -> Page:
        import pandas as pd

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
            mask &= frame["_search"].str.contains(fold(query.text), regex=False)
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


def run_source(runs: Any = None) -> RunSource:
    """What ``browse`` lists: a ``RunStore`` (or the path of one), a list of records, or, by
    default, the configured store if there is one, else this process's history."""
    from nbagent.analytics import history
    from nbagent.analytics.store import RunStore
    from nbagent.config import settings

    if runs is None:
        runs = settings.store if settings.store is not None else history.records()
    if isinstance(runs, (RunStore, str, Path)):
        return StoreRuns(runs)
    if isinstance(runs, RunRecord):
        return RecordRuns([runs])
    if isinstance(runs, (StoreRuns, RecordRuns)):
        return runs
    return RecordRuns(runs)
