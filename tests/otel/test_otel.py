"""OpenTelemetry spans of runs, checked with the SDK's in-memory exporter: the span tree, the GenAI
and OpenInference attributes, real times, and how an interrupted, failed or smolagents run looks.
"""

from __future__ import annotations

import dataclasses

import end_states
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import StatusCode
from smolagents import ToolCallingAgent
from smolagents_fakes import ScriptedSmolModel, SlowTool, answer, call

import nbagent
from nbagent import otel
from nbagent.analytics.store import RunStore
from nbagent.otel.spans import ns

pytestmark = pytest.mark.needs("otel", "smolagents")


def _tree(exporter, record):
    """The spans of ``record``'s run: its root, then its children in start order."""
    found = [s for s in exporter.get_finished_spans() if s.attributes.get("nbagent.run_id") == record.run_id]
    [root] = [s for s in found if s.parent is None]
    children = sorted((s for s in found if s.parent is not None), key=lambda s: (s.start_time, s.name))
    assert {s.parent.span_id for s in children} <= {root.context.span_id}
    assert {s.context.trace_id for s in found} == {root.context.trace_id}  # one trace per run
    return root, children


def test_a_finished_run_is_an_agent_span_with_chat_and_tool_spans(spans):
    record = end_states.success()
    made = otel.export(record, spans.provider)
    root, children = _tree(spans, record)
    assert made == 1 + len(children) == 4
    assert root.name == "invoke_agent adder"
    assert [s.name for s in children] == ["chat scripted", "execute_tool add", "chat scripted"]
    assert root.status.status_code == StatusCode.UNSET
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.agent.name"] == "adder"
    assert root.attributes["gen_ai.request.model"] == "scripted"
    assert root.attributes["openinference.span.kind"] == "AGENT"
    assert root.attributes["gen_ai.usage.input_tokens"] == record.input_tokens
    assert (root.start_time, root.end_time) == (ns(record.started_at), ns(record.ended_at))

    chat, tool, final = children
    step = record.steps[0]
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["openinference.span.kind"] == "LLM"
    assert chat.attributes["llm.model_name"] == "scripted"
    assert (
        chat.attributes["gen_ai.usage.input_tokens"]
        == chat.attributes["llm.token_count.prompt"]
        == step.input_tokens
    )
    assert chat.attributes["gen_ai.usage.output_tokens"] == chat.attributes["llm.token_count.completion"]
    assert chat.attributes["nbagent.model_end"] == "recorded"
    assert (chat.start_time, chat.end_time) == (ns(step.started_at), ns(step.model_ended_at))
    assert chat.end_time <= tool.start_time  # the model call ended before its tool ran
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == tool.attributes["tool.name"] == "add"
    assert tool.attributes["gen_ai.tool.call.id"] == step.tool_calls[0].call_id
    assert tool.attributes["openinference.span.kind"] == "TOOL"
    assert (tool.start_time, tool.end_time) == (
        ns(step.tool_calls[0].started_at),
        ns(step.tool_calls[0].ended_at),
    )
    assert final.attributes["nbagent.step.kind"] == "final"
    # Content is opt-in.
    assert not any("input.value" in s.attributes or "output.value" in s.attributes for s in (root, *children))


def test_content_goes_on_spans_only_when_asked(spans):
    record = end_states.success()
    otel.export(record, spans.provider, content=True)
    root, (_, tool, final) = _tree(spans, record)
    assert root.attributes["input.value"] == "add 2 and 3"
    assert root.attributes["output.value"] == "The sum is 5."
    assert tool.attributes["input.value"] == '{"a": 2, "b": 3}' and tool.attributes["output.value"] == "5"
    assert final.attributes["output.value"] == "The sum is 5."


def test_an_interrupted_run_marks_the_cut_step_and_leaves_unknown_usage_out(spans):
    record = end_states.interrupted_mid_stream()
    otel.export(record, spans.provider)
    root, [chat] = _tree(spans, record)
    assert root.status.status_code == StatusCode.ERROR and root.status.description == "AgentInterrupted"
    assert root.attributes["nbagent.interrupted"] is True
    assert root.attributes["error.type"] == "AgentInterrupted"
    assert root.attributes["nbagent.stop_reason"] == "user"
    assert chat.status.status_code == StatusCode.ERROR
    assert chat.attributes["nbagent.interrupted"] is True
    assert chat.end_time == ns(record.steps[0].ended_at)  # the span ends at the cut
    for name in ("gen_ai.usage.input_tokens", "llm.token_count.prompt", "llm.token_count.total"):
        assert name not in chat.attributes  # unknown, never 0
        assert name not in root.attributes or name.startswith("llm")


