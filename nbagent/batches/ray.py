"""The Ray backend: each task runs in a worker process of a Ray cluster; the notebook keeps the rest.

``RayBackend(address=...)`` starts ``workers`` Ray actors for a batch (one worker process each).
An actor runs each task it is given as an ordinary nbagent run on its own runner loop, and
streams the run's events back as Ray streaming-generator items, in chunks of at most
``CHUNK_S`` (``nbagent.batches.ray_worker``). The notebook folds them with its own ``Recorder``
and store sink, so the live table, the records and the store are the notebook's, as for local
runs. The factory and the tasks travel with Ray's own serialisation (cloudpickle).

Stop: ``RemoteRun.interrupt`` calls the actor's ``interrupt`` (an async actor serves it while its
runs go on), which interrupts the run through its own cancel scope; the interrupted record's
last events come back like any others. A Stop that reaches the actor before the task started
there ends that task unstarted (``"skipped"`` in the frame).

Approvals: a remote run's tool call that needs one (``@tool(requires_approval=True)``,
``approve=``) waits in its worker like a local one; the notebook's record shows it pending (the
batch table's opened task says "waiting for approval"), and ``batch.run_of(key).approve(call_id)``
/ ``deny(call_id, reason)`` / ``pending_approvals`` work as on a local run: the decision goes to
the worker. ``configure(approval_timeout_s=)`` of the notebook applies to remote runs too.

A lost worker (its process killed, its node gone, ``ray.kill``) fails only its own runs: each run
it had started ends ``"error"`` (``error_type`` ``"WorkerLost"``, "worker lost: ..."), with
everything received until then. Nothing that ran is retried (``max_restarts=0``,
``max_task_retries=0``): a retry would repeat the tools' side effects; a resume reruns those
tasks instead. The worker is not given another task, a replacement actor is started in its
place, and the tasks it had not started (sent before its loss was known) go to the live workers:
a task starts only after the notebook has seen its worker accept it, so one never seen accepted
never ran.

Ray is imported when a backend is built, never by ``import nbagent``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from nbagent.batches.ray_run import (
    PLACEMENTS,
    WORKER_LOST,
    NotAccepted,
    RemoteFailure,
    RemoteRun,
    Worker,
    ray_module,
)
from nbagent.batches.ray_worker import CHUNK_S, BatchWorker
from nbagent.errors import describe

if TYPE_CHECKING:
    from nbagent.batches.handle import Batch
    from nbagent.batches.tasks import TaskItem

__all__ = [
    "CHUNK_S",
    "PLACEMENTS",
    "WORKER_LOST",
    "BatchWorker",
    "NotAccepted",
    "RayBackend",
    "RemoteFailure",
    "RemoteRun",
    "Worker",
]


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
        self.ray = ray_module()
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.address = address
        self.workers = workers
        self.num_cpus = num_cpus
        self.init = dict(init or {})
        self.actors: list[Any] = []
        """Every actor the open batch started (lost ones and replacements included)."""
        self.pids: list[int] = []
        """Their worker processes' ids, in the order they started."""
        self.lost_pids: list[int] = []
        """The workers lost during the batch."""
        self._workers: list[Worker] = []
        self._starting: asyncio.Future[Worker | None] | None = None
        self._replacements = 0
        self._actor_class: Any = None
        self._drives: set[asyncio.Future[None]] = set()
        self._starters: set[asyncio.Future[None]] = set()
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
        self._actor_class = ray.remote(BatchWorker).options(
            max_restarts=0,
            max_task_retries=0,
            num_cpus=self.num_cpus,
            max_concurrency=max(1000, batch.concurrency),
        )
        self._replacements, self._starting = 0, None
        self.actors, self.pids, self.lost_pids = [], [], []
        actors = [self._new_actor(batch) for _ in range(self.workers)]
        pids = await asyncio.gather(*(actor.pid.remote() for actor in actors))
        self._workers = [Worker(actor, pid) for actor, pid in zip(actors, pids, strict=True)]
        self.pids = list(pids)

    def _new_actor(self, batch: Batch) -> Any:
        actor = self._actor_class.remote(batch.factory, batch.factory_takes_row)
        self.actors.append(actor)
        return actor

    def _options(self, batch: Batch) -> dict[str, Any]:
        """A run's ``start`` options in a worker: the batch's, and this process's defaults that
        the worker's own process does not have (approval timeout, limits)."""
        from nbagent.config import settings

        options = batch.run_options()
        if settings.approval_timeout_s is not None:
            options.setdefault("approval_timeout_s", settings.approval_timeout_s)
        if settings.limits is not None:
            options.setdefault("limits", settings.limits)
        return options

    async def _pick(self) -> Worker:
        """The least busy live worker; a replacement's when none is live (waiting for it)."""
        while True:
            live = [w for w in self._workers if not w.lost]
            if live:
                return min(live, key=lambda w: w.load)
            if self._starting is None:
                self._replace()
            assert self._starting is not None
            if await asyncio.shield(self._starting) is None:
                raise RuntimeError(
                    f"every Ray worker of the batch was lost ({len(self.lost_pids)}: pids "
                    f"{', '.join(map(str, self.lost_pids))}) and no replacement could start"
                )

    def _lost(self, worker: Worker, exc: BaseException) -> None:
        """``worker`` is gone: give it no more tasks, and start a replacement in its place."""
        if worker.lost:
            return
        worker.lost = True
        self.lost_pids.append(worker.pid)
        logging.getLogger("nbagent").warning(
            "nbagent: Ray worker %d lost (%s); its runs end 'error', the other tasks go on",
            worker.pid,
            describe(exc).splitlines()[0],
        )
        with contextlib.suppress(Exception):  # make sure: no task may reach it again
            self.ray.kill(worker.actor)
        if self._starting is None:
            self._replace()

    def _replace(self) -> None:
        """Start a replacement actor, at most ``workers`` per batch; ``_starting`` is its worker
        once it is up (``None``: it could not start, or no more may start)."""
        self._starting = asyncio.get_running_loop().create_future()
        batch = self._batch
        if batch is None or self._replacements >= self.workers:
            self._starting.set_result(None)  # stays: a batch with no live worker fails its tasks
            return
        self._replacements += 1

        async def start() -> None:
            worker: Worker | None = None
            try:
                actor = self._new_actor(batch)
                worker = Worker(actor, await actor.pid.remote())
                self._workers.append(worker)
                self.pids.append(worker.pid)
            except Exception as exc:
                logging.getLogger("nbagent").warning(
                    "nbagent: a replacement Ray worker could not start: %s", describe(exc)
                )
            finally:
                starting, self._starting = self._starting, None
                if starting is not None and not starting.done():
                    starting.set_result(worker)
            if worker is not None and sum(not w.lost for w in self._workers) < self.workers:
                self._replace()  # another worker was lost meanwhile

        _keep(self._starters, asyncio.ensure_future(start()))

    async def launch(self, batch: Batch, item: TaskItem) -> RemoteRun:
        remote = RemoteRun(self, batch, item)
        _keep(self._drives, asyncio.ensure_future(remote.drive()))
        return remote

    async def close(self, batch: Batch) -> None:
        if self._batch is not batch:  # open refused this batch: the backend is another's
            return
        try:
            while self._drives:
                await asyncio.gather(*self._drives, return_exceptions=True)
            for starter in list(self._starters):  # no task waits for a replacement any more
                starter.cancel()
            await asyncio.gather(*self._starters, return_exceptions=True)
            for actor in self.actors:
                with contextlib.suppress(Exception):  # already gone
                    self.ray.kill(actor)
            self.actors, self._workers = [], []
        finally:
            self._batch = None


def _keep(tasks: set[asyncio.Future[None]], task: asyncio.Future[None]) -> None:
    """Hold ``task`` in ``tasks`` until it is done (a batch of many tasks keeps only live ones)."""
    tasks.add(task)
    task.add_done_callback(tasks.discard)
