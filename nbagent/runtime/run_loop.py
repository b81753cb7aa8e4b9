"""The loop's side of a run: launching it, driving its source, fanning its events out, ending it.

``Run`` (``nbagent.runtime.handle``) is the caller's side: it is built on the caller's thread, is
stopped and waited on from any thread. This class is where the two meet: ``launch`` records the
``RunStarted`` on the caller's thread (so ``run.record`` exists at once) and submits ``_main`` to the
runner's loop (``nbagent.runtime.loop``). On the loop, ``_main`` drives the source, turns however
it ended into one ``RunFinished`` (an interrupt accepted before the end always wins: see
``nbagent.runtime.cancel``), waits for sinks that write elsewhere (a store's rows), and completes
the handle's future exactly once.

Events are fanned out on the loop thread, in order: first to the ``Recorder``, then to the limit
watcher, then to each sink. A sink that raises (anything, even ``SystemExit``) is logged once and
skipped for that event; it never ends the run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from nbagent import events as ev
from nbagent.analytics import cost, history
from nbagent.context import RunContext
from nbagent.errors import AgentInterrupted, MaxStepsReached, describe, error_kind
from nbagent.forks import origins
from nbagent.guardrails.approvals import Approvals
from nbagent.guardrails.limits import LimitWatcher
from nbagent.recorder import Recorder
from nbagent.records import RunRecord
from nbagent.runtime import turns
from nbagent.runtime.cancel import CancelScope, current_scope
from nbagent.runtime.loop import LoopThread, runner_loop
from nbagent.runtime.run_setup import cost_of, remember_run_of
from nbagent.runtime.source import Sink, Source

if TYPE_CHECKING:
    from nbagent.forks.origins import ForkStart, Kept

logger = logging.getLogger("nbagent")

_live_runs: set[RunLoopSide] = set()
_live_lock = threading.Lock()


class RunLoopSide:
    """What runs on the runner's loop for one run (the base of ``Run``, which sets these fields
    on the caller's thread before ``launch``)."""

    run_id: str
    source: Source
    task: str
    task_input: Any
    reset: bool
    tags: tuple[str, ...]
    metadata: dict[str, Any]
    options: dict[str, Any]
    model_name: str
    scope: CancelScope
    approvals: Approvals
    parent_run_id: str | None
    continues_run_id: str | None
    fork: ForkStart | None
    shown: bool
    launched: bool
    completion: concurrent.futures.Future[RunRecord]
    sink_errors: list[str]
    _owner: Any
    _memory: Any
    _result: Any
    _parent: CancelScope | None
    _loop: asyncio.AbstractEventLoop | None
    _watcher: LimitWatcher | None
    _recorder: Recorder
    _sinks: list[Sink]
    _failed_sinks: set[int]
    _final: RunRecord | None
    _finish_lock: threading.Lock
    _started: bool
    _kept: Kept | None

    def _keep_cut_usage(self, ctx: RunContext) -> None:
        """A step cut by a limit keeps the tokens it streamed, as an estimate: whether the source
        closed the cut step itself (flagged ``interrupted``) or left it for the runner to close."""
        live = self._recorder.live
        if self._watcher is None or live is None or not live.steps:
            return
        last = live.steps[-1]
        if last.end_s is not None and not last.interrupted:
            return
        step = last.number
        cut = self._watcher.cut_usage(step)
        if cut is not None:
            usage = ev.Usage(self.run_id, step, time.perf_counter(), cut[0], cut[1], "estimated")
            self._recorder.apply(usage)
            self._fan_out(usage)

    def _emit(self, event: ev.RunEvent) -> None:
        self._recorder.apply(event)
        if self._watcher is not None:  # before any sink: a crossed budget stops the run at once
            self._watcher(event)
        self._fan_out(event)

    def _fan_out(self, event: ev.RunEvent) -> None:
        for index, sink in enumerate(self._sinks):
            try:
                sink(event)
            except BaseException as exc:  # even SystemExit from a sink must not end the run
                if index not in self._failed_sinks:
                    self._failed_sinks.add(index)
                    message = f"sink {sink!r} failed on {type(event).__name__}: {describe(exc)}"
                    self.sink_errors.append(message)
                    logger.error("nbagent: %s (reported once; the run goes on)", message, exc_info=exc)

    def launch(self) -> None:
        """Record the start and hand the run to the runner's loop. Once, by ``nbagent.start``."""
        self._started = True
        _warm_up_source(type(self.source))
        # Recorded here, on the caller's thread, so ``run.record`` exists as soon as start() returns.
        started = ev.RunStarted(
            self.run_id,
            0,
            time.perf_counter(),
            self.task,
            self.source.name,
            self.model_name,
            datetime.now(timezone.utc),
            parent_run_id=self.parent_run_id,
            continues_run_id=self.continues_run_id,
            forked_from_run_id=self.fork.origin.record.run_id if self.fork is not None else None,
            forked_at_step=self.fork.at_step if self.fork is not None else None,
            tags=self.tags,
            metadata=self.metadata,
            model_params=self.source.model_params(),
        )
        for sink in self._sinks:
            sink.follow(self._recorder)
        self._recorder.apply(started)
        remember_run_of(self._owner, self.run_id)
        self._kept = origins.keep(self.run_id, self._owner, self.source.framework)
        if self._memory is not self._owner:
            remember_run_of(self._memory, self.run_id)
        with _live_lock:
            _live_runs.add(self)
        try:
            for attempt in (1, 2):
                self._loop = runner_loop()
                main = self._main(started)
                try:
                    asyncio.run_coroutine_threadsafe(main, self._loop)
                    break
                except RuntimeError:  # that loop was retired as we submitted: the next one is fresh
                    main.close()
                    if attempt == 2:
                        raise
        except BaseException:  # never submitted (a Ctrl-C right here, say): it is not live
            with _live_lock:
                _live_runs.discard(self)
            raise
        self.launched = True
        if self._parent is not None:  # adopted only once it runs: a failed start leaves no child behind
            self._parent.adopt(self.scope)

    async def _main(self, started: ev.RunStarted) -> None:
        task = asyncio.current_task()
        assert task is not None
        current_scope.set(self.scope)
        ctx = RunContext(self.run_id, self.scope, self._emit)
        ctx.enter()
        recorder = self._recorder
        ctx.live_record = lambda: recorder.live
        ctx.shown = self.shown
        ctx.approvals = self.approvals
        ctx.kept = self._kept
        if self.fork is not None:  # its steps are numbered from the step it forks at
            ctx.fork, ctx.step = self.fork, self.fork.at_step - 1
        status: ev.RunStatus = "success"
        output: Any = None
        error: str | None = None
        error_type: str | None = None
        try:
            self._fan_out(started)
            self.scope.bind(task)
            if self._watcher is not None:
                self._watcher.start()
            key = self.source.turn_key(self.options, self.reset)  # state kept per key (a LangGraph thread)
            async with turns.turn(
                self._owner,
                ctx,
                takes_turns=self.source.takes_turns,
                continues=self.continues_run_id,
                key=key,
            ) as place:
                ctx.turn = place
                output = await self.source.drive(self.task_input, ctx, self.reset, **self.options)
        except AgentInterrupted:
            # A Stop, or the agent's own code stopping it (a smolagents step callback calling
            # agent.interrupt()): ``stop_reason`` tells them apart.
            status = "interrupted"
        except asyncio.CancelledError as exc:
            if self.scope.stop_after_step:  # a Stop (either mode) was asked for
                status = "interrupted"
            else:  # cancelled by the agent's own code, not by a Stop: an error, not the user's doing
                status, error_type = "error", "CancelledError"
                error = f"{describe(exc)} (the run was cancelled from inside, not by a Stop)"
        except MaxStepsReached as exc:
            status, error, error_type = "max_steps", describe(exc), "MaxStepsReached"
            output = exc.output
        except BaseException as exc:  # even SystemExit from a source must end as a record, not kill the loop
            status, error, error_type = "error", describe(exc), error_kind(exc)
        if self._watcher is not None:
            self._watcher.stop()
        self.approvals.close()
        try:
            self._finish(task, ctx, status, output, error, error_type)
            try:
                await self._sinks_drained()
            except asyncio.CancelledError:
                # An interrupt accepted just before the end delivers its cancel here, late: the
                # record already says "interrupted"; its rows must still be written first.
                if hasattr(task, "uncancel"):
                    task.uncancel()
                await self._sinks_drained()
        finally:
            self._complete()

    def _finish(
        self,
        task: asyncio.Task[Any] | None,
        ctx: RunContext,
        status: ev.RunStatus,
        output: Any,
        error: str | None,
        error_type: str | None,
    ) -> None:
        with self._finish_lock:
            if self._final is not None:
                return  # ended already (its loop died under it)
            if self.scope.close():
                # An interrupt accepted before the end wins, even against a just-finished answer.
                status, error, error_type = "interrupted", None, None
            stop_reason = {"success": None, "max_steps": "max_steps", "error": "error"}.get(status)
            if status == "interrupted":
                output, error, error_type = None, None, None
                stop_reason = self.scope.stop_reason or "agent"
                if self.scope.limit is not None:
                    status, error, error_type = "limit", self.scope.limit_message, "LimitExceeded"
                    self._keep_cut_usage(ctx)
            if task is not None and hasattr(task, "uncancel") and task.cancelling():  # Python >= 3.11
                task.uncancel()  # the cancel was ours and is handled; the record is the result
            self._result = ctx.result if status == "success" else None
            # Priced before the end event, so every recorder of the run (the store's too) has the cost.
            price = cost_of(self.live_record())
            finished = ev.RunFinished(
                self.run_id,
                ctx.step,
                time.perf_counter(),
                status,
                output,
                error,
                error_type,
                price,
                stop_reason=stop_reason,
                messages=ctx.messages,
                fork_data=self._fork_data(ctx),
            )
            self._recorder.apply(finished)
            self._final = self._recorder.snapshot()  # before any sink shows the end: the handle never lags
        self._fan_out(finished)

    def _fork_data(self, ctx: RunContext) -> dict[str, Any] | None:
        """The run's history as JSON for its record (``Source.fork_data``), naming its framework;
        a source that fails to give it loses forks from a store, never the run."""
        if ctx.conversation is None:
            return None
        try:
            data = self.source.fork_data(ctx.conversation, self.options)
        except Exception as exc:
            logger.warning("nbagent: run %s keeps no fork data: %s", self.run_id, describe(exc))
            return None
        return None if data is None else {"framework": self.source.framework, **data}

    def _complete(self) -> None:
        """Hand the final record out: history, the handle, every waiter. Exactly once."""
        with _live_lock:
            _live_runs.discard(self)
        if self.completion.done():
            return
        final = self._final or self._recorder.snapshot()
        assert final is not None
        self._final = final
        history.add(final)
        self.completion.set_result(final)

    def _end_without_loop(self, reason: str) -> None:
        """End the run from another thread because its loop is gone: an ``"error"`` record."""
        ctx = RunContext(self.run_id, self.scope, self._emit)
        live = self._recorder.live
        ctx.step = len(live.steps) if live is not None else 0
        self._finish(None, ctx, "error", None, f"RuntimeError: {reason} during the run", "RuntimeError")
        self._complete()

    async def _sinks_drained(self) -> None:
        """Wait (without blocking the loop) for sinks that write elsewhere, such as a store's
        writer thread, so a returned record is also a stored one. Bounded: a stuck database
        delays the record by at most ``SINK_DRAIN_TIMEOUT_S``."""
        pending = [
            asyncio.wrap_future(drained) for sink in self._sinks if (drained := sink.drained()) is not None
        ]
        if pending:
            await asyncio.wait(pending, timeout=SINK_DRAIN_TIMEOUT_S)


