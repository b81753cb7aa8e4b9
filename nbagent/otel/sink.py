"""``OTelSink``: a run's spans as the run goes, for ``start(agent, task, sinks=[OTelSink()])``.

The sink folds the events with its own ``Recorder`` (the one place that decides what a run looked
like) and opens each span when its part begins, so a live tracing UI shows the run while it
works: the run's span at its start, a step's ``chat`` span when the step starts, a tool's span
when the call starts. A span is ended (and exported) when its part is over, with the same
attributes and status as ``export`` gives a stored record (``nbagent.otel.spans``). The chat
span's end is the model call's end: the ``ModelCallEnded`` event when the source sends one, else
the first tool call's start, else the step's end (``nbagent.model_end`` tells which). Usage
arrives during the step, so the chat span gets its attributes when the step ends, with its end
time set back to the model call's end. Whatever is open when the run ends is ended there, marked
interrupted.

A tool span covers the tool's own time, never a wait for a person's approval: a started call's
span is opened at the first event that is not another call's start or an approval request, and
a call that asks for approval gets its span after the decision (at the time ``tool_start`` gives,
as an export does), with the wait as its own ``await_approval`` span, made when decided.

It runs on the runner's loop thread like every sink; it never raises into the run (a failing
exporter is logged once per run).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from nbagent import events as ev
from nbagent.otel.spans import (
    approval_attributes,
    approval_window,
    chat_attributes,
    model_end,
    ns,
    run_attributes,
    tool_attributes,
    tool_start,
)
from nbagent.recorder import Recorder
from nbagent.runtime.source import Sink

logger = logging.getLogger("nbagent")


@dataclass
class _LiveRun:
    recorder: Recorder = field(default_factory=Recorder)
    root: Any = None
    chats: dict[int, Any] = field(default_factory=dict)
    tools: dict[str, Any] = field(default_factory=dict)
    unopened: dict[str, Any] = field(default_factory=dict)
    """Started calls whose tool span waits to see whether they ask for approval first."""
    awaiting: dict[str, Any] = field(default_factory=dict)
    """Calls waiting for a person's decision (no tool span yet)."""
    failed: bool = False


class OTelSink(Sink):
    """Emits each run it sees as OpenTelemetry spans, live.

    Args:
        tracer_provider: the provider to use (default: the global one; ``ValueError`` at once if
            none is configured, so a run never starts with an export that goes nowhere).
        content: put message content (task, model text, tool arguments and results, answer) on
            the spans; off by default.

    One sink may serve several runs (it keys them by run id).
    """

    def __init__(self, tracer_provider: Any = None, *, content: bool = False) -> None:
        from nbagent.otel.traces import tracer_for

        self.content = content
        self._provider, self._tracer = tracer_for(tracer_provider)
        self._runs: dict[str, _LiveRun] = {}

    def __call__(self, event: ev.RunEvent) -> None:
        live = self._runs.get(event.run_id)
        if live is None:
            if not isinstance(event, ev.RunStarted):
                return
            live = self._runs[event.run_id] = _LiveRun()
        live.recorder.apply(event)
        if live.failed:
            return
        try:
            self._handle(live, event)
        except Exception:
            live.failed = True
            logger.exception(
                "nbagent: OpenTelemetry export of run %s failed; its spans stop here", event.run_id
            )
        if isinstance(event, ev.RunFinished):
            self._runs.pop(event.run_id, None)

    def _start(self, name: str, at: Any, parent: Any) -> Any:
        from opentelemetry import trace
        from opentelemetry.context import Context

        context = trace.set_span_in_context(parent) if parent is not None else Context()
        return self._tracer.start_span(name, context=context, start_time=ns(at))

    @staticmethod
    def _finish(span: Any, attributes: dict[str, Any], error: str | None, end_ns: int) -> None:
        from opentelemetry.trace import Status, StatusCode

        span.set_attributes(attributes)
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, error))
        span.end(end_time=end_ns)

    def _handle(self, live: _LiveRun, event: ev.RunEvent) -> None:
        record = live.recorder.live
        assert record is not None
        kind = type(event)
        if live.unopened and kind is not ev.ToolCallStarted and kind is not ev.ApprovalRequested:
            for step, call in live.unopened.values():
                self._open_tool(live, step, call)
            live.unopened.clear()
        if kind is ev.RunStarted:
            live.root = self._start(f"invoke_agent {record.agent}", record.started_at, None)
            live.root.set_attributes(
                {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": record.agent}
            )
        elif kind is ev.StepStarted:
            step = record.steps[-1]
            live.chats[step.number] = self._start(f"chat {record.model}", step.started_at, live.root)
        elif kind is ev.ToolCallStarted:
            step = record.steps[-1]
            call = step.tool_calls[-1]
            live.unopened[call.call_id] = (step, call)
        elif kind is ev.ApprovalRequested:
            found = live.unopened.pop(event.call_id, None)  # type: ignore[attr-defined]
            if found is not None:
                live.awaiting[event.call_id] = found  # type: ignore[attr-defined]
        elif kind is ev.ApprovalDecided:
            found = live.awaiting.pop(event.call_id, None)  # type: ignore[attr-defined]
            if found is not None:
                self._approval_span(live, *found)
                live.unopened[event.call_id] = found  # type: ignore[attr-defined]
        elif kind is ev.ToolCallFinished:
            self._end_tool(live, event.call_id)  # type: ignore[attr-defined]
        elif kind is ev.StepFinished:
            self._end_chat(live, event.step)
        elif kind is ev.RunFinished:
            for step, call in live.awaiting.values():  # the run ended while they waited
                self._approval_span(live, step, call)
                self._open_tool(live, step, call)
            live.awaiting.clear()
            for call_id in list(live.tools):
                self._end_tool(live, call_id)
            for number in list(live.chats):
                self._end_chat(live, number)
            attributes, error = run_attributes(record, self.content)
            assert record.ended_at is not None
            self._finish(live.root, attributes, error, ns(record.ended_at))

    def _open_tool(self, live: _LiveRun, step: Any, call: Any) -> None:
        span = self._start(f"execute_tool {call.tool}", tool_start(call), live.root)
        live.tools[call.call_id] = (step, call, span)

    def _approval_span(self, live: _LiveRun, step: Any, call: Any) -> None:
        """The wait for a decision, as one ended span (made when the wait is over)."""
        waited = approval_window(call)
        if waited is None:
            return
        span = self._start(f"await_approval {call.tool}", waited[0], live.root)
        span.set_attributes(approval_attributes(live.recorder.live, step, call))  # type: ignore[arg-type]
        span.end(end_time=max(ns(waited[1]), ns(waited[0])))

    def _end_tool(self, live: _LiveRun, call_id: str) -> None:
        found = live.tools.pop(call_id, None)
        if found is None:
            return
        step, call, span = found
        record = live.recorder.live
        attributes, error = tool_attributes(record, step, call, self.content)  # type: ignore[arg-type]
        end = call.ended_at or step.ended_at or record.ended_at  # type: ignore[union-attr]
        self._finish(span, attributes, error, max(ns(end), ns(tool_start(call))))

    def _end_chat(self, live: _LiveRun, number: int) -> None:
        span = live.chats.pop(number, None)
        record = live.recorder.live
        if span is None or record is None:
            return
        step = next(s for s in record.steps if s.number == number)
        end, how = model_end(step, step.ended_at or record.ended_at or step.started_at)
        attributes, error = chat_attributes(record, step, how, self.content)
        self._finish(span, attributes, error, max(ns(end), ns(step.started_at)))
