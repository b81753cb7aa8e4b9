"""The runner: the one place that knows about threads and event loops.

Every run is a task on one private event loop that lives on a daemon thread ("nbagent-loop").
Nothing is patched: the user's loop (Jupyter's, or none in a script) only ever waits on a
``concurrent.futures.Future``. So ``start()`` returns at once and the kernel stays idle, which is
what lets a Stop click reach it (see the design notes); ``run()`` blocks in short slices so
Jupyter's interrupt (``KeyboardInterrupt`` in the main thread) becomes an interrupt of the run;
``arun()`` and ``await run`` wait without blocking the kernel, and cancelling them stops the run.

Events are fanned out on the loop thread, in order: first to the ``Recorder``, then to each sink.
A sink that raises is logged once and skipped for that event; it never kills the run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
import uuid
from collections.abc import Callable, Generator, Iterable
from datetime import datetime, timezone
from typing import Any, Protocol

from . import events as ev
from . import history
from .cancel import CancelScope, InterruptMode, current_scope
from .config import settings
from .context import RunContext
from .errors import AgentError, AgentInterrupted, MaxStepsReached, describe, error_kind
from .records import Recorder, RunRecord

logger = logging.getLogger("nbagent")

Sink = Callable[[ev.RunEvent], Any]


class Source(Protocol):
    """What the runner can run: the native ``Agent`` and the smolagents adapter both are one."""

    name: str

    @property
    def model_name(self) -> str: ...

    async def drive(self, task: str, ctx: RunContext, reset: bool = True) -> Any: ...


class _LoopThread:
    """The private event loop on its daemon thread, started on first use."""

    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None

    @classmethod
    def get(cls) -> asyncio.AbstractEventLoop:
        with cls._lock:
            if cls._loop is None or cls._thread is None or not cls._thread.is_alive():
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def serve() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                cls._thread = threading.Thread(target=serve, name="nbagent-loop", daemon=True)
                cls._thread.start()
                ready.wait()
                cls._loop = loop
                _warm_up_pricing()
            return cls._loop


def runner_loop() -> asyncio.AbstractEventLoop:
    """The runner's event loop (started if needed)."""
    return _LoopThread.get()


_live_runs: set[Run] = set()
_live_lock = threading.Lock()


def as_source(agent: Any) -> Source:
    """The runnable form of ``agent``: itself if native, an adapter for a smolagents agent."""
    if hasattr(agent, "drive"):
        return agent
    from .adapters import smolagents as adapter

    if adapter.is_smolagents_agent(agent):
        return adapter.SmolagentsSource(agent)
    raise TypeError(f"nbagent cannot run {type(agent).__name__}: pass an nbagent.Agent or a smolagents agent")