SINK_DRAIN_TIMEOUT_S = 5.0


def live_runs() -> list[RunLoopSide]:
    """The runs that have not ended yet."""
    with _live_lock:
        return list(_live_runs)


def _end_runs_of_dead_loop(loop: Any, reason: str) -> None:
    """End, as ``"error"`` records, the live runs of a loop that died (``LoopThread.on_loop_death``)."""
    for live in live_runs():
        if live._loop is loop:
            live._end_without_loop(reason)


_warmed: set[type] = set()
_warmed_lock = threading.Lock()


def _warm_up_source(kind: type[Source]) -> None:
    """``Source.warm_up`` of ``kind`` on a daemon thread, once per class (a no-op by default)."""
    if kind.warm_up.__func__ is Source.warm_up.__func__:  # type: ignore[attr-defined]
        return
    with _warmed_lock:
        if kind in _warmed:
            return
        _warmed.add(kind)

    def warm() -> None:
        try:
            kind.warm_up()
        except Exception as exc:  # only a later first end pays for it
            logger.debug("nbagent: %s.warm_up failed: %s", kind.__name__, describe(exc))

    threading.Thread(target=warm, name=f"nbagent-warm-{kind.__name__}", daemon=True).start()


def _warm_up_pricing() -> None:
    """Load the price library off the loop thread as the loop starts, so the first run's end can
    be priced without an import on the loop (which would hold its record and every Stop)."""
    cost.warm_up()


LoopThread.on_loop_death = _end_runs_of_dead_loop
LoopThread.on_start = _warm_up_pricing
