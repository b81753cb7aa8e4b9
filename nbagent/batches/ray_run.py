"""The notebook's side of a task on the Ray backend: ``RemoteRun`` (a ``TaskRun``).

Part of ``nbagent.batches.ray`` (which explains the design): the run's record folded from its
worker's stream, its store rows, its Stop, its approvals, and where the task goes when the worker
it was given to is lost before accepting it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nbagent import events as ev
from nbagent.errors import NbagentError, describe
from nbagent.extras import install_hint
from nbagent.guardrails.approvals import PendingApproval
from nbagent.recorder import Recorder
from nbagent.records import RunRecord
from nbagent.runtime.cancel import InterruptMode

if TYPE_CHECKING:
    from nbagent.batches.handle import Batch
    from nbagent.batches.ray import RayBackend
    from nbagent.batches.tasks import TaskItem

WORKER_LOST = "WorkerLost"
PLACEMENTS = 8
"""How many workers a task may be given to before it fails (each lost before it accepted it)."""


def ray_module() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ImportError(f"the Ray backend needs Ray: {install_hint('ray')}") from exc
    return ray


class RemoteFailure(NbagentError):
    """An exception raised in a worker, as text (the original may not travel)."""


class WorkerLost(RemoteFailure):
    """The worker running the task was lost (its process killed, its node gone); its name is
    ``WORKER_LOST``, the ``error_type`` of the records it ends."""


class NotAccepted(NbagentError):
    """The task's worker was lost before it accepted the task: it never started there."""


@dataclass(eq=False)
class Worker:
    """One actor of the backend: its process id, its live tasks, and whether it is lost."""

    actor: Any
    pid: int
    load: int = 0
    lost: bool = False


