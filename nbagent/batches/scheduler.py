"""The loop side of a ``Batch``: its scheduler on the runner's loop, and how each task ends.

One coroutine per *live* task, never per queued one: the scheduler walks the tasks in order and
starts the next only when a slot of ``concurrency`` is free (a done callback frees it and wakes
the scheduler), so a batch of 100,000 tasks holds 100 coroutines at concurrency 100, and a Stop
skips the queued tasks in one pass instead of waking each through a semaphore.

A task is launched by the backend, waited for (its own limits bound it), scored, and
counted (``Tally.move``). Whatever one task raises, a ``BaseException`` included, ends that
task with an error record; the batch ends, and its name is released, only once every task has
ended, so a row never changes after ``"done"``.

The factory and the score are the user's code: they run on the batch's own threads
(``nbagent.batches.threads``) through ``in_thread``, which a Stop of mode ``"now"`` abandons
after ``ABANDON_GRACE_S``: the row then says so (an abandoned factory's task ends
``"interrupted"`` with the reason in ``error``; an abandoned score is NA with the reason in
``score_error``), and the batch ends.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from nbagent.batches.resume import (
    attempts_by_task,
    earlier_attempts,
    finished_before,
)
from nbagent.batches.state import UNFINISHED, Tally, TaskState
from nbagent.batches.threads import MAX_THREADS, BatchThreads, original
from nbagent.errors import describe
from nbagent.records import RunRecord

if TYPE_CHECKING:
    from nbagent.batches.handle import Batch

LATEST_KEPT = 20
"""How many of the latest ended tasks a batch keeps at hand for its table."""
TICK_S = 0.1
"""Seconds between two refreshes of a batch's views."""
ABANDON_GRACE_S = 0.5
"""After a Stop (``"now"``), how long a factory or a score may still take before it is abandoned."""


class Abandoned(Exception):
    """A factory or a score that had not returned a grace after Stop all."""


