"""The store's writer thread: commit points of many runs, written in order, grouped into few
transactions.

Part of ``nbagent.analytics.store``. ``WriteQueue`` is one thread per store that exists only while there is
work. Each run's sink (``nbagent.analytics.store.writer.RunWriter``) queues a ``RowsJob`` at each
commit point; the thread builds the job's rows from the run's record when it takes it, so a row
changed many times while the thread was busy is built and written once.
"""

from __future__ import annotations

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

CHUNKS = (ROWS_PER_STATEMENT, *(n for n in (256, 64, 16, 4, 1) if n < ROWS_PER_STATEMENT))
"""The row counts a statement is written with: any number of rows is a few statements of these
sizes, so each table has a handful of texts, each compiled once (SQLite compiles a statement of a
thousand rows in about as long as it takes to run it) and kept in sqlite3's statement cache."""

_texts: dict[tuple[str, int], str] = {}
"""The text of each statement for each size in ``CHUNKS``."""


def _rows_text(statement: str, n: int) -> str:
    values = statement[statement.index(" VALUES ") + 8 :]
    return statement + f", {values}" * (n - 1)


def put_rows(
    conn: Any, statement: str, rows: list[tuple[Any, ...]], done: Callable[[], None] | None = None
) -> None:
    """Write ``rows`` with few statements of many rows each (``VALUES (...), (...), ...``).

    Why not ``executemany``: Python's sqlite3 releases the GIL around every row's step, and a
    writer thread then waits for the busy runner loop to hand it back, once per row (measured
    here: about 50 µs a row under load, most of a batch's store time). One statement per few
    hundred rows waits once. Rows of one key later in the list replace earlier ones, in order.
    ``done`` is called after each statement.
    """
    start = 0
    for size in CHUNKS:
        while len(rows) - start >= size:
            text = _texts.get((statement, size))
            if text is None:
                text = _texts[(statement, size)] = _rows_text(statement, size)
            conn.execute(text, [value for row in rows[start : start + size] for value in row])
            start += size
            if done is not None:
                done()


def put_all(conn: Any, rows: list[Row], done: Callable[[], None] | None = None) -> None:
    """Write ``rows`` (statements and parameters, in order) with ``put_rows``: one statement per
    table and few hundred rows, each table's rows in their order, the tables in the order they first
    appear (a run's row before its steps', a step's before its calls')."""
    by_statement: dict[str, list[tuple[Any, ...]]] = {}
    for statement, params in rows:
        by_statement.setdefault(statement, []).append(params)
    for statement, params_list in by_statement.items():
        put_rows(conn, statement, params_list, done)


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

LEND_AFTER_S = 0.06
"""A commit point queued this long ago and not taken yet (longer than ``GROUP_WINDOW_S``): the
writer thread is starved of the GIL (``WriteQueue.lend``)."""

LEND_PROBE_S = 0.01
"""A lend's first wait: a writer starved of the GIL moves within it, as the loop has let it go; one
that does not is inside SQLite (a slow commit, a database locked by another writer)..."""

LEND_SLICE_S = 0.05
"""... and after it, a lend goes on while the writer did something in its last slice of this long..."""

LEND_MAX_S = 0.25
"""... up to this long in all: the longest the runner's loop waits for the writer in one lend."""

