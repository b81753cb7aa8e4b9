"""How a run gets into the store while it runs: its sink, the store's writer thread, and who writes.

Part of ``nbagent.store`` (which holds the ``RunStore`` API and explains the design). The sink
(``RunWriter``) runs on the runner's loop thread: it folds events with its own ``Recorder`` and
turns what changed into plain row tuples, so the loop never waits on the database. The rows are
written in order by ``WriteQueue``, one thread per store that exists only while there is work.

A run is written with the identity of the process writing it (host, pid and, on Linux, the
process's boot id and start time, which tell a reused pid apart), so a reader can tell a run
whose writer died (``"unfinished"``) from one still being written.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nbagent import events as ev
from nbagent.analytics.store.schema import (
    PUT_CALL,
    PUT_RUN,
    PUT_STEP,
    Writer,
    call_row,
    put_whole_run,
    run_row,
    step_row,
)
from nbagent.records import Recorder, RunRecord, StepRecord

if TYPE_CHECKING:
    import sqlite3

    from nbagent.analytics.store import RunStore

logger = logging.getLogger("nbagent")

_LAST_WRITE_ATTEMPTS = 4

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


_identity: tuple[int, Writer] | None = None


def this_writer() -> Writer:
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


def writer_gone(run_id: str, writer: Writer) -> bool:
    """True when a run stored as running can no longer be finished by its writer."""
    if writer == this_writer():
        with _live_lock:
            return run_id not in _live_run_ids
    return not _writer_alive(*writer)


# -- the writer thread ----------------------------------------------------------------------------


class WriteQueue:
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

    def passed(self) -> Future[None]:
        """A future that completes once every job queued so far has run (jobs queued later, by
        other runs, are not waited for): what one run awaits for its own rows."""
        done: Future[None] = Future()
        done.set_running_or_notify_cancel()
        self.put(lambda: done.set_result(None))
        return done

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


Row = tuple[str, tuple[Any, ...]]
"""A statement and its parameters."""


class RunWriter:
    """The sink of one run: folds its events and queues the rows that changed.

    Called on the runner's loop thread, in event order; the rows are plain tuples made here, and
    the store's writer thread writes them. A transaction is committed at every point where the
    run may then wait a long time or end: the run's start, its wait for its agent and the end of
    that wait (which moves its ``started_at``), a step's start and finish, a tool call's start,
    the run's end. A finished tool call rides with the next of those (the next call or the
    step's finish follows at once), which saves a commit per call. When a write fails, the next
    commit rewrites the whole run from a copy of the record, so the store catches up; the run's
    last write is retried a few times, as nothing follows it, and then handed to the store, which
    tries it again at each read until it lands.
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
        if not (self._pending or self._behind or last):
            return
        rows, self._pending = self._pending, []
        whole = self._recorder.snapshot() if (self._behind or last) else None
        run_id = self._record.run_id
        self._store._writes_queued(run_id, 1)

        def job() -> None:
            try:
                self._commit(rows, whole, last)
            finally:
                self._store._writes_queued(run_id, -1)

        self._store._queue.put(job)

    def drained(self) -> Future[None]:
        """Completes when this run's rows are written (the runner awaits it): the writes queued
        before now, not those other runs sharing the store queue after it."""
        return self._store._queue.passed()

    def _commit(self, rows: list[Row], whole: RunRecord | None, last: bool) -> None:
        """On the store's writer thread: write ``rows``, or all of ``whole`` when behind."""

        def write(conn: sqlite3.Connection) -> None:
            for statement, params in rows:
                conn.execute(statement, params)

        def rewrite(conn: sqlite3.Connection) -> None:
            assert whole is not None
            put_whole_run(conn, whole, this_writer())

        attempts = _LAST_WRITE_ATTEMPTS if last else 1
        run_id = self._run_id or ""
        try:
            for attempt in range(attempts):
                try:
                    self._store._write(rewrite if self._behind and whole is not None else write)
                except Exception as exc:
                    if attempt + 1 == attempts:
                        raise
                    self._behind = True  # the retry rewrites the whole run
                    logger.debug("nbagent: retrying the last write of run %s: %s", run_id, exc)
                    time.sleep(0.2 * 2**attempt)
                else:
                    self._behind = False
                    self._store._run_behind(run_id, False)
                    return
        except Exception as exc:
            if not self._behind or last:  # once when it falls behind, once at the end
                then = "it is rewritten at the next read" if last else "it is rewritten at its next commit"
                logger.warning(
                    "nbagent: could not write run %s to %s (%s: %s); %s",
                    run_id,
                    self._store.path,
                    type(exc).__name__,
                    exc,
                    then,
                )
            self._behind = True
            self._store._run_behind(run_id, True, whole if last else None)
        finally:
            if last:
                with _live_lock:
                    _live_run_ids.discard(run_id)

    def _find_step(self, number: int) -> StepRecord | None:
        for step in reversed(self._record.steps):
            if step.number == number:
                return step
        return None

    def _rows(self, event: ev.RunEvent) -> list[Row]:
        """The rows ``event`` changed, as they stand now."""
        record = self._record
        kind = type(event)
        if kind is ev.RunStarted or kind is ev.RunQueued or kind is ev.RunDequeued:
            return [(PUT_RUN, run_row(record, this_writer()))]
        if kind is ev.RunFinished:
            # The recorder has closed whatever was still open: rewrite those rows, then the run.
            rows: list[Row] = []
            for number in sorted(self._open_steps):
                step = self._find_step(number)
                if step is not None:
                    rows.append((PUT_STEP, step_row(record.run_id, step)))
            for number, seq in sorted(self._open_calls):
                step = self._find_step(number)
                if step is not None:
                    rows.append((PUT_CALL, call_row(record.run_id, number, seq, step.tool_calls[seq])))
            self._open_steps.clear()
            self._open_calls.clear()
            return [*rows, (PUT_RUN, run_row(record, this_writer()))]
        step = self._find_step(event.step)
        if step is None:
            return []
        if kind is ev.StepStarted or kind is ev.StepFinished:
            if kind is ev.StepStarted:
                self._open_steps.add(step.number)
            else:
                self._open_steps.discard(step.number)
            return [(PUT_STEP, step_row(record.run_id, step))]
        if kind is ev.ToolCallStarted or kind is ev.ToolCallFinished:
            call_id = event.call_id  # type: ignore[attr-defined]
            seq = next((i for i, c in enumerate(step.tool_calls) if c.call_id == call_id), None)
            if seq is None:
                return []
            if kind is ev.ToolCallStarted:
                self._open_calls.add((step.number, seq))
            else:
                self._open_calls.discard((step.number, seq))
            return [(PUT_CALL, call_row(record.run_id, step.number, seq, step.tool_calls[seq]))]
        return []
