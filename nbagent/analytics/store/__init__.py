"""``RunStore``: every run persisted to SQLite as it happens, so a dead kernel loses no finished step.

``nbagent.start(agent, task, store=RunStore("runs.db"))`` (or ``nbagent.configure(store=...)``)
adds the store's sink to the run. The sink reads the run's own record (its ``Recorder``, the one
place that decides what a run looked like, which folds each event once) and marks each row as it
changes, queueing a commit at every point where the run may then wait or end: the run's start, its
wait for its agent and the end of that wait, a step's start and finish, a tool call's start, the
run's end (a call's result rides with the next commit, which follows at once). So a ``kill -9``
keeps every step finished before the last moment (the writer commits what it is given within 50 ms
and a transaction, about 0.2 s under a runner that never waits for a model; a returned record's
rows are all committed), and even shows the step and the
tool call the process died in, with the text the model had streamed in it (written every
``TEXT_INTERVAL_S``, half a second, while it streams).
Usage is folded in memory and lands with its step.

Durability: the database is in WAL mode with ``synchronous=NORMAL``, which keeps every commit
through a crash of the process (``kill -9``, a dead kernel); ``RunStore(path, synchronous="FULL")``
also survives a power cut, at the price of an fsync per commit.

The sink only marks rows and queues commit points: the rows are built and written in order on
a thread of the store's own ("nbagent-store", started when there is something to write and gone
when there is not), so a slow or locked database never holds up the runner's loop, and with it
every run and every Stop. Commits are grouped: whatever the runs sharing the store queued while
the thread was writing goes in its next transaction, begun at most every ``GROUP_WINDOW_S``
(50 ms) while work keeps coming, each row once (``commits.WriteQueue``): a hundred runs share
commits instead of queueing one each, and a run's commit points meanwhile share one job. A loop
so busy that the thread cannot get the GIL back (runs that never wait for a model) lends it its
turn at a commit point once rows have waited 60 ms (``WriteQueue.lend``). The
runner waits (without blocking its loop, and for a bounded time) until a run's rows are written
before it hands back the record, so a returned record is a stored one.

Several kernels may write one store at once: each write is a short ``BEGIN IMMEDIATE``
transaction, SQLite's busy timeout queues the writers, and a write that still fails is retried;
if it fails for good, it is logged, its rows are written again with the run's next commit (a run's
last write: the whole run, at the store's next read), reads warn until they are, and the run never
sees a database error. No value can fail a write either: text that is not valid UTF-8
(lone surrogates) is stored with backslash escapes, and a value that refuses to become JSON or
text (a raising ``__repr__``, ``2 ** 20000``) is stored as a readable placeholder
(``nbagent.analytics.store.schema``). A run still marked running whose writer process is gone reads back
as ``"unfinished"`` (a writer on another host cannot be checked, so its runs read as running).

Reading needs no write access. ``RunStore(path, readonly=True)``, or any store whose file or
folder this process cannot write, opens with SQLite's ``mode=ro``: it reads runs (even those a
live writer is adding), never migrates or changes the file, and refuses ``sink()``/``add()``.
In a read-only folder without a write-ahead log it reads the file as ``immutable``. A file that
is not a store (random bytes, a truncated or damaged database, an SQLite file with other tables)
raises ``NotAStoreError`` naming it.

``store=`` takes a path wherever it takes a store (``start``, ``batch``, ``configure``):
``open_store`` gives the one ``RunStore`` of this process for that file. A named batch leases its
name in the store while it runs (``nbagent.analytics.store.leases``), so two processes sharing the
file never run one batch twice.

The file is created readable by its owner only (0600; SQLite gives the ``-wal`` and ``-shm``
files the same mode). The schema is versioned with ``PRAGMA user_version``; opening an older
store writable migrates it in place, in one transaction; opened read-only it is read as it is
(columns it lacks read as their defaults); a newer one is refused.
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import closing, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from nbagent.analytics.store.commits import WriteQueue
from nbagent.analytics.store.file import (
    CleaningConnection,
    NotAStoreError,
    ReadOnlyStoreError,
    StoreError,
    StoreVersionError,
    connect,
    file_errors,
    inspect,
    migrate,
    retrying,
    why_not_writable,
)
from nbagent.analytics.store.identity import this_writer, writer_gone
from nbagent.analytics.store.schema import SCHEMA_VERSION, UNFINISHED_ERROR, put_whole_run, read_records
from nbagent.analytics.store.writer import RunWriter
from nbagent.records import RunRecord

if TYPE_CHECKING:
    import pandas as pd

    from nbagent.analytics.runs import Page, RunQuery

__all__ = [
    "SCHEMA_VERSION",
    "UNFINISHED_ERROR",
    "NotAStoreError",
    "PendingWritesWarning",
    "ReadOnlyStoreError",
    "RunStore",
    "StoreError",
    "StoreVersionError",
    "open_store",
]

logger = logging.getLogger("nbagent")


class PendingWritesWarning(UserWarning):
    """A read of a store missed runs of this process whose writes were not done yet."""


class RunStore:
    """A SQLite file of runs, written as they happen and read back as records or frames.

    Args:
        path: the database file; ``~`` is expanded. Created (owner-only) with its parent folders
            if missing, unless read-only.
        readonly: only read: never create, migrate or change the file. Chosen automatically
            when the file or its folder is not writable; ``store.readonly`` tells.
        synchronous: ``"NORMAL"`` keeps every commit through a process crash; ``"FULL"`` also
            through a power cut (an fsync per commit).
        busy_timeout_s: how long a write waits for another writer before it is retried.

    Raises ``NotAStoreError`` for a file that is not a store, ``StoreVersionError`` for a store
    of a newer nbagent, ``FileNotFoundError`` for a read-only store that does not exist.
    Methods may be called from any thread. One store may serve many runs at once.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        readonly: bool = False,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        busy_timeout_s: float = 10.0,
    ) -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError("synchronous must be 'NORMAL' or 'FULL'")
        self.path = Path(path).expanduser()
        self._synchronous = synchronous
        self._busy_timeout_s = busy_timeout_s
        self._lock = threading.Lock()
        self._queue = WriteQueue(lambda work: self._write(work, clean=False))
        self._unwritten_lock = threading.Lock()
        self._queued_writes: dict[str, int] = {}
        self._behind: set[str] = set()
        self._lost: dict[str, RunRecord] = {}
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        reason = "readonly=True" if readonly else why_not_writable(self.path)
        self.readonly = reason is not None
        """True when the store only reads (asked for, or the file or its folder is not writable)."""
        self._readonly_reason = reason
        if self.readonly:
            if not self.path.is_file():
                raise FileNotFoundError(
                    errno.ENOENT, "no nbagent store here (a read-only store is only read)", str(self.path)
                )
            with self._reader() as conn:
                inspect(conn, self.path)
            return
        self._create_file()
        with file_errors(self.path):
            conn = self._connect()
        try:
            if retrying(conn, lambda c: inspect(c, self.path)) != SCHEMA_VERSION:
                retrying(conn, lambda c: migrate(c, self.path), begin="BEGIN IMMEDIATE")
            if retrying(conn, lambda c: c.execute("PRAGMA journal_mode").fetchone()[0]) != "wal":
                retrying(conn, lambda c: c.execute("PRAGMA journal_mode=WAL"))
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def __repr__(self) -> str:
        return f"RunStore({str(self.path)!r}{', readonly=True' if self.readonly else ''})"

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Finish the queued writes, then close the connection. A closed store raises
        ``StoreError`` when it is written (a live run's later writes are logged and lost), given a
        run or read. Closing again does nothing. Runs whose last write failed get one more try;
        those that still cannot be written are logged."""
        if self._lost and not self._closed:
            self._queue.put(self._rewrite_lost)
        self.flush()
        with self._unwritten_lock:
            lost = sorted(self._lost) if not self._closed else []
        if lost:
            logger.warning(
                "nbagent: closing %s with %d run(s) it could not write, now lost: %s",
                self.path,
                len(lost),
                ", ".join(lost),
            )
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    @property
    def closed(self) -> bool:
        """True once ``close()`` was called: the store no longer writes or reads."""
        return self._closed

    def _refuse_closed(self) -> None:
        if self._closed:
            raise StoreError(f"{self.path} is closed: open a new RunStore({str(self.path)!r}) to use it")

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every write queued so far is done (not those live runs queue meanwhile: a
        flush during a run returns once the run's steps so far are stored); False if ``timeout``
        passed first."""
        try:
            self._queue.passed().result(timeout)
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
        return connect(
            self.path, readonly=self.readonly, timeout=self._busy_timeout_s, synchronous=self._synchronous
        )

    @property
    def schema_version(self) -> int:
        with self._reader() as conn:
            return conn.execute("PRAGMA user_version").fetchone()[0]

    # -- writing -------------------------------------------------------------------------------

    def _refuse_writes(self) -> None:
        self._refuse_closed()
        if self.readonly:
            raise ReadOnlyStoreError(
                f"{self.path} is open read-only ({self._readonly_reason}): it cannot store runs; "
                "open a writable store for that"
            )

    def _write(self, work: Callable[[Any], Any], *, clean: bool = True) -> None:
        """Run ``work`` in one write transaction. ``clean=False`` binds values as they are: for
        rows built from a ``Recorder``'s record, whose values are clean already; if one still
        fails, the caller writes the same rows again with ``clean=True``."""
        with self._lock:
            self._refuse_closed()
            if self._conn is None:
                raise ReadOnlyStoreError(f"{self.path} is not open for writing")
            wrap = CleaningConnection if clean else (lambda conn: conn)
            retrying(self._conn, lambda conn: work(wrap(conn)), begin="BEGIN IMMEDIATE")

    def sink(self) -> RunWriter:
        """A sink for one run: pass it to ``start(sinks=[...])``, or just ``start(store=store)``.
        ``ReadOnlyStoreError`` for a read-only store, so the run is refused before it starts."""
        self._refuse_writes()
        return RunWriter(self)

    def add(self, record: RunRecord) -> None:
        """Store a finished run (e.g. one built from a smolagents agent's memory), replacing any
        stored run with the same id."""
        self._refuse_writes()
        if not record.done:
            raise ValueError("add() takes finished runs; give a live run store= when you start it")
        self._write(lambda conn: put_whole_run(conn, record, writer=None))

    def _writes_queued(self, run_id: str, change: int) -> None:
        """Called by a run's sink: ``change`` more (or fewer) writes of ``run_id`` are queued."""
        with self._unwritten_lock:
            count = self._queued_writes.get(run_id, 0) + change
            if count > 0:
                self._queued_writes[run_id] = count
            else:
                self._queued_writes.pop(run_id, None)

    def _run_behind(self, run_id: str, behind: bool, final: RunRecord | None = None) -> None:
        """Called by a run's sink: a write of ``run_id`` failed (or it caught up again). ``final``:
        the run has ended and its sink gave up; the next read tries to write it again."""
        with self._unwritten_lock:
            (self._behind.add if behind else self._behind.discard)(run_id)
            if final is not None:
                self._lost[run_id] = final

    def _rewrite_lost(self) -> None:
        """On the writer thread: write the ended runs whose last write failed, if it works now."""
        with self._unwritten_lock:
            lost = dict(self._lost)
        for run_id, record in lost.items():
            try:
                self._write(lambda conn, record=record: put_whole_run(conn, record, this_writer()))
            except Exception as exc:
                logger.debug("nbagent: run %s still cannot be written: %s", run_id, exc)
                continue
            with self._unwritten_lock:
                self._behind.discard(run_id)
                if self._lost.get(run_id) is record:
                    del self._lost[run_id]

    # -- reading -------------------------------------------------------------------------------

    @contextmanager
    def _reader(self) -> Iterator[sqlite3.Connection]:
        """A connection of its own, so a long read never holds up a run's writes."""
        self._refuse_closed()
        with file_errors(self.path), closing(self._connect()) as conn:
            yield conn

    def _read(self, run_ids: Iterable[str] | None) -> list[RunRecord]:
        self._refuse_closed()
        if self._lost:
            self._queue.put(self._rewrite_lost)
        flushed = self.flush(timeout=self._busy_timeout_s)
        with self._unwritten_lock:
            unwritten = set(self._behind) | (set() if flushed else set(self._queued_writes))
        wanted = None if run_ids is None else list(run_ids)
        with self._reader() as conn:
            records = retrying(conn, lambda c: read_records(c, wanted, writer_gone), begin="BEGIN")
        if wanted is not None:
            unwritten &= set(wanted)
        if unwritten:
            n = len(unwritten)
            runs = "1 run" if n == 1 else f"{n} runs"
            warnings.warn(
                f"{runs} of this process not fully written to {self.path} yet (the database is busy: "
                f"another process holds its write lock): this read misses {'it' if n == 1 else 'them'} "
                "or shows an older state. The writes are retried (a live run's at its next step, an "
                "ended run's at the next read); store.flush() waits for queued ones.",
                PendingWritesWarning,
                stacklevel=3,
            )
        return records

    def records(self, run_ids: Iterable[str] | None = None) -> list[RunRecord]:
        """Every stored run (or those in ``run_ids``), oldest first, read in one consistent snapshot
        after this store's own queued writes (waiting up to ``busy_timeout_s`` for them).

        When some of this process's runs are still not written (another process holds the write
        lock for longer), the result misses them or shows an older state, and a
        ``PendingWritesWarning`` says how many. A warning, not an error: what is returned is true,
        the missing writes land by themselves once the lock is free, and a notebook reading its
        runs while another kernel writes should still get an answer. ``store.flush()`` waits for
        the writes; ``warnings.simplefilter("error", PendingWritesWarning)`` makes it strict.
        """
        return self._read(run_ids)

    def records_where(self, path: str, value: Any) -> list[RunRecord]:
        """The stored runs whose ``metadata`` holds ``value`` at ``path`` (dotted keys:
        ``records_where("batch.name", "qa-v2")``), oldest first; the search runs in SQL."""
        if not path or any(not part or not part.replace("_", "").isalnum() for part in path.split(".")):
            raise ValueError(f"path must be dotted keys of letters, digits and '_', not {path!r}")
        query = (
            "SELECT run_id FROM runs WHERE CASE WHEN json_valid(metadata) "
            "THEN json_extract(metadata, ?) END = ?"
        )
        self._refuse_closed()
        self.flush(timeout=self._busy_timeout_s)  # this process's own runs first
        with self._reader() as conn:
            if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'runs'").fetchone() is None:
                return []
            rows = retrying(conn, lambda c: c.execute(query, (f"$.{path}", value)).fetchall())
        ids = [row[0] for row in rows]
        return self._read(ids) if ids else []

    def record(self, run_id: str) -> RunRecord:
        """The stored run ``run_id``; ``KeyError`` if there is none."""
        found = self._read([run_id])
        if not found:
            raise KeyError(run_id)
        return found[0]

    def page(self, query: RunQuery) -> Page:
        """One page of the stored runs ``query`` selects, filtered, sorted and paged in SQL on a
        read-only connection (``nbagent.analytics.runs``: the interface history shares)."""
        from nbagent.analytics.store.pages import StorePages

        return StorePages(self.path).page(query)

    def choices(self) -> dict[str, list[str]]:
        """The distinct statuses, agents and models stored (for filter menus)."""
        from nbagent.analytics.store.pages import StorePages

        return StorePages(self.path).choices()

    def runs(self) -> pd.DataFrame:
        """One row per stored run (``nbagent.analytics.frames.runs_frame``)."""
        from nbagent.analytics.frames import runs_frame

        return runs_frame(self._read(None))

    def steps(self) -> pd.DataFrame:
        """One row per stored step (``nbagent.analytics.frames.steps_frame``)."""
        from nbagent.analytics.frames import steps_frame

        return steps_frame(self._read(None))

    def tool_calls(self) -> pd.DataFrame:
        """One row per stored tool call (``nbagent.analytics.frames.tool_calls_frame``)."""
        from nbagent.analytics.frames import tool_calls_frame

        return tool_calls_frame(self._read(None))


_opened_lock = threading.Lock()
_opened: dict[str, RunStore] = {}
"""The stores ``open_store`` made, by resolved path: runs given one path share one writer."""


def open_store(store: RunStore | str | os.PathLike[str]) -> RunStore:
    """The ``RunStore`` for ``store=``: a ``RunStore`` as it is, or the one store of this process
    for a path (``"evals.db"``, a ``Path``, ``"~/runs.db"``), opened on first use.

    One ``RunStore`` per resolved path, so two runs or batches given one path share one writer
    thread and its grouped commits (two ``RunStore`` objects on one file work too, as two writers
    would). A path's store that was closed is opened again. Anything else is a ``TypeError``
    naming its type, at once, before a run starts.
    """
    if isinstance(store, RunStore):
        return store
    if isinstance(store, bytes) or not isinstance(store, (str, os.PathLike)):
        raise TypeError(
            f"store must be a RunStore or a path to one (str or pathlib.Path), not {type(store).__name__}"
        )
    path = Path(store).expanduser()
    if not str(store).strip():
        raise ValueError("store must name a file: the path is empty")
    key = str(path.resolve())
    with _opened_lock:
        opened = _opened.get(key)
        if opened is None or opened.closed:
            opened = _opened[key] = RunStore(path)
        return opened
