"""``Batch``: the handle on many runs of one agent factory, with one Stop and one table.

A batch owns a ``Scheduler`` on the runner's own loop (``nbagent.runtime.loop``;
``nbagent.batches.scheduler``): it starts each task when one of ``concurrency`` slots is free,
asks the backend to launch the task's run (``nbagent.batches.local`` on this loop,
``nbagent.batches.ray`` on a Ray cluster), waits for its record, scores it, and frees the slot.
Nothing blocks the loop: the factory and the score run on the batch's own threads
(``nbagent.batches.threads``), the store reads on worker threads. A time cap per task is the
runs' own ``Limits(max_seconds=)``, passed with the other ``start`` options.

The Stop path is one hop, as for a run: ``interrupt("now")`` (any thread, idempotent) marks the
batch stopping and interrupts every live run through its own ``interrupt`` (its cancel scope, or
the remote worker's); the scheduler skips every task not started in one pass, and a task whose
agent was being built ends ``"skipped"`` without a run (or, if its factory has not returned a
grace later, ``"interrupted"``, abandoned). Who wins a race: the mark is set before the live runs
are walked, and a task checks it after its run is launched, so each run is interrupted by one
side or the other. ``interrupt("after_step")`` (a batch's step is a task) only
sets the mark: live runs finish.

Waiting is a run's (``nbagent.runtime.waiting``): ``batch.wait()`` turns Ctrl-C into a Stop,
and ``await batch`` stops the batch at Jupyter's ■ Interrupt, then raises
``BatchStoppedByKeyboard`` once every task has its row.

Every task ends as a row of ``frame()``: its run's record (success, interrupted, error,
max_steps, limit), an error record when its
factory or its start failed, the stored record of an earlier attempt a resume reused, or
``"skipped"``. The views (``nbagent.batches.table``) are refreshed by one ticker on the loop, about
ten times a second, whatever the number of tasks.

Any thread may read a batch while it runs (a task's run and record, the progress its views show,
the batch as DataFrames). The progress and the running tasks come from the batch's ``Tally`` and a
task's state from a key index, never from a walk over every task: a view refreshed ten times a
second costs the same for a batch of 100,000 tasks as for one of ten.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Generator
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from nbagent import events as ev
from nbagent.batches.guards import AgentClaims, claim_name, release_name
from nbagent.batches.resume import batch_metadata, batch_tags
from nbagent.batches.scheduler import Scheduler, refresh
from nbagent.batches.state import (
    OLD_AFTER_STEP,
    Backend,
    BatchStoppedByKeyboard,
    Progress,
    TaskRun,
    TaskState,
    takes_row,
)
from nbagent.batches.tasks import TaskItem
from nbagent.batches.threads import original
from nbagent.errors import describe, error_kind
from nbagent.records import RunRecord
from nbagent.runtime.cancel import InterruptMode
from nbagent.runtime.loop import runner_loop
from nbagent.runtime.script_exit import install as install_script_exit
from nbagent.runtime.waiting import WaitEnds, wait_async, wait_blocking
from nbagent.text import shorten

if TYPE_CHECKING:
    import pandas as pd


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
        self.skip = skip
        self.start_options = dict(start_options)
        self.tasks = [TaskState(item) for item in items]
        self._by_key = {state.item.key: state for state in self.tasks}
        self.error: str | None = None
        """Set when the batch itself failed (its backend could not start)."""
        self._stop: InterruptMode | None = None
        self._stop_reason: ev.Stopper = "user"
        self._lock = threading.Lock()
        self.views: list[Any] = []
        """What ``add_view`` added: refreshed on the loop while the batch runs, and at its end."""
        self.table: Any = None
        """The live widget table (``nbagent.batches.table.BatchTable``) when one is shown."""
        self._t0 = time.perf_counter()
        self._ended_at: float | None = None
        self.completion: concurrent.futures.Future[None] = concurrent.futures.Future()
        self.completion.set_running_or_notify_cancel()
        self.scheduler = Scheduler(self)
        """The batch's loop side: what it started, ended and counted."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self.keyboard_pressed = False
        """Set by Jupyter's interrupt during ``await batch`` (``nbagent.runtime.interrupts``)."""
        self.agents = AgentClaims()
        """The agent objects of the live runs: a factory must not hand one to two runs."""
        self._name_claim: Any = None

    # -- control -------------------------------------------------------------------------------

    def add_view(self, view: Any) -> None:
        """A view with ``refresh(final: bool)``, called on the runner's loop. Before ``_start``."""
        self.views.append(view)

    def hold_name(self) -> None:
        """Refuse a second live batch of this name and store in this process (both would run
        every task); released when the batch ends."""
        self._name_claim = claim_name(self, self.name, self.store)

    def free_name(self) -> None:
        """Give the batch's name back (the batch ended, or never started)."""
        release_name(self, self._name_claim)
        self._name_claim = None

    def launch(self) -> None:
        """Start the batch on the runner's loop (``nbagent.batch`` calls it once the views are up).

        On the caller's thread it first does what each run's ``start`` does once per process:
        the runs start on the runner's thread, which must not import or probe a module for the
        first time while the caller may be importing it (``await batch`` imports IPython; a run
        started meanwhile found it half-imported and failed).
        """
        install_script_exit()
        self._loop = runner_loop()
        asyncio.run_coroutine_threadsafe(self.scheduler.main(), self._loop)

    def ended(self) -> None:
        """On the loop, once every task has ended (the scheduler calls it): the batch is over, its
        name free."""
        self._ended_at = time.perf_counter()
        self.free_name()
        self.completion.set_result(None)  # before the final refresh, so the views say "done"
        for view in self.views:
            refresh(view, final=True)

    async def in_thread(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on the batch's own threads, given up a grace after Stop all: how a backend
        calls the user's code (``Scheduler.in_thread``)."""
        return await self.scheduler.in_thread(what, fn, *args)

    def stopped(self) -> bool:
        """True once the batch was told to stop (either mode): a task not started must not start."""
        return self._stop is not None

    @property
    def stop_mode(self) -> InterruptMode | None:
        """``None`` until a Stop; then ``"now"`` or ``"after_step"``."""
        return self._stop

    @property
    def stop_reason(self) -> ev.Stopper:
        """The ``reason`` of the Stop (``"user"`` until one): an interrupted run's ``stop_reason``."""
        return self._stop_reason

    def interrupt(self, mode: InterruptMode = "now", *, reason: ev.Stopper = "user") -> bool:
        """Stop the batch: ``"now"`` interrupts every live run and skips the tasks not started;
        ``"after_step"`` (a batch's step is a task) lets the live runs finish and starts no more.
        ``reason`` becomes the interrupted runs' ``stop_reason``. True if the batch was still
        running. Idempotent; any thread (a Stop click arrives on the kernel's)."""
        if mode == OLD_AFTER_STEP:
            warnings.warn(
                'batch.interrupt("after_current") is now batch.interrupt("after_step"), as for a run '
                "(the old spelling goes in the next release)",
                DeprecationWarning,
                stacklevel=2,
            )
            mode = "after_step"
        if mode not in ("now", "after_step"):
            raise ValueError(f"mode must be 'now' or 'after_step', not {mode!r}")
        stop: InterruptMode = mode
        with self._lock:
            if self.completion.done() or self._stop == "now" or self._stop == stop:
                return False
            self._stop, self._stop_reason = stop, reason
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the runner's loop is closed: nothing waits
                self._loop.call_soon_threadsafe(self.scheduler.stopping)
        if stop == "now":
            for state in self.running():
                run = state.run
                if run is not None:
                    run.interrupt("now", reason=reason)
        return True

    @property
    def status(self) -> str:
        """``"running"``, ``"stopping"`` after a Stop, then ``"done"`` or ``"stopped"``."""
        if self.completion.done():
            return "stopped" if self._stop is not None else "done"
        return "running" if self._stop is None else "stopping"

    def done(self) -> bool:
        return self.completion.done()

    def _ends(self) -> WaitEnds:
        name = "batch" if self.name is None else f"batch {self.name!r}"
        return WaitEnds(
            name=name,
            instead="use `await batch`",
            still_stopping=f"{name} is still stopping; batch.frame() has its rows so far",
            result=lambda _: self.frame(),
            stopped=lambda _: BatchStoppedByKeyboard(self),
        )

    def wait(self, timeout: float | None = None) -> pd.DataFrame:
        """Block until every task has ended; the frame. Ctrl-C (Jupyter's ■ Interrupt) stops the
        batch (now), waits for its rows and raises ``BatchStoppedByKeyboard``; a second Ctrl-C
        raises ``KeyboardInterrupt`` at once. ``TimeoutError`` if ``timeout`` passes first."""
        return wait_blocking(self, timeout, self._ends())

    def __await__(self) -> Generator[Any, None, pd.DataFrame]:
        """``frame = await batch``; Jupyter's ■ Interrupt stops the batch at once and raises
        ``BatchStoppedByKeyboard`` (its ``.batch`` has the frame) once every task has its row."""
        return wait_async(self, self._ends()).__await__()

    def __repr__(self) -> str:
        p = self.progress()
        name = "" if self.name is None else f" {self.name!r}"
        skipped = f", {p.skipped} skipped" if p.skipped else ""
        return f"<nbagent.Batch{name} {p.state}: {p.ran}/{p.total} done{skipped}>"

    # -- what every run of the batch is started with ------------------------------------------

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

    # -- readers: whole-field reads of what the loop writes, from any thread ----------------

    def run_of(self, task: int | str) -> TaskRun | None:
        """The run handle of a task (by position or key), ``None`` if it has not started."""
        return self.task_state(task).run

    def task_state(self, task: int | str) -> TaskState:
        """The state of one task, by position or by key (``KeyError`` / ``IndexError`` if none)."""
        if isinstance(task, int):
            return self.tasks[task]
        return self._by_key[task]

    def record_of(self, task: int | str) -> RunRecord | None:
        """A task's record: final, reused, or a snapshot of its live run; ``None`` if none."""
        state = self.task_state(task)
        if state.record is not None:
            return state.record
        return _snapshot(state.run) if state.run is not None else None

    def records(self) -> list[RunRecord]:
        """The latest record of every task that has one, in task order."""
        return [r for s in self.tasks if (r := s.record) is not None]

    def progress(self) -> Progress:
        t = self.scheduler.tally
        phases = t.phases
        p = Progress(
            self.name,
            len(self.tasks),
            ended=dict(t.ended),
            reused=phases["reused"],
            running=phases["running"] + phases["starting"],
            queued=phases["queued"],
            skipped=phases["skipped"],
            input_tokens=t.input_tokens,
            output_tokens=t.output_tokens,
            cost_usd=t.cost_usd,
            state=self.status,
        )
        end = self._ended_at if self._ended_at is not None else time.perf_counter()
        p.elapsed_s = end - self._t0
        finished = sum(p.ended.values())
        left = p.running + p.queued
        if finished and left and self._stop is None:
            p.eta_s = p.elapsed_s / finished * left
        return p

    def running(self) -> list[TaskState]:
        """The tasks whose run is live, in the order they started."""
        return list(self.scheduler.tally.running.values())

    def latest(self) -> list[TaskState]:
        """The latest ended tasks, newest first."""
        return list(reversed(self.scheduler.latest))

    def frame(self) -> pd.DataFrame:
        """One row per task, in task order (``nbagent.batches.frames.batch_frame``)."""
        from nbagent.batches.frames import batch_frame

        return batch_frame(self)

    def attempts(self) -> pd.DataFrame:
        """Every attempt of every task, earlier batches of the same name (from the store)
        included, oldest first: the runs frame with ``task_key`` and ``attempt`` (1, 2, ...)."""
        from nbagent.batches.frames import attempts_frame

        return attempts_frame([*self.scheduler.earlier, *self.scheduler.session])

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


def _snapshot(run: TaskRun) -> RunRecord | None:
    try:
        return run.record
    except RuntimeError:  # a remote run whose first events have not come back yet
        return None
