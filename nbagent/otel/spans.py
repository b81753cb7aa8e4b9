"""What a run becomes in OpenTelemetry: span names, times, attributes and status, from records.

One trace per run: an ``invoke_agent {agent}`` span for the run, and under it a ``chat {model}``
span per step (the step's model call) and an ``execute_tool {tool}`` span per tool call. Each
carries the GenAI semantic-convention attributes (``gen_ai.*``) and the OpenInference ones
(``openinference.span.kind``, ``llm.*``, ``tool.name``), so Phoenix, Langfuse and Jaeger each
find what they look for.

Times are the record's own UTC times. A chat span ends when the step's model call ended
(``StepRecord.model_ended_at``, recorded live and kept by the store); a step that lacks it (an
older store, a source that cannot tell) ends its chat span at the start of its first tool call,
else at the step's end, and says which in ``nbagent.model_end`` (``recorded``,
``first_tool_call``, ``step_end``). A run or step that did not finish normally has status ERROR
and an ``error.type``: an interrupted one ``AgentInterrupted`` with ``nbagent.interrupted=true``
and its span ends at the cut; a run whose process died (``unfinished``) ends at the last time
the record knows. Unknown token counts leave their attributes out: a missing count is never 0.
Message content (the task, model text, tool arguments and results, the answer, error messages)
goes on spans only when asked (``content=True``), scrubbed of credentials: traces often travel
further than notebooks.
Without it a failed span's status description is its ``error.type`` alone (an error message
often quotes the very arguments or results content=False keeps off); with it, the message is
scrubbed of credentials and cut to ``ERROR_LIMIT`` characters.

A tool call that waited for a person's approval gets an ``await_approval {tool}`` span for the
wait (with ``nbagent.approval``, the decision, and ``nbagent.approval.wait_s``) beside its
``execute_tool`` span, which covers the tool's own time only (``approval_window``, ``tool_start``),
live and after the fact alike. A denied call never ran: its tool span starts at the decision.

This module builds plain data (``SpanData``), so the export path and the live sink share it and
it is testable without an exporter; ``emit`` turns it into SDK spans.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from nbagent import events as ev
from nbagent.errors import scrub_secrets
from nbagent.records import RunRecord, StepRecord, ToolCallRecord
from nbagent.text import safe_text, shorten

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
CONTENT_LIMIT = 32_000
"""Characters of one content attribute (a 10 MB tool result must not become a 10 MB span)."""

ERROR_LIMIT = 1_000
"""Characters of an error message on a span (``content=True``); without content, none at all."""

FAILED_TYPES = {
    "interrupted": "AgentInterrupted",
    "max_steps": "MaxStepsReached",
    "error": "AgentError",
    "limit": "LimitExceeded",
    "unfinished": "Unfinished",
}


def ns(at: datetime) -> int:
    """A UTC datetime as nanoseconds since the epoch (exact to the microsecond)."""
    at = at.replace(tzinfo=timezone.utc) if at.tzinfo is None else at
    delta = at - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def content_text(value: Any) -> str:
    """A value as attribute text: strings as they are, anything else as JSON (else its repr),
    scrubbed of credentials (scrubbed a little past the cut, so a key across it is still found)."""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, default=safe_text)
        except Exception:
            text = safe_text(value)
    return safe_text(scrub_secrets(text[: CONTENT_LIMIT + 1_000])[:CONTENT_LIMIT])


@dataclass
class SpanData:
    """One span to emit: name, times (ns), attributes, status (``None`` = unset) and children."""

    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    error: str | None = None
    """The status description of a failed span (its status is ERROR); ``None``: not failed."""
    children: list[SpanData] = field(default_factory=list)

    def walk(self) -> list[SpanData]:
        return [self, *(s for child in self.children for s in child.walk())]


def status_text(attributes: dict[str, Any], message: str, content: bool) -> str:
    """A failed span's status description: its ``error.type`` without content, else the message,
    scrubbed and then bounded (a key cut in half would no longer be recognised)."""
    if not content:
        return str(attributes["error.type"])
    window = message[: 4 * ERROR_LIMIT]  # scrubbing a megabyte is slow; nothing past here is shown
    return shorten(scrub_secrets(window), ERROR_LIMIT)


def approval_window(call: ToolCallRecord) -> tuple[datetime, datetime] | None:
    """When the call waited for a person (``None``: it never waited). An approved call's own time
    starts at the decision (``started_at``), so its wait ends there; a denied, timed-out or
    undecided one (the run ended first) waited from its start."""
    wait = call.approval_wait_s
    if wait is None or call.approval == "pending":
        return None
    if call.approval == "approved":
        return call.started_at - timedelta(seconds=wait), call.started_at
    return call.started_at, call.started_at + timedelta(seconds=wait)


def tool_start(call: ToolCallRecord) -> datetime:
    """When the tool's own time began: its start, or after a wait that did not approve it, the
    decision (it never ran)."""
    window = approval_window(call)
    if window is None or call.approval == "approved":
        return call.started_at
    return window[1] if call.ended_at is None else min(window[1], call.ended_at)


def approval_attributes(record: RunRecord, step: StepRecord, call: ToolCallRecord) -> dict[str, Any]:
    return {
        "gen_ai.tool.name": call.tool,
        "gen_ai.tool.call.id": call.call_id,
        "nbagent.run_id": record.run_id,
        "nbagent.step": step.number,
        "nbagent.approval": call.approval or "undecided",
        "nbagent.approval.wait_s": call.approval_wait_s or 0.0,
    }


def _usage(
    attributes: dict[str, Any], input_tokens: int | None, output_tokens: int | None, llm: bool
) -> None:
    if input_tokens is not None:
        attributes["gen_ai.usage.input_tokens"] = input_tokens
        if llm:
            attributes["llm.token_count.prompt"] = input_tokens
    if output_tokens is not None:
        attributes["gen_ai.usage.output_tokens"] = output_tokens
        if llm:
            attributes["llm.token_count.completion"] = output_tokens
    if llm and input_tokens is not None and output_tokens is not None:
        attributes["llm.token_count.total"] = input_tokens + output_tokens


def last_known(record: RunRecord) -> datetime:
    """The latest time the record knows: its end, else its last step's or call's time."""
    if record.ended_at is not None:
        return record.ended_at
    times = [record.started_at]
    for step in record.steps:
        times.extend(t for t in (step.started_at, step.ended_at, step.model_ended_at) if t is not None)
        for call in step.tool_calls:
            times.extend(t for t in (call.started_at, call.ended_at) if t is not None)
    return max(times)


def model_end(step: StepRecord, run_end: datetime) -> tuple[datetime, str]:
    """When the step's model call ended, and how that is known."""
    recorded = getattr(step, "model_ended_at", None)
    if recorded is not None:
        return recorded, "recorded"
    if step.tool_calls:
        return step.tool_calls[0].started_at, "first_tool_call"
    return (step.ended_at or run_end), "step_end"


