"""``Batch``: the handle on many runs of one agent factory, with one Stop and one table.

A batch is a scheduler on the runner's own loop (``nbagent.runtime.loop``): one coroutine per
task waits on a semaphore of ``concurrency`` slots, asks the backend to launch the task's run
(``nbagent.batches.local`` on this loop, ``nbagent.batches.ray`` on a Ray cluster), waits for its
record (interrupting it at ``timeout_s``), scores it, and frees the slot. Nothing here blocks
the loop: the factory and the store reads run on worker threads.

The Stop path is one hop, as for a run: ``interrupt("now")`` (any thread, idempotent) marks the
batch stopping and interrupts every launched run through its own ``interrupt`` (its cancel
scope, or the remote worker's); a task still waiting for a slot sees the mark when it gets one
and ends ``"skipped"``, without a run. Who wins a race: the mark is set before the launched runs
are walked, and a task checks it after its run is launched, so each run is interrupted by one
side or the other. ``interrupt("after_current")`` only sets the mark: live runs finish.

Every task ends as a row of ``frame()``: its run's record (success, interrupted, error,
max_steps; ``stop_reason == "timeout"`` for one cut by ``timeout_s``), an error record when its
factory or its start failed, the stored record of an earlier attempt a resume reused, or
``"skipped"``. The views (``nbagent.batches.table``) are refreshed by one ticker on the loop, about
ten times a second, whatever the number of tasks.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Generator
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from nbagent.batches.resume import (
    batch_metadata,
    batch_tags,
    earlier_attempts,
    finished_before,
    key_of,
    latest_by_key,
)
from nbagent.batches.state import (
    Backend,
    BatchStoppedByKeyboard,
    Progress,
    StopMode,
    TaskRun,
    TaskState,
    takes_row,
)
from nbagent.batches.tasks import TaskItem
from nbagent.errors import describe, error_kind
from nbagent.records import RunRecord
from nbagent.runtime.loop import LoopThread, runner_loop
from nbagent.text import shorten

if TYPE_CHECKING:
    import pandas as pd

TICK_S = 0.1
"""Seconds between two refreshes of a batch's views."""
LATEST_KEPT = 20
"""How many of the latest ended tasks a batch keeps at hand for its table."""


