"""``RunContext``: what a source (the native agent, the smolagents adapter) gets to report a run.

It numbers steps, stamps every event with the run id and a ``perf_counter`` time, and hands it to
the runner's fan-out. Every method must be called on the runner's loop thread: a source that
works on another thread hands its results to the loop first (the smolagents adapter uses a queue).
"""

from __future__ import annotations

import contextlib
import contextvars
import time
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from nbagent import events as ev
from nbagent.errors import ModelError
from nbagent.guardrails.approvals import Approvals
from nbagent.runtime.cancel import CancelScope
from nbagent.runtime.turns import Turn

if TYPE_CHECKING:
    from nbagent.forks.origins import ForkStart, Kept
from nbagent.text import safe_text

_current_call: contextvars.ContextVar[tuple[RunContext, str] | None] = contextvars.ContextVar(
    "nbagent_current_call", default=None
)


_current_run: contextvars.ContextVar[weakref.ref[RunContext] | None] = contextvars.ContextVar(
    "nbagent_current_run", default=None
)
"""Weakly: a context copied from the run's (a worker thread's, a task's that outlives the run) must
not keep the run, and through it the user's agent, alive."""


def current_call() -> tuple[RunContext, str] | None:
    """The run and call id of the tool call the calling code runs inside (``RunContext.calling``),
    or ``None``: how a tool that can tell its progress (an MCP server's) finds where to report it,
    without the tool's own signature changing."""
    return _current_call.get()


def current_run() -> RunContext | None:
    """The run the calling code is part of (set for the run's task, so every task and worker
    context copied from it sees it), or ``None`` outside any run. Code inside a framework's own
    tool, where nbagent cannot mark the call (``current_call``), finds it with
    ``RunContext.running_call``."""
    found = _current_run.get()
    return None if found is None else found()


def run_only_context() -> contextvars.Context:
    """A fresh context holding only the run and call the caller is in (``current_run``,
    ``current_call``): for work handed to the runner loop on the caller's behalf, which must find
    its run but not carry the rest of the caller's context (a smolagents worker's, say, ties
    whatever runs in it to that run's thread: its Stop shuts down the sockets opened there)."""
    context = contextvars.Context()
    context.run(_current_run.set, _current_run.get())
    context.run(_current_call.set, _current_call.get())
    return context


