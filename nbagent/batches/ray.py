"""The Ray backend: each task runs in a worker process of a Ray cluster; the notebook keeps the rest.

``RayBackend(address=...)`` starts ``workers`` Ray actors for a batch (one worker process each).
An actor runs each task it is given as an ordinary nbagent run on its own runner loop, and
streams the run's events back as Ray streaming-generator items, in chunks of at most
``CHUNK_S``. The notebook folds them with its own ``Recorder`` and store sink, so the live table,
the records and the store are the notebook's, as for local runs. The factory and the tasks
travel with Ray's own serialisation (cloudpickle).

Stop: ``RemoteRun.interrupt`` calls the actor's ``interrupt`` (an async actor serves it while its
runs go on), which interrupts the run through its own cancel scope; the interrupted record's
last events come back like any others. A Stop that reaches the actor before the task started
there ends that task unstarted (``"skipped"`` in the frame).

A worker lost mid-run (its process killed, its node gone, ``ray.kill``) ends each of its runs
``"error"`` ("worker lost: ..."), with everything received until then. Nothing is retried
(``max_restarts=0``, ``max_task_retries=0``): a retry would repeat the tools' side effects; a
resume reruns those tasks instead.

Ray is imported when a backend is built, never by ``import nbagent``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import threading
import time
import uuid
from dataclasses import fields, replace
from typing import TYPE_CHECKING, Any

from nbagent import events as ev
from nbagent.batches.guards import AgentClaims
from nbagent.errors import describe
from nbagent.records import Recorder, RunRecord
from nbagent.text import safe_text

if TYPE_CHECKING:
    from nbagent.batches.handle import Batch
    from nbagent.batches.tasks import TaskItem

CHUNK_S = 0.05
"""How long events wait in a worker before they are sent to the notebook, at most."""
WORKER_LOST = "WorkerLost"


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ImportError("the Ray backend needs Ray: pip install 'nbagent[ray]'") from exc
    return ray


class RemoteFailure(Exception):
    """An exception raised in a worker, as text (the original may not travel)."""


def _shippable(event: ev.RunEvent) -> ev.RunEvent:
    """``event`` as something pickle takes: values that refuse become their text."""
    try:
        pickle.dumps(event)
        return event
    except Exception:
        changes = {}
        for f in fields(event):
            value = getattr(event, f.name)
            try:
                pickle.dumps(value)
            except Exception:
                changes[f.name] = safe_text(value)
        return replace(event, **changes)


class BatchWorker:
    """Runs tasks in a Ray worker process (an async actor: ``interrupt`` is served while runs go)."""

    def __init__(self, factory: Any, takes_row: bool) -> None:
        self.factory = factory
        self.takes_row = takes_row
        self.runs: dict[str, Any] = {}
        self.stops: dict[str, tuple[str, str]] = {}
        self.agents = AgentClaims()

    def pid(self) -> int:
        return os.getpid()

    def interrupt(self, token: str, mode: str, reason: str) -> bool:
        run = self.runs.get(token)
        if run is None:
            self.stops.setdefault(token, (mode, reason))  # it has not started here yet
            return False
        return run.interrupt(mode, reason=reason)

    async def run(
        self, token: str, item: TaskItem, tags: list[str], metadata: dict[str, Any], options: dict[str, Any]
    ):
        from nbagent.runtime.runner import start

        if token in self.stops:
            yield ("skipped", None)
            return
        try:
            row = dict(item.row)
            agent = await asyncio.to_thread(lambda: self.factory(row) if self.takes_row else self.factory())
            if agent is None:
                raise TypeError("the agent factory returned None; it must return an agent")
            self.agents.claim(agent, item.key)  # two live runs of this worker on one agent
        except Exception as exc:
            yield ("failed", (describe(exc), type(exc).__name__))
            return
        buffer: list[ev.RunEvent] = []
        lock = threading.Lock()

        def sink(event: ev.RunEvent) -> None:
            with lock:
                buffer.append(event)

        if token in self.stops:
            self.agents.release(item.key)
            yield ("skipped", None)
            return
        try:
            run = start(
                agent, item.task, sinks=[sink], display=False, tags=tags, metadata=metadata, **options
            )
        except Exception as exc:
            self.agents.release(item.key)
            yield ("failed", (describe(exc), type(exc).__name__))
            return
        self.runs[token] = run
        if token in self.stops:
            mode, reason = self.stops.pop(token)
            run.interrupt(mode, reason=reason)
        try:
            waiter = asyncio.ensure_future(_wait(run))
            while True:
                finished, _ = await asyncio.wait({waiter}, timeout=CHUNK_S)
                with lock:
                    chunk, buffer[:] = list(buffer), []
                if chunk:
                    yield ("events", [_shippable(e) for e in chunk])
                if finished:
                    with lock:
                        rest = list(buffer)
                    if rest:
                        yield ("events", [_shippable(e) for e in rest])
                    return
        finally:
            self.runs.pop(token, None)
            self.stops.pop(token, None)
            self.agents.release(item.key)


async def _wait(run: Any) -> RunRecord:
    return await run


class RemoteRun:
    """The notebook's side of a run in a Ray worker: its record, its store rows, its Stop."""

    def __init__(self, backend: RayBackend, actor: Any, token: str, batch: Batch, item: TaskItem) -> None:
        self.backend = backend
        self.actor = actor
        self.token = token
        self.batch = batch
        self.item = item
        self.run_id = ""
        self._recorder = Recorder()
        self._store_sink = batch.store.sink() if batch.store is not None else None
        self._done = threading.Event()
        self._last_t = 0.0
        self._last_at = time.perf_counter()
        self.result: asyncio.Future[RunRecord | None] = asyncio.get_running_loop().create_future()

    def interrupt(self, mode: str = "now", *, reason: str = "user") -> bool:
        """Ask the worker to stop the run. Any thread; idempotent."""
        if self._done.is_set():
            return False
        self.actor.interrupt.remote(self.token, mode, reason)
        return True

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
        if type(event) is ev.RunStarted:
            self.run_id = event.run_id
        self._last_t, self._last_at = event.t, time.perf_counter()
        self._recorder.apply(event)
        if self._store_sink is not None:
            try:
                self._store_sink(event)
            except Exception as exc:  # a store failure never ends the run
                import logging

                logging.getLogger("nbagent").warning("nbagent: store sink failed: %s", describe(exc))

    async def consume(self, stream: Any) -> None:
        ray = _ray()
        record: RunRecord | None = None
        lost: str | None = None
        try:
            async for ref in stream:
                kind, payload = await ref
                if kind == "events":
                    for event in payload:
                        self._apply(event)
                elif kind == "failed":
                    text, name = payload
                    failure = RemoteFailure(f"{name}: {text}" if name not in text else text)
                    record = await self._failed("the agent factory failed", failure)
                elif kind == "skipped":
                    break
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the worker died (RayActorError...), or its stream broke
            first_line = describe(exc).splitlines()[0]
            lost = (
                f"worker lost: {first_line}"
                if isinstance(exc, ray.exceptions.RayError)
                else f"the remote run's stream failed: {first_line}"
            )
        live = self._recorder.live
        if record is None and live is not None:
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
            record = self._recorder.snapshot()
        elif record is None and lost is not None:
            record = await self._failed("the task could not run in its worker", RemoteFailure(lost))
        if self._store_sink is not None and record is not None:
            drained = getattr(self._store_sink, "drained", None)
            if drained is not None:
                await asyncio.wait({asyncio.wrap_future(drained())}, timeout=5.0)
        self._done.set()
        if not self.result.done():
            self.result.set_result(record)

    async def _failed(self, what: str, exc: BaseException) -> RunRecord:
        record = self.batch._error_record(self.item, what, exc)
        if self.batch.store is not None:
            await asyncio.to_thread(self.batch.store.add, record)
        return record


