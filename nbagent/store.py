"""``RunStore``: every run persisted to SQLite as it happens, so a dead kernel loses no finished step.

``nbagent.start(agent, task, store=RunStore("runs.db"))`` (or ``nbagent.configure(store=...)``)
adds the store's sink to the run. The sink folds the run's events with its own ``Recorder`` (the
one place that decides what a run looked like) and writes each row as it changes, committing at
every point where the run may then wait or end: the run's start and end, a step's start and
finish, a tool call's start (a call's result rides with the next commit, which follows at once).
So a ``kill -9`` keeps every finished step, and even shows the step and the tool call the process
died in. Streamed text and usage are folded in memory and land with their step.

Durability: the database is in WAL mode with ``synchronous=NORMAL``, which keeps every commit
through a crash of the process (``kill -9``, a dead kernel); ``RunStore(path, synchronous="FULL")``
also survives a power cut, at the price of an fsync per commit.

The sink only folds events and queues rows: the writes happen in order on a thread of the
store's own ("nbagent-store", started when there is something to write and gone when there is
not), so a slow or locked database never holds up the runner's loop, and with it every run and
every Stop. The runner waits (without blocking its loop, and for a bounded time) until a run's
rows are written before it hands back the record, so a returned record is a stored one.

Several kernels may write one store at once: each write is a short ``BEGIN IMMEDIATE``
transaction, SQLite's busy timeout queues the writers, and a write that still fails is retried;
if it fails for good, it is logged and the next write rewrites the whole run so far, so the run
never sees a database error. Text that is not valid UTF-8 (lone surrogates) is stored with
backslash escapes instead of failing the write.

A run is stored with the identity of the process that writes it (host, pid and, on Linux, the
process's boot and start time, which tell a reused pid apart). When the store reads back a run
still marked running whose writer is gone, its status is ``"unfinished"`` (a writer on another
host cannot be checked, so its runs keep reading as running).

The file is created readable by its owner only (0600; SQLite gives the ``-wal`` and ``-shm``
files the same mode). The schema is versioned with ``PRAGMA user_version``; opening an older store
migrates it in place, in one transaction, and a newer one is refused.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sqlite3
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import closing, contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from . import events as ev
from .records import Recorder, RunRecord, StepRecord, ToolCallRecord

if TYPE_CHECKING:
    import pandas as pd

logger = logging.getLogger("nbagent")

SCHEMA_VERSION = 2

_SCHEMA = """
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    task TEXT NOT NULL,
    agent TEXT NOT NULL,
    model TEXT NOT NULL,
    status TEXT NOT NULL,
    started_at TEXT NOT NULL,
    ended_at TEXT,
    duration_s REAL,
    output TEXT,
    error TEXT,
    error_type TEXT,
    cost_usd REAL,
    writer_host TEXT,
    writer_pid INTEGER,
    writer_start TEXT
);
CREATE INDEX runs_by_start ON runs (started_at);
CREATE TABLE steps (
    run_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    kind TEXT NOT NULL,
    started_at TEXT NOT NULL,
    start_s REAL NOT NULL,
    ended_at TEXT,
    end_s REAL,
    input_tokens INTEGER,
    output_tokens INTEGER,
    usage_source TEXT NOT NULL,
    model_output TEXT NOT NULL,
    error TEXT,
    interrupted INTEGER NOT NULL,
    retries INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, step)
) WITHOUT ROWID;
CREATE TABLE tool_calls (
    run_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    call_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    arguments TEXT,
    started_at TEXT NOT NULL,
    start_s REAL NOT NULL,
    ended_at TEXT,
    end_s REAL,
    status TEXT,
    result TEXT,
    error TEXT,
    PRIMARY KEY (run_id, step, seq)
) WITHOUT ROWID;
"""
"""The current schema (version 2). Times are ISO 8601 UTC text; values (output, arguments,
results) are JSON, with anything JSON cannot hold stored as its ``repr``."""

_MIGRATIONS: dict[int, str] = {
    # Version 1 had no writer identity (so a dead writer's run could not be told from a live
    # one), no cost and no retry count.
    1: """
        ALTER TABLE runs ADD COLUMN cost_usd REAL;
        ALTER TABLE runs ADD COLUMN writer_host TEXT;
        ALTER TABLE runs ADD COLUMN writer_pid INTEGER;
        ALTER TABLE runs ADD COLUMN writer_start TEXT;
        ALTER TABLE steps ADD COLUMN retries INTEGER NOT NULL DEFAULT 0;
    """,
}
"""``_MIGRATIONS[n]`` turns a version ``n`` store into version ``n + 1``."""

UNFINISHED_ERROR = "the process running it ended before the run finished"

_RETRIES = 4
_LAST_WRITE_ATTEMPTS = 4


class StoreVersionError(RuntimeError):
    """The store was written by a newer nbagent (its schema version is unknown here)."""


# -- who is writing ------------------------------------------------------------------------------


def _process_start(pid: int) -> str | None:
    """The boot id and start time of process ``pid`` (Linux), which tell a reused pid apart."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses; the start time is field 22.
    return f"{boot}:{stat.rpartition(')')[2].split()[19]}"


