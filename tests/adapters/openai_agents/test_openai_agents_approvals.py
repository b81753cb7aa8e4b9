"""OpenAI Agents SDK tools with ``needs_approval`` under nbagent: the paused SDK run shows in the
approval panel, is decided there (through the SDK's ``RunState``) and resumes within one nbagent
run; a Stop while it waits ends it like any Stop. Errors are errors, not Stops. No network."""

from __future__ import annotations

import asyncio

import pytest
from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call
from support import wait_until

import nbagent
from nbagent.adapters.openai_agents import source as adapter

pytestmark = pytest.mark.needs("openai-agents")


@pytest.fixture(autouse=True, scope="module")
def no_trace_export():
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(False)


@pytest.fixture(autouse=True)
def shown(views):
    """The runs show in a view, where a person decides (here from code, as its buttons do)."""
    nbagent.configure(display=True)
    yield
    nbagent.configure(display=False)


sent: list[str] = []


@function_tool(needs_approval=True)
def send_email(to: str) -> str:
    """Sends an email (a person must approve it)."""
    sent.append(to)
    return f"sent to {to}"


def mailer(*replies) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel([[function_call("send_email", {"to": "bob"}, call_id="s1")], *replies])
    return Agent(name="mailer", model=model, tools=[send_email]), model


def pending(run) -> list:
    wait_until(lambda: run.pending_approvals or run.done())
    return run.pending_approvals


def test_a_paused_run_shows_in_the_approval_panel_and_resumes_in_the_same_run():
    sent.clear()
    agent, _ = mailer([assistant_message("sent it")])
    run = nbagent.start(agent, "mail bob")
    (call,) = pending(run)
    assert (call.tool, call.arguments) == ("send_email", {"to": "bob"})
    assert sent == [] and not run.done()
    assert run.approve(call.call_id)
    record = run.wait(timeout=20)
    assert record.status == "success" and record.output == "sent it" and sent == ["bob"]
    (first, _) = record.steps
    (tool_call,) = first.tool_calls
    assert (tool_call.status, tool_call.result, tool_call.approval) == ("ok", "sent to bob", "approved")


def test_with_no_view_the_run_ends_paused_as_runner_run_does_and_its_state_resumes():
    sent.clear()
    plain_agent, _ = mailer()
    plain = asyncio.run(Runner.run(plain_agent, "mail bob"))
    agent, _ = mailer([assistant_message("sent it")])

    run = nbagent.start(agent, "mail bob", display=False)  # a script: no one sees a panel
    record = run.wait(timeout=20)

    assert (record.status, record.output, sent) == ("success", None, [])
    (call,) = record.steps[0].tool_calls
    assert (call.tool, call.status) == ("send_email", "deferred")
    assert [i.raw_item.call_id for i in run.result.interruptions] == [
        i.raw_item.call_id for i in plain.interruptions
    ]
    assert run.result.to_input_list() == plain.to_input_list()
    state = run.result.to_state()
    state.approve(run.result.interruptions[0])
    resumed = nbagent.run(agent, state, display=False)
    assert (resumed.status, resumed.output, sent) == ("success", "sent it", ["bob"])


def test_a_denied_call_never_runs_and_the_model_sees_the_reason():
    sent.clear()
    agent, model = mailer([assistant_message("ok, not sent")])
    run = nbagent.start(agent, "mail bob")
    (call,) = pending(run)
    run.deny(call.call_id, "bob is on holiday")
    record = run.wait(timeout=20)
    assert record.status == "success" and sent == []
    assert record.steps[0].tool_calls[0].status == "denied"
    answer = [item for item in model.last_call.input if item.get("type") == "function_call_output"]
    assert answer[0]["output"] == "bob is on holiday"


def test_an_approval_timeout_rejects_the_call():
    sent.clear()
    agent, _ = mailer([assistant_message("timed out")])
    record = nbagent.run(agent, "mail bob", approval_timeout_s=0.05)
    assert record.status == "success" and sent == []
    assert record.steps[0].tool_calls[0].approval == "timed_out"


def test_a_stop_while_waiting_for_approval_ends_interrupted_and_the_run_can_go_on():
    sent.clear()
    agent, model = mailer()
    run = nbagent.start(agent, "mail bob")
    pending(run)
    run.interrupt()
    record = run.wait(timeout=20)
    assert record.status == "interrupted" and sent == []
    assert record.steps[0].tool_calls[0].status == "cancelled"

    model.enqueue([assistant_message("going on")])
    more = nbagent.run(agent, "go on", reset=False)
    assert more.status == "success" and more.output == "going on"
    answers = [item for item in model.last_call.input if item.get("type") == "function_call_output"]
    assert answers == [
        {"type": "function_call_output", "call_id": "s1", "output": adapter.INTERRUPTED_OUTPUT}
    ]


def test_stop_after_step_while_waiting_denies_the_call_and_starts_no_new_turn():
    sent.clear()
    agent, model = mailer([assistant_message("never asked")])
    run = nbagent.start(agent, "mail bob")
    pending(run)
    run.interrupt("after_step")
    record = run.wait(timeout=20)
    assert record.status == "interrupted" and sent == []
    assert record.steps[0].tool_calls[0].status == "denied"
    assert len(record.steps) == 1 and model.last_call.input[-1]["role"] == "user"


def test_nbagents_own_approve_policy_is_refused_at_start():
    agent, _ = mailer()
    with pytest.raises(TypeError, match="needs_approval"):
        nbagent.start(agent, "mail bob", approve=True)


def test_an_error_is_not_a_stop():
    @function_tool(failure_error_function=None)
    def explode() -> str:
        """Fails, and its errors are not returned to the model."""
        raise RuntimeError("kaboom")

    model = ScriptedModel([[function_call("explode", {}, call_id="e1")], [assistant_message("going on")]])
    agent = Agent(name="loud", model=model, tools=[explode])
    record = nbagent.run(agent, "go")
    assert (record.status, record.stop_reason, record.error_type) == ("error", "error", "UserError")
    assert record.error == "UserError: Error running tool explode: kaboom"
    (call,) = record.steps[0].tool_calls
    assert call.status == "error" and "kaboom" in call.error  # not "abandoned", not "cancelled"
    assert adapter.INTERRUPTED_OUTPUT not in str(record.messages)