class RayBackend:
    """Runs a batch's tasks on a Ray cluster.

    Args:
        address: the cluster to join (``"auto"``: the one this machine is part of; ``None``:
            a local one that ``ray.init`` starts, unless Ray is initialised already).
        workers: how many worker processes (Ray actors) run the tasks.
        num_cpus: CPUs each worker reserves on the cluster.
        init: more keywords for ``ray.init`` when this backend calls it.
    """

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        *,
        workers: int = 2,
        num_cpus: float = 1,
        init: dict[str, Any] | None = None,
    ) -> None:
        self.ray = _ray()
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.address = address
        self.workers = workers
        self.num_cpus = num_cpus
        self.init = dict(init or {})
        self.actors: list[Any] = []
        self.pids: list[int] = []
        """The worker processes' ids, once a batch has opened the backend."""
        self._load: dict[int, int] = {}
        self._streams: list[asyncio.Task[None]] = []
        self._batch: Batch | None = None
        """The batch the backend is open for: its actors and streams serve that batch only."""

    def __repr__(self) -> str:
        return f"RayBackend(address={self.address!r}, workers={self.workers})"

    def _connect(self) -> None:
        ray = self.ray
        if not ray.is_initialized():
            ray.init(address=self.address, **self.init)

    def _claim(self, batch: Batch) -> None:
        """Refuse a second batch while the backend is open for one (the actors and streams are
        the backend's, and the first batch's close would end the second's runs)."""
        if self._batch is not None and self._batch is not batch:
            raise RuntimeError(
                f"this RayBackend is already running batch {self._batch.name or ''!r}: "
                "a backend serves one batch at a time; make a RayBackend per batch, or await the first"
            )
        self._batch = batch

    async def open(self, batch: Batch) -> None:
        self._claim(batch)
        ray = self.ray
        await asyncio.to_thread(self._connect)
        worker = ray.remote(BatchWorker).options(
            max_restarts=0,
            max_task_retries=0,
            num_cpus=self.num_cpus,
            max_concurrency=max(1000, batch.concurrency),
        )
        self.actors = [worker.remote(batch.factory, batch.factory_takes_row) for _ in range(self.workers)]
        self.pids = list(await asyncio.gather(*(actor.pid.remote() for actor in self.actors)))
        self._load = dict.fromkeys(range(len(self.actors)), 0)

    async def launch(self, batch: Batch, item: TaskItem) -> RemoteRun:
        index = min(self._load, key=self._load.__getitem__)  # the least busy worker
        actor = self.actors[index]
        token = uuid.uuid4().hex
        remote = RemoteRun(self, actor, token, batch, item)
        stream = actor.run.options(num_returns="streaming").remote(
            token, item, batch.tags_for(), batch.metadata_for(item), batch.run_options()
        )
        self._load[index] += 1

        async def consume() -> None:
            try:
                await remote.consume(stream)
            finally:
                self._load[index] -= 1

        self._streams.append(asyncio.ensure_future(consume()))
        return remote

    async def close(self, batch: Batch) -> None:
        if self._batch is not batch:  # open refused this batch: the backend is another's
            return
        try:
            if self._streams:
                await asyncio.gather(*self._streams, return_exceptions=True)
            self._streams = []
            for actor in self.actors:
                with contextlib.suppress(Exception):  # already gone
                    self.ray.kill(actor)
            self.actors = []
        finally:
            self._batch = None