_identity: tuple[int, tuple[str, int, str | None]] | None = None


def _writer() -> tuple[str, int, str | None]:
    """(host, pid, start) of this process, recomputed after a fork."""
    global _identity
    pid = os.getpid()
    if _identity is None or _identity[0] != pid:
        _identity = (pid, (socket.gethostname(), pid, _process_start(pid)))
    return _identity[1]


def _pid_alive(pid: int) -> bool:
    if sys.platform == "win32":
        import ctypes

        kernel32 = ctypes.windll.kernel32  # type: ignore[attr-defined]
        handle = kernel32.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
        if not handle:
            return False
        code = ctypes.c_ulong()
        try:
            kernel32.GetExitCodeProcess(handle, ctypes.byref(code))
        finally:
            kernel32.CloseHandle(handle)
        return code.value == 259  # STILL_ACTIVE
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, owned by someone else
    return True


_live_lock = threading.Lock()
_live_run_ids: set[str] = set()
"""Runs this process is writing right now (across all stores)."""


def _writer_alive(host: str | None, pid: int | None, start: str | None) -> bool:
    """Could the writer of a run still be writing it? Unknown writers (other hosts) count as alive."""
    if pid is None:
        return False  # written before writers were recorded (schema 1): nobody is writing it now
    if host != socket.gethostname():
        return True
    if not _pid_alive(pid):
        return False
    return start is None or _process_start(pid) in (None, start)


# -- values ---------------------------------------------------------------------------------------


def _json(value: Any) -> str | None:
    if value is None:
        return None
    try:
        return json.dumps(value, ensure_ascii=False, default=repr)
    except (ValueError, RecursionError):  # a circular structure
        return json.dumps(repr(value), ensure_ascii=False)


