"""pydantic-ai under nbagent: concurrent runs, continuing after a request limit, approvals in
nbagent's panel, run keywords and task types, step kinds live and after the fact."""

from __future__ import annotations

import asyncio
import threading

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent, UsageLimits
from pydantic_ai.messages import BinaryContent, ImageUrl
from pydantic_ai.models.function import DeltaToolCall, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolDenied
from support import wait_until

import nbagent
from nbagent.adapters.pydantic_ai.records import records_from_pydantic_ai

pytestmark = pytest.mark.needs("pydantic-ai")


def mailer(output_type=str) -> Agent:
    agent = Agent(TestModel(), output_type=output_type)

    @agent.tool_plain(requires_approval=True)
    def send_email(to: str) -> str:
        """Sends an email."""
        return f"sent to {to}"

    return agent


@pytest.fixture(autouse=True)
def undisplayed_views(views):
    """A run started with ``display=True`` gets a view that is never displayed (``conftest.views``):
    approvals wait in its panel, decided here from code as its buttons decide them."""


def test_five_concurrent_runs_of_one_agent_all_end():
    release = threading.Event()

    async def stream(messages, info):
        while not release.is_set():
            await asyncio.sleep(0.005)
        yield "done"

    agent = Agent(FunctionModel(stream_function=stream))
    runs = [nbagent.start(agent, f"task {i}", display=False) for i in range(5)]
    wait_until(lambda: all(r.record.steps for r in runs))  # all five are asking the model at once
    release.set()
    records = [r.wait(timeout=20) for r in runs]
    assert [r.status for r in records] == ["success"] * 5
    assert all(r.queued_s == 0 for r in records)


def test_reset_false_after_max_steps_answers_the_last_calls():
    async def stream(messages, info):
        if messages[-1].parts[-1].part_kind == "user-prompt" and len(messages) == 1:
            yield {0: DeltaToolCall(name="add", json_args='{"a": 1, "b": 2}', tool_call_id="c1")}
        else:
            yield f"seen {len(messages)} messages"

    agent = Agent(FunctionModel(stream_function=stream))

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    first = nbagent.run(agent, "add", display=False, usage_limits=UsageLimits(request_limit=1))
    assert first.status == "max_steps"
    second = nbagent.run(agent, "go on", display=False, reset=False)
    assert second.status == "success", second.error
    # request, the call, its returns with the new prompt
    assert second.output == "seen 3 messages"


def test_requires_approval_asks_in_the_panel_and_the_run_goes_on():
    run = nbagent.start(mailer(), "mail a", display=True)
    wait_until(lambda: run.pending_approvals)
    (pending,) = run.pending_approvals
    assert pending.tool == "send_email" and pending.arguments == {"to": "a"}
    assert run.approve(pending.call_id)
    record = run.wait(timeout=20)

    agent = mailer(output_type=[str, DeferredToolRequests])  # pydantic-ai alone: the run pauses
    paused = agent.run_sync("mail a")
    call = paused.output.approvals[0]
    resumed = agent.run_sync(
        message_history=paused.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={call.tool_call_id: True}),
    )
    assert record.status == "success" and record.output == resumed.output
    (step_call,) = record.tool_calls
    assert (step_call.status, step_call.result, step_call.approval) == ("ok", "sent to a", "approved")


def test_a_denied_call_keeps_the_reason_and_the_model_sees_it():
    run = nbagent.start(mailer(), "mail a", display=True)
    wait_until(lambda: run.pending_approvals)
    run.deny(run.pending_approvals[0].call_id, "not today")
    record = run.wait(timeout=20)
    assert record.status == "success" and "not today" in record.output
    (call,) = record.tool_calls
    assert (call.status, call.error, call.approval) == ("denied", "not today", "denied")


def test_an_approval_that_times_out_is_denied():
    record = nbagent.run(mailer(), "mail a", display=True, approval_timeout_s=0.1)
    (call,) = record.tool_calls
    assert record.status == "success" and (call.status, call.approval) == ("denied", "timed_out")


