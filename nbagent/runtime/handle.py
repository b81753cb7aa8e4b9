"""``Run``: the handle on one run, the caller's side of it.

A ``Run`` is built on the caller's thread (``nbagent.start``): it checks the task, the options
and the limits against its source, and holds what its loop side
(``nbagent.runtime.run_loop.RunLoopSide``, its base class) needs to launch and drive it. Control
and waiting are the caller's: ``interrupt``, ``approve`` / ``deny``, ``record`` from any thread;
``wait()`` blocks in slices (Ctrl-C interrupts the run, then raises ``StoppedByKeyboard`` once the
record is complete), ``await run`` waits on the caller's loop (``nbagent.runtime.waiting``).
"""

from __future__ import annotations

import concurrent.futures
import threading
import uuid
import warnings
from collections.abc import Callable, Generator, Iterable
from typing import TYPE_CHECKING, Any

from nbagent import events as ev
from nbagent.guardrails.approvals import ApprovalPolicy, Approvals, PendingApproval
from nbagent.guardrails.limits import Limits, LimitWatcher, check_priced
from nbagent.recorder import Recorder
from nbagent.records import RunRecord
from nbagent.runtime.cancel import CancelScope, InterruptMode, current_scope
from nbagent.runtime.run_loop import SINK_DRAIN_TIMEOUT_S, RunLoopSide, live_runs
from nbagent.runtime.run_setup import check_options, check_tags, last_run_of
from nbagent.runtime.source import Sink, Source, as_sink, native_source
from nbagent.runtime.waiting import wait_async, wait_blocking
from nbagent.text import shorten

if TYPE_CHECKING:
    from nbagent.forks.origins import ForkStart

__all__ = ["SINK_DRAIN_TIMEOUT_S", "Run", "Sink", "live_runs"]


class _Displays:
    run: Callable[[Run], None] | None = None
    """How a ``Run`` displays itself in IPython; set by the top layer."""


displays = _Displays()


class Run(RunLoopSide):
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
        sinks: Iterable[Sink | Callable[[ev.RunEvent], Any]] = (),
        reset: bool = True,
        tags: Iterable[str] = (),
        metadata: dict[str, Any] | None = None,
        options: dict[str, Any] | None = None,
        limits: Limits | None = None,
        approve: ApprovalPolicy = None,
        approval_timeout_s: float | None = None,
        fork: ForkStart | None = None,
    ) -> None:
        self.agent = agent
        self.source = source if source is not None else native_source(agent)
        """What drives the run: the agent itself when native, else its framework's adapter
        (``nbagent.start`` picks it; the runtime knows no framework)."""
        self.task_input = task
        """The task as given, for the source (a str unless the source's ``task_text`` takes more)."""
        self.task = self.source.task_text(task)
        """The task as text, for the record and the views."""
        self.reset = reset
        self.tags = tuple(check_tags(tags))
        self.metadata = dict(metadata or {})
        self.options = dict(options or {})
        """Extra keyword arguments for the source (smolagents' ``additional_args``, ``images``...)."""
        check_options(self.source, self.options)
        self.source.check_run(self.options, reset)
        if limits is not None and not isinstance(limits, Limits):
            raise TypeError(f"limits must be nbagent.Limits(...), not {type(limits).__name__}")
        self.limits = limits if limits else None
        # The model this run will use (a run option may choose another than the agent's own).
        self.model_name = self.source.model_name_for(self.options)
        rates = check_priced(self.limits, self.model_name)  # refuses an unpriced cost limit now
        if approve not in (None, False) and not self.source.supports_approvals:
            raise TypeError(self.source.approvals_refusal())
        self.approvals = Approvals(approve, approval_timeout_s)
        """The run's pending approvals (``pending_approvals``, ``approve``, ``deny``)."""
        self.run_id = uuid.uuid4().hex[:16]
        self.scope = CancelScope(self.run_id)
        self._watcher = LimitWatcher(self.limits, self.scope, rates, task) if self.limits else None
        self._parent = current_scope.get()
        """The scope of the run whose tool starts this one: adopted by it when this run starts."""
        self.parent_run_id = self._parent.run_id if self._parent is not None else None
        self._loop = None
        self._owner = self.source.agent
        """Whose runs this one takes turns with and continues: the user's agent, also when a
        source object wrapping it was passed."""
        self._memory = self.source.memory_of(self.options)
        """Whose memory ``reset=False`` continues: the agent, or the part of it the options name
        (a LangGraph thread: a run on thread A continues A's latest run, not B's)."""
        self.continues_run_id = None if reset else last_run_of(self._memory)
        self.fork = fork
        """What a fork starts from (``nbagent.fork``): ``drive`` finds it as ``ctx.fork``."""
        self.shown = False
        """True when a view (widgets or text) shows this run."""
        self.keyboard_pressed = False
        """Set by the SIGINT handler of an ``await`` of this run (``nbagent.runtime.interrupts``)."""
        self._recorder = Recorder()
        self._sinks: list[Sink] = [as_sink(sink) for sink in sinks]
        self._failed_sinks: set[int] = set()
        self.sink_errors: list[str] = []
        """One line per sink that raised (each sink is reported once)."""
        self.completion: concurrent.futures.Future[RunRecord] = concurrent.futures.Future()
        self.completion.set_running_or_notify_cancel()  # nobody may cancel it: only the runner completes it
        self._final: RunRecord | None = None
        self._result: Any = None
        self._finish_lock = threading.Lock()
        self._started = False
        self.launched = False
        """True once the run was handed to the loop (it will end with a record)."""

    # -- control ---------------------------------------------------------------------------

    @property
    def sinks(self) -> tuple[Sink, ...]:
        """The run's event consumers (views, a store's writer, exporters), in fan-out order."""
        return tuple(self._sinks)

    def add_sink(self, sink: Sink | Callable[[ev.RunEvent], Any]) -> None:
        """Add an event consumer. Only before the run starts, so a sink sees every event."""
        if self._started:
            raise RuntimeError("add sinks before the run starts (pass sinks= to start())")
        self._sinks.append(as_sink(sink))

    def interrupt(self, mode: InterruptMode = "now", *, reason: ev.Stopper = "user") -> bool:
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

    @property
    def result(self) -> Any:
        """What the framework's own call returned, as it returned it (LangGraph's final state as
        ``ainvoke`` gives it; the native ``Agent``'s answer), once the run succeeded; ``None``
        before, after any other end (a Stop, an error), or where the source keeps none."""
        return self._result

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
        """Deprecated: ``pending.resume(value)`` on the item of ``run.pending_approvals`` (a
        LangGraph interrupt's answer is a verb of that request, not of every run)."""
        warnings.warn(
            "run.resume(value) goes in the next release: answer the interrupt with "
            "run.pending_approvals[i].resume(value)",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.approvals.resume(value, call_id)

    def edit(self, call_id: str | None, arguments: Any) -> bool:
        """Deprecated: ``pending.edit(arguments)`` on the item of ``run.pending_approvals``."""
        warnings.warn(
            "run.edit(call_id, arguments) goes in the next release: use "
            "run.pending_approvals[i].edit(arguments)",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.approvals.edit(call_id, arguments)

    def limits_used(self) -> dict[str, tuple[float, float]]:
        """Each set limit as ``(used so far, limit)`` (estimates included while a reply streams)."""
        if self._watcher is None or self.limits is None:
            return {}
        used = self._watcher.used()
        return {name: (used.get(name, 0.0), limit) for name, limit in self.limits.set().items()}