def _unjson(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _iso(at: datetime | None) -> str | None:
    """One fixed UTC format, so text order is time order (a naive time is taken as UTC)."""
    if at is None:
        return None
    at = at.replace(tzinfo=timezone.utc) if at.tzinfo is None else at.astimezone(timezone.utc)
    return at.isoformat(timespec="microseconds")


def _time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def _run_row(record: RunRecord, writer: tuple[str, int, str | None] | None) -> tuple[Any, ...]:
    host, pid, start = writer if writer is not None else (None, None, None)
    return (
        record.run_id,
        record.task,
        record.agent,
        record.model,
        record.status,
        _iso(record.started_at),
        _iso(record.ended_at),
        record.duration_s,
        _json(record.output),
        record.error,
        record.error_type,
        record.cost_usd,
        host,
        pid,
        start,
    )


def _step_row(run_id: str, step: StepRecord) -> tuple[Any, ...]:
    return (
        run_id,
        step.number,
        step.kind,
        _iso(step.started_at),
        step.start_s,
        _iso(step.ended_at),
        step.end_s,
        step.input_tokens,
        step.output_tokens,
        step.usage_source,
        step.model_output,
        step.error,
        int(step.interrupted),
        step.retries,
    )


def _call_row(run_id: str, step: int, seq: int, call: ToolCallRecord) -> tuple[Any, ...]:
    return (
        run_id,
        step,
        seq,
        call.call_id,
        call.tool,
        _json(call.arguments),
        _iso(call.started_at),
        call.start_s,
        _iso(call.ended_at),
        call.end_s,
        call.status,
        _json(call.result),
        call.error,
    )


_PUT_RUN = "INSERT OR REPLACE INTO runs VALUES (" + ",".join("?" * 15) + ")"
_PUT_STEP = "INSERT OR REPLACE INTO steps VALUES (" + ",".join("?" * 14) + ")"
_PUT_CALL = "INSERT OR REPLACE INTO tool_calls VALUES (" + ",".join("?" * 13) + ")"


# -- the store ------------------------------------------------------------------------------------


class RunStore:
    """A SQLite file of runs, written as they happen and read back as records or frames.

    Args:
        path: the database file; created (owner-only) with its parent folders if missing.
        synchronous: ``"NORMAL"`` keeps every commit through a process crash; ``"FULL"`` also
            through a power cut (an fsync per commit).
        busy_timeout_s: how long a write waits for another writer before it is retried.

    Methods may be called from any thread. One store may serve many runs at once.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        busy_timeout_s: float = 10.0,
    ) -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError("synchronous must be 'NORMAL' or 'FULL'")
        self.path = Path(path)
        self._synchronous = synchronous
        self._busy_timeout_s = busy_timeout_s
        self._lock = threading.Lock()
        self._queue = _WriteQueue()
        self._create_file()
        self._conn = self._connect()
        try:
            self._retrying(self._conn, lambda conn: conn.execute("PRAGMA journal_mode=WAL"))
            self._retrying(self._conn, self._migrate, begin="BEGIN IMMEDIATE")
        except BaseException:
            self._conn.close()
            raise

    def __repr__(self) -> str:
        return f"RunStore({str(self.path)!r})"

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Finish the queued writes, then close the connection (live runs can no longer write)."""
        self.flush()
        with self._lock:
            self._conn.close()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued write of this store is done; False if ``timeout`` passed first."""
        try:
            self._queue.drained().result(timeout)
        except FutureTimeout:
            return False
        return True

    # -- opening -------------------------------------------------------------------------------

    def _create_file(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            return
        os.close(fd)

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE ... COMMIT), so a
        # writer takes the write lock up front and never fails half-way on a lock upgrade.
        conn = sqlite3.connect(
            self.path, timeout=self._busy_timeout_s, isolation_level=None, check_same_thread=False
        )
        conn.execute(f"PRAGMA synchronous={self._synchronous}")
        return conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == 0:
            if conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                raise StoreVersionError(f"{self.path} is a SQLite file but not an nbagent run store")
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
        elif version > SCHEMA_VERSION:
            raise StoreVersionError(
                f"{self.path} has store schema {version}; this nbagent reads up to {SCHEMA_VERSION}: "
                "upgrade nbagent"
            )
        else:
            for old in range(version, SCHEMA_VERSION):
                for statement in _MIGRATIONS[old].split(";"):
                    if statement.strip():
                        conn.execute(statement)
        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    @property
    def schema_version(self) -> int:
        with self._reader() as conn:
            return conn.execute("PRAGMA user_version").fetchone()[0]

    # -- writing -------------------------------------------------------------------------------

    def _retrying(
        self, conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], Any], *, begin: str = ""
    ) -> Any:
        """Run ``work`` (in a transaction opened with ``begin``), retrying when the database is busy.

        ``BEGIN IMMEDIATE`` takes the write lock up front, so a writer never fails half-way on a
        lock upgrade; a plain ``BEGIN`` gives a read one consistent snapshot. The busy timeout
        already waits for other writers; a retry covers what it cannot (a lock held longer than
        the timeout). The last failure is raised.
        """
        attempt = 0
        while True:
            try:
                if begin:
                    conn.execute(begin)
                try:
                    result = work(conn)
                    if begin:
                        conn.execute("COMMIT")
                    return result
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.OperationalError:
                attempt += 1
                if attempt == _RETRIES:
                    raise
                time.sleep(0.05 * 2**attempt)

    def _write(self, work: Callable[[sqlite3.Connection], Any]) -> None:
        with self._lock:
            self._retrying(self._conn, _clean_text(work), begin="BEGIN IMMEDIATE")

    def sink(self) -> Callable[[ev.RunEvent], None]:
        """A sink for one run: pass it to ``start(sinks=[...])``, or just ``start(store=store)``."""
        return _RunWriter(self)

    def add(self, record: RunRecord) -> None:
        """Store a finished run (e.g. one built from a smolagents agent's memory), replacing any
        stored run with the same id."""
        if not record.done:
            raise ValueError("add() takes finished runs; give a live run store= when you start it")

        def put(conn: sqlite3.Connection) -> None:
            _put_whole_run(conn, record, writer=None)

        self._write(put)

    # -- reading -------------------------------------------------------------------------------

    @contextmanager
    def _reader(self) -> Iterator[sqlite3.Connection]:
        """A connection of its own, so a long read never holds up a run's writes."""
        with closing(self._connect()) as conn:
            yield conn

    def records(self, run_ids: Iterable[str] | None = None) -> list[RunRecord]:
        """Every stored run (or those in ``run_ids``), oldest first, read in one consistent snapshot
        (after this store's own queued writes)."""
        self.flush(timeout=self._busy_timeout_s)
        wanted = None if run_ids is None else list(run_ids)
        with self._reader() as conn:
            return self._retrying(conn, lambda c: _read_records(c, wanted), begin="BEGIN")

    def record(self, run_id: str) -> RunRecord:
        """The stored run ``run_id``; ``KeyError`` if there is none."""
        found = self.records([run_id])
        if not found:
            raise KeyError(run_id)
        return found[0]

    def runs(self) -> pd.DataFrame:
        """One row per stored run (``nbagent.frames.runs_frame``)."""
        from .frames import runs_frame

        return runs_frame(self.records())

    def steps(self) -> pd.DataFrame:
        """One row per stored step (``nbagent.frames.steps_frame``)."""
        from .frames import steps_frame

        return steps_frame(self.records())

    def tool_calls(self) -> pd.DataFrame:
        """One row per stored tool call (``nbagent.frames.tool_calls_frame``)."""
        from .frames import tool_calls_frame

        return tool_calls_frame(self.records())


def _put_whole_run(
    conn: sqlite3.Connection, record: RunRecord, writer: tuple[str, int, str | None] | None
) -> None:
    conn.execute("DELETE FROM steps WHERE run_id = ?", (record.run_id,))
    conn.execute("DELETE FROM tool_calls WHERE run_id = ?", (record.run_id,))
    conn.execute(_PUT_RUN, _run_row(record, writer))
    conn.executemany(_PUT_STEP, [_step_row(record.run_id, s) for s in record.steps])
    conn.executemany(
        _PUT_CALL,
        [
            _call_row(record.run_id, s.number, seq, call)
            for s in record.steps
            for seq, call in enumerate(s.tool_calls)
        ],
    )


def _read_records(conn: sqlite3.Connection, run_ids: list[str] | None) -> list[RunRecord]:
    # One read transaction (the caller's), so runs, steps and calls come from the same moment.
    where, params = "", ()
    if run_ids is not None:
        where, params = " WHERE run_id IN (SELECT value FROM json_each(?))", (json.dumps(run_ids),)
    runs: dict[str, RunRecord] = {}
    steps: dict[tuple[str, int], StepRecord] = {}
    with _live_lock:
        live_here = set(_live_run_ids)
    here = _writer()
    for row in conn.execute(
        "SELECT run_id, task, agent, model, status, started_at, ended_at, duration_s, output, error,"
        " error_type, cost_usd, writer_host, writer_pid, writer_start FROM runs"
        + where
        + " ORDER BY started_at, run_id",
        params,
    ):
        record = RunRecord(
            run_id=row[0],
            task=row[1],
            agent=row[2],
            model=row[3],
            started_at=_time(row[5]),  # type: ignore[arg-type]
            status=row[4],
            output=_unjson(row[8]),
            error=row[9],
            error_type=row[10],
            ended_at=_time(row[6]),
            duration_s=row[7],
            cost_usd=row[11],
        )
        if record.status == "running":
            writer = (row[12], row[13], row[14])
            ours = writer == here
            if (ours and record.run_id not in live_here) or (not ours and not _writer_alive(*writer)):
                record.status, record.error = "unfinished", UNFINISHED_ERROR
        runs[record.run_id] = record
    for row in conn.execute(
        "SELECT run_id, step, kind, started_at, start_s, ended_at, end_s, input_tokens, output_tokens,"
        " usage_source, model_output, error, interrupted, retries FROM steps"
        + where
        + " ORDER BY run_id, step",
        params,
    ):
        run = runs.get(row[0])
        if run is None:
            continue
        step = StepRecord(
            number=row[1],
            kind=row[2],
            started_at=_time(row[3]),  # type: ignore[arg-type]
            start_s=row[4],
            ended_at=_time(row[5]),
            end_s=row[6],
            input_tokens=row[7],
            output_tokens=row[8],
            usage_source=row[9],
            model_output=row[10],
            error=row[11],
            interrupted=bool(row[12]),
            retries=row[13],
        )
        run.steps.append(step)
        steps[(row[0], row[1])] = step
    for row in conn.execute(
        "SELECT run_id, step, call_id, tool, arguments, started_at, start_s, ended_at, end_s, status,"
        " result, error FROM tool_calls" + where + " ORDER BY run_id, step, seq",
        params,
    ):
        owner = steps.get((row[0], row[1]))
        if owner is None:
            continue
        owner.tool_calls.append(
            ToolCallRecord(
                call_id=row[2],
                tool=row[3],
                arguments=_unjson(row[4]),
                started_at=_time(row[5]),  # type: ignore[arg-type]
                start_s=row[6],
                status=row[9],
                result=_unjson(row[10]),
                error=row[11],
                ended_at=_time(row[7]),
                end_s=row[8],
            )
        )
    return list(runs.values())


Row = tuple[str, tuple[Any, ...]]
"""A statement and its parameters."""


class _WriteQueue:
    """Jobs done in order on one thread that exists only while there is work.

    ``put`` may be called from any thread. ``drained()`` is a future that completes when the
    queue is empty (at once if it is), for the runner to await and ``flush`` to wait on.
    """

    def __init__(self) -> None:
        self._jobs: deque[Callable[[], None]] = deque()
        self._lock = threading.Lock()
        self._busy = False
        self._waiters: list[Future[None]] = []

    def put(self, job: Callable[[], None]) -> None:
        with self._lock:
            self._jobs.append(job)
            if self._busy:
                return
            self._busy = True
        threading.Thread(target=self._serve, name="nbagent-store", daemon=True).start()

    def drained(self) -> Future[None]:
        done: Future[None] = Future()
        with self._lock:
            if self._busy:
                self._waiters.append(done)
                return done
        done.set_result(None)
        return done

    def _serve(self) -> None:
        while True:
            with self._lock:
                if not self._jobs:
                    self._busy = False
                    waiters, self._waiters = self._waiters, []
                    break
                job = self._jobs.popleft()
            try:
                job()
            except Exception:  # a job reports its own failures; this only keeps the queue going
                logger.exception("nbagent: a store write failed")
        for waiter in waiters:
            waiter.set_result(None)


def _storable(value: Any) -> Any:
    if isinstance(value, str) and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates (os.fsdecode, surrogateescape): keep them visible
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


class _CleaningConnection:
    """A connection whose ``execute`` makes text parameters storable (see ``_storable``)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, statement: str, params: Iterable[Any] = ()) -> sqlite3.Cursor:
        return self._conn.execute(statement, tuple(_storable(p) for p in params))

    def executemany(self, statement: str, rows: Iterable[Iterable[Any]]) -> sqlite3.Cursor:
        return self._conn.executemany(statement, (tuple(_storable(p) for p in row) for row in rows))


def _clean_text(work: Callable[[Any], Any]) -> Callable[[sqlite3.Connection], Any]:
    return lambda conn: work(_CleaningConnection(conn))


class _RunWriter:
    """The sink of one run: folds its events and queues the rows that changed.

    Called on the runner's loop thread, in event order; the rows are plain tuples made here, and
    the store's writer thread writes them. A transaction is committed at every point where the
    run may then wait a long time or end: the run's start and end, a step's start and finish, a
    tool call's start. A finished tool call rides with the next of those (the next call or the
    step's finish follows at once), which saves a commit per call. When a write fails, the next
    commit rewrites the whole run from a copy of the record, so the store catches up; the run's
    last write is retried a few times, as nothing follows it.
    """

    def __init__(self, store: RunStore) -> None:
        self._store = store
        self._recorder = Recorder()
        self._run_id: str | None = None
        self._behind = False
        """Set by the writer thread when a write failed; read here to send the whole run next."""
        self._pending: list[Row] = []
        self._open_steps: set[int] = set()
        self._open_calls: set[tuple[int, int]] = set()

    def __repr__(self) -> str:
        return f"<RunStore sink {self._store.path} run={self._run_id}>"

    @property
    def _record(self) -> RunRecord:
        # The record being built, not a copy: this sink runs on the loop thread between events.
        record = self._recorder.live
        assert record is not None
        return record

    def __call__(self, event: ev.RunEvent) -> None:
        self._recorder.apply(event)
        kind = type(event)
        if kind is ev.TextDelta or kind is ev.Usage or kind is ev.Retrying:
            return  # folded in memory; written with the step
        if kind is ev.RunStarted:
            self._run_id = event.run_id
            with _live_lock:
                _live_run_ids.add(event.run_id)
        self._pending.extend(self._rows(event))
        if kind is ev.ToolCallFinished:
            return
        last = kind is ev.RunFinished
        rows, self._pending = self._pending, []
        whole = self._recorder.snapshot() if (self._behind or last) else None
        self._store._queue.put(lambda: self._commit(rows, whole, last))

    def drained(self) -> Future[None]:
        """Completes when this store has written what it was given (the runner awaits it)."""
        return self._store._queue.drained()

    def _commit(self, rows: list[Row], whole: RunRecord | None, last: bool) -> None:
        """On the store's writer thread: write ``rows``, or all of ``whole`` when behind."""

        def write(conn: sqlite3.Connection) -> None:
            for statement, params in rows:
                conn.execute(statement, params)

        def rewrite(conn: sqlite3.Connection) -> None:
            assert whole is not None
            _put_whole_run(conn, whole, _writer())

        attempts = _LAST_WRITE_ATTEMPTS if last else 1
        try:
            for attempt in range(attempts):
                try:
                    self._store._write(rewrite if self._behind and whole is not None else write)
                except Exception as exc:
                    if attempt + 1 == attempts:
                        raise
                    self._behind = True  # the retry rewrites the whole run
                    logger.debug("nbagent: retrying the last write of run %s: %s", self._run_id, exc)
                    time.sleep(0.2 * 2**attempt)
                else:
                    self._behind = False
                    return
        except Exception as exc:
            if not self._behind or last:  # once when it falls behind, once at the end
                then = "the store misses its end" if last else "it is rewritten at its next commit"
                logger.warning(
                    "nbagent: could not write run %s to %s (%s: %s); %s",
                    self._run_id,
                    self._store.path,
                    type(exc).__name__,
                    exc,
                    then,
                )
            self._behind = True
        finally:
            if last:
                with _live_lock:
                    _live_run_ids.discard(self._run_id or "")

    def _find_step(self, number: int) -> StepRecord | None:
        for step in reversed(self._record.steps):
            if step.number == number:
                return step
        return None

    def _rows(self, event: ev.RunEvent) -> list[Row]:
        """The rows ``event`` changed, as they stand now."""
        record = self._record
        kind = type(event)
        if kind is ev.RunStarted:
            return [(_PUT_RUN, _run_row(record, _writer()))]
        if kind is ev.RunFinished:
            # The recorder has closed whatever was still open: rewrite those rows, then the run.
            rows: list[Row] = []
            for number in sorted(self._open_steps):
                step = self._find_step(number)
                if step is not None:
                    rows.append((_PUT_STEP, _step_row(record.run_id, step)))
            for number, seq in sorted(self._open_calls):
                step = self._find_step(number)
                if step is not None:
                    rows.append((_PUT_CALL, _call_row(record.run_id, number, seq, step.tool_calls[seq])))
            self._open_steps.clear()
            self._open_calls.clear()
            return [*rows, (_PUT_RUN, _run_row(record, _writer()))]
        step = self._find_step(event.step)
        if step is None:
            return []
        if kind is ev.StepStarted or kind is ev.StepFinished:
            if kind is ev.StepStarted:
                self._open_steps.add(step.number)
            else:
                self._open_steps.discard(step.number)
            return [(_PUT_STEP, _step_row(record.run_id, step))]
        if kind is ev.ToolCallStarted or kind is ev.ToolCallFinished:
            call_id = event.call_id  # type: ignore[attr-defined]
            seq = next((i for i, c in enumerate(step.tool_calls) if c.call_id == call_id), None)
            if seq is None:
                return []
            if kind is ev.ToolCallStarted:
                self._open_calls.add((step.number, seq))
            else:
                self._open_calls.discard((step.number, seq))
            return [(_PUT_CALL, _call_row(record.run_id, step.number, seq, step.tool_calls[seq]))]
        return []