class Run:
    """A handle on one run: stop it, watch it, wait for its record.

    ``interrupt``, ``done``, ``status`` and ``record`` may be used from any thread at any time.
    Awaiting the handle (``record = await run``) waits without blocking the kernel; cancelling that
    await interrupts the run.
    """

    def __init__(self, agent: Any, task: str, *, sinks: Iterable[Sink] = (), reset: bool = True) -> None:
        self.agent = agent
        self.source = as_source(agent)
        self.task = task
        self.reset = reset
        self.run_id = uuid.uuid4().hex[:16]
        self.scope = CancelScope()
        self._recorder = Recorder()
        self._sinks: list[Sink] = list(sinks)
        self._failed_sinks: set[int] = set()
        self.sink_errors: list[str] = []
        """One line per sink that raised (each sink is reported once)."""
        self._future: concurrent.futures.Future[RunRecord] = concurrent.futures.Future()
        self._future.set_running_or_notify_cancel()  # nobody may cancel it: only the runner completes it
        self._final: RunRecord | None = None
        self._started = False
        self._submitted = False

    # -- control ---------------------------------------------------------------------------

    def add_sink(self, sink: Sink) -> None:
        """Add an event consumer. Only before the run starts, so a sink sees every event."""
        if self._started:
            raise RuntimeError("add sinks before the run starts (pass sinks= to start())")
        self._sinks.append(sink)

    def interrupt(self, mode: InterruptMode = "now") -> bool:
        """Stop the run: ``"now"`` cancels the in-flight model call and tool; ``"after_step"`` lets
        the current step finish. True if the run was still live. Idempotent; any thread."""
        return self.scope.interrupt(mode)

    def done(self) -> bool:
        return self._future.done()

    @property
    def status(self) -> str:
        """``"running"`` until the end, then the record's status."""
        return self._final.status if self._final is not None else "running"

    @property
    def record(self) -> RunRecord:
        """The final record once done; before that, a snapshot of the run so far."""
        if self._final is not None:
            return self._final
        snapshot = self._recorder.snapshot()
        if snapshot is None:
            raise RuntimeError("the run has not been started")
        return snapshot

    def live_record(self) -> RunRecord:
        """The record being built, not a copy. Only for sinks, on the runner's thread, between
        events: elsewhere use ``record``, a consistent snapshot."""
        live = self._recorder.live
        if live is None:
            raise RuntimeError("the run has not been started")
        return live

    def live_text(self, step: int) -> str:
        """The text the model has streamed so far in ``step``."""
        return self._recorder.live_text(step)

    def wait(self, timeout: float | None = None) -> RunRecord:
        """Block until the run ends and return its record.

        Waits in short slices so Jupyter's interrupt (``KeyboardInterrupt``) reaches this thread;
        it interrupts the run, and the wait goes on until the interrupted record is complete.
        Raises ``TimeoutError`` if ``timeout`` passes first (the run goes on).
        """
        if threading.current_thread() is _LoopThread._thread:
            raise RuntimeError("wait() on the runner's own thread would deadlock: use `await run` in a tool")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                return self._future.result(timeout=0.1 if remaining is None else min(0.1, remaining))
            except concurrent.futures.TimeoutError:
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError(f"run {self.run_id} still running after {timeout} s") from None
            except KeyboardInterrupt:
                self.interrupt()

    async def _await(self) -> RunRecord:
        waiter = asyncio.wrap_future(self._future)
        try:
            return await asyncio.shield(waiter)
        except asyncio.CancelledError:
            self.interrupt()
            raise

    def __await__(self) -> Generator[Any, None, RunRecord]:
        return self._await().__await__()

    def __repr__(self) -> str:
        return f"<nbagent.Run {self.run_id} {self.status} task={self.task[:40]!r}>"

    # -- the loop side ---------------------------------------------------------------------

    def _emit(self, event: ev.RunEvent) -> None:
        self._recorder.apply(event)
        self._fan_out(event)

    def _fan_out(self, event: ev.RunEvent) -> None:
        for index, sink in enumerate(self._sinks):
            try:
                sink(event)
            except Exception as exc:
                if index not in self._failed_sinks:
                    self._failed_sinks.add(index)
                    message = f"sink {sink!r} failed on {type(event).__name__}: {describe(exc)}"
                    self.sink_errors.append(message)
                    logger.error("nbagent: %s (reported once; the run goes on)", message, exc_info=exc)

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._started = True
        # Recorded here, on the caller's thread, so ``run.record`` exists as soon as start() returns.
        started = ev.RunStarted(
            self.run_id,
            0,
            time.perf_counter(),
            self.task,
            getattr(self.source, "name", type(self.agent).__name__),
            self.source.model_name,
            datetime.now(timezone.utc),
        )
        self._recorder.apply(started)
        with _live_lock:
            _live_runs.add(self)
        asyncio.run_coroutine_threadsafe(self._main(started), loop)
        self._submitted = True

    async def _main(self, started: ev.RunStarted) -> None:
        task = asyncio.current_task()
        assert task is not None
        current_scope.set(self.scope)
        ctx = RunContext(self.run_id, self.scope, self._emit)
        status: ev.RunStatus = "success"
        output: Any = None
        error: str | None = None
        error_type: str | None = None
        try:
            self._fan_out(started)
            self.scope.bind(task)
            output = await self.source.drive(self.task, ctx, self.reset)
        except (asyncio.CancelledError, AgentInterrupted):
            status = "interrupted"
        except MaxStepsReached as exc:
            status, error, error_type = "max_steps", describe(exc), "MaxStepsReached"
        except BaseException as exc:  # even SystemExit from a source must end as a record, not kill the loop
            status, error, error_type = "error", describe(exc), error_kind(exc)
        try:
            self._finish(task, ctx, status, output, error, error_type)
            await self._sinks_drained()
        finally:
            with _live_lock:
                _live_runs.discard(self)
            final = self._final or self._recorder.snapshot()
            assert final is not None
            self._final = final
            history.add(final)
            self._future.set_result(final)

    def _finish(
        self,
        task: asyncio.Task[Any],
        ctx: RunContext,
        status: ev.RunStatus,
        output: Any,
        error: str | None,
        error_type: str | None,
    ) -> None:
        if self.scope.close():
            # An interrupt accepted before the end wins, even against a just-finished answer.
            status, error, error_type = "interrupted", None, None
        if status == "interrupted":
            output, error, error_type = None, "interrupted by the user", "AgentInterrupted"
        if hasattr(task, "uncancel") and task.cancelling():  # Python >= 3.11
            task.uncancel()  # the cancel was ours and is handled; the record is the result
        # Priced before the end event, so every recorder of the run (the store's too) has the cost.
        cost = _cost_of(self.live_record())
        finished = ev.RunFinished(
            self.run_id, ctx.step, time.perf_counter(), status, output, error, error_type, cost
        )
        self._recorder.apply(finished)
        self._final = self._recorder.snapshot()  # before any sink shows the end: the handle never lags
        self._fan_out(finished)

    async def _sinks_drained(self) -> None:
        """Wait (without blocking the loop) for sinks that write elsewhere, such as a store's
        writer thread, so a returned record is also a stored one. Bounded: a stuck database
        delays the record by at most ``SINK_DRAIN_TIMEOUT_S``."""
        pending = [
            asyncio.wrap_future(drained())
            for sink in self._sinks
            if (drained := getattr(sink, "drained", None)) is not None
        ]
        if pending:
            await asyncio.wait(pending, timeout=SINK_DRAIN_TIMEOUT_S)


