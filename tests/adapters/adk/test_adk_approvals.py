"""Google ADK's own tool confirmation and long-running tools under nbagent: a call ADK waits on
shows in the approval panel, the decision goes back to ADK the way ADK's own clients send it (a
function response to ``adk_request_confirmation``, or the long-running call's response, as the
next message of the same session), and the run goes on within one nbagent run. With no view and no
``approve=``, a run ends waiting as plain ADK's does, its call ``deferred``. No network.

Each test checks what ADK did, not only the record: whether the tool ran, and what the model was
sent after the decision.
"""

from __future__ import annotations

import asyncio

import pytest
from support import wait_until

import nbagent

pytestmark = pytest.mark.needs("adk")

from adk_fakes import Turn, scripted  # noqa: E402
from google.adk import Agent  # noqa: E402
from google.adk.runners import InMemoryRunner  # noqa: E402
from google.adk.tools import FunctionTool, LongRunningFunctionTool, ToolContext  # noqa: E402
from google.genai import types  # noqa: E402

from nbagent.adapters.adk.source import _homes  # noqa: E402


@pytest.fixture(autouse=True)
def undisplayed_views(views):
    """A shown run gets a view that is never displayed (``conftest.views``)."""


class Mail:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def send_email(self, to: str) -> str:
        """Sends an email."""
        self.sent.append(to)
        return f"sent to {to}"

    def pay(self, amount: int, tool_context: ToolContext) -> str:
        """Pays, once a person confirms (asks for it itself)."""
        confirmation = tool_context.tool_confirmation
        if confirmation is None:
            tool_context.request_confirmation(hint=f"pay {amount}?", payload={"amount": amount})
            return None
        if not confirmation.confirmed:
            return "not paid"
        self.sent.append(f"paid {confirmation.payload['amount']}")
        return f"paid {amount}"

    def start_job(self, job: str) -> None:
        """Starts a job a person finishes (long-running: no result yet)."""
        self.sent.append(f"started {job}")


def pending(run) -> list:
    wait_until(lambda: run.pending_approvals or run.done())
    return run.pending_approvals


def last_answer(model) -> dict:
    """The last function response the model was sent."""
    parts = [p for c in model.script.requests[-1].contents for p in c.parts or () if p.function_response]
    return parts[-1].function_response.response


def calls(record) -> list[tuple[str, str]]:
    return [(c.tool, c.status) for s in record.steps for c in s.tool_calls]


def mailer(mail: Mail, **tool_options):
    model = scripted([Turn("", [("send_email", {"to": "bob"})]), Turn("done"), Turn("next")])
    tool = FunctionTool(mail.send_email, **tool_options)
    return Agent(name="mailer", model=model, tools=[tool]), model


def session_of(agent):
    home = _homes.get(agent)
    user_id, session_id = home.last
    runner = home.runner
    return asyncio.run(
        runner.session_service.get_session(app_name=runner.app_name, user_id=user_id, session_id=session_id)
    )


def unanswered(session) -> list[str]:
    answered = {r.id for e in session.events for r in e.get_function_responses()}
    return [c.name for e in session.events for c in e.get_function_calls() if c.id not in answered]


def test_require_confirmation_approved_in_the_panel_runs_the_tool_in_the_same_run():
    mail = Mail()
    agent, model = mailer(mail, require_confirmation=True)
    run = nbagent.start(agent, "mail bob", display=True)
    (call,) = pending(run)
    assert (call.tool, call.arguments) == ("send_email", {"to": "bob"})
    assert mail.sent == []  # ADK holds it until confirmed
    assert run.approve(call.call_id)
    record = run.wait(timeout=30)
    assert (record.status, record.output) == ("success", "done ")
    assert mail.sent == ["bob"] and calls(record) == [("send_email", "ok")]
    assert last_answer(model) == {"result": "sent to bob"}
    assert unanswered(session_of(agent)) == []  # ADK took the confirmation: nothing left open