def test_approve_policy_holds_a_plain_tool():
    agent = Agent(TestModel())
    ran = []

    @agent.tool_plain
    def delete(path: str) -> str:
        """Deletes a file."""
        ran.append(path)
        return "deleted"

    run = nbagent.start(agent, "clean up", display=False, approve={"delete"})
    wait_until(lambda: run.pending_approvals)
    assert ran == []  # held before it runs
    run.approve(run.pending_approvals[0].call_id)
    record = run.wait(timeout=20)
    assert record.status == "success" and ran == ["a"]
    assert record.tool_calls[0].approval == "approved"


def test_denied_approval_matches_pydantic_ai_denial():
    record = nbagent.run(mailer(), "mail a", display=True, approval_timeout_s=0.05)
    agent = mailer(output_type=[str, DeferredToolRequests])
    paused = agent.run_sync("mail a")
    call = paused.output.approvals[0]
    resumed = agent.run_sync(
        message_history=paused.all_messages(),
        deferred_tool_results=DeferredToolResults(
            approvals={call.tool_call_id: ToolDenied("the user denied this call: timed out")}
        ),
    )
    assert record.output == resumed.output


def test_event_stream_handler_still_gets_every_event():
    def events_of(runner):
        seen = []

        async def handler(ctx, events):
            async for event in events:
                seen.append(event.event_kind)

        agent = Agent(TestModel())

        @agent.tool_plain
        def double(x: int) -> int:
            """Double."""
            return 2 * x

        runner(agent, handler)
        return seen

    plain = events_of(lambda agent, h: agent.run_sync("go", event_stream_handler=h))
    ours = events_of(lambda agent, h: nbagent.run(agent, "go", display=False, event_stream_handler=h))
    assert ours == plain and "function_tool_result" in ours


def test_a_keyword_pydantic_ai_does_not_take_is_refused_at_start():
    with pytest.raises(TypeError, match=r"take no 'max_turns'.*usage_limits"):
        nbagent.start(Agent(TestModel()), "x", max_turns=3)


def test_a_task_of_text_and_images_is_recorded_readably():
    record = nbagent.run(
        Agent(TestModel()),
        ["compare", ImageUrl("https://example.com/a.png"), BinaryContent(b"\x89PNG", media_type="image/png")],
        display=False,
    )
    assert record.status == "success"
    assert record.task == "compare [image: https://example.com/a.png] [image/png: 4 bytes]"
    with pytest.raises(TypeError, match="a pydantic-ai task is a str or a sequence"):
        nbagent.start(Agent(TestModel()), 42)


class City(BaseModel):
    name: str


def test_an_output_tool_step_is_final_live_and_after_the_fact():
    agent = Agent(TestModel(), output_type=City)
    live = nbagent.run(agent, "a city", display=False)
    (after,) = records_from_pydantic_ai(agent.run_sync("a city"))
    assert [s.kind for s in live.steps] == [s.kind for s in after.steps] == ["final"]


def test_with_no_view_and_no_approve_the_run_ends_with_deferred_tool_requests_as_agent_run_does():
    plain = mailer([str, DeferredToolRequests]).run_sync("mail a")
    agent = mailer([str, DeferredToolRequests])

    run = nbagent.start(agent, "mail a", display=False)  # a script: no one sees a panel
    record = run.wait(timeout=20)

    assert record.status == "success" and isinstance(record.output, DeferredToolRequests)
    assert [c.tool_name for c in record.output.approvals] == [c.tool_name for c in plain.output.approvals]
    assert [(c.tool, c.status) for c in record.tool_calls] == [("send_email", "deferred")]
    assert run.result.output == record.output and run.result.usage == plain.usage
    call_id = record.output.approvals[0].tool_call_id
    resumed = nbagent.run(
        agent,
        None,
        display=False,
        message_history=run.result.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={call_id: True}),
    )
    assert resumed.status == "success" and "sent to a" in resumed.output


def test_with_no_view_and_no_deferred_output_type_the_run_fails_as_agent_run_does():
    with pytest.raises(Exception) as plain:
        mailer().run_sync("mail a")
    record = nbagent.run(mailer(), "mail a", display=False)
    assert (record.status, record.error_type) == ("error", type(plain.value).__name__)
    assert record.error.endswith(str(plain.value))
