"""``Run``: the handle on one run, and everything that runs on the runner's loop for it.

A ``Run`` is built on the caller's thread (``nbagent.start``), records its ``RunStarted`` there so
``run.record`` exists at once, and submits ``_main`` to the runner's loop (``nbagent.runtime.loop``). On the
loop, ``_main`` drives the source, turns however it ended into one ``RunFinished`` (an interrupt
accepted before the end always wins: see ``nbagent.runtime.cancel``), waits for sinks that write
elsewhere (a store's rows), and completes the handle's future exactly once. Waiting on it is the
caller's side: ``wait()`` blocks in slices (Ctrl-C interrupts the run, then raises
``StoppedByKeyboard`` once the record is complete), ``await run`` waits on the caller's loop.

Events are fanned out on the loop thread, in order: first to the ``Recorder``, then to each sink.
A sink that raises (anything, even ``SystemExit``) is logged once and skipped for that event; it
never ends the run.
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
from typing import Any

from nbagent import events as ev
from nbagent.analytics import cost, history
from nbagent.context import RunContext
from nbagent.errors import AgentInterrupted, MaxStepsReached, describe, error_kind
from nbagent.guardrails.approvals import ApprovalPolicy, Approvals, PendingApproval
from nbagent.guardrails.limits import Limits, LimitWatcher, check_priced
from nbagent.recorder import Recorder
from nbagent.records import RunRecord
from nbagent.runtime import turns
from nbagent.runtime.cancel import CancelScope, InterruptMode, current_scope
from nbagent.runtime.loop import LoopThread, runner_loop
from nbagent.runtime.run_setup import (
    check_options,
    check_tags,
    cost_of,
    last_run_of,
    model_params,
    remember_run_of,
)
from nbagent.runtime.source import Sink, Source, native_source
from nbagent.runtime.waiting import wait_async, wait_blocking
from nbagent.text import shorten

logger = logging.getLogger("nbagent")

_live_runs: set[Run] = set()
_live_lock = threading.Lock()


class _Displays:
    run: Callable[[Run], None] | None = None
    """How a ``Run`` displays itself in IPython; set by the top layer."""


displays = _Displays()


class Run:
    """A handle on one run: stop it, watch it, wait for its record.

    ``interrupt``, ``done``, ``status`` and ``record`` may be used from any thread at any time.
    Awaiting the handle (``record = await run``) waits without blocking the kernel; cancelling that
    await interrupts the run.
    """

    def __init__(
        self,
        agent: Any,
        task: str,
        *,
        source: Source | None = None,
        sinks: Iterable[Sink] = (),
        reset: bool = True,
        tags: Iterable[str] = (),
        metadata: dict[str, Any] | None = None,
        options: dict[str, Any] | None = None,
        limits: Limits | None = None,
        approve: ApprovalPolicy = None,
        approval_timeout_s: float | None = None,
    ) -> None:
        self.agent = agent
        self.source = source if source is not None else native_source(agent)
        """What drives the run: the agent itself when native, else its framework's adapter
        (``nbagent.start`` picks it; the runtime knows no framework)."""
        task_text = getattr(self.source, "task_text", None)
        if task_text is None and not isinstance(task, str):
            raise TypeError(f"task must be a str, not {type(task).__name__}")
        self.task_input = task
        """The task as given, for the source (a str unless the source's ``task_text`` takes more)."""
        self.task = task if task_text is None else task_text(task)
        """The task as text, for the record and the views."""
        self.reset = reset
        self.tags = tuple(check_tags(tags))
        self.metadata = dict(metadata or {})
        self.options = dict(options or {})
        """Extra keyword arguments for the source (smolagents' ``additional_args``, ``images``...)."""
        check_options(self.source, self.options)
        if limits is not None and not isinstance(limits, Limits):
            raise TypeError(f"limits must be nbagent.Limits(...), not {type(limits).__name__}")
        self.limits = limits if limits else None
        # The model this run will use (a run option may choose another than the agent's own).
        model_name_for = getattr(self.source, "model_name_for", None)
        self.model_name = model_name_for(self.options) if model_name_for else self.source.model_name
        rates = check_priced(self.limits, self.model_name)  # refuses an unpriced cost limit now
        if approve not in (None, False) and not getattr(self.source, "supports_approvals", False):
            raise TypeError(
                f"approve= is not supported for {type(agent).__name__} agents: nbagent can hold the "
                "tool calls of nbagent.Agent and smolagents agents only (pydantic-ai has "
                "requires_approval, the OpenAI Agents SDK needs_approval)"
            )
        self.approvals = Approvals(approve, approval_timeout_s)
        """The run's pending approvals (``pending_approvals``, ``approve``, ``deny``)."""
        self.run_id = uuid.uuid4().hex[:16]
        self.scope = CancelScope(self.run_id)
        self._watcher = LimitWatcher(self.limits, self.scope, rates, task) if self.limits else None
        self._parent = current_scope.get()
        """The scope of the run whose tool starts this one: adopted by it when this run starts."""
        self.parent_run_id = self._parent.run_id if self._parent is not None else None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._owner = getattr(self.source, "agent", agent)
        """Whose runs this one takes turns with and continues: the user's agent, also when a
        source object wrapping it was passed."""
        self.continues_run_id = None if reset else last_run_of(self._owner)
        self.shown = False
        """True when a view (widgets or text) shows this run."""
        self.keyboard_pressed = False
        """Set by the SIGINT handler of an ``await`` of this run (``nbagent.runtime.interrupts``)."""
        self._recorder = Recorder()
        self._sinks: list[Sink] = list(sinks)
        self._failed_sinks: set[int] = set()
        self.sink_errors: list[str] = []
        """One line per sink that raised (each sink is reported once)."""
        self.completion: concurrent.futures.Future[RunRecord] = concurrent.futures.Future()
        self.completion.set_running_or_notify_cancel()  # nobody may cancel it: only the runner completes it
        self._final: RunRecord | None = None
        self._finish_lock = threading.Lock()
        self._started = False
        self.launched = False
        """True once the run was handed to the loop (it will end with a record)."""

    # -- control ---------------------------------------------------------------------------

    @property
    def sinks(self) -> tuple[Sink, ...]:
        """The run's event consumers (views, a store's writer, exporters), in fan-out order."""
        return tuple(self._sinks)

    def add_sink(self, sink: Sink) -> None:
        """Add an event consumer. Only before the run starts, so a sink sees every event."""
        if self._started:
            raise RuntimeError("add sinks before the run starts (pass sinks= to start())")
        self._sinks.append(sink)

    def interrupt(self, mode: InterruptMode = "now", *, reason: str = "user") -> bool:
        """Stop the run: ``"now"`` cancels the in-flight model call and tool; ``"after_step"`` lets
        the current step finish. True if the run was still live. Idempotent; any thread.
        ``reason`` becomes the record's ``stop_reason``."""
        return self.scope.interrupt(mode, reason=reason)

    def done(self) -> bool:
        return self.completion.done()

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

        In Jupyter, prefer ``record = await run``: while a cell blocks here the kernel cannot take
        a Stop click, so the view's Stop button says so and is disabled until the wait ends; use
        Jupyter's ■ Interrupt instead. Ctrl-C or ■ Interrupt interrupts the run; once its record
        is complete (and stored), ``StoppedByKeyboard`` (a ``KeyboardInterrupt``) is raised so the
        cell, a loop of runs and "Run All" stop too. A second Ctrl-C while the run is still
        stopping raises ``KeyboardInterrupt`` at once. Raises ``TimeoutError`` if ``timeout``
        passes first (the run goes on).
        """
        __tracebackhide__ = True  # a traceback through here shows the caller's line (IPython, pytest)
        return wait_blocking(self, timeout)

    async def _await(self) -> RunRecord:
        __tracebackhide__ = True
        return await wait_async(self)

    def __await__(self) -> Generator[Any, None, RunRecord]:
        return self._await().__await__()

    def __getattr__(self, name: str) -> Any:
        if name in RunRecord.__dataclass_fields__ or name in vars(RunRecord):
            raise AttributeError(
                f"a Run has no {name!r}: its result is a RunRecord. Use `record = await run` "
                f"(or run.wait()) and then record.{name}; run.record is a snapshot while it runs"
            )
        raise AttributeError(f"'Run' object has no attribute {name!r}")

    def __repr__(self) -> str:
        return f"<nbagent.Run {self.run_id} {self.status} task={shorten(self.task, 40)!r}>"

    def _ipython_display_(self) -> None:
        """A run as a cell's last line shows its view (``nbagent.view.display.display_run``,
        plugged in by ``nbagent.api``: the runtime knows no view)."""
        if displays.run is None:
            print(repr(self))
        else:
            displays.run(self)

    # -- approvals and budgets (nbagent.guardrails) ------------------------------------------

    @property
    def pending_approvals(self) -> list[PendingApproval]:
        """The tool calls waiting for a decision now (``call_id``, ``tool``, ``arguments``). Any thread."""
        return self.approvals.pending

    def approve(self, call_id: str) -> bool:
        """Let the pending call ``call_id`` run; True if it was pending and undecided. Any thread.
        A ValueError for a LangGraph interrupt that asks for an answer, or whose review does not
        allow approving."""
        return self.approvals.approve(call_id)

    def deny(self, call_id: str, reason: str | None = None) -> bool:
        """Refuse the pending call ``call_id``: it does not run, and the model sees "the user
        denied this call: <reason>"; True if it was pending and undecided. Any thread."""
        return self.approvals.deny(call_id, reason)

    def resume(self, value: Any, call_id: str | None = None) -> bool:
        """Answer the pending LangGraph ``interrupt()`` ``call_id`` (the only one pending when
        ``None``) with ``value``: the graph goes on with it, in this run. Any thread."""
        return self.approvals.resume(value, call_id)

    def edit(self, call_id: str | None, arguments: Any) -> bool:
        """Approve the pending call ``call_id`` that a LangGraph interrupt reviews, with
        ``arguments`` in place of the model's (an ``edit`` decision). Any thread."""
        return self.approvals.edit(call_id, arguments)

    def limits_used(self) -> dict[str, tuple[float, float]]:
        """Each set limit as ``(used so far, limit)`` (estimates included while a reply streams)."""
        if self._watcher is None or self.limits is None:
            return {}
        used = self._watcher.used()
        return {name: (used.get(name, 0.0), limit) for name, limit in self.limits.set().items()}

    def _keep_cut_usage(self, ctx: RunContext) -> None:
        """A step cut by a limit keeps the tokens it streamed, as an estimate."""
        live = self._recorder.live
        if self._watcher is None or live is None or not live.steps or live.steps[-1].end_s is not None:
            return
        step = live.steps[-1].number
        cut = self._watcher.cut_usage(step)
        if cut is not None:
            usage = ev.Usage(self.run_id, step, time.perf_counter(), cut[0], cut[1], "estimated")
            self._recorder.apply(usage)
            self._fan_out(usage)

    # -- the loop side ---------------------------------------------------------------------

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
        # Recorded here, on the caller's thread, so ``run.record`` exists as soon as start() returns.
        started = ev.RunStarted(
            self.run_id,
            0,
            time.perf_counter(),
            self.task,
            getattr(self.source, "name", type(self.agent).__name__),
            self.model_name,
            datetime.now(timezone.utc),
            parent_run_id=self.parent_run_id,
            continues_run_id=self.continues_run_id,
            tags=self.tags,
            metadata=self.metadata,
            model_params=model_params(self.source),
        )
        self._recorder.apply(started)
        remember_run_of(self._owner, self.run_id)
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
        ctx.shown = self.shown
        ctx.approvals = self.approvals
        status: ev.RunStatus = "success"
        output: Any = None
        error: str | None = None
        error_type: str | None = None
        try:
            self._fan_out(started)
            self.scope.bind(task)
            if self._watcher is not None:
                self._watcher.start()
            takes_turns = getattr(self.source, "takes_turns", True)
            turn_key = getattr(self.source, "turn_key", None)  # state kept per key (a LangGraph thread)
            key = turn_key(self.options, self.reset) if turn_key is not None else None
            async with turns.turn(
                self._owner, ctx, takes_turns=takes_turns, continues=self.continues_run_id, key=key
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
            )
            self._recorder.apply(finished)
            self._final = self._recorder.snapshot()  # before any sink shows the end: the handle never lags
        self._fan_out(finished)

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
            asyncio.wrap_future(drained())
            for sink in self._sinks
            if (drained := getattr(sink, "drained", None)) is not None
        ]
        if pending:
            await asyncio.wait(pending, timeout=SINK_DRAIN_TIMEOUT_S)


SINK_DRAIN_TIMEOUT_S = 5.0


def live_runs() -> list[Run]:
    """The runs that have not ended yet."""
    with _live_lock:
        return list(_live_runs)


def _end_runs_of_dead_loop(loop: Any, reason: str) -> None:
    """End, as ``"error"`` records, the live runs of a loop that died (``LoopThread.on_loop_death``)."""
    for live in live_runs():
        if live._loop is loop:
            live._end_without_loop(reason)


def _warm_up_pricing() -> None:
    """Load the price library off the loop thread as the loop starts, so the first run's end can
    be priced without an import on the loop (which would hold its record and every Stop)."""
    cost.warm_up()


LoopThread.on_loop_death = _end_runs_of_dead_loop
LoopThread.on_start = _warm_up_pricing