def test_require_confirmation_denied_is_refused_by_adk_and_the_model_is_told():
    mail = Mail()
    agent, model = mailer(mail, require_confirmation=True)
    run = nbagent.start(agent, "mail bob", display=True)
    (call,) = pending(run)
    assert run.deny(call.call_id, "not bob")
    record = run.wait(timeout=30)
    assert (record.status, record.output) == ("success", "done ")
    assert mail.sent == [] and calls(record) == [("send_email", "denied")]
    assert last_answer(model) == {"error": "This tool call is rejected."}  # ADK's own words


def test_require_confirmation_by_a_callable_holds_only_the_calls_it_picks():
    mail = Mail()
    model = scripted(
        [Turn("", [("send_email", {"to": "bob"}), ("send_email", {"to": "eve"})]), Turn("done"), Turn("next")]
    )
    tool = FunctionTool(mail.send_email, require_confirmation=lambda to: to == "eve")
    agent = Agent(name="mailer", model=model, tools=[tool])
    run = nbagent.start(agent, "mail both", display=True)
    (call,) = pending(run)
    assert call.arguments == {"to": "eve"}
    assert run.approve(call.call_id)
    record = run.wait(timeout=30)
    assert record.status == "success" and sorted(mail.sent) == ["bob", "eve"]
    assert sorted(calls(record)) == [("send_email", "ok"), ("send_email", "ok")]


def test_a_tool_that_requests_confirmation_gets_the_decision_and_its_payload():
    mail = Mail()
    # ADK lets the model answer while the confirmation is asked, then runs the tool again once
    # it is given: two replies in one nbagent run
    model = scripted([Turn("", [("pay", {"amount": 5})]), Turn("asking"), Turn("paid"), Turn("next")])
    agent = Agent(name="payer", model=model, tools=[mail.pay])
    run = nbagent.start(agent, "pay", display=True)
    (call,) = pending(run)
    assert (call.tool, call.arguments) == ("pay", {"amount": 5})
    assert run.approve(call.call_id)
    record = run.wait(timeout=30)
    assert (record.status, record.output) == ("success", "paid ")
    assert mail.sent == ["paid 5"] and last_answer(model) == {"result": "paid 5"}


def test_a_long_running_call_is_approved_with_adks_status_answer():
    mail = Mail()
    model = scripted([Turn("", [("start_job", {"job": "report"})]), Turn("the job is approved"), Turn("x")])
    agent = Agent(name="jobs", model=model, tools=[LongRunningFunctionTool(func=mail.start_job)])
    run = nbagent.start(agent, "start it", display=True)
    (call,) = pending(run)
    assert call.tool == "start_job" and mail.sent == ["started report"]
    assert run.approve(call.call_id)
    record = run.wait(timeout=30)
    assert (record.status, record.output) == ("success", "the job is approved ")
    assert last_answer(model) == {"status": "approved"}
    assert calls(record) == [("start_job", "ok")]


def test_a_long_running_call_denied_tells_the_model_why():
    mail = Mail()
    model = scripted([Turn("", [("start_job", {"job": "report"})]), Turn("ok, not started"), Turn("x")])
    agent = Agent(name="jobs", model=model, tools=[LongRunningFunctionTool(func=mail.start_job)])
    run = nbagent.start(agent, "start it", display=True)
    (call,) = pending(run)
    assert run.deny(call.call_id, "too late")
    record = run.wait(timeout=30)
    assert record.status == "success" and calls(record) == [("start_job", "denied")]
    assert last_answer(model) == {"status": "denied", "reason": "too late"}