class Batch:
    """A handle on a batch: ``await batch`` (the frame), ``interrupt()``, ``status``, ``frame()``.

    ``interrupt``, ``status``, ``progress``, ``frame`` and the other readers may be used from any
    thread at any time; the batch is driven on the runner's loop.
    """

    def __init__(
        self,
        factory: Callable[..., Any],
        items: list[TaskItem],
        *,
        backend: Backend,
        concurrency: int,
        store: Any,
        name: str | None,
        score: Callable[[RunRecord, dict[str, Any]], Any] | None,
        timeout_s: float | None,
        skip: frozenset[str],
        start_options: dict[str, Any],
    ) -> None:
        self.factory = factory
        self.factory_takes_row = takes_row(factory)
        self.backend = backend
        self.concurrency = concurrency
        self.store = store
        self.name = name
        self.score = score
        self.timeout_s = timeout_s
        self.skip = skip
        self.start_options = dict(start_options)
        self.tasks = [TaskState(item) for item in items]
        self.error: str | None = None
        """Set when the batch itself failed (its backend could not start)."""
        self._stop: StopMode | None = None
        self._lock = threading.Lock()
        self._latest: deque[TaskState] = deque(maxlen=LATEST_KEPT)
        self._earlier: list[RunRecord] = []
        self._session: list[RunRecord] = []
        self._views: list[Any] = []
        self.table: Any = None
        """The live widget table (``nbagent.batches.table.BatchTable``) when one is shown."""
        self._t0 = time.perf_counter()
        self._ended_at: float | None = None
        self._future: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._future.set_running_or_notify_cancel()

    # -- control -------------------------------------------------------------------------------

    def add_view(self, view: Any) -> None:
        """A view with ``refresh(final: bool)``, called on the runner's loop. Before ``_start``."""
        self._views.append(view)

    def _start(self) -> None:
        asyncio.run_coroutine_threadsafe(self._main(), runner_loop())

    def interrupt(self, mode: StopMode = "now") -> bool:
        """Stop the batch: ``"now"`` interrupts every live run and skips the tasks not started;
        ``"after_current"`` lets the live runs finish and starts no more. True if the batch was
        still running. Idempotent; any thread (a Stop click arrives on the kernel's)."""
        if mode not in ("now", "after_current"):
            raise ValueError(f"mode must be 'now' or 'after_current', not {mode!r}")
        with self._lock:
            if self._future.done() or self._stop == "now" or self._stop == mode:
                return False
            self._stop = mode
        if mode == "now":
            for state in self.tasks:
                run = state.run
                if run is not None and state.phase == "running":
                    run.interrupt("now", reason="user")
        return True

    @property
    def status(self) -> str:
        """``"running"``, ``"stopping"`` after a Stop, then ``"done"`` or ``"stopped"``."""
        if self._future.done():
            return "stopped" if self._stop is not None else "done"
        return "running" if self._stop is None else "stopping"

    def done(self) -> bool:
        return self._future.done()

    def wait(self, timeout: float | None = None) -> pd.DataFrame:
        """Block until every task has ended; the frame. Ctrl-C stops the batch (now), waits for
        its records and raises ``KeyboardInterrupt``; ``TimeoutError`` if ``timeout`` passes."""
        if threading.current_thread() is LoopThread.thread():
            raise RuntimeError("wait() on the runner's own thread would deadlock: use `await batch`")
        deadline = None if timeout is None else time.monotonic() + timeout
        pressed = False
        while True:
            try:
                try:
                    left = None if deadline is None else max(0.0, deadline - time.monotonic())
                    self._future.result(timeout=0.1 if left is None else min(0.1, left))
                    break
                except concurrent.futures.TimeoutError:
                    if deadline is not None and time.monotonic() >= deadline:
                        raise TimeoutError(
                            f"batch {self.name or ''} still running after {timeout} s"
                        ) from None
            except KeyboardInterrupt:
                if pressed:
                    raise
                pressed = True
                self.interrupt("now")
        if pressed:
            raise BatchStoppedByKeyboard(self)
        return self.frame()

    async def _await(self) -> pd.DataFrame:
        waiter = asyncio.wrap_future(self._future)
        try:
            await asyncio.shield(waiter)
        except asyncio.CancelledError:
            self.interrupt("now")
            await asyncio.wait({waiter}, timeout=5.0)
            raise
        return self.frame()

    def __await__(self) -> Generator[Any, None, pd.DataFrame]:
        return self._await().__await__()

    def __repr__(self) -> str:
        p = self.progress()
        return f"<nbagent.Batch {self.name or ''} {p.state} {p.done}/{p.total} done>"

    # -- reading -------------------------------------------------------------------------------

    def run_of(self, task: int | str) -> TaskRun | None:
        """The run handle of a task (by position or key), ``None`` if it has not started."""
        return self._state(task).run

    def _state(self, task: int | str) -> TaskState:
        if isinstance(task, int):
            return self.tasks[task]
        for state in self.tasks:
            if state.item.key == task:
                return state
        raise KeyError(task)

    def record_of(self, task: int | str) -> RunRecord | None:
        """A task's record: final, reused, or a snapshot of its live run; ``None`` if none."""
        state = self._state(task)
        if state.record is not None:
            return state.record
        return _snapshot(state.run) if state.run is not None else None

    def records(self) -> list[RunRecord]:
        """The latest record of every task that has one, in task order."""
        return [r for s in self.tasks if (r := s.record) is not None]

    def progress(self) -> Progress:
        p = Progress(self.name, len(self.tasks), state=self.status)
        cost = 0.0
        priced = False
        for state in self.tasks:
            phase = state.phase
            if phase == "ended" and state.record is not None:
                status = str(state.record.status)
                p.ended[status] = p.ended.get(status, 0) + 1
                record = state.record
                if record.input_tokens is not None:
                    p.input_tokens = (p.input_tokens or 0) + record.input_tokens
                if record.output_tokens is not None:
                    p.output_tokens = (p.output_tokens or 0) + record.output_tokens
                if record.cost_usd is not None:
                    cost, priced = cost + record.cost_usd, True
            elif phase == "reused":
                p.reused += 1
            elif phase == "skipped":
                p.skipped += 1
            elif phase in ("running", "starting"):
                p.running += 1
            else:
                p.queued += 1
        p.cost_usd = cost if priced else None
        end = self._ended_at if self._ended_at is not None else time.perf_counter()
        p.elapsed_s = end - self._t0
        finished = sum(p.ended.values())
        left = p.running + p.queued
        if finished and left and self._stop is None:
            p.eta_s = p.elapsed_s / finished * left
        return p

    def running(self) -> list[TaskState]:
        return [s for s in self.tasks if s.phase == "running"]

    def latest(self) -> list[TaskState]:
        """The latest ended tasks, newest first."""
        return list(reversed(self._latest))

    def frame(self) -> pd.DataFrame:
        """One row per task, in task order (``nbagent.batches.frames.batch_frame``)."""
        from nbagent.batches.frames import batch_frame

        return batch_frame(self)

    def attempts(self) -> pd.DataFrame:
        """Every attempt of every task, earlier batches of the same name (from the store)
        included, oldest first: the runs frame with ``task_key`` and ``attempt`` (1, 2, ...)."""
        from nbagent.batches.frames import attempts_frame

        return attempts_frame([*self._earlier, *self._session])

    def steps(self) -> pd.DataFrame:
        """One row per step of each task's latest attempt, with its ``task_key``."""
        from nbagent.analytics.frames import steps_frame
        from nbagent.batches.frames import keyed

        return keyed(steps_frame, self.records())

    def tool_calls(self) -> pd.DataFrame:
        """One row per tool call of each task's latest attempt, with its ``task_key``."""
        from nbagent.analytics.frames import tool_calls_frame
        from nbagent.batches.frames import keyed

        return keyed(tool_calls_frame, self.records())

    # -- the loop side -------------------------------------------------------------------------

    async def _main(self) -> None:
        ticker = asyncio.ensure_future(self._tick()) if self._views else None
        try:
            await self.backend.open(self)
            if self.store is not None and self.name is not None:
                await self._resume()
            slots = asyncio.Semaphore(self.concurrency)
            await asyncio.gather(*(self._one(s, slots) for s in self.tasks if s.phase == "queued"))
        except BaseException as exc:  # the batch itself failed: every task not ended gets a record
            self.error = describe(exc)
            for state in self.tasks:
                if state.phase in ("queued", "starting"):
                    await self._failed(state, "the batch failed", exc)
        finally:
            try:
                await self.backend.close(self)
            except Exception as exc:
                self.error = self.error or describe(exc)
            self._ended_at = time.perf_counter()
            if ticker is not None:
                ticker.cancel()
            self._future.set_result(None)  # before the final refresh, so the views say "done"
            for view in self._views:
                _refresh(view, final=True)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            for view in self._views:
                _refresh(view, final=False)

    async def _resume(self) -> None:
        assert self.name is not None
        earlier = await asyncio.to_thread(earlier_attempts, self.store, self.name)
        self._earlier = earlier
        latest = latest_by_key(earlier)
        counts: dict[str, int] = {}
        for record in earlier:
            key = key_of(record)
            if key is not None:
                counts[key] = counts.get(key, 0) + 1
        for state in self.tasks:
            state.attempts = counts.get(state.item.key, 0)
            record = latest.get(state.item.key)
            if finished_before(record, self.skip):
                assert record is not None
                state.record, state.phase = record, "reused"
                self._score(state)

    async def _one(self, state: TaskState, slots: asyncio.Semaphore) -> None:
        try:
            await self._task(state, slots)
        except Exception as exc:  # one task's trouble never stops the others
            if state.phase not in ("ended", "skipped"):
                await self._failed(state, "the batch could not run this task", exc)

    async def _task(self, state: TaskState, slots: asyncio.Semaphore) -> None:
        async with slots:
            if self._stop is not None:
                state.phase = "skipped"
                return
            state.phase, state.started = "starting", time.perf_counter()
            try:
                run = await self.backend.launch(self, state.item)
            except Exception as exc:  # the factory failed, or start() refused what it made
                await self._failed(state, "the agent factory failed", exc)
                return
            state.run, state.phase = run, "running"
            if self._stop == "now":  # a Stop that walked the runs before this one was there
                run.interrupt("now", reason="user")
            waiter = asyncio.ensure_future(_record_of(run))
            if self.timeout_s is not None:
                finished, _ = await asyncio.wait({waiter}, timeout=self.timeout_s)
                if not finished:
                    run.interrupt("now", reason="timeout")
            record = await waiter
            if record is None:  # a remote task a Stop reached before it started in its worker
                state.phase = "skipped"
                return
            self._session.append(record)
            await self._ended(state, record)

    async def _ended(self, state: TaskState, record: RunRecord) -> None:
        state.record = record
        self._score(state)
        state.phase = "ended"
        self._latest.append(state)

    def _score(self, state: TaskState) -> None:
        if self.score is None or state.record is None:
            return
        try:
            state.score = self.score(state.record, dict(state.item.row))
        except Exception as exc:  # a bad score function marks the row; it never stops the batch
            state.score, state.score_error = None, describe(exc)

    async def _failed(self, state: TaskState, what: str, exc: BaseException) -> None:
        """End a task whose run never started with a complete ``"error"`` record, stored like a
        run (on a worker thread), so a resume reruns it."""
        record = self._error_record(state.item, what, exc)
        self._session.append(record)
        if self.store is not None:
            try:
                await asyncio.to_thread(self.store.add, record)
            except Exception as store_exc:
                record.error = f"{record.error} (not stored: {describe(store_exc)})"
        await self._ended(state, record)

    def _error_record(self, item: TaskItem, what: str, exc: BaseException) -> RunRecord:
        now = datetime.now(timezone.utc)
        record = RunRecord(
            run_id=uuid.uuid4().hex[:16],
            task=item.task,
            agent=shorten(getattr(self.factory, "__name__", type(self.factory).__name__), 80),
            model="",
            started_at=now,
            status="error",
            error=f"{what}: {describe(exc)}",
            error_type=error_kind(exc),
            ended_at=now,
            duration_s=0.0,
            stop_reason="error",
            tags=self.tags_for(),
            metadata=self.metadata_for(item),
        )
        return record

    def tags_for(self) -> list[str]:
        return [*self.start_options.get("tags", ()), *batch_tags(self.name)]

    def metadata_for(self, item: TaskItem) -> dict[str, Any]:
        return {**(self.start_options.get("metadata") or {}), "batch": batch_metadata(self.name, item)}

    def run_options(self) -> dict[str, Any]:
        """The keywords for every run's ``start`` besides tags and metadata."""
        return {k: v for k, v in self.start_options.items() if k not in ("tags", "metadata")}


async def _record_of(run: TaskRun) -> RunRecord | None:
    return await run


def _snapshot(run: TaskRun) -> RunRecord | None:
    try:
        return run.record
    except RuntimeError:  # a remote run whose first events have not come back yet
        return None


def _refresh(view: Any, *, final: bool) -> None:
    try:
        view.refresh(final=final)
    except Exception:  # a view must never end a batch
        logging.getLogger("nbagent").exception("nbagent: a batch view failed to refresh")
