"""The loop side of a ``Batch``: its scheduler on the runner's loop, and how each task ends.

One coroutine per *live* task, never per queued one: the scheduler walks the tasks in order and
starts the next only when a slot of ``concurrency`` is free (a done callback frees it and wakes
the scheduler), so a batch of 100,000 tasks holds 100 coroutines at concurrency 100, and a Stop
skips the queued tasks in one pass instead of waking each through a semaphore.

A task is launched by the backend, waited for (interrupted at ``timeout_s``), scored, and
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
import uuid
from collections import deque
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from nbagent.batches.guards import AgentClaims
from nbagent.batches.resume import (
    attempts_by_task,
    batch_metadata,
    batch_tags,
    earlier_attempts,
    finished_before,
)
from nbagent.batches.state import UNFINISHED, Backend, StopMode, Tally, TaskRun, TaskState
from nbagent.batches.tasks import TaskItem
from nbagent.batches.threads import BatchThreads, original
from nbagent.errors import describe, error_kind
from nbagent.records import RunRecord
from nbagent.text import shorten

TICK_S = 0.1
"""Seconds between two refreshes of a batch's views."""
ABANDON_GRACE_S = 0.5
"""After a Stop (``"now"``), how long a factory or a score may still take before it is abandoned."""


class Abandoned(Exception):
    """A factory or a score that had not returned a grace after Stop all."""


