"""Run records: the complete account of a run, in every end state (``RunRecord``, its
``StepRecord``s and their ``ToolCallRecord``s).

``nbagent.recorder.Recorder`` builds them from a run's events. Unknown token counts stay ``None``;
totals add the known counts only and ``usage_complete`` says whether that is all of them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from nbagent import events as ev
from nbagent.errors import ERROR_TYPES, AgentError
from nbagent.text import shorten

LOG_LINES_KEPT = 50
"""How many of a call's last log lines its record keeps (``ToolCallRecord.logs``); a server that
logs without end must not grow a record, a view or a store row without end."""


@dataclass(frozen=True)
class ToolProgress:
    """A running tool call's last progress report (an MCP server's ``notifications/progress``, or
    any source's ``RunContext.tool_progress``): ``progress`` so far, of ``total`` when known."""

    progress: float
    total: float | None = None
    message: str | None = None

    @property
    def fraction(self) -> float | None:
        """``progress / total`` within 0..1, or ``None`` when the total is unknown."""
        if self.total is None or self.total <= 0:
            return None
        return min(max(self.progress / self.total, 0.0), 1.0)


@dataclass
class ToolCallRecord:
    call_id: str
    tool: str
    arguments: Any
    started_at: datetime
    start_s: float
    """Seconds from the start of the run."""
    status: ev.ToolCallStatus | None = None
    """``None`` while the call is in flight."""
    result: Any = None
    error: str | None = None
    ended_at: datetime | None = None
    end_s: float | None = None
    approval: str | None = None
    """``None`` when the call needed no approval; ``"pending"`` while it waits for a person, then
    ``"approved"``, ``"denied"`` or ``"timed_out"``."""
    approval_wait_s: float | None = None
    """Seconds the call waited for its approval (``start_s`` is when it really started, after)."""
    progress: ToolProgress | None = None
    """The last progress the call reported while it ran (``None``: it reported none)."""
    logs: list[str] = field(default_factory=list)
    """The last ``LOG_LINES_KEPT`` log lines the call's server sent while it ran (``"level: text"``)."""
    logs_dropped: int = 0
    """How many earlier log lines were not kept."""

    @property
    def duration_s(self) -> float | None:
        return None if self.end_s is None else self.end_s - self.start_s


@dataclass
class NodeRecord:
    """A part of the agent that worked in a step and is not a tool (``nbagent.events.NodeStarted``):
    a graph node, a middleware hook, a sub-agent. Kept apart from tool calls, so counts, frames
    and ``max_tool_calls`` are about tools only."""

    node_id: str
    name: str
    started_at: datetime
    start_s: float
    """Seconds from the start of the run."""
    status: ev.NodeStatus | None = None
    """``None`` while the node works."""
    output: Any = None
    error: str | None = None
    ended_at: datetime | None = None
    end_s: float | None = None

    @property
    def duration_s(self) -> float | None:
        return None if self.end_s is None else self.end_s - self.start_s


@dataclass
class StepRecord:
    number: int
    kind: ev.StepKind
    started_at: datetime
    start_s: float
    """Seconds from the start of the run."""
    ended_at: datetime | None = None
    end_s: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    usage_source: ev.UsageSource = "unknown"
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    model_output: str = ""
    error: str | None = None
    interrupted: bool = False
    retries: int = 0
    model_ended_at: datetime | None = None
    """When the step's model call had its whole reply (before its tools ran); ``None`` when the
    call never completed or the source cannot tell."""
    nodes: list[NodeRecord] = field(default_factory=list)
    """The graph nodes, hooks and sub-agents that worked in the step (not tools)."""
    fork_point: Any = None
    """Where the step's model request began in the source's history (``RunContext.fork_point``:
    how many conversation items the model was sent, a LangGraph checkpoint id...), so a fork at
    this step starts from what the model saw then; ``None`` when the source cannot tell."""

    @property
    def duration_s(self) -> float | None:
        return None if self.end_s is None else self.end_s - self.start_s

    @property
    def wait_s(self) -> float:
        """Seconds the step's tool calls spent waiting for a person's approval (part of
        ``duration_s``, not the step's own work)."""
        return sum(c.approval_wait_s or 0.0 for c in self.tool_calls)

    @property
    def total_tokens(self) -> int | None:
        if self.input_tokens is None or self.output_tokens is None:
            return None
        return self.input_tokens + self.output_tokens

    @property
    def usage_known(self) -> bool:
        """True when both counts are known and no part of the step's usage was unknown."""
        return self.total_tokens is not None and self.usage_source != "unknown"