def run_attributes(record: RunRecord, content: bool) -> tuple[dict[str, Any], str | None]:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": record.agent,
        "gen_ai.request.model": record.model,
        "openinference.span.kind": "AGENT",
        "nbagent.run_id": record.run_id,
        "nbagent.status": str(record.status),
        "nbagent.steps": len(record.steps),
        "nbagent.usage_complete": record.usage_complete,
    }
    _usage(attributes, record.input_tokens, record.output_tokens, llm=False)
    for key, value in (
        ("nbagent.stop_reason", record.stop_reason),
        ("nbagent.parent_run_id", record.parent_run_id),
        ("nbagent.cost_usd", record.cost_usd),
        ("nbagent.queued_s", record.queued_s or None),  # a live span also covers the wait
    ):
        if value is not None:
            attributes[key] = value
    if record.tags:
        attributes["nbagent.tags"] = list(record.tags)
    if content:
        attributes["input.value"] = content_text(record.task)
        if record.output is not None:
            attributes["output.value"] = content_text(record.output)
    error = None
    if record.status != "success":
        attributes["error.type"] = record.error_type or FAILED_TYPES.get(
            str(record.status), str(record.status)
        )
        message = record.error or str(record.status)
        if record.status == "interrupted":
            attributes["nbagent.interrupted"] = True
            message = f"interrupted ({ev.stop_text(record.stop_reason) if record.stop_reason else 'stop'})"
        error = status_text(attributes, message, content)
    return attributes, error