SINK_DRAIN_TIMEOUT_S = 5.0


def _prepare(
    agent: Any, task: str, *, reset: bool, sinks: Iterable[Sink], store: Any, display: bool | None
) -> Run:
    run = Run(agent, task, sinks=sinks, reset=reset)
    store = store if store is not None else settings.store
    if store is not None:
        run.add_sink(store.sink())
    if display is None:
        display = settings.display if settings.display is not None else _in_kernel()
    if display:
        from .display import show_run

        show_run(run)
    return run


def start(
    agent: Any,
    task: str,
    *,
    reset: bool = True,
    sinks: Iterable[Sink] = (),
    store: Any = None,
    display: bool | None = None,
) -> Run:
    """Start ``task`` on ``agent`` in the background and return its ``Run`` at once.

    Args:
        agent: an ``nbagent.Agent`` or a smolagents agent.
        task: what to do.
        reset: False continues the agent's memory (after an interrupt, say).
        sinks: callables that receive every ``RunEvent`` in order, on the runner's thread.
        store: a ``RunStore`` to persist the run to as it happens (default: ``configure(store=)``).
        display: show the live view; by default, when running in a Jupyter kernel.
    """
    run = _prepare(agent, task, reset=reset, sinks=sinks, store=store, display=display)
    run._start(runner_loop())
    return run


def run(
    agent: Any,
    task: str,
    *,
    reset: bool = True,
    sinks: Iterable[Sink] = (),
    store: Any = None,
    display: bool | None = None,
) -> RunRecord:
    """Run ``task`` to its end and return the record, blocking; Jupyter's interrupt stops the run."""
    handle = _prepare(agent, task, reset=reset, sinks=sinks, store=store, display=display)
    try:
        handle._start(runner_loop())
    except KeyboardInterrupt:  # pressed while the run was being launched: it must not run on unseen
        handle.interrupt()
        if not handle._submitted:
            raise  # it may never start, so there is no record to wait for
    return handle.wait()


async def arun(
    agent: Any,
    task: str,
    *,
    reset: bool = True,
    sinks: Iterable[Sink] = (),
    store: Any = None,
    display: bool | None = None,
) -> RunRecord:
    """Run ``task`` without blocking the caller's loop; cancelling this await interrupts the run."""
    return await start(agent, task, reset=reset, sinks=sinks, store=store, display=display)


def interrupt_all(mode: InterruptMode = "now") -> int:
    """Interrupt every live run; returns how many were asked to stop."""
    with _live_lock:
        runs = list(_live_runs)
    return sum(r.interrupt(mode) for r in runs)


def live_runs() -> list[Run]:
    with _live_lock:
        return list(_live_runs)


def _warm_up_pricing() -> None:
    """Import the price library off the loop thread, once: importing it on the loop at the end of
    the first run would hold that run's record (and any Stop) for a few hundred milliseconds."""
    import importlib.util

    if importlib.util.find_spec("genai_prices") is not None:
        threading.Thread(
            target=importlib.import_module, args=("genai_prices",), name="nbagent-warmup", daemon=True
        ).start()


def _cost_of(record: RunRecord) -> float | None:
    """The run's cost when the ``cost`` extra can price its model; a pricing failure never fails a run."""
    from .cost import record_cost

    try:
        return record_cost(record)
    except Exception as exc:
        logger.warning("nbagent: could not price run %s: %s", record.run_id, describe(exc))
        return None


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


__all__ = ["AgentError", "Run", "arun", "interrupt_all", "live_runs", "run", "runner_loop", "start"]