class Scheduler:
    """The loop side of one ``nbagent.batches.handle.Batch``, which owns it: it starts the tasks,
    waits for them, scores them and keeps the tally of where every task is. It reads the batch's
    settings and its Stop mark; only the loop writes what it keeps, any thread may read it."""

    def __init__(self, batch: Batch) -> None:
        self.batch = batch
        self.tally = Tally(len(batch.tasks))
        self.latest: deque[TaskState] = deque(maxlen=LATEST_KEPT)
        """The latest ended tasks, oldest first (the table shows them)."""
        self.earlier: list[RunRecord] = []
        """The stored attempts of earlier batches of the same name (a resume reads them)."""
        self.session: list[RunRecord] = []
        """Every record this batch made, in the order its tasks ended."""
        self.threads = BatchThreads(min(batch.concurrency, MAX_THREADS))
        self._wake = asyncio.Event()
        """Set when a slot frees or a Stop comes: the scheduler looks again."""
        self._now = asyncio.Event()
        """Set by a Stop of mode ``"now"``: waits on the user's code give up."""

    def stopping(self) -> None:
        """On the loop, after a Stop of either mode: wake the scheduler (and, for ``"now"``,
        every wait on the user's code)."""
        self._wake.set()
        if self.batch.stop_mode == "now":
            self._now.set()

    async def main(self) -> None:
        batch = self.batch
        ticker = asyncio.ensure_future(self._tick()) if batch.views else None
        try:
            await batch.backend.open(batch)
            if batch.store is not None and batch.name is not None:
                await self._resume()
            await self._schedule()
        except BaseException as exc:  # the batch itself failed: every task not ended gets a record
            batch.error = describe(exc)
            for state in batch.tasks:
                if state.phase == "queued":
                    await self._failed(state, "the batch failed", exc)
        finally:
            try:
                await batch.backend.close(batch)
            except Exception as exc:
                batch.error = batch.error or describe(exc)
            finally:
                self.threads.close()
                if ticker is not None:
                    ticker.cancel()
                batch.ended()

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            for view in self.batch.views:
                refresh(view, final=False)

    async def _schedule(self) -> None:
        """Start the queued tasks in order, at most ``concurrency`` at once; after a Stop, skip
        the rest in one pass. Returns once every started task has ended."""
        batch = self.batch
        live: set[asyncio.Future[None]] = set()

        def freed(task: asyncio.Future[None]) -> None:
            live.discard(task)
            self._wake.set()

        queued = (s for s in batch.tasks if s.phase == "queued")
        try:
            for state in queued:
                while len(live) >= batch.concurrency and batch.stop_mode is None:
                    self._wake.clear()  # nothing runs between the check and here: one thread
                    await self._wake.wait()
                if batch.stop_mode is not None:
                    self.tally.move(state, "skipped")
                    self.tally.skip_queued(queued)
                    break
                task = asyncio.ensure_future(self._one(state))
                live.add(task)
                task.add_done_callback(freed)
        finally:
            while live:
                await asyncio.wait(set(live))

    async def _resume(self) -> None:
        batch = self.batch
        assert batch.name is not None
        self.earlier = await asyncio.to_thread(earlier_attempts, batch.store, batch.name)
        counts, latest = attempts_by_task(self.earlier)
        for state in batch.tasks:
            mark = (state.item.key, state.item.task)
            state.attempts = counts.get(mark, 0)
            record = latest.get(mark)
            if finished_before(record, batch.skip):
                assert record is not None
                state.record = record
                self.tally.move(state, "reused")
                await self._score(state)

    async def _one(self, state: TaskState) -> None:
        try:
            await self._task(state)
        except (asyncio.CancelledError, GeneratorExit):
            raise
        except BaseException as exc:  # one task's trouble (a SystemExit too) never stops the others
            if state.phase not in ("ended", "skipped"):
                await self._failed(state, "the batch could not run this task", exc)

    async def _task(self, state: TaskState) -> None:
        batch = self.batch
        state.started = time.perf_counter()
        self.tally.move(state, "starting")
        try:
            run = await batch.backend.launch(batch, state.item)
        except Abandoned as exc:  # a Stop, and the factory never returned
            await self._failed(state, "", exc, status="interrupted")
            return
        except Exception as exc:  # the factory failed, or start() refused what it made
            await self._failed(state, "the agent factory failed", exc)
            return
        if run is None:  # a Stop came while the factory built the agent: never started
            self.tally.move(state, "skipped")
            return
        state.run = run
        self.tally.move(state, "running")
        if batch.stop_mode == "now":  # a Stop that walked the runs before this one was there
            run.interrupt("now", reason=batch.stop_reason)
        try:
            record = await run
        finally:
            batch.agents.release(state.item.key)
        if record is None:  # a remote task a Stop reached before it started in its worker
            self.tally.move(state, "skipped")
            return
        self.session.append(record)
        await self._ended(state, record)

    async def in_thread(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on the batch's threads (``what`` names it in the row if abandoned): its
        result, or what it raised; ``Abandoned`` if a Stop (``"now"``) came and it had not
        returned ``ABANDON_GRACE_S`` later (its thread goes on, its result is dropped)."""
        submitted = self.threads.submit(fn, *args)
        job = asyncio.wrap_future(submitted)
        if self.batch.stop_mode != "now":
            stop = asyncio.ensure_future(self._now.wait())
            try:
                await asyncio.wait({job, stop}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stop.cancel()
        if not job.done():
            await asyncio.wait({job}, timeout=ABANDON_GRACE_S)
        if not job.done():
            submitted.cancel()  # not started yet (every thread was busy): it never will be
            job.add_done_callback(_dropped)
            raise Abandoned(
                f"abandoned: {what} had not returned {ABANDON_GRACE_S:g} s after Stop all "
                "(its thread may still be running)"
            )
        return job.result()

    async def _ended(self, state: TaskState, record: RunRecord) -> None:
        state.record = record
        await self._score(state)
        self.tally.move(state, "ended")
        self.latest.append(state)

    async def _score(self, state: TaskState) -> None:
        """On the batch's threads: a scorer may take seconds (a judge model, a test suite), and
        the loop it would block carries every run and every Stop of the process. A run cut short
        (interrupted, stopped by a limit) is not scored: its score is NA."""
        record, score = state.record, self.batch.score
        if score is None or record is None or record.status in UNFINISHED:
            return
        try:
            state.score = await self.in_thread("the score", score, record, dict(state.item.row))
        except Abandoned as exc:
            state.score, state.score_error = None, str(exc)
        except Exception as exc:  # a bad score function marks the row; it never stops the batch
            state.score, state.score_error = None, describe(original(exc))

    async def _failed(
        self, state: TaskState, what: str, exc: BaseException, *, status: str = "error"
    ) -> None:
        """End a task whose run never started with a complete record (``"error"``, or
        ``"interrupted"`` for an abandoned factory), stored like a run (on a worker thread), so a
        resume reruns it."""
        record = self.batch.error_record(state.item, what, exc, status=status)
        self.session.append(record)
        store = self.batch.store
        if store is not None:
            try:
                await asyncio.to_thread(store.add, record)
            except Exception as store_exc:
                record.error = f"{record.error} (not stored: {describe(store_exc)})"
        await self._ended(state, record)


def _dropped(job: asyncio.Future[Any]) -> None:
    if not job.cancelled():
        job.exception()  # retrieved: an abandoned job's late failure is nobody's to report


def refresh(view: Any, *, final: bool) -> None:
    try:
        view.refresh(final=final)
    except Exception:  # a view must never end a batch
        logging.getLogger("nbagent").exception("nbagent: a batch view failed to refresh")