class RunContext:
    def __init__(
        self,
        run_id: str,
        scope: CancelScope,
        emit: Callable[[ev.RunEvent], None],
    ) -> None:
        self.run_id = run_id
        self.scope = scope
        self.emit = emit
        self.step = 0
        self.shown = False
        """True when a view shows the run (a source may then silence its own console output)."""
        self.messages: list[dict[str, Any]] | None = None
        """Set by the source: the conversation the model saw, kept in the record at the end."""
        self.approvals: Approvals = Approvals()
        """The run's pending approvals: a source asks them before a call that needs one runs."""
        self.turn: Turn = Turn(None)
        """The run's place in its agent's line (``nbagent.runtime.turns``), set before ``drive``."""
        self.result: Any = None
        """What the framework's own call returned (``set_result``): ``Run.result`` once it ended."""
        self.fork: ForkStart | None = None
        """For a fork (``nbagent.fork``): what the run starts from, ``fork.input`` being what the
        source's ``fork_input`` made of the original's history. ``drive`` starts from it instead of
        its task (and of ``reset`` / ``kept_history``). ``None`` for any other run."""
        self.kept: Kept | None = None
        """This process's note of the run for forks of it (``nbagent.forks.origins``)."""
        self.live_record: Callable[[], Any] = lambda: None
        """The run's record as it grows (set by the runner; loop thread only)."""
        self._conversation: Any = None

    def enter(self) -> None:
        """Mark the calling task's context as this run's (``current_run``): by the runner, once,
        in the run's own task before the source starts."""
        _current_run.set(weakref.ref(self))

    def running_call(self, tool: str, arguments: Any = None) -> str | None:
        """The id of the call of ``tool`` this run is running now (of these ``arguments`` when
        several are), or ``None``. Loop thread only. How code inside a framework's own tool, which
        nbagent does not wrap, finds the call it serves: a framework runs the tool, and the adapter
        reports the call from the framework's events, so the call may show a moment after the
        tool began: look again at each report rather than once."""
        record = self.live_record()
        if record is None:
            return None
        running = [c for s in record.steps[-2:] for c in s.tool_calls if c.tool == tool and c.status is None]
        if len(running) > 1 and arguments is not None:
            running = [c for c in running if c.arguments == arguments] or running
        return running[-1].call_id if running else None

    @property
    def conversation(self) -> Any:
        """The run's history in the source's own form (the native agent's messages, pydantic-ai's
        ``ModelMessage`` list, the Agents SDK's input items): set by the source as it has it, the
        live object or a copy. Forks of the run in this process start from it (cut at a step's
        ``fork_point``); at the end ``Source.fork_data`` turns it into the record's JSON."""
        return self._conversation

    @conversation.setter
    def conversation(self, value: Any) -> None:
        self._conversation = value
        if self.kept is not None:
            self.kept.conversation = value

    def fork_point(self, point: Any) -> None:
        """Where this step's model request begins in the source's history (JSON data: how many
        conversation items the model is sent, a checkpoint id): call it as the step's request is
        about to go. A fork at this step starts from there (``StepRecord.fork_point``)."""
        self.emit(ev.ForkPoint(self.run_id, self.step, time.perf_counter(), point))

    @property
    def kept_history(self) -> Any:
        """For a run that continues (``reset=False``): the history the agent's previous run kept
        with ``keep_history`` (``None`` for a fresh run, or before any run kept one)."""
        return self.turn.history

    def keep_history(self, history: Any) -> None:
        """Keep ``history`` for the agent's next continued run (stateless frameworks' sources)."""
        self.turn.keep(history)

    def set_result(self, value: Any) -> None:
        """Keep the value the framework's own call returns (LangGraph's final state, a pydantic-ai
        ``AgentRunResult``...), as it is, for ``Run.result``: code written for the framework can
        go on reading it."""
        self.result = value

    def queued(self, after_run_id: str | None) -> None:
        """The run must wait for ``after_run_id`` (another run of the same agent) to end."""
        self.emit(ev.RunQueued(self.run_id, self.step, time.perf_counter(), after_run_id))

    def dequeued(self) -> None:
        """The wait is over: the run's clock starts now."""
        self.emit(ev.RunDequeued(self.run_id, self.step, time.perf_counter()))

    def start_step(self, kind: ev.StepKind, *, at: float | None = None) -> int:
        """Begin the next step (``at``: when it began, a ``time.perf_counter()``; default now)."""
        self.step += 1
        self.emit(ev.StepStarted(self.run_id, self.step, time.perf_counter() if at is None else at, kind))
        return self.step

    def text(self, text: str) -> None:
        self.emit(ev.TextDelta(self.run_id, self.step, time.perf_counter(), text))

    def tool_arguments(self, text: str) -> None:
        """A piece of a tool call's arguments streamed in (token budgets count it like text)."""
        self.emit(ev.ToolArgumentsDelta(self.run_id, self.step, time.perf_counter(), text))

    def usage(self, input_tokens: int | None, output_tokens: int | None, source: ev.UsageSource) -> None:
        """Report token usage. A count that is not a non-negative integer (or ``None``) is a broken
        model: ``ModelError`` names it, instead of a bad number reaching the frames."""
        for name, value in (("input_tokens", input_tokens), ("output_tokens", output_tokens)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**53
            ):
                raise ModelError(
                    f"the model reported {name}={safe_text(value)}; a token count must be a "
                    "non-negative int, or None when unknown"
                )
        self.emit(ev.Usage(self.run_id, self.step, time.perf_counter(), input_tokens, output_tokens, source))

    def model_starting(self, prompt_tokens: int) -> None:
        """A model request is about to be sent, with a prompt of about ``prompt_tokens``. A limit
        on input tokens may stop the run here: check ``scope.interrupted`` before sending."""
        self.emit(ev.ModelCallStarting(self.run_id, self.step, time.perf_counter(), prompt_tokens))

    def model_ended(self) -> None:
        """The step's model call has its whole reply (``StepRecord.model_ended_at``)."""
        self.emit(ev.ModelCallEnded(self.run_id, self.step, time.perf_counter()))

    def retrying(self, attempt: int, delay_s: float, reason: str) -> None:
        self.emit(ev.Retrying(self.run_id, self.step, time.perf_counter(), attempt, delay_s, reason))

    def tool_started(self, call_id: str, tool: str, arguments: Any) -> None:
        self.emit(ev.ToolCallStarted(self.run_id, self.step, time.perf_counter(), call_id, tool, arguments))

    def tool_finished(
        self, call_id: str, status: ev.ToolCallStatus, result: Any = None, error: str | None = None
    ) -> None:
        self.emit(
            ev.ToolCallFinished(self.run_id, self.step, time.perf_counter(), call_id, status, result, error)
        )

    def tool_progress(
        self, call_id: str, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """The running call ``call_id`` got ``progress`` of ``total`` (``None``: unknown) done, with
        an optional ``message``: its row in the view shows a bar (or the count) and the message,
        and ``ToolCallRecord.progress`` keeps the last one. A report after the call ended is
        ignored, so a source need not know whether it raced the end."""
        self.emit(
            ev.ToolCallProgress(
                self.run_id, self.step, time.perf_counter(), call_id, progress, total, message
            )
        )

    @contextlib.contextmanager
    def calling(self, call_id: str) -> Iterator[None]:
        """Run the tool of ``call_id`` inside this block: code it runs (and tasks it starts) find
        the call with ``current_call()``, to report progress and log lines for it."""
        token = _current_call.set((self, call_id))
        try:
            yield
        finally:
            _current_call.reset(token)

    def tool_log(self, call_id: str, text: str, level: str = "info") -> None:
        """A log line of the running call ``call_id`` (shown under its row, the last few; the record
        keeps the last ``nbagent.records.LOG_LINES_KEPT``). Scrubbed of secrets like any text."""
        self.emit(ev.ToolCallLog(self.run_id, self.step, time.perf_counter(), call_id, text, level))

    def node_started(self, node_id: str, name: str, *, at: float | None = None) -> None:
        """A node that is not a tool (a graph node, a hook, a sub-agent) began (``at``: when, a
        ``time.perf_counter()``; default now)."""
        self.emit(
            ev.NodeStarted(self.run_id, self.step, time.perf_counter() if at is None else at, node_id, name)
        )

    def node_finished(
        self, node_id: str, status: ev.NodeStatus, output: Any = None, error: str | None = None
    ) -> None:
        self.emit(
            ev.NodeFinished(self.run_id, self.step, time.perf_counter(), node_id, status, output, error)
        )

    def finish_step(
        self,
        model_output: str | None = None,
        error: str | None = None,
        interrupted: bool = False,
        kind: ev.StepKind | None = None,
    ) -> None:
        self.emit(
            ev.StepFinished(
                self.run_id,
                self.step,
                time.perf_counter(),
                model_output=model_output,
                kind=kind,
                error=error,
                interrupted=interrupted,
            )
        )
