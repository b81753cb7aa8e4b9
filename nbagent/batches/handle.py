"""``Batch``: the handle on many runs of one agent factory, with one Stop and one table.

A batch is a scheduler on the runner's own loop (``nbagent.runtime.loop``): one coroutine per
task waits on a semaphore of ``concurrency`` slots, asks the backend to launch the task's run
(``nbagent.batches.local`` on this loop, ``nbagent.batches.ray`` on a Ray cluster), waits for its
record (interrupting it at ``timeout_s``), scores it, and frees the slot. Nothing here blocks
the loop: the factory, the score and the store reads run on worker threads.

The Stop path is one hop, as for a run: ``interrupt("now")`` (any thread, idempotent) marks the
batch stopping and interrupts every launched run through its own ``interrupt`` (its cancel
scope, or the remote worker's); a task still waiting for a slot sees the mark when it gets one
and ends ``"skipped"``, without a run, as does one whose agent was being built (the local
backend starts no run after a Stop of either mode). Who wins a race: the mark is set before the launched runs
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

from nbagent.batches.guards import AgentClaims, claim_name, release_name
from nbagent.batches.reading import BatchReading
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


class Batch(BatchReading):
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
        self.agents = AgentClaims()
        """The agent objects of the live runs: a factory must not hand one to two runs."""
        self._name_claim: Any = None

    # -- control -------------------------------------------------------------------------------

    def add_view(self, view: Any) -> None:
        """A view with ``refresh(final: bool)``, called on the runner's loop. Before ``_start``."""
        self._views.append(view)

    def _claim_name(self) -> None:
        """Refuse a second live batch of this name and store in this process (both would run
        every task); released when the batch ends."""
        self._name_claim = claim_name(self, self.name, self.store)

    def _release_name(self) -> None:
        release_name(self, self._name_claim)
        self._name_claim = None

    def _start(self) -> None:
        asyncio.run_coroutine_threadsafe(self._main(), runner_loop())

    def stopped(self) -> bool:
        """True once the batch was told to stop (either mode): a task not started must not start."""
        return self._stop is not None

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
            self._release_name()
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
                await self._score(state)

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
            if run is None:  # a Stop came while the factory built the agent: never started
                state.phase = "skipped"
                return
            state.run, state.phase = run, "running"
            if self._stop == "now":  # a Stop that walked the runs before this one was there
                run.interrupt("now", reason="user")
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
                state.phase = "skipped"
                return
            self._session.append(record)
            await self._ended(state, record)

    async def _ended(self, state: TaskState, record: RunRecord) -> None:
        state.record = record
        await self._score(state)
        state.phase = "ended"
        self._latest.append(state)

    async def _score(self, state: TaskState) -> None:
        """On a worker thread: a scorer may take seconds (a judge model, a test suite), and the
        loop it would block carries every run and every Stop of the process."""
        if self.score is None or state.record is None:
            return
        try:
            state.score = await asyncio.to_thread(self.score, state.record, dict(state.item.row))
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


def _refresh(view: Any, *, final: bool) -> None:
    try:
        view.refresh(final=final)
    except Exception:  # a view must never end a batch
        logging.getLogger("nbagent").exception("nbagent: a batch view failed to refresh")
