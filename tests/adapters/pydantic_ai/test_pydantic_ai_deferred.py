"""pydantic-ai runs that resume deferred calls, that hand calls back to their caller, that run to
pydantic-ai's default request limit, and a model error's text. No network."""

from __future__ import annotations

import pytest
from pydantic_ai import Agent, UsageLimits
from pydantic_ai.exceptions import CallDeferred, ModelHTTPError
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults
from support import wait_until

import nbagent
from nbagent.analytics.frames import tool_calls_frame
from nbagent.view.html import record_html

pytestmark = pytest.mark.needs("pydantic-ai")


@pytest.fixture(autouse=True)
def undisplayed_views(views):
    """A run started with ``display=True`` gets a view that is never displayed (``conftest.views``):
    approvals wait in its panel, decided here from code as its buttons decide them."""


def mailer() -> Agent:
    agent = Agent(TestModel(), output_type=[str, DeferredToolRequests])

    @agent.tool_plain(requires_approval=True)
    def send(to: str) -> str:
        """Sends a message."""
        return f"sent to {to}"

    return agent


def test_resuming_with_deferred_results_matches_pydantic_ai_with_a_step_for_the_calls():
    agent = mailer()
    paused = agent.run_sync("mail a")
    call = paused.output.approvals[0]
    options = dict(
        message_history=paused.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={call.tool_call_id: True}),
    )
    plain = agent.run_sync(None, **options)

    record = nbagent.run(agent, None, display=False, **options)

    assert (record.status, record.output) == ("success", plain.output)
    assert (record.input_tokens, record.output_tokens) == (
        plain.usage.input_tokens,
        plain.usage.output_tokens,
    )
    resumed, answer = record.steps
    assert [(c.tool, c.status, c.result) for c in resumed.tool_calls] == [("send", "ok", "sent to a")]
    assert (resumed.input_tokens, resumed.output_tokens, resumed.model_ended_at) == (0, 0, None)
    assert answer.kind == "final" and answer.model_ended_at is not None


def office() -> Agent:
    """A model that asks for a call needing approval and one the caller runs (``CallDeferred``),
    then answers with what the calls returned."""

    def model(messages, info):
        last = messages[-1].parts[-1]
        if last.part_kind == "user-prompt":
            return ModelResponse(
                parts=[
                    ToolCallPart("delete", {"path": "/x"}, tool_call_id="d1"),
                    ToolCallPart("external", {"q": "b"}, tool_call_id="e1"),
                ]
            )
        return ModelResponse(parts=[TextPart("done " + ",".join(str(p.content) for p in messages[-1].parts))])

    agent = Agent(FunctionModel(model), output_type=[str, DeferredToolRequests])

    @agent.tool_plain(requires_approval=True)
    def delete(path: str) -> str:
        return "deleted"

    @agent.tool_plain
    def external(q: str) -> str:
        raise CallDeferred

    return agent


def run_approving(agent: Agent, task, **options):
    run = nbagent.start(agent, task, display=True, **options)  # a person decides in its view
    wait_until(lambda: run.pending_approvals or run.done())
    for pending in run.pending_approvals:
        run.approve(pending.call_id)
    return run.wait(timeout=20)


def test_an_external_deferred_call_beside_approvals_is_deferred_to_the_caller():
    record = run_approving(office(), "go")

    assert record.status == "success"
    assert [c.tool_call_id for c in record.output.calls] == ["e1"] and record.output.approvals == []
    calls = {c.tool: c for c in record.tool_calls}
    assert (calls["delete"].status, calls["delete"].approval) == ("ok", "approved")
    assert calls["external"].status == "deferred" and "deferred_tool_results" in calls["external"].error
    assert tool_calls_frame([record]).set_index("tool").loc["external", "status"] == "deferred"
    assert "deferred to the caller" in str(record) and "deferred to the caller" in record_html(record)


def test_reset_false_with_deferred_results_runs_on_as_pydantic_ai_resumes():
    agent = office()
    plain = agent.run_sync("go")  # pydantic-ai alone: both calls come back to the caller
    plain = agent.run_sync(
        None,
        message_history=plain.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={"d1": True}, calls={"e1": "ext result"}),
    )
    run_approving(agent, "go")

    record = nbagent.run(
        agent,
        None,
        display=False,
        reset=False,
        deferred_tool_results=DeferredToolResults(calls={"e1": "ext result"}),
    )

    assert (record.status, record.output) == ("success", plain.output)
    assert [(c.tool, c.status, c.result) for c in record.steps[0].tool_calls] == [
        ("external", "ok", "ext result")
    ]
    assert len(record.steps) == 2


def test_the_default_request_limit_ends_max_steps_as_an_explicit_one_does():
    def loop(messages, info):
        return ModelResponse(parts=[ToolCallPart("again", {}, tool_call_id=f"c{len(messages)}")])

    agent = Agent(FunctionModel(loop))

    @agent.tool_plain
    def again() -> str:
        return "again"

    default = nbagent.run(agent, "go", display=False)
    explicit = nbagent.run(agent, "go", display=False, usage_limits=UsageLimits(request_limit=50))

    for record in (default, explicit):
        assert (record.status, record.stop_reason, len(record.steps)) == ("max_steps", "max_steps", 50)
    assert default.error == explicit.error


def test_a_model_error_names_the_model_once_and_reads_cleanly():
    def failing(messages, info):
        raise ModelHTTPError(503, "m", body="overloaded")

    record = nbagent.run(Agent(FunctionModel(failing)), "go", display=False)

    assert record.status == "error" and record.error_type == "ModelError"
    assert (
        record.error
        == "ModelError: function:failing: ModelHTTPError: status_code: 503, model_name: m, body: overloaded"
    )
