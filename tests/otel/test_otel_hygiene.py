"""OpenTelemetry keeps content off spans unless asked and times tools by the tool's own time:
with ``content=False`` a failed span's status is its error type alone (no arguments, results or
error text, however big); with ``content=True`` the message is scrubbed and bounded. A call that
waited for approval gets an ``await_approval`` span for the wait, and its ``execute_tool`` span
covers only the tool, live (``OTelSink``) exactly as after the fact (``export``)."""

from __future__ import annotations

import threading

import pytest
from opentelemetry.trace import StatusCode
from support import add, fast_model, wait_until

import nbagent
from nbagent import otel
from nbagent.models import ToolCall
from nbagent.otel.spans import ERROR_LIMIT, ns

pytestmark = pytest.mark.needs("otel")

KEY = "sk-proj-LEAKED0123456789abcdefXYZ"
WAIT_S = 0.3
"""How long a person takes to decide (the tool itself takes about a millisecond)."""


def run_spans_of(exporter, record):
    return [s for s in exporter.get_finished_spans() if s.attributes.get("nbagent.run_id") == record.run_id]


def shape(found):
    return sorted(
        (s.name, s.start_time, s.end_time, dict(s.attributes), s.status.status_code, s.status.description)
        for s in found
    )


def everything_said(found) -> str:
    """Every attribute value and status description of the spans, as one text."""
    return "\n".join(
        [str(v) for s in found for v in s.attributes.values()] + [str(s.status.description) for s in found]
    )


def bad_argument_run(**options):
    """A model that calls ``add`` with 1 MB of invalid JSON arguments holding a key."""
    arguments = '{"a": 1, "b": "' + KEY + " " + "x" * 1_000_000
    turns = [[ToolCall("add", arguments, id="bad")], "gave up"]
    return nbagent.run(nbagent.Agent(fast_model(turns), tools=[add]), "add", display=False, **options)


def test_without_content_a_failed_tool_span_says_only_its_error_type(spans):
    sink = otel.OTelSink(spans.provider)
    record = bad_argument_run(sinks=[sink])
    (call,) = record.tool_calls
    assert call.status == "error" and len(call.error) > 1_000_000  # the record keeps what happened
    live = run_spans_of(spans, record)
    spans.clear()
    otel.export(record, spans.provider)
    after = run_spans_of(spans, record)
    for found in (live, after):
        (tool,) = [s for s in found if s.name == "execute_tool add"]
        assert tool.status.status_code == StatusCode.ERROR
        assert tool.status.description == tool.attributes["error.type"] == "ToolError"
        said = everything_said(found)
        assert KEY not in said and "xxxx" not in said and "arguments are not valid JSON" not in said
    assert shape(live) == shape(after)


def test_with_content_a_failed_tool_span_has_a_scrubbed_bounded_message(spans):
    record = bad_argument_run()
    otel.export(record, spans.provider, content=True)
    (tool,) = [s for s in run_spans_of(spans, record) if s.name == "execute_tool add"]
    description = tool.status.description
    assert "arguments are not valid JSON" in description and len(description) <= ERROR_LIMIT
    assert KEY not in everything_said(run_spans_of(spans, record))


def test_without_content_a_failed_run_and_step_say_only_their_error_type(spans):
    def refuse(messages):
        raise RuntimeError(f"the server said no to {{'prompt': {messages[-1]['content']!r}}}")

    sink = otel.OTelSink(spans.provider)
    record = nbagent.run(nbagent.Agent(fast_model(refuse)), "my secret plan", display=False, sinks=[sink])
    assert record.status == "error" and "my secret plan" in record.error
    found = run_spans_of(spans, record)
    failed = [s for s in found if s.status.status_code == StatusCode.ERROR]
    assert len(failed) == 2  # the run and its step
    assert all(s.status.description == s.attributes["error.type"] for s in failed)
    assert "my secret plan" not in everything_said(found)


def approval_run(decide, sinks):
    """A run whose ``add`` call waits for a person, who decides (``decide(run, call_id)``) after
    ``WAIT_S`` on another thread."""
    turns = [[ToolCall("add", {"a": 1, "b": 2}, id="c1")], "done"]
    agent = nbagent.Agent(fast_model(turns), tools=[add])
    run = nbagent.start(agent, "add", display=False, approve=["add"], sinks=sinks)
    wait_until(lambda: run.pending_approvals)
    timer = threading.Timer(WAIT_S, decide, (run, "c1"))
    timer.start()
    record = run.wait(timeout=30)
    timer.join()
    return record


def test_the_live_tool_span_is_the_tools_time_and_the_wait_is_its_own_span(spans):
    sink = otel.OTelSink(spans.provider)
    record = approval_run(lambda run, call_id: run.approve(call_id), [sink])
    (call,) = record.tool_calls
    assert call.status == "ok" and call.approval == "approved" and call.approval_wait_s >= WAIT_S
    live = run_spans_of(spans, record)
    (tool,) = [s for s in live if s.name == "execute_tool add"]
    (wait,) = [s for s in live if s.name == "await_approval add"]
    assert (tool.start_time, tool.end_time) == (ns(call.started_at), ns(call.ended_at))
    assert (tool.end_time - tool.start_time) / 1e9 < WAIT_S  # the tool's time, not the person's
    assert wait.end_time == tool.start_time
    assert (wait.end_time - wait.start_time) / 1e9 == pytest.approx(call.approval_wait_s, abs=1e-5)
    assert wait.attributes["nbagent.approval"] == tool.attributes["nbagent.approval"] == "approved"
    assert tool.attributes["nbagent.approval.wait_s"] == call.approval_wait_s
    spans.clear()
    otel.export(record, spans.provider)
    assert shape(live) == shape(run_spans_of(spans, record))


def test_a_denied_call_has_its_wait_span_and_a_tool_span_at_the_decision(spans):
    sink = otel.OTelSink(spans.provider)
    record = approval_run(lambda run, call_id: run.deny(call_id, "not now"), [sink])
    (call,) = record.tool_calls
    assert call.status == "denied" and call.approval == "denied"
    live = run_spans_of(spans, record)
    (tool,) = [s for s in live if s.name == "execute_tool add"]
    (wait,) = [s for s in live if s.name == "await_approval add"]
    assert wait.start_time == ns(call.started_at) and wait.end_time <= tool.start_time
    assert (tool.end_time - tool.start_time) / 1e9 < WAIT_S  # it never ran
    assert tool.status.description == "ToolDenied" and wait.attributes["nbagent.approval"] == "denied"
    spans.clear()
    otel.export(record, spans.provider)
    assert shape(live) == shape(run_spans_of(spans, record))


def test_a_run_stopped_while_a_call_waits_has_an_undecided_wait_span(spans):
    sink = otel.OTelSink(spans.provider)
    record = approval_run(lambda run, call_id: run.interrupt(), [sink])
    (call,) = record.tool_calls
    assert record.status == "interrupted" and call.status == "cancelled"
    live = run_spans_of(spans, record)
    (wait,) = [s for s in live if s.name == "await_approval add"]
    assert wait.attributes["nbagent.approval"] == "undecided"
    spans.clear()
    otel.export(record, spans.provider)
    assert shape(live) == shape(run_spans_of(spans, record))
