"""Tool calls that wait for a person, on the native agent: approve, deny with a reason, timeout,
Stop while pending, two pending calls in one step, and the terminal front end."""

from __future__ import annotations

import io
import threading

import pytest
from support import add, fast_model, wait_until

import nbagent
from nbagent.guardrails import ApprovalCall
from nbagent.models import ToolCall
from nbagent.view.terminal import TextView
from nbagent.view.terminal_approvals import NOT_INTERACTIVE, TerminalApprovals

SENT: list[str] = []


@nbagent.tool(requires_approval=True)
def send_email(to: str, body: str) -> str:
    """Send an email.

    Args:
        to: the address.
        body: the text.
    """
    SENT.append(to)
    return f"sent to {to}"


@pytest.fixture(autouse=True)
def no_mail():
    SENT.clear()
    yield


def seen_by_model() -> tuple[list[list[dict]], callable]:
    """A policy model that asks for one email, then answers; and the prompts it saw."""
    prompts: list[list[dict]] = []

    def policy(messages):
        prompts.append([dict(m) for m in messages])
        if len(prompts) == 1:
            return [ToolCall("send_email", {"to": "boss@example.com", "body": "<b>hi</b>"}, id="mail-1")]
        return "done"

    return prompts, policy


def test_an_approved_call_runs_after_the_decision_and_the_wait_is_kept_apart():
    prompts, policy = seen_by_model()
    run = nbagent.start(nbagent.Agent(fast_model(policy), tools=[send_email]), "mail the boss")
    wait_until(lambda: run.pending_approvals)
    (pending,) = run.pending_approvals
    assert (pending.call_id, pending.tool) == ("mail-1", "send_email")
    assert pending.arguments == {"to": "boss@example.com", "body": "<b>hi</b>"}
    assert SENT == []  # nothing runs before the decision
    assert run.approve("mail-1")
    record = run.wait(timeout=20)
    call = record.tool_calls[0]
    assert record.status == "success" and SENT == ["boss@example.com"]
    assert (call.status, call.approval, call.result) == ("ok", "approved", "sent to boss@example.com")
    assert call.approval_wait_s > 0 and record.steps[0].wait_s == call.approval_wait_s == record.wait_s
    assert call.started_at >= record.steps[0].started_at  # its own time starts after the decision
    assert prompts[1][-1]["content"] == "sent to boss@example.com"
    frame = nbagent.analytics.tool_calls_frame(record)
    assert frame.approval.tolist() == ["approved"] and frame.approval_wait_s[0] == call.approval_wait_s


def test_a_denied_call_does_not_run_and_the_model_sees_the_reason():
    prompts, policy = seen_by_model()
    run = nbagent.start(nbagent.Agent(fast_model(policy), tools=[send_email]), "mail the boss")
    wait_until(lambda: run.pending_approvals)
    assert run.deny("mail-1", "not on a Sunday")
    assert not run.deny("mail-1", "again") and not run.approve("mail-1")  # the first decision wins
    record = run.wait(timeout=20)
    call = record.tool_calls[0]
    assert record.status == "success" and SENT == []
    assert (call.status, call.approval, call.error) == ("denied", "denied", "not on a Sunday")
    assert prompts[1][-1]["content"] == "the user denied this call: not on a Sunday"


def test_an_undecided_call_is_denied_when_the_approval_times_out():
    prompts, policy = seen_by_model()
    agent = nbagent.Agent(fast_model(policy), tools=[send_email])
    record = nbagent.run(agent, "mail", approval_timeout_s=0.2)
    call = record.tool_calls[0]
    assert record.status == "success" and SENT == []
    assert (call.status, call.approval, call.error) == ("denied", "timed_out", "timed out")
    assert call.approval_wait_s >= 0.2
    assert prompts[1][-1]["content"] == "the user denied this call: timed out"


def test_stop_while_a_call_waits_ends_interrupted_and_nothing_runs():
    _, policy = seen_by_model()
    run = nbagent.start(nbagent.Agent(fast_model(policy), tools=[send_email]), "mail")
    wait_until(lambda: run.pending_approvals)
    assert run.interrupt()
    record = run.wait(timeout=20)
    assert record.status == "interrupted" and record.stop_reason == "user"
    assert record.tool_calls[0].status == "cancelled" and SENT == []
    assert run.pending_approvals == [] and not run.approve("mail-1")


def test_two_calls_of_one_step_are_pending_together():
    calls = [
        ToolCall("send_email", {"to": "a@example.com", "body": "1"}, id="m1"),
        ToolCall("add", {"a": 1, "b": 2}, id="plain"),
        ToolCall("send_email", {"to": "b@example.com", "body": "2"}, id="m2"),
    ]
    run = nbagent.start(nbagent.Agent(fast_model([calls, "done"]), tools=[send_email, add]), "mail twice")
    wait_until(lambda: len(run.pending_approvals) == 2)
    assert [p.call_id for p in run.pending_approvals] == ["m1", "m2"]
    assert run.deny("m2", "only one") and run.approve("m1")
    record = run.wait(timeout=20)
    by_id = {c.call_id: c for c in record.tool_calls}
    assert SENT == ["a@example.com"]
    assert (by_id["m1"].status, by_id["plain"].status, by_id["m2"].status) == ("ok", "ok", "denied")
    assert by_id["plain"].approval is None


