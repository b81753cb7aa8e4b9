"""Pages of a store's runs, straight from SQL: ``RunStore.page`` and ``RunStore.choices``.

Tens of thousands of stored runs stay responsive because the filter, the sort and the page are one
``SELECT run_id ... LIMIT`` on the ``runs`` table (only the ids are sorted, not whole rows with
their outputs), the page's rows are then joined by key, and the per-run step counts and token sums
are computed for the rows of that page only (correlated subqueries over the steps' primary key).

Reading here never goes through the store's writer: each query opens its own read-only SQLite
connection (``mode=ro``, or ``immutable=1`` in a read-only folder), so browsing can neither lock
out a live run's writes nor change the file. Filter values are always bound parameters; the sort
column is checked against a fixed list (``RunQuery``). A run still marked ``running`` whose
writer process is gone is shown as ``unfinished``.

Text search answers as ``nbagent.history`` does (``RecordRuns``), for any text: each of task,
output, error and run id, as the frames show it, case folded with Python's ``str.casefold``,
contains the folded needle. So the output is searched as its text, not as its stored JSON (where
a quote, a backslash, a newline or a tab is escaped), and folding is a function of the read
connection (SQLite's ``LIKE`` folds ASCII letters only).
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from nbagent.analytics.frames import value_text
from nbagent.analytics.runs import SEARCHED, Page, RunQuery, fold, page_frame
from nbagent.analytics.store.schema import from_json, iso

_OUTPUT_TEXT = """CASE
    WHEN output IS NULL THEN NULL
    WHEN output GLOB '"*' AND json_valid(output) AND NOT instr(output, '\\u0000')
        THEN json_extract(output, '$')
    ELSE nbagent_value_text(output) END"""
"""The output as the frames show it (``value_text``): a JSON string decoded in SQL, anything else
(a number, a dict, a foreign writer's raw text; a string holding a NUL, which SQLite's JSON
functions cut short) shown by Python."""

_SEARCHED = tuple(_OUTPUT_TEXT if column == "output" else column for column in SEARCHED)


def _output_text(stored: str | None) -> str | None:
    return value_text(from_json(stored))


def _contains(text: str, folded: str) -> tuple[str, list[Any]]:
    """SQL for "``text``, case folded, contains ``folded``", and its parameters.

    Folding in Python costs a call per row, so it runs on the rows that need it only: text that
    is all ASCII folds as SQLite's ``LIKE`` does (ASCII letters), and a match of an ASCII needle
    by ``LIKE`` is a match after folding too, since folding works character by character. Text
    has a character past ASCII or a NUL (where ``LIKE`` stops reading) exactly when it has fewer
    characters (``length`` counts up to a NUL) than bytes."""
    by_python = f"(length({text}) < length(CAST({text} AS BLOB)) AND instr(nbagent_fold({text}), ?))"
    if not folded.isascii() or "\x00" in folded:  # only text past ASCII, or with a NUL, holds it
        return by_python, [folded]
    escaped = folded.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"({text} LIKE ? ESCAPE '\\' OR {by_python})", [f"%{escaped}%", folded]


class StorePages:
    """Pages of a ``RunStore``'s runs, straight from SQL (read-only connections)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def _connect(self) -> sqlite3.Connection:
        from nbagent.analytics.store.file import connect

        conn = connect(self.path, readonly=True, timeout=10, synchronous="NORMAL")
        conn.create_function("nbagent_fold", 1, fold, deterministic=True)
        conn.create_function("nbagent_value_text", 1, _output_text, deterministic=True)
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
            matches = [_contains(text, fold(query.text)) for text in _SEARCHED]
            clauses.append("(" + " OR ".join(sql for sql, _ in matches) + ")")
            params.extend(value for _, values in matches for value in values)
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", params

    @staticmethod
    def _forks(conn: sqlite3.Connection) -> str:
        """The fork columns to select: a store of a schema before forks (read-only, so never
        migrated) has none, and its runs fork nothing."""
        columns = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
        if {"forked_from_run_id", "forked_at_step"} <= columns:
            return "r.forked_from_run_id, r.forked_at_step"
        return "NULL, NULL"

    @staticmethod
    def _page_sql(query: RunQuery, chosen: str, forks: str = "NULL, NULL") -> str:
        """The page's rows, joined by key to ``chosen`` (a ``SELECT run_id``), in the query's order."""
        order = "DESC" if query.descending else "ASC"
        return f"""
            SELECT r.run_id, r.started_at, r.status, r.agent, r.model, r.task,
                   (SELECT count(*) FROM steps s WHERE s.run_id = r.run_id),
                   r.duration_s,
                   (SELECT sum(input_tokens) FROM steps s WHERE s.run_id = r.run_id),
                   (SELECT sum(output_tokens) FROM steps s WHERE s.run_id = r.run_id),
                   r.cost_usd, {forks}, r.writer_host, r.writer_pid, r.writer_start
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
                return Page(page_frame([]), 0, query)
            conn.execute("BEGIN")  # the count and the page from one snapshot
            forks = self._forks(conn)
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
                    self._page_sql(query, chosen, forks), [json.dumps(kept[start : start + query.page_size])]
                ).fetchall()
            else:
                total = conn.execute(f"SELECT count(*) FROM runs{where}", params).fetchone()[0]
                limited = self._page_sql(query, f"{ordered} LIMIT ? OFFSET ?", forks)
                found = conn.execute(limited, [*params, query.page_size, start]).fetchall()
            conn.execute("COMMIT")
        return Page(page_frame([self._shown(row) for row in found]), total, query)

    @staticmethod
    def _gone(row: tuple[Any, ...]) -> bool:
        """Whether the writer of a run stored as running, ``(run_id, host, pid, start)``, is gone."""
        from nbagent.analytics.store.identity import writer_gone

        return writer_gone(row[0], (row[1], row[2], row[3]))

    @staticmethod
    def _shown(row: tuple[Any, ...]) -> tuple[Any, ...]:
        values = list(row[:13])
        if values[2] == "running" and StorePages._gone((row[0], row[13], row[14], row[15])):
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
