"""How a run gets into the store while it runs: its sink, the store's writer thread, and who writes.

Part of ``nbagent.analytics.store`` (which holds the ``RunStore`` API and explains the design). The sink
(``RunWriter``) runs on the runner's loop thread: it notes which rows each event changed in the
run's record (the run's own ``Recorder``'s, which has folded the event already), so the loop
never waits on the database. The rows are built and written in
order by ``WriteQueue`` (``nbagent.analytics.store.commits``), one thread per store that exists
only while there is work.

A run is written with the identity of the process writing it (``nbagent.analytics.store.identity``),
so a reader can tell a run whose writer died (``"unfinished"``) from one still being written.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from concurrent.futures import Future
from typing import TYPE_CHECKING

from nbagent import events as ev
from nbagent.analytics.store.commits import GROUP_LIMIT, Row, RowsJob, WriteQueue, put_all
from nbagent.analytics.store.identity import live_lock, live_run_ids, this_writer, writer_gone
from nbagent.analytics.store.schema import (
    PUT_CALL,
    PUT_RUN,
    PUT_STEP,
    STEP_COLUMNS,
    call_row,
    put_whole_run,
    run_row,
    step_row,
)
from nbagent.recorder import Recorder
from nbagent.records import RunRecord
from nbagent.runtime.source import Sink

if TYPE_CHECKING:
    import sqlite3

    from nbagent.analytics.store import RunStore

__all__ = ["GROUP_LIMIT", "RowsJob", "RunWriter", "WriteQueue", "this_writer", "writer_gone"]

logger = logging.getLogger("nbagent")

_LAST_WRITE_ATTEMPTS = 4

TEXT_INTERVAL_S = 0.5
"""How far behind the stream a step in progress may be in the store (its text so far)."""

_TEXT_COLUMN = list(STEP_COLUMNS).index("model_output")


class RunWriter(Sink):
    """The sink of one run: notes the rows its events change and queues them.

    Called on the runner's loop thread, in event order: it notes which rows the event changed
    (the run, a step, a tool call) in the run's record. That is the run's own ``Recorder``'s
    (``follow``), which folded the event before the sink was told, so a step costs one fold;
    a sink used alone (no run gave it one) folds the events with a ``Recorder`` of its own. The
    rows are built from the record when the store's writer thread takes them, holding the
    record still (``Recorder.held``: a row never shows half an event), and a row changed several
    times while the writer was busy is built and written once: under load a step's start and end,
    or a call's, become one row. A row built then may show an event the sink has not been told
    yet (the one being fanned out): it is the truth a moment early, and it is written again with
    the event's own commit point; only the run's end waits for the sink (its row is held back
    until the sink has marked the steps and calls the end closed).

    A commit point is queued wherever the run may then wait a long time or end: the run's start,
    its wait for its agent and the end of that wait (which moves its ``started_at``), a step's
    start and finish, a tool call's start, the run's end; a step's text in progress every
    ``TEXT_INTERVAL_S``. A finished tool call rides with the next of those (the next call or the
    step's finish follows at once). When a write fails, its rows are marked changed again, so the
    run's next commit writes them (built as they stand then) with its own, and the store counts
    the run as behind (a read warns) until that commit lands; the run's last write is retried a
    few times, as nothing follows it, and then handed to the store as a copy of the whole run,
    which it tries again at each read until it lands.
    """

    def __init__(self, store: RunStore) -> None:
        self._store = store
        self._recorder = Recorder()
        self._folds = True
        """Folds each event into ``_recorder``: no run gave the sink its own recorder (``follow``)."""
        self._run_id: str | None = None
        self._behind = False
        """Set by the writer thread when a write failed (its rows are back in ``_dirty``); cleared
        once a commit has written them."""
        self._lock = threading.Lock()
        """Held while an event is folded in and while the writer builds rows from the record."""
        self._dirty: set[tuple[int, ...]] = set()
        """Rows changed since the writer last took them: () the run, (step,), (step, seq)."""
        self._waiting: RowsJob | None = None
        """The job queued last, until the writer takes its rows: commit points meanwhile join it."""
        self._open_steps: set[int] = set()
        self._open_calls: set[tuple[int, int]] = set()
        self._text_steps: set[int] = set()
        self._text_timer = False
        self._ended = False

    def __repr__(self) -> str:
        return f"<RunStore sink {self._store.path} run={self._run_id}>"

    def follow(self, recorder: Recorder) -> None:
        """Read the run's record from ``recorder`` (which folds each event before the sink is
        told it) instead of folding a copy. Before the first event only."""
        with self._lock:
            if self._recorder.live is None:
                self._recorder, self._folds = recorder, False

    @property
    def _record(self) -> RunRecord:
        # The record being built, not a copy: this sink runs on the loop thread between events.
        record = self._recorder.live
        assert record is not None
        return record

    def __call__(self, event: ev.RunEvent) -> None:
        kind = type(event)
        with self._lock:
            if self._folds:
                self._recorder.apply(event)
            if kind is ev.TextDelta:
                self._text_changed(event.step)
                return
            if kind is ev.Usage or kind is ev.Retrying:
                return  # folded in memory; written with the step
            if kind is ev.ToolCallProgress or kind is ev.ToolCallLog:
                return  # folded in memory; written with the call when it ends
            if kind is ev.NodeStarted or kind is ev.NodeFinished:
                self._dirty.add((event.step,))  # the step's row holds its nodes: the next commit writes it
                return
            changed = self._changed(event)
            self._dirty.update(changed)
            if kind is ev.RunStarted:
                self._run_id = event.run_id
                with live_lock:
                    live_run_ids.add(event.run_id)
            if kind is ev.ToolCallFinished:
                return  # rides with the next commit point, which follows at once
            last = kind is ev.RunFinished
            if not (changed or self._behind or last):
                return
            if last:
                self._ended = True
            job = self._job_to_queue(last)
        self._queue(job)

    def _job_to_queue(self, last: bool) -> RowsJob | None:
        """Under the lock: a new job for this commit point, or ``None`` when the job queued last
        has not been taken yet (its rows are built when it is, so it writes these too)."""
        job = self._waiting
        if job is not None:
            job.last = job.last or last
            return None
        job = self._waiting = RowsJob(self, last)
        return job

    def _queue(self, job: RowsJob | None) -> None:
        """A commit point (on the loop): queue ``job``, if it is a new one; a loop too busy to let
        the writer thread run waits for it here (``WriteQueue.lend``)."""
        queue = self._store._queue
        if job is not None:
            self._store._writes_queued(self._record.run_id, 1)
            queue.put(job)
        queue.lend()

    def _text_changed(self, step: int) -> None:
        """A step's text grew: write the step as it stands within ``TEXT_INTERVAL_S``, so a
        process killed mid-step keeps what the model had said (one row per interval, however fast
        tokens stream)."""
        self._text_steps.add(step)
        if self._text_timer:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not on a loop (a run ended from another thread): the end writes it
            return
        self._text_timer = True
        loop.call_later(TEXT_INTERVAL_S, self._write_text)

    def _write_text(self) -> None:
        """On the loop, between events: queue the open steps whose text grew (the rows are built
        with the text so far)."""
        self._text_timer = False
        steps, self._text_steps = self._text_steps, set()
        if self._ended:
            return  # the end writes it
        with self._lock:
            # A step that finished meanwhile was written with its finish: only open ones change.
            self._dirty.update((n,) for n in steps & self._open_steps)
            if self._behind:
                return  # the next commit point writes it, with the rows of the write that failed
            job = self._job_to_queue(False)
        self._queue(job)

    def _take_rows(self) -> tuple[set[tuple[int, ...]], list[Row]]:
        """On the writer thread: the keys of the rows changed since the last take, and those rows
        as they stand now."""
        with self._lock:
            keys, self._dirty = self._dirty, set()
            self._waiting = None  # a commit point from now on queues a job of its own
            with self._recorder.held() as record:
                return keys, self._rows(record, keys)

    def _rows(self, record: RunRecord | None, keys: set[tuple[int, ...]]) -> list[Row]:
        """Under both locks: the rows of ``keys`` as they stand in ``record``."""
        rows: list[Row] = []
        if record is None:
            return rows
        for key in sorted(keys):
            if not key:
                if record.ended_at is not None and not self._ended:
                    # Ended, but the sink has not marked what the end closed: with its commit point.
                    self._dirty.add(key)
                    keys.discard(key)
                    continue
                rows.append((PUT_RUN, run_row(record, this_writer())))
                continue
            step = self._recorder.step(key[0])
            if step is None:
                continue
            if len(key) == 1:
                row = step_row(record.run_id, step)
                if step.end_s is None:  # in progress: with the text streamed so far
                    text = self._recorder.shown_text(step.number)
                    row = (*row[:_TEXT_COLUMN], text, *row[_TEXT_COLUMN + 1 :])
                rows.append((PUT_STEP, row))
            elif key[1] < len(step.tool_calls):
                call = step.tool_calls[key[1]]
                rows.append((PUT_CALL, call_row(record.run_id, step.number, key[1], call)))
        return rows

    def _untake(self, keys: set[tuple[int, ...]]) -> None:
        """On the writer thread: the write of these rows failed; the next commit writes them."""
        with self._lock:
            self._dirty |= keys

    def drained(self) -> Future[None]:
        """Completes when this run's rows are written (the runner awaits it): the writes queued
        before now, not those other runs sharing the store queue after it."""
        return self._store._queue.passed()

    def _commit(self, job: RowsJob) -> None:
        """On the store's writer thread: write the rows of ``job``, with those of any write of this
        run that failed before (marked changed again); at the run's end, all of it when behind."""
        rows = job.take()
        if self._behind:  # rows of a failed write are back in ``_dirty``: they go with these
            keys, more = self._take_rows()
            job.keys |= keys
            rows = job.rows = rows + more  # built later: newer, so written after
        last = job.last
        # A copy of the whole ended run (it no longer changes), taken only when it must be written
        # again or handed to the store: a snapshot costs as much as the rows of every step.
        whole = self._recorder.snapshot() if last and self._behind else None

        def write(conn: sqlite3.Connection) -> None:
            put_all(conn, rows)  # few statements: each gives the GIL up to SQLite, and waits for it

        def rewrite(conn: sqlite3.Connection) -> None:
            assert whole is not None
            put_whole_run(conn, whole, this_writer())
            write(conn)  # built after the copy was taken: newer

        attempts = _LAST_WRITE_ATTEMPTS if last else 1
        run_id = self._run_id or ""
        try:
            for attempt in range(attempts):
                try:
                    self._store._write(write if whole is None else rewrite)
                except Exception as exc:
                    if attempt + 1 == attempts or self._store.closed:
                        raise
                    self._behind = True  # the retry rewrites the whole run
                    whole = self._recorder.snapshot()
                    logger.debug("nbagent: retrying the last write of run %s: %s", run_id, exc)
                    time.sleep(0.2 * 2**attempt)
                else:
                    self._written(last)
                    return
        except Exception as exc:
            self._untake(job.keys)
            if self._store.closed:
                if not self._behind:
                    logger.warning(
                        "nbagent: run %s is not stored: %s was closed while it ran", run_id, self._store.path
                    )
            elif not self._behind or last:  # once when it falls behind, once at the end
                then = (
                    "the whole run is written again at the store's next read (until then, reads warn "
                    "that it is missing or incomplete)"
                    if last
                    else "its rows are written again with its next commit (until then, reads warn that "
                    "it is incomplete)"
                )
                logger.warning(
                    "nbagent: could not write run %s to %s (%s: %s); %s",
                    run_id,
                    self._store.path,
                    type(exc).__name__,
                    exc,
                    then,
                )
            self._behind = True
            if last and whole is None:
                whole = self._recorder.snapshot()
            self._store._run_behind(run_id, True, whole)
            if last:
                with live_lock:
                    live_run_ids.discard(run_id)
            self._store._writes_queued(run_id, -1)

    def _written(self, last: bool) -> None:
        """On the writer thread: this sink's queued rows are committed (with those of any write
        that failed before: they were taken again when it was behind)."""
        run_id = self._run_id or ""
        if self._behind:
            self._behind = False
            self._store._run_behind(run_id, False)
        if last:
            with live_lock:
                live_run_ids.discard(run_id)
        self._store._writes_queued(run_id, -1)

    def _changed(self, event: ev.RunEvent) -> list[tuple[int, ...]]:
        """The rows ``event`` changed: () the run, (step,) a step, (step, seq) a tool call."""
        kind = type(event)
        if kind is ev.RunStarted or kind is ev.RunQueued or kind is ev.RunDequeued:
            return [()]
        if kind is ev.RunFinished:
            # The recorder has closed whatever was still open: rewrite those rows, then the run.
            keys: list[tuple[int, ...]] = [(n,) for n in self._open_steps]
            keys.extend(self._open_calls)
            self._open_steps.clear()
            self._open_calls.clear()
            return [*keys, ()]
        step = self._recorder.step(event.step)
        if step is None:
            return []
        if kind is ev.StepStarted or kind is ev.StepFinished:
            if kind is ev.StepStarted:
                self._open_steps.add(step.number)
            else:
                self._open_steps.discard(step.number)
            return [(step.number,)]
        if kind is ev.ToolCallStarted or kind is ev.ToolCallFinished:
            call_id = event.call_id  # type: ignore[attr-defined]
            seq = next((i for i, c in enumerate(step.tool_calls) if c.call_id == call_id), None)
            if seq is None:
                return []
            if kind is ev.ToolCallStarted:
                self._open_calls.add((step.number, seq))
            else:
                self._open_calls.discard((step.number, seq))
            return [(step.number, seq)]
        return []