def test_with_no_view_and_no_approver_the_run_ends_waiting_as_plain_adk():
    """What plain ADK does: the invocation ends with the confirmation asked; the call ``deferred``.
    The user can then answer it with their own ``runner.run_async``, as ADK's samples do."""
    mail = Mail()
    agent, _ = mailer(mail, require_confirmation=True)
    record = nbagent.run(agent, "mail bob", display=False)
    assert (record.status, record.output) == ("success", None)
    assert calls(record) == [("send_email", "deferred")] and mail.sent == []
    session = session_of(agent)
    assert unanswered(session) == ["adk_request_confirmation"]
    (ask,) = [
        c for e in session.events for c in e.get_function_calls() if c.name == "adk_request_confirmation"
    ]
    answer = types.FunctionResponse(id=ask.id, name=ask.name, response={"confirmed": True})
    runner = _homes.get(agent).runner

    async def confirm():
        message = types.Content(role="user", parts=[types.Part(function_response=answer)])
        return [e async for e in runner.run_async(user_id="user", session_id=session.id, new_message=message)]

    events = asyncio.run(confirm())
    assert mail.sent == ["bob"] and events[-1].content.parts[0].text == "done "


def test_approve_policy_holds_a_call_before_adk_runs_it():
    """``approve=`` with no view: the person is whoever calls ``run.approve``."""
    mail = Mail()
    model = scripted([Turn("", [("send_email", {"to": "bob"})]), Turn("done"), Turn("next")])
    agent = Agent(name="mailer", model=model, tools=[mail.send_email])
    run = nbagent.start(agent, "mail bob", display=False, approve={"send_email"})
    (call,) = pending(run)
    assert mail.sent == []
    assert run.approve(call.call_id)
    record = run.wait(timeout=30)
    assert (record.status, record.output) == ("success", "done ")
    assert mail.sent == ["bob"] and calls(record) == [("send_email", "ok")]


def test_approve_policy_denied_never_runs_the_tool():
    mail = Mail()
    model = scripted([Turn("", [("send_email", {"to": "bob"})]), Turn("not sent"), Turn("next")])
    agent = Agent(name="mailer", model=model, tools=[mail.send_email])
    run = nbagent.start(agent, "mail bob", display=False, approve=lambda call: call.arguments["to"] == "bob")
    (call,) = pending(run)
    assert run.deny(call.call_id, "not bob")
    record = run.wait(timeout=30)
    assert record.status == "success" and mail.sent == [] and calls(record) == [("send_email", "denied")]
    assert last_answer(model) == {"error": "the user denied this call: not bob"}


def test_a_stop_while_a_confirmation_waits_leaves_the_session_whole():
    mail = Mail()
    agent, _ = mailer(mail, require_confirmation=True)
    run = nbagent.start(agent, "mail bob", display=True)
    pending(run)
    assert run.interrupt()
    record = run.wait(timeout=30)
    assert record.status == "interrupted" and mail.sent == []
    session = session_of(agent)
    runner = _homes.get(agent).runner

    async def next_turn():
        message = types.Content(role="user", parts=[types.Part(text="never mind")])
        return [e async for e in runner.run_async(user_id="user", session_id=session.id, new_message=message)]

    events = asyncio.run(next_turn())
    assert events[-1].content.parts[0].text == "done " and mail.sent == []


def test_the_plain_runner_is_left_as_it_was():
    """A run with decisions does not change the user's runner or agent (nbagent's plugin is on
    the run's own copy)."""
    mail = Mail()
    agent, _ = mailer(mail, require_confirmation=True)
    runner = InMemoryRunner(agent=agent)
    run = nbagent.start(runner, "mail bob", display=True)
    (call,) = pending(run)
    run.approve(call.call_id)
    assert run.wait(timeout=30).status == "success"
    assert [p.name for p in runner.plugin_manager.plugins] == []


def test_approve_policy_over_a_tool_that_asks_itself_asks_once():
    """``approve=True`` and ``require_confirmation=True`` on one tool: ADK's question is the one
    shown; once approved the run ends (no second question for the same call)."""
    mail = Mail()
    agent, _ = mailer(mail, require_confirmation=True)
    run = nbagent.start(agent, "mail bob", display=False, approve=True)
    (call,) = pending(run)
    assert run.approve(call.call_id)
    record = run.wait(timeout=30)
    assert (record.status, record.output, mail.sent) == ("success", "done ", ["bob"])