class RemoteRun:
    """The notebook's side of a run in a Ray worker: its record, its store rows, its Stop, its
    approvals. ``worker_pid``: the process the task was given to (``None`` until then)."""

    def __init__(self, backend: RayBackend, batch: Batch, item: TaskItem) -> None:
        self.backend = backend
        self.batch = batch
        self.item = item
        self.run_id = ""
        self.worker: Worker | None = None
        self.token = ""
        self._recorder = Recorder()
        self._store_sink = batch.store.sink() if batch.store is not None else None
        if self._store_sink is not None:
            self._store_sink.follow(self._recorder)
        self._ended = False
        self._stop: tuple[str, str] | None = None
        self._pending: dict[str, PendingApproval] = {}
        self._last_t = 0.0
        self._last_at = time.perf_counter()
        self.result: asyncio.Future[RunRecord | None] = asyncio.get_running_loop().create_future()

    @property
    def worker_pid(self) -> int | None:
        return None if self.worker is None else self.worker.pid

    def interrupt(self, mode: InterruptMode = "now", *, reason: ev.Stopper = "user") -> bool:
        """Ask the worker to stop the run (a task not given to a worker yet is not started).
        Any thread; idempotent."""
        if self._ended:
            return False
        self._stop = self._stop or (mode, reason)
        worker = self.worker
        if worker is not None:
            worker.actor.interrupt.remote(self.token, mode, reason)
        return True

    # -- approvals -----------------------------------------------------------------------------

    @property
    def pending_approvals(self) -> list[PendingApproval]:
        """The tool calls of the remote run waiting for a decision now. Any thread."""
        return list(self._pending.values())

    def approve(self, call_id: str) -> bool:
        """Let the pending call ``call_id`` run in its worker; True if it was pending here."""
        return self._decide(call_id, "approved", None)

    def deny(self, call_id: str, reason: str | None = None) -> bool:
        """Refuse the pending call ``call_id`` (the model sees "the user denied this call: ...")."""
        if reason is not None and not isinstance(reason, str):
            raise TypeError(f"reason must be a str, not {type(reason).__name__}")
        return self._decide(call_id, "denied", reason)

    def _decide(self, call_id: str, decision: str, reason: str | None) -> bool:
        pending, worker = self._pending.pop(call_id, None), self.worker
        if pending is None or worker is None or self._ended:
            return False
        worker.actor.decide.remote(self.token, call_id, decision, reason)
        return True

    # -- the record ----------------------------------------------------------------------------

    def live_record(self) -> RunRecord:
        live = self._recorder.live
        if live is None:
            raise RuntimeError("the run has not started in its worker yet")
        return live

    @property
    def record(self) -> RunRecord:
        snapshot = self._recorder.snapshot()
        if snapshot is None:
            raise RuntimeError("the run has not started in its worker yet")
        return snapshot

    def __await__(self):
        return asyncio.shield(self.result).__await__()

    def _apply(self, event: ev.RunEvent) -> None:
        kind = type(event)
        if kind is ev.RunStarted:
            self.run_id = event.run_id
        elif kind is ev.ApprovalRequested:
            self._pending[event.call_id] = PendingApproval(  # type: ignore[arg-type]
                event.call_id, event.tool, event.arguments, event.step, event.t, None
            )
        elif kind is ev.ApprovalDecided or kind is ev.ToolCallFinished:
            self._pending.pop(event.call_id, None)
        elif kind is ev.RunFinished:
            self._pending.clear()
        self._last_t, self._last_at = event.t, time.perf_counter()
        self._recorder.apply(event)
        if self._store_sink is not None:
            try:
                self._store_sink(event)
            except Exception as exc:  # a store failure never ends the run
                logging.getLogger("nbagent").warning("nbagent: store sink failed: %s", describe(exc))

    # -- the stream ----------------------------------------------------------------------------

    async def drive(self) -> None:
        """Give the task to a live worker and fold its stream; to another worker when the one it
        was given to is lost before accepting it. Sets ``result``."""
        record: RunRecord | None = None
        try:
            for _ in range(PLACEMENTS):
                if self._stop is not None:  # stopped before any worker started it
                    break
                worker = await self.backend._pick()
                self.token = uuid.uuid4().hex  # before the worker: an interrupt reads both
                self.worker = worker
                worker.load += 1
                try:
                    record = await self._consume(worker)
                    break
                except NotAccepted:  # it never started there: another worker takes it
                    self.worker = None
                finally:
                    worker.load -= 1
            else:
                raise RuntimeError(f"{PLACEMENTS} workers were lost before one accepted the task")
        except Exception as exc:  # no live worker could be had
            record = await self._failed("the task could not run in its worker", exc)
        finally:
            if self._store_sink is not None and record is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait({asyncio.wrap_future(self._store_sink.drained())}, timeout=5.0)
            self._ended = True
            self._pending.clear()
            if not self.result.done():
                self.result.set_result(record)

    async def _consume(self, worker: Worker) -> RunRecord | None:
        """Fold the task's stream from ``worker``: its record, ``None`` if it was skipped there;
        ``NotAccepted`` when the worker was lost before accepting it."""
        ray = self.backend.ray
        stream = worker.actor.run.options(num_returns="streaming").remote(
            self.token,
            self.item,
            self.batch.tags_for(),
            self.batch.metadata_for(self.item),
            self.backend._options(self.batch),
        )
        accepted = False
        lost: str | None = None
        try:
            async for ref in stream:
                kind, payload = await ref
                if kind == "accepted":
                    accepted = True
                    if self._stop is not None:
                        worker.actor.interrupt.remote(self.token, *self._stop)
                    worker.actor.go.remote(self.token)
                elif kind == "events":
                    for event in payload:
                        self._apply(event)
                elif kind == "failed":
                    text, name = payload
                    failure = RemoteFailure(f"{name}: {text}" if name not in text else text)
                    return await self._failed("the agent factory failed", failure)
                elif kind == "skipped":
                    return None
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the worker died (RayActorError...), or its stream broke
            is_ray = isinstance(exc, ray.exceptions.RayError)
            if isinstance(exc, ray.exceptions.RayActorError):
                self.backend._lost(worker, exc)  # no more tasks for it
                if not accepted:
                    raise NotAccepted(describe(exc).splitlines()[0]) from exc
            first_line = describe(exc).splitlines()[0]
            lost = f"worker lost: {first_line}" if is_ray else f"the remote run's stream failed: {first_line}"
        live = self._recorder.live
        if live is None:
            if lost is None and not accepted:
                raise NotAccepted("its stream ended before the worker accepted the task")
            if lost is None:
                failure = RemoteFailure("its stream ended before the run started")
            else:
                failure = WorkerLost(lost) if lost.startswith("worker lost") else RemoteFailure(lost)
            return await self._failed("the task could not run in its worker", failure)
        if not live.done:  # the stream ended without the run's end: its worker is gone
            self._apply(
                ev.RunFinished(
                    live.run_id,
                    len(live.steps),
                    self._last_t + (time.perf_counter() - self._last_at),
                    "error",
                    error=lost or "worker lost: its stream ended before the run did",
                    error_type=WORKER_LOST,
                    stop_reason="error",
                )
            )
        return self._recorder.snapshot()

    async def _failed(self, what: str, exc: BaseException) -> RunRecord:
        record = self.batch.error_record(self.item, what, exc)
        if self.batch.store is not None:
            await asyncio.to_thread(self.batch.store.add, record)
        return record