def chat_attributes(
    record: RunRecord, step: StepRecord, how: str, content: bool
) -> tuple[dict[str, Any], str | None]:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": record.model,
        "llm.model_name": record.model,
        "openinference.span.kind": "LLM",
        "nbagent.run_id": record.run_id,
        "nbagent.step": step.number,
        "nbagent.step.kind": step.kind,
        "nbagent.usage_source": step.usage_source,
        "nbagent.model_end": how,
    }
    _usage(attributes, step.input_tokens, step.output_tokens, llm=True)
    if step.retries:
        attributes["nbagent.retries"] = step.retries
    if content and step.model_output:
        attributes["output.value"] = content_text(step.model_output)
    error = None
    model_cut = step.interrupted and how != "recorded" and not step.tool_calls
    if model_cut or (step.ended_at is None and record.status == "unfinished"):
        attributes["nbagent.interrupted"] = True
        attributes["error.type"] = "AgentInterrupted" if step.interrupted else "Unfinished"
        message = "interrupted" if step.interrupted else "the process ended during this step"
        error = status_text(attributes, message, content)
    elif step.error and not step.tool_calls:
        attributes["error.type"] = record.error_type or "AgentError"
        error = status_text(attributes, step.error, content)
    return attributes, error


def tool_attributes(
    record: RunRecord, step: StepRecord, call: ToolCallRecord, content: bool
) -> tuple[dict[str, Any], str | None]:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.tool,
        "gen_ai.tool.call.id": call.call_id,
        "tool.name": call.tool,
        "openinference.span.kind": "TOOL",
        "nbagent.run_id": record.run_id,
        "nbagent.step": step.number,
        "nbagent.tool.status": call.status or "running",
    }
    if call.approval is not None and call.approval != "pending":
        attributes["nbagent.approval"] = call.approval
    if call.approval_wait_s is not None:
        attributes["nbagent.approval.wait_s"] = call.approval_wait_s
    if content:
        attributes["input.value"] = content_text(call.arguments)
        if call.result is not None:
            attributes["output.value"] = content_text(call.result)
    message = None
    if call.status == "error":
        attributes["error.type"] = "ToolError"
        message = call.error or "error"
    elif call.status in ("cancelled", "abandoned", None):
        attributes["nbagent.interrupted"] = True
        attributes["error.type"] = "AgentInterrupted" if call.status else "Unfinished"
        message = call.status or "the process ended during this call"
    elif call.status == "denied":
        attributes["error.type"] = "ToolDenied"
        message = call.error or "denied"
    return attributes, None if message is None else status_text(attributes, message, content)


def run_spans(record: RunRecord, *, content: bool = False) -> SpanData:
    """The span tree of one run."""
    end = last_known(record)
    attributes, error = run_attributes(record, content)
    root = SpanData(f"invoke_agent {record.agent}", ns(record.started_at), ns(end), attributes, error)
    for step in record.steps:
        chat_end, how = model_end(step, end)
        attrs, err = chat_attributes(record, step, how, content)
        root.children.append(SpanData(f"chat {record.model}", ns(step.started_at), ns(chat_end), attrs, err))
        for call in step.tool_calls:
            waited = approval_window(call)
            if waited is not None:
                attrs = approval_attributes(record, step, call)
                root.children.append(
                    SpanData(f"await_approval {call.tool}", ns(waited[0]), ns(waited[1]), attrs)
                )
            attrs, err = tool_attributes(record, step, call, content)
            call_end = call.ended_at or step.ended_at or end
            root.children.append(
                SpanData(f"execute_tool {call.tool}", ns(tool_start(call)), ns(call_end), attrs, err)
            )
    return root


def emit(tracer: Any, data: SpanData, parent: Any = None) -> None:
    """Turn ``data`` (and its children) into ended SDK spans, with ``parent`` as their parent."""
    from opentelemetry import trace
    from opentelemetry.context import Context
    from opentelemetry.trace import Status, StatusCode

    # A run's trace starts at its own root, never under whatever span the caller has open.
    context = trace.set_span_in_context(parent) if parent is not None else Context()
    span = tracer.start_span(data.name, context=context, attributes=data.attributes, start_time=data.start_ns)
    if data.error is not None:
        span.set_status(Status(StatusCode.ERROR, data.error))
    for child in data.children:
        emit(tracer, child, span)
    span.end(end_time=max(data.end_ns, data.start_ns))