def test_a_pending_item_takes_its_own_decision_and_run_edit_is_deprecated():
    """Each item of ``run.pending_approvals`` decides itself (``approve()``, ``deny(reason)``);
    the verbs only a LangGraph interrupt takes (``edit``, ``resume``) live there too, and the old
    ``run.edit`` / ``run.resume`` say where they went."""
    calls = [
        ToolCall("send_email", {"to": "a@example.com", "body": "1"}, id="m1"),
        ToolCall("send_email", {"to": "b@example.com", "body": "2"}, id="m2"),
    ]
    run = nbagent.start(nbagent.Agent(fast_model([calls, "done"]), tools=[send_email]), "mail twice")
    wait_until(lambda: len(run.pending_approvals) == 2)
    first, second = run.pending_approvals
    with pytest.raises(ValueError, match="no single pending interrupt"):
        first.edit({"to": "c@example.com"})  # a plain tool call is no interrupt review
    with pytest.warns(DeprecationWarning, match=r"pending_approvals\[i\]\.edit"), pytest.raises(ValueError):
        run.edit("m1", {"to": "c@example.com"})
    assert second.deny("only one") and first.approve()
    assert not first.approve()  # the first decision counts
    record = run.wait(timeout=20)
    by_id = {c.call_id: c for c in record.tool_calls}
    assert SENT == ["a@example.com"]
    assert (by_id["m1"].status, by_id["m2"].status, by_id["m2"].error) == ("ok", "denied", "only one")


def test_a_predicate_on_the_run_or_the_agent_decides_which_calls_wait():
    seen: list[ApprovalCall] = []

    def big_sums(call: ApprovalCall) -> bool:
        seen.append(call)
        return call.arguments.get("a", 0) > 100

    calls = [ToolCall("add", {"a": 1, "b": 1}, id="small"), ToolCall("add", {"a": 500, "b": 1}, id="big")]
    run = nbagent.start(nbagent.Agent(fast_model([calls, "ok"]), tools=[add]), "sum", approve=big_sums)
    wait_until(lambda: run.pending_approvals)
    assert [p.call_id for p in run.pending_approvals] == ["big"]
    run.approve("big")
    assert run.wait(timeout=20).status == "success"
    assert {c.call_id for c in seen} == {"small", "big"}

    agent = nbagent.Agent(
        fast_model([[ToolCall("add", {"a": 1, "b": 1}, id="x")], "ok"]), tools=[add], approve={"add"}
    )
    run = nbagent.start(agent, "sum")
    wait_until(lambda: run.pending_approvals)
    run.deny("x")
    record = run.wait(timeout=20)
    assert record.tool_calls[0].status == "denied" and record.tool_calls[0].error == "denied"


def test_bad_approval_options_are_refused():
    agent = nbagent.Agent(fast_model(["x"]))
    with pytest.raises(TypeError, match="approve must be True, a set of tool names"):
        nbagent.start(agent, "t", approve=42)
    with pytest.raises(ValueError, match="approval_timeout_s must be a positive number"):
        nbagent.start(agent, "t", approval_timeout_s=0)
    with pytest.raises(TypeError, match="requires_approval must be True or False"):
        nbagent.tool(requires_approval="yes")


def test_a_text_view_in_a_non_interactive_terminal_denies_with_a_clear_reason():
    _, policy = seen_by_model()
    run = nbagent.Run(nbagent.Agent(fast_model(policy), tools=[send_email]), "mail")
    out = io.StringIO()
    run.add_sink(TextView(out))
    run.add_sink(TerminalApprovals(run, interactive=lambda: False))
    run.launch()
    record = run.wait(timeout=20)
    call = record.tool_calls[0]
    assert (call.status, call.approval, call.error) == ("denied", "denied", NOT_INTERACTIVE)
    assert "waiting for approval" in out.getvalue() and "denied" in out.getvalue() and SENT == []


@pytest.mark.parametrize(
    ("answer", "status", "error"), [("y", "ok", None), ("n too late", "denied", "too late")]
)
def test_a_text_view_asks_on_an_interactive_terminal(answer, status, error):
    _, policy = seen_by_model()
    run = nbagent.Run(nbagent.Agent(fast_model(policy), tools=[send_email]), "mail")
    asked: list[str] = []
    answered = threading.Event()

    def ask(prompt: str) -> str:
        asked.append(prompt)
        answered.set()
        return answer

    run.add_sink(TerminalApprovals(run, ask=ask, interactive=lambda: True))
    run.launch()
    record = run.wait(timeout=20)
    assert answered.is_set() and "send_email" in asked[0] and "boss@example.com" in asked[0]
    assert (record.tool_calls[0].status, record.tool_calls[0].error) == (status, error)


def test_a_version_3_store_migrates_and_keeps_approvals_and_model_ends(tmp_path):
    import dataclasses
    import sqlite3

    from old_stores import VERSION_1, VERSION_2_CHANGES

    from nbagent.analytics.store import SCHEMA_VERSION, RunStore
    from nbagent.analytics.store.schema import MIGRATIONS

    path = tmp_path / "v3.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(VERSION_1 + VERSION_2_CHANGES + MIGRATIONS[2] + "PRAGMA user_version = 3;")
    store = RunStore(path)
    assert store.schema_version == SCHEMA_VERSION == 7
    assert all(s.model_ended_at is None for r in store.records() for s in r.steps)
    assert all(c.approval is None for r in store.records() for c in r.tool_calls)
    _, policy = seen_by_model()
    run = nbagent.start(nbagent.Agent(fast_model(policy), tools=[send_email]), "mail", store=store)
    wait_until(lambda: run.pending_approvals)
    run.deny("mail-1", "stored reason")
    record = run.wait(timeout=20)
    stored = RunStore(path).record(record.run_id)
    assert dataclasses.asdict(stored) == dataclasses.asdict(record)
    assert stored.tool_calls[0].approval == "denied" and stored.steps[0].model_ended_at is not None
