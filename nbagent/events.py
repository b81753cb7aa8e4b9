"""The run event stream: what happened during a run, and nothing else.

Sources (the native ``Agent``, the smolagents adapter) emit these; the runner fans them out, in
order, to the recorder and to sinks (live view, text view, store). Every event is a frozen,
slotted dataclass carrying the run id, the step number (0 before the first step) and ``t``, a
``time.perf_counter()`` reading. Wall-clock time appears once, in ``RunStarted.started_at``; the
recorder derives every other UTC time from it, so clock jumps never reorder a run.

Every text an event carries is scrubbed of credentials here, as the event is made (``_scrub``,
``nbagent.secrets``): errors, the task, tool arguments and results, the answer, the conversation.
Every source (the native agent, the framework adapters, the runner) reports through these events,
so the recorder, the store, the views and OpenTelemetry only ever see scrubbed text. Streamed
pieces (``TextDelta``, ``ToolArgumentsDelta``) are the exception: a key may be split across two of
them, and they are the per-token path; the recorder scrubs a step's text whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, get_args

from nbagent.secrets import scrub, scrub_value

StepKind = Literal["planning", "action", "final"]
RunStatus = Literal["success", "interrupted", "error", "max_steps", "limit"]
UsageSource = Literal["reported", "estimated", "unknown"]
ToolCallStatus = Literal["ok", "error", "cancelled", "abandoned", "denied", "deferred"]
"""``"deferred"``: not run; the run handed it back to its caller (pydantic-ai's ``DeferredToolRequests``)."""
Approval = Literal["approved", "denied", "timed_out"]

Stopper = Literal["user", "keyboard", "parent", "shutdown", "agent", "timed_out"]
"""Who stops a run, the ``reason`` of ``interrupt``: the user (Stop, ``run.interrupt()``), Ctrl-C or
Jupyter's ■ Interrupt, the run that started it, the kernel shutting down, the agent's own code (a
smolagents step callback calling ``agent.interrupt()``), an approval nobody answered in time."""
LimitName = Literal[
    "max_tokens", "max_input_tokens", "max_output_tokens", "max_cost_usd", "max_seconds",
    "max_wait_seconds", "max_tool_calls", "max_steps",
]  # fmt: skip
"""A field of ``nbagent.Limits``: the ``stop_reason`` of a run that ended ``"limit"``."""
StopReason = Literal[
    "user", "user_after_step", "keyboard", "keyboard_after_step", "parent", "shutdown", "agent",
    "agent_after_step", "timed_out", "error",
    "max_tokens", "max_input_tokens", "max_output_tokens", "max_cost_usd", "max_seconds",
    "max_wait_seconds", "max_tool_calls", "max_steps",
]  # fmt: skip
"""Why a run ended other than by finishing (a record's ``stop_reason``; ``None`` for a success): a
``Stopper`` for a Stop ``"now"``, ``"<stopper>_after_step"`` for a "Stop after step", ``"error"``,
``"max_steps"`` (steps used up, or that ``Limits`` field), or for a ``"limit"`` end the
``LimitName`` that tripped. A framework's own budget that tripped keeps its own name
(pydantic-ai's ``"total_tokens_limit"``): a ``stop_reason`` may be any ``str``."""

STOP_REASONS: dict[StopReason, str] = {
    "user": "stopped by the user",
    "user_after_step": "stopped after a step",
    "keyboard": "stopped by Ctrl-C",
    "keyboard_after_step": "stopped by Ctrl-C after a step",
    "parent": "stopped with its parent run",
    "shutdown": "stopped as its kernel or process shut down",
    "agent": "stopped by the agent's own code",
    "agent_after_step": "stopped by the agent's own code after a step",
    "timed_out": "stopped: an approval was not answered in time",
    "error": "ended by an error",
    **{limit: f"budget {limit} reached" for limit in get_args(LimitName)},
}
"""The words for each ``StopReason``: every view and exporter shows a stop reason through
``stop_text``, never in words of its own."""

_AFTER_STEP: dict[str, StopReason] = {
    "user": "user_after_step",
    "keyboard": "keyboard_after_step",
    "agent": "agent_after_step",
}


def after_step(reason: Stopper | LimitName) -> StopReason:
    """The ``stop_reason`` of a "Stop after step" asked for with ``reason`` (a budget, a run's
    parent or a shutdown is its own reason in either mode)."""
    return _AFTER_STEP.get(reason, reason)  # type: ignore[return-value]


def stop_text(reason: str) -> str:
    """The words for a record's ``stop_reason`` (a framework's own budget as its name)."""
    return STOP_REASONS.get(reason, f"budget {reason} reached")  # type: ignore[call-overload]


def why_stopped(status: str, stop_reason: str | None) -> str | None:
    """Why a run stopped by a person or a budget stopped (``None`` for any other end): the words
    the text view, the HTML views and the exporters show."""
    if status in ("interrupted", "limit") and stop_reason:
        return stop_text(stop_reason)
    return None


def _scrub(event: Any, texts: tuple[str, ...] = (), values: tuple[str, ...] = ()) -> None:
    """Replace fields of a frozen event with their scrubbed copies: ``texts`` are text fields (a
    value that is not a string becomes its text; ``None`` stays), ``values`` any value (the
    strings in it are scrubbed; the event keeps the very object when nothing was hidden)."""
    for name in texts:
        text = getattr(event, name)
        if text is not None:
            object.__setattr__(event, name, scrub(text if isinstance(text, str) else str(text)))
    for name in values:
        object.__setattr__(event, name, scrub_value(getattr(event, name)))


@dataclass(frozen=True, slots=True)
class RunEvent:
    run_id: str
    step: int
    t: float


@dataclass(frozen=True, slots=True)
class RunStarted(RunEvent):
    task: str
    agent: str
    model: str
    started_at: datetime
    parent_run_id: str | None = None
    """The run whose tool started this one (stopping the parent stops it)."""
    continues_run_id: str | None = None
    """The run of the same agent whose memory this one continues (``reset=False``)."""
    forked_from_run_id: str | None = None
    """The run this one forks (``nbagent.fork``), at step ``forked_at_step``."""
    forked_at_step: int | None = None
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    model_params: dict[str, Any] = field(default_factory=dict)
    """The model's request settings (temperature, max_tokens...), when the model tells them."""

    def __post_init__(self) -> None:
        _scrub(self, ("task",), ("tags", "metadata", "model_params"))


@dataclass(frozen=True, slots=True)
class RunQueued(RunEvent):
    """The run waits for another run of the same agent to end (runs of one agent take turns)."""

    after_run_id: str | None


@dataclass(frozen=True, slots=True)
class RunDequeued(RunEvent):
    """The wait is over and the run really starts: its clock starts here."""


@dataclass(frozen=True, slots=True)
class StepStarted(RunEvent):
    kind: StepKind


@dataclass(frozen=True, slots=True)
class TextDelta(RunEvent):
    """A piece of model output text, as it streams in."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallStarted(RunEvent):
    call_id: str
    tool: str
    arguments: Any

    def __post_init__(self) -> None:
        _scrub(self, values=("arguments",))


@dataclass(frozen=True, slots=True)
class ToolCallFinished(RunEvent):
    call_id: str
    status: ToolCallStatus
    result: Any = None
    error: str | None = None

    def __post_init__(self) -> None:
        _scrub(self, ("error",), ("result",))


@dataclass(frozen=True, slots=True)
class ToolCallProgress(RunEvent):
    """The running call ``call_id`` reported progress: ``progress`` so far, of ``total`` when known
    (an MCP server's ``notifications/progress``). Only the last one is kept."""

    call_id: str
    progress: float
    total: float | None = None
    message: str | None = None

    def __post_init__(self) -> None:
        _scrub(self, ("message",))


@dataclass(frozen=True, slots=True)
class ToolCallLog(RunEvent):
    """A log line the running call ``call_id`` produced (an MCP server's ``notifications/message``
    during the call); ``level`` as the server named it (``"info"``, ``"warning"``...)."""

    call_id: str
    text: str
    level: str = "info"

    def __post_init__(self) -> None:
        _scrub(self, ("text", "level"))


@dataclass(frozen=True, slots=True)
class ModelCallStarting(RunEvent):
    """A model request is about to be sent; ``prompt_tokens`` estimates its input (a limit on
    input tokens is checked against it before anything is sent)."""

    prompt_tokens: int


@dataclass(frozen=True, slots=True)
class ModelCallEnded(RunEvent):
    """The step's model call has its whole reply (the stream ended); tools may follow."""


@dataclass(frozen=True, slots=True)
class ApprovalRequested(RunEvent):
    """The tool call just started (``ToolCallStarted``) waits for a person to approve or deny it;
    it does not run until decided. A denied call then finishes ``"denied"``."""

    call_id: str
    tool: str
    arguments: Any

    def __post_init__(self) -> None:
        _scrub(self, values=("arguments",))


@dataclass(frozen=True, slots=True)
class ApprovalDecided(RunEvent):
    """The pending call was decided; ``wait_s`` is how long it waited for the decision."""

    call_id: str
    decision: Approval
    reason: str | None = None
    wait_s: float = 0.0
    arguments: Any = None
    """The arguments the call runs with when the person edited them (``None``: the model's)."""

    def __post_init__(self) -> None:
        _scrub(self, ("reason",))


@dataclass(frozen=True, slots=True)
class Usage(RunEvent):
    """Token usage of the step's model call(s); ``None`` means unknown, never zero."""

    input_tokens: int | None
    output_tokens: int | None
    source: UsageSource


@dataclass(frozen=True, slots=True)
class Retrying(RunEvent):
    """The model call failed in a way worth retrying; the next attempt starts in ``delay_s``."""

    attempt: int
    delay_s: float
    reason: str

    def __post_init__(self) -> None:
        _scrub(self, ("reason",))


@dataclass(frozen=True, slots=True)
class StepFinished(RunEvent):
    """The step ended; ``model_output`` is the step's whole model text when the source knows it.

    ``kind`` corrects the kind given at the start: a native action step whose reply has no tool
    call turns out to be the ``"final"`` answer.
    """

    model_output: str | None = None
    kind: StepKind | None = None
    error: str | None = None
    interrupted: bool = False

    def __post_init__(self) -> None:
        _scrub(self, ("model_output", "error"))


@dataclass(frozen=True, slots=True)
class RunFinished(RunEvent):
    """The run ended. ``cost_usd`` is its price when the ``cost`` extra knows the model."""

    status: RunStatus
    output: Any = None
    error: str | None = None
    error_type: str | None = None
    cost_usd: float | None = None
    stop_reason: StopReason | str | None = None
    """Why the run ended other than by finishing (``StopReason``); ``None`` for a success."""
    messages: list[dict[str, Any]] | None = None
    """The conversation the model saw, as chat messages, when the source can tell."""
    fork_data: dict[str, Any] | None = None
    """What a fork of the run needs, as JSON data (``RunRecord.fork_data``)."""

    def __post_init__(self) -> None:
        _scrub(self, ("error",), ("output", "messages", "fork_data"))


@dataclass(frozen=True, slots=True)
class ForkPoint(RunEvent):
    """Where the step's model request begins in the source's history (``StepRecord.fork_point``):
    a fork at this step starts from there."""

    point: Any


@dataclass(frozen=True, slots=True)
class ToolArgumentsDelta(RunEvent):
    """A piece of a tool call's arguments (JSON text) as the model streams it. Token budgets count
    it like model text, so a reply that is all arguments is cut as soon as it crosses one; the
    complete call is reported by ``ToolCallStarted`` once the reply has ended."""

    text: str


NodeStatus = Literal["ok", "error", "cancelled"]


@dataclass(frozen=True, slots=True)
class NodeStarted(RunEvent):
    """A part of the agent that is not a tool began working in the step: a graph node, a
    middleware hook, a sub-agent, a question to a person. A line in the view, never a tool call
    (``StepRecord.nodes``: not in ``tool_calls``, not counted by ``max_tool_calls``)."""

    node_id: str
    name: str
    """Who is working, as the framework names it (a path such as ``researcher › summarize``)."""


@dataclass(frozen=True, slots=True)
class NodeFinished(RunEvent):
    """The node ``node_id`` ended: ``output`` is what it produced, ``error`` why it failed."""

    node_id: str
    status: NodeStatus
    output: Any = None
    error: str | None = None

    def __post_init__(self) -> None:
        _scrub(self, ("error",), ("output",))