LEND_PAUSE_S = 0.1
"""After a lend in which the writer did not move, no lend until it moves, or for this long."""


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
        self._queued_at: float | None = None
        """When the oldest job not taken yet was queued (``time.monotonic``)."""
        self._round_at: float | None = None
        """When the oldest job of the round the thread is writing was queued."""
        self._rounds_taken = 0
        self._rounds_done = 0
        """Rounds of jobs taken and written by the thread: what ``lend`` waits on."""
        self._round_done = threading.Condition(self._lock)
        self._ticks = 0
        """Bumped by the thread between its SQLite calls (a round taken, a job, a statement, a
        commit): a lend that sees it stand still knows the writer is inside SQLite, not starved."""
        self._lend_paused_until = 0.0
        self._lend_paused_ticks = -1
        self.lent_s = 0.0
        """Seconds the runner's loop waited in ``lend`` (for tests and benchmarks)."""
        self.commits = 0
        """Transactions of rows written so far (for tests and benchmarks)."""
        self.jobs = 0
        """Commit points of runs queued so far: ``jobs / commits`` is how many share one."""

    def put(self, job: Callable[[], None] | RowsJob | Future[None]) -> None:
        with self._lock:
            if not self._jobs:
                self._queued_at = time.monotonic()
            self._jobs.append(job)
            if type(job) is RowsJob:
                self.jobs += 1
            else:
                self._hurry.set()
            if self._busy:
                return
            self._busy = True
        threading.Thread(target=self._serve, name="nbagent-store", daemon=True).start()

    def lend(self) -> None:
        """On the runner's loop, at a commit point: when the jobs queued have waited more than
        ``LEND_AFTER_S``, wait (up to ``LEND_MAX_S``) until the thread has written them.

        Why: a thread that gives the GIL up (each SQLite call does, and so does its wait between
        transactions) gets it back only when the thread holding it blocks. An asyncio loop with
        work ready never blocks: it gives the GIL up at every turn (its ``select(0)``) and takes
        it back before the woken writer can, so under a busy loop the writer waits hundreds of
        milliseconds per call (measured: a median of 340 ms, 2 s at worst) and the store falls
        seconds behind. Blocked here, the loop leaves the GIL to the writer for one round. A loop
        that waits for models or tools blocks often, its writer keeps up, and it never lends. A
        writer that does not move while the loop waits is inside SQLite (a slow commit, a database
        locked by another writer), not starved: the lend ends, and none follows until the writer
        moves or ``LEND_PAUSE_S`` has passed, so such a database costs the loop at most
        ``LEND_PROBE_S`` every ``LEND_PAUSE_S``."""
        now = time.monotonic()
        with self._lock:
            queued, writing = self._queued_at, self._round_at
            since = min(queued or now, writing or now)
            if now - since < LEND_AFTER_S:
                return
            if self._ticks == self._lend_paused_ticks and now < self._lend_paused_until:
                return
            # the round that takes the waiting jobs, else the one being written
            target = self._rounds_taken + (queued is not None)
            self._hurry.set()  # no group window: the loop waits
            wait = LEND_PROBE_S
            while True:
                ticks = self._ticks
                if self._round_done.wait_for(lambda: self._rounds_done >= target, wait):
                    break
                end = time.monotonic()
                if self._ticks == ticks:  # inside SQLite: not starved
                    self._lend_paused_ticks, self._lend_paused_until = ticks, end + LEND_PAUSE_S
                    break
                if end - now >= LEND_MAX_S:
                    break
                wait = LEND_SLICE_S
            self.lent_s += time.monotonic() - now

    def _tick(self) -> None:
        """The thread moved (between SQLite calls): what a lend watches for."""
        self._ticks += 1

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
                self._round_at, self._queued_at = self._queued_at, None
                self._rounds_taken += 1
                self._ticks += 1
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
                self._ticks += 1
            self._write_group(group, passed)
            with self._lock:
                self._rounds_done = self._rounds_taken
                self._round_at = None
                self._round_done.notify_all()
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
            rows: list[Row] = []
            for job in group:
                rows += job.take()
                self._ticks += 1

            def write(conn: Any) -> None:
                put_all(conn, rows, self._tick)

            try:
                self._write(write)
            except Exception as exc:
                logger.debug("nbagent: a grouped store write failed (%s); writing run by run", exc)
            else:
                self._ticks += 1
                self.commits += 1
                for job in group:
                    job.sink._written(job.last)
                return
        for job in group:
            self._ticks += 1
            try:
                job.sink._commit(job)
                self._ticks += 1
                self.commits += 1
            except Exception:
                logger.exception("nbagent: a store write failed")