class BatchLoop:
    """The scheduler of ``nbagent.batches.handle.Batch`` (its attributes are set there)."""

    factory: Callable[..., Any]
    backend: Backend
    concurrency: int
    store: Any
    name: str | None
    score: Callable[[RunRecord, dict[str, Any]], Any] | None
    timeout_s: float | None
    skip: frozenset[str]
    start_options: dict[str, Any]
    tasks: list[TaskState]
    error: str | None
    agents: AgentClaims
    _stop: StopMode | None
    _stop_reason: str
    _tally: Tally
    _threads: BatchThreads
    _wake: asyncio.Event
    _now: asyncio.Event
    _latest: deque[TaskState]
    _earlier: list[RunRecord]
    _session: list[RunRecord]
    _views: list[Any]

    def _finish(self, ticker: asyncio.Future[None] | None) -> None:
        raise NotImplementedError

    def _stopping(self) -> None:
        """On the loop, after a Stop of either mode: wake the scheduler (and, for ``"now"``,
        every wait on the user's code)."""
        self._wake.set()
        if self._stop == "now":
            self._now.set()

    async def _main(self) -> None:
        ticker = asyncio.ensure_future(self._tick()) if self._views else None
        try:
            await self.backend.open(self)
            if self.store is not None and self.name is not None:
                await self._resume()
            await self._schedule()
        except BaseException as exc:  # the batch itself failed: every task not ended gets a record
            self.error = describe(exc)
            for state in self.tasks:
                if state.phase == "queued":
                    await self._failed(state, "the batch failed", exc)
        finally:
            try:
                await self.backend.close(self)
            except Exception as exc:
                self.error = self.error or describe(exc)
            finally:
                self._finish(ticker)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            for view in self._views:
                refresh(view, final=False)

    async def _schedule(self) -> None:
        """Start the queued tasks in order, at most ``concurrency`` at once; after a Stop, skip
        the rest in one pass. Returns once every started task has ended."""
        live: set[asyncio.Future[None]] = set()

        def freed(task: asyncio.Future[None]) -> None:
            live.discard(task)
            self._wake.set()

        queued = (s for s in self.tasks if s.phase == "queued")
        try:
            for state in queued:
                while len(live) >= self.concurrency and self._stop is None:
                    self._wake.clear()  # nothing runs between the check and here: one thread
                    await self._wake.wait()
                if self._stop is not None:
                    self._tally.move(state, "skipped")
                    self._tally.skip_queued(queued)
                    break
                task = asyncio.ensure_future(self._one(state))
                live.add(task)
                task.add_done_callback(freed)
        finally:
            while live:
                await asyncio.wait(set(live))

    async def _resume(self) -> None:
        assert self.name is not None
        earlier = await asyncio.to_thread(earlier_attempts, self.store, self.name)
        self._earlier = earlier
        counts, latest = attempts_by_task(earlier)
        for state in self.tasks:
            mark = (state.item.key, state.item.task)
            state.attempts = counts.get(mark, 0)
            record = latest.get(mark)
            if finished_before(record, self.skip):
                assert record is not None
                state.record = record
                self._tally.move(state, "reused")
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
        state.started = time.perf_counter()
        self._tally.move(state, "starting")
        try:
            run = await self.backend.launch(self, state.item)
        except Abandoned as exc:  # a Stop, and the factory never returned
            await self._failed(state, "", exc, status="interrupted")
            return
        except Exception as exc:  # the factory failed, or start() refused what it made
            await self._failed(state, "the agent factory failed", exc)
            return
        if run is None:  # a Stop came while the factory built the agent: never started
            self._tally.move(state, "skipped")
            return
        state.run = run
        self._tally.move(state, "running")
        if self._stop == "now":  # a Stop that walked the runs before this one was there
            run.interrupt("now", reason=self._stop_reason)
        waiter = asyncio.ensure_future(_record_of(run))
        if self.timeout_s is not None:
            finished, _ = await asyncio.wait({waiter}, timeout=self.timeout_s)
            if not finished:
                run.interrupt("now", reason="timeout")
        try:
            record = await waiter
        finally:
            self.agents.release(state.item.key)
        if record is None:  # a remote task a Stop reached before it started in its worker
            self._tally.move(state, "skipped")
            return
        self._session.append(record)
        await self._ended(state, record)

    async def in_thread(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on the batch's threads (``what`` names it in the row if abandoned): its
        result, or what it raised; ``Abandoned`` if a Stop (``"now"``) came and it had not
        returned ``ABANDON_GRACE_S`` later (its thread goes on, its result is dropped)."""
        submitted = self._threads.submit(fn, *args)
        job = asyncio.wrap_future(submitted)
        if self._stop != "now":
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
        self._tally.move(state, "ended")
        self._latest.append(state)

    async def _score(self, state: TaskState) -> None:
        """On the batch's threads: a scorer may take seconds (a judge model, a test suite), and
        the loop it would block carries every run and every Stop of the process. A run cut short
        (interrupted, stopped by a limit) is not scored: its score is NA."""
        record = state.record
        if self.score is None or record is None or record.status in UNFINISHED:
            return
        try:
            state.score = await self.in_thread("the score", self.score, record, dict(state.item.row))
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
        record = self.error_record(state.item, what, exc, status=status)
        self._session.append(record)
        if self.store is not None:
            try:
                await asyncio.to_thread(self.store.add, record)
            except Exception as store_exc:
                record.error = f"{record.error} (not stored: {describe(store_exc)})"
        await self._ended(state, record)

    def error_record(
        self, item: TaskItem, what: str, exc: BaseException, *, status: str = "error"
    ) -> RunRecord:
        """The record of a task whose run never got going (its factory, or its worker, failed)."""
        now = datetime.now(timezone.utc)
        exc = original(exc)
        stopped = status == "interrupted"
        return RunRecord(
            run_id=uuid.uuid4().hex[:16],
            task=item.task,
            agent=shorten(getattr(self.factory, "__name__", type(self.factory).__name__), 80),
            model="",
            started_at=now,
            status=status,
            error=f"{what}: {describe(exc)}" if what else str(exc),
            error_type=None if stopped else error_kind(exc),
            ended_at=now,
            duration_s=0.0,
            stop_reason=self._stop_reason if stopped else "error",
            tags=self.tags_for(),
            metadata=self.metadata_for(item),
        )

    def tags_for(self) -> list[str]:
        return [*self.start_options.get("tags", ()), *batch_tags(self.name)]

    def metadata_for(self, item: TaskItem) -> dict[str, Any]:
        return {**(self.start_options.get("metadata") or {}), "batch": batch_metadata(self.name, item)}

    def run_options(self) -> dict[str, Any]:
        """The keywords for every run's ``start`` besides tags and metadata."""
        return {k: v for k, v in self.start_options.items() if k not in ("tags", "metadata")}


async def _record_of(run: TaskRun) -> RunRecord | None:
    return await run


def _dropped(job: asyncio.Future[Any]) -> None:
    if not job.cancelled():
        job.exception()  # retrieved: an abandoned job's late failure is nobody's to report


def refresh(view: Any, *, final: bool) -> None:
    try:
        view.refresh(final=final)
    except Exception:  # a view must never end a batch
        logging.getLogger("nbagent").exception("nbagent: a batch view failed to refresh")