def test_a_tool_cut_by_a_stop_is_marked_and_ends_at_the_cut(spans):
    record = end_states.interrupted_mid_tool()
    otel.export(record, spans.provider)
    _, children = _tree(spans, record)
    cancelled = [s for s in children if s.name == "execute_tool wait_forever"]
    assert len(cancelled) == 1
    [span] = cancelled
    assert (
        span.attributes["nbagent.interrupted"] is True
        and span.attributes["nbagent.tool.status"] == "cancelled"
    )
    assert span.status.status_code == StatusCode.ERROR
    assert span.end_time == ns(record.steps[-1].tool_calls[0].ended_at)
    # The model call of the cut step had ended: its chat span is whole, with its usage.
    chat = next(s for s in children if s.name.startswith("chat") and s.attributes["nbagent.step"] == 2)
    assert chat.status.status_code == StatusCode.UNSET and "gen_ai.usage.input_tokens" in chat.attributes


def test_an_error_run_has_error_status_and_type(spans):
    record = end_states.error()
    otel.export([record], spans.provider)
    root, children = _tree(spans, record)
    assert root.status.status_code == StatusCode.ERROR
    assert root.attributes["error.type"] == record.error_type == "ModelError"
    failed = children[-1]
    assert failed.name == "chat scripted" and failed.status.status_code == StatusCode.ERROR
    assert failed.attributes["error.type"] == "ModelError"


def smolagents_run(**options):
    model = ScriptedSmolModel([call("lookup", query="moon"), answer("It is far.")])
    agent = ToolCallingAgent(tools=[SlowTool()], model=model)
    return nbagent.run(agent, "How far is the moon?", display=False, **options)


def test_a_smolagents_run_exports_the_same_shape(spans):
    record = smolagents_run()
    assert record.status == "success"
    otel.export(record, spans.provider)
    root, children = _tree(spans, record)
    assert root.name == f"invoke_agent {record.agent}"
    assert root.attributes["gen_ai.request.model"] == "scripted-smol"
    tools = [s for s in children if s.name.startswith("execute_tool")]
    assert [s.attributes["gen_ai.tool.name"] for s in tools] == [c.tool for c in record.tool_calls]
    assert "execute_tool lookup" in [s.name for s in tools]
    chats = [s for s in children if s.name == "chat scripted-smol"]
    assert len(chats) == len(record.steps)
    assert all(s.attributes["gen_ai.usage.input_tokens"] == 100 for s in chats)


@pytest.mark.parametrize(
    "make", [end_states.success, end_states.interrupted_mid_tool, end_states.error, smolagents_run]
)
def test_the_live_sink_makes_the_spans_an_export_makes(spans, make):
    sink = otel.OTelSink(spans.provider)
    record = make(sinks=[sink])
    live = _tree(spans, record)
    spans.clear()
    otel.export(record, spans.provider)
    after = _tree(spans, record)

    def shape(tree):
        root, children = tree
        return [
            (s.name, s.start_time, s.end_time, dict(s.attributes), s.status.status_code, s.status.description)
            for s in (root, *children)
        ]

    assert shape(live) == shape(after)


def test_spans_of_a_stored_run_have_the_times_of_the_live_run(spans, tmp_path):
    store = RunStore(tmp_path / "runs.db")
    record = end_states.success(store=store)
    otel.export(RunStore(tmp_path / "runs.db", readonly=True), spans.provider)
    from_store = _tree(spans, record)
    spans.clear()
    otel.export(record, spans.provider)
    live = _tree(spans, record)
    assert [(s.name, s.start_time, s.end_time) for s in (from_store[0], *from_store[1])] == [
        (s.name, s.start_time, s.end_time) for s in (live[0], *live[1])
    ]
    assert from_store[1][0].attributes["nbagent.model_end"] == "recorded"


def test_a_step_without_its_model_end_uses_what_the_record_has_and_says_so(spans):
    record = end_states.success()
    for step in record.steps:
        step.model_ended_at = None  # as a source that cannot tell, or an older store
    otel.export(record, spans.provider)
    _, (chat, tool, final) = _tree(spans, record)
    assert chat.attributes["nbagent.model_end"] == "first_tool_call" and chat.end_time == tool.start_time
    assert final.attributes["nbagent.model_end"] == "step_end"
    assert final.end_time == ns(record.steps[1].ended_at)


def test_export_without_a_tracer_provider_says_so():
    record = end_states.success()
    with pytest.raises(ValueError, match="no OpenTelemetry tracer provider is configured"):
        otel.export(record)
    with pytest.raises(ValueError, match="no OpenTelemetry tracer provider is configured"):
        otel.OTelSink()
    with pytest.raises(TypeError, match="RunRecords"):
        otel.export([record, "not a record"], TracerProvider())


def test_a_record_copy_exports_identically(spans):
    record = end_states.success()
    otel.export([record, dataclasses.replace(record, run_id="copy")], spans.provider)
    assert len(spans.get_finished_spans()) == 8