def _sum_known(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


@dataclass
class RunRecord:
    run_id: str
    task: str
    agent: str
    model: str
    started_at: datetime
    status: ev.RunStatus | str = "running"
    """``"running"`` until the end; then success / interrupted / error / max_steps / limit
    (a store may also hold ``"unfinished"``: the process died during the run)."""
    output: Any = None
    error: str | None = None
    error_type: str | None = None
    ended_at: datetime | None = None
    duration_s: float | None = None
    steps: list[StepRecord] = field(default_factory=list)
    cost_usd: float | None = None
    stop_reason: ev.StopReason | str | None = None
    """Why the run ended other than by finishing (``nbagent.events.StopReason``: who stopped it,
    ``"user_after_step"``, ``"max_steps"``, ``"error"``, or the budget that tripped for a
    ``"limit"`` end); ``None`` for a success. ``nbagent.events.stop_text`` gives its words."""
    parent_run_id: str | None = None
    """The run whose tool started this one."""
    continues_run_id: str | None = None
    """The run whose memory this one continues (``reset=False``)."""
    queued_s: float = 0.0
    """Seconds the run waited for an earlier run of the same agent before it really started;
    ``started_at`` and ``duration_s`` count from the real start."""
    queued_after: str | None = None
    """While the run waits in that queue: the run it waits for (``None`` otherwise)."""
    tags: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    model_params: dict[str, Any] = field(default_factory=dict)
    """The model's request settings (temperature, max_tokens...), when the model tells them."""
    messages: list[dict[str, Any]] | None = None
    """The conversation the model saw by the end of the run, when the source can tell."""
    forked_from_run_id: str | None = None
    """The run this one is a fork of (``nbagent.fork``): its steps before ``forked_at_step``
    are that run's, not made again; this record has only its own steps from there on."""
    forked_at_step: int | None = None
    """The step of ``forked_from_run_id`` this fork starts at: its first step has this number."""
    fork_data: dict[str, Any] | None = None
    """What a fork of this run needs, as JSON data the store keeps (``Source.fork_data``): the
    ``framework`` that made it, and the source's own history (``conversation`` in its own form,
    LangGraph's ``thread_id``); ``None`` when the source keeps nothing to fork from."""

    @property
    def wait_s(self) -> float:
        """Seconds the run spent waiting for approvals (not counted against ``max_seconds``)."""
        return sum(s.wait_s for s in self.steps)

    @property
    def input_tokens(self) -> int | None:
        """Sum of the known input tokens of all steps (``None`` when none is known)."""
        return _sum_known([s.input_tokens for s in self.steps])

    @property
    def output_tokens(self) -> int | None:
        return _sum_known([s.output_tokens for s in self.steps])

    @property
    def total_tokens(self) -> int | None:
        return _sum_known([self.input_tokens, self.output_tokens])

    @property
    def usage_complete(self) -> bool:
        """True when every step's usage is known, so the totals are the whole truth."""
        return all(s.usage_known for s in self.steps)

    @property
    def done(self) -> bool:
        return self.status != "running"

    @property
    def tool_calls(self) -> list[ToolCallRecord]:
        return [call for step in self.steps for call in step.tool_calls]

    def raise_for_status(self) -> RunRecord:
        """Return self on success; otherwise raise the typed ``AgentError`` for this end state."""
        if self.status == "success":
            return self
        cls = ERROR_TYPES.get(self.error_type or "", AgentError)
        if self.status == "interrupted":
            cls = ERROR_TYPES["AgentInterrupted"]
        elif self.status == "max_steps":
            cls = ERROR_TYPES["MaxStepsReached"]
        elif self.status == "limit":
            cls = ERROR_TYPES["LimitExceeded"]
        message = self.error or f"run {self.run_id} ended with status {self.status!r}"
        # The error text starts with its type ("ModelError: the server said no"): the raised
        # error's own name says it already.
        message = message.removeprefix(f"{cls.__name__}: ") or message
        raise cls(message, record=self)

    def summary(self) -> str:
        """One line: status, steps, duration and tokens."""
        duration = "?" if self.duration_s is None else f"{self.duration_s:.2f}s"
        tokens = "?" if self.input_tokens is None else f"{self.input_tokens} in / {self.output_tokens} out"
        if not self.usage_complete and self.input_tokens is not None:
            tokens += " (partial)"
        n = len(self.steps)
        line = f"{self.status}: {n} step{'' if n == 1 else 's'}, {duration}, tokens {tokens}"
        if self.error:
            line += f"; {self.error}"
        return line

    def __str__(self) -> str:
        return renderers.text(self) if renderers.text is not None else self.summary()

    def __repr__(self) -> str:
        tokens = "?" if self.total_tokens is None else str(self.total_tokens)
        duration = "?" if self.duration_s is None else f"{self.duration_s:.2f}s"
        return (
            f"<RunRecord {self.run_id} {self.status} {shorten(self.agent, 40)}/{shorten(self.model, 40)} "
            f"steps={len(self.steps)} tokens={tokens} {duration} task={shorten(self.task, 40)!r}>"
        )

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self) if cycle else str(self))

    def _repr_html_(self) -> str | None:
        return renderers.html(self) if renderers.html is not None else None

    def to_html(self, path: str | os.PathLike[str]) -> Path:
        """Write this run as one self-contained HTML file (its own CSS, no script, nothing fetched)
        that opens in any browser without a kernel; returns the path written."""
        if renderers.file is None:
            raise RuntimeError("no HTML writer is loaded: import nbagent (it sets one up)")
        return renderers.file(self, path)


class Renderers:
    """How a record shows itself: as text, as a cell's HTML, as an HTML file. Records know no view:
    the package's top layer (``nbagent.api``) plugs the views in as it loads, so the data layer
    never imports the layers that draw it."""

    text: Callable[[RunRecord], str] | None = None
    html: Callable[[RunRecord], str] | None = None
    file: Callable[[RunRecord, str | os.PathLike[str]], Path] | None = None


renderers = Renderers()
