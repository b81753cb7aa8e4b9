"""The store's writer thread: commit points of many runs, written in order, grouped into few
transactions.

Part of ``nbagent.analytics.store``. ``WriteQueue`` is one thread per store that exists only while there is
work. Each run's sink (``nbagent.analytics.store.writer.RunWriter``) queues a ``RowsJob`` at each
commit point; the thread builds the job's rows from the run's record when it takes it, so a row
changed many times while the thread was busy is built and written once.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nbagent.analytics.store.writer import RunWriter

logger = logging.getLogger("nbagent")

Row = tuple[str, tuple[Any, ...]]
"""A statement and its parameters."""


def _rows_per_statement() -> int:
    import sqlite3

    limit = 32766 if sqlite3.sqlite_version_info >= (3, 32, 0) else 999  # SQLITE_MAX_VARIABLE_NUMBER
    return max(1, limit // 32)


ROWS_PER_STATEMENT = _rows_per_statement()
_many: dict[str, str] = {}
"""The text of each statement for a full chunk of ``ROWS_PER_STATEMENT`` rows (one per statement)."""


def _rows_text(statement: str, n: int) -> str:
    values = statement[statement.index(" VALUES ") + 8 :]
    return statement + f", {values}" * (n - 1)


_some_rows_text = functools.lru_cache(maxsize=32)(_rows_text)
"""The texts for fewer rows: their count varies with load, so only the recent ones are kept."""


def put_rows(conn: Any, statement: str, rows: list[tuple[Any, ...]]) -> None:
    """Write ``rows`` with few statements of many rows each (``VALUES (...), (...), ...``).

    Why not ``executemany``: Python's sqlite3 releases the GIL around every row's step, and a
    writer thread then waits for the busy runner loop to hand it back, once per row (measured
    here: about 50 µs a row under load, most of a batch's store time). One statement per few
    hundred rows waits once. Rows of one key later in the list replace earlier ones, in order.
    """
    for start in range(0, len(rows), ROWS_PER_STATEMENT):
        chunk = rows[start : start + ROWS_PER_STATEMENT]
        if len(chunk) == ROWS_PER_STATEMENT:
            text = _many.get(statement)
            if text is None:
                text = _many[statement] = _rows_text(statement, ROWS_PER_STATEMENT)
        else:
            text = _some_rows_text(statement, len(chunk))
        conn.execute(text, [value for row in chunk for value in row])


class RowsJob:
    """One commit point of a run: its rows are built when the writer thread takes it (``rows``
    is ``None`` until then)."""

    __slots__ = ("keys", "last", "rows", "sink")

    def __init__(self, sink: RunWriter, last: bool) -> None:
        self.sink, self.last = sink, last
        self.rows: list[Row] | None = None
        self.keys: set[tuple[int, ...]] = set()
        """The sink's keys of ``rows``: marked changed again if their write fails."""

    def take(self) -> list[Row]:
        if self.rows is None:
            self.keys, self.rows = self.sink._take_rows()
        return self.rows


GROUP_WINDOW_S = 0.05
"""While rows keep coming, the writer begins a transaction at most this often (``WriteQueue``)."""

GROUP_LIMIT = 2000
"""At most this many runs' commit points share one transaction (a bound on how long one holds the
database's write lock)."""


class WriteQueue:
    """Jobs done in order on one thread that exists only while there is work.

    ``put`` may be called from any thread. ``drained()`` is a future that completes when the
    queue is empty (at once if it is), for the runner to await and ``flush`` to wait on.

    Group commit: rows queued by many runs are written together, in one transaction. A commit
    costs far more than a row (a WAL frame per touched page, a lock round trip, the statements'
    set-up), so a hundred runs writing at once share commits instead of queueing one per event.
    A thread that finds work the moment it starts writes it at once; while work keeps coming, it
    begins a transaction at most every ``GROUP_WINDOW_S``, so the commit points of a run's quick
    steps meet in one job (``RunWriter``), each row built and written once. No row waits longer
    than that and one transaction, and nothing waits when a run or ``flush`` waits for the rows.
    If a group fails, each run's rows are retried on their own, so one run's failure (and its
    recovery by rewriting the whole run) stays that run's.
    """

    def __init__(self, write: Callable[[Callable[[Any], Any]], None] | None = None) -> None:
        self._jobs: deque[Callable[[], None] | RowsJob | Future[None]] = deque()
        self._lock = threading.Lock()
        self._busy = False
        self._waiters: list[Future[None]] = []
        self._hurry = threading.Event()
        """Set when someone waits for the queued rows: the next transaction begins at once."""
        self._write = write
        self.commits = 0
        """Transactions of rows written so far (for tests and benchmarks)."""
        self.jobs = 0
        """Commit points of runs queued so far: ``jobs / commits`` is how many share one."""

    def put(self, job: Callable[[], None] | RowsJob | Future[None]) -> None:
        with self._lock:
            self._jobs.append(job)
            if type(job) is RowsJob:
                self.jobs += 1
            else:
                self._hurry.set()
            if self._busy:
                return
            self._busy = True
        threading.Thread(target=self._serve, name="nbagent-store", daemon=True).start()

    def passed(self) -> Future[None]:
        """A future that completes once every job queued so far has run (jobs queued later, by
        other runs, are not waited for): what one run awaits for its own rows."""
        done: Future[None] = Future()
        done.set_running_or_notify_cancel()
        self.put(done)
        return done

    def drained(self) -> Future[None]:
        done: Future[None] = Future()
        with self._lock:
            if self._busy:
                self._waiters.append(done)
                self._hurry.set()
                return done
        done.set_result(None)
        return done

    def _serve(self) -> None:
        began: float | None = None
        while True:
            if began is not None:
                self._hurry.wait(began + GROUP_WINDOW_S - time.monotonic())
            with self._lock:
                if not self._jobs:
                    self._busy = False
                    waiters, self._waiters = self._waiters, []
                    break
                jobs = list(self._jobs)
                self._jobs.clear()
                self._hurry.clear()
            began = time.monotonic()
            group: list[RowsJob] = []
            # Runs waiting for their rows: told once the group holding the jobs queued before
            # them is written, so a hundred runs ending at once share one transaction.
            passed: list[Future[None]] = []
            for job in jobs:
                if type(job) is RowsJob:
                    if job.sink._behind:  # written on its own, with the rows that failed before
                        self._write_group(group, passed)
                        group = []
                        self._write_group([job], passed)
                        continue
                    group.append(job)
                    if len(group) >= GROUP_LIMIT:
                        self._write_group(group, passed)
                        group = []
                    continue
                if type(job) is Future:
                    passed.append(job)
                    continue
                self._write_group(group, passed)
                group = []
                try:
                    job()  # type: ignore[operator]
                except Exception:  # a job reports its own failures; this only keeps the queue going
                    logger.exception("nbagent: a store write failed")
            self._write_group(group, passed)
        for waiter in waiters:
            waiter.set_result(None)

    def _write_group(self, group: list[RowsJob], passed: list[Future[None]]) -> None:
        """Write ``group``, then complete (and forget) the ``passed`` futures queued before it."""
        try:
            self._write_rows(group)
        finally:
            for done in passed:
                done.set_result(None)
            passed.clear()

    def _write_rows(self, group: list[RowsJob]) -> None:
        if not group:
            return
        if len(group) > 1 and self._write is not None:
            by_statement: dict[str, list[tuple[Any, ...]]] = {}
            for job in group:
                for statement, params in job.take():
                    by_statement.setdefault(statement, []).append(params)

            def write(conn: Any) -> None:
                for statement, rows in by_statement.items():
                    put_rows(conn, statement, rows)

            try:
                self._write(write)
            except Exception as exc:
                logger.debug("nbagent: a grouped store write failed (%s); writing run by run", exc)
            else:
                self.commits += 1
                for job in group:
                    job.sink._written(job.last)
                return
        for job in group:
            try:
                job.sink._commit(job)
                self.commits += 1
            except Exception:
                logger.exception("nbagent: a store write failed")
