"""Approvals at their edges: the decision is reported when it is made, a Stop after step while a
call waits, an approval after a Stop, calls that share an id, and agents that cannot hold calls."""

from __future__ import annotations

import queue
import threading

import pytest
from support import fast_model, wait_until

import nbagent
from nbagent.models import ToolCall
from nbagent.runtime.source import Source
from nbagent.view.terminal_approvals import TerminalApprovals

RELEASE = threading.Event()


@nbagent.tool(requires_approval=True)
def slow_send(to: str) -> str:
    """Send, slowly.

    Args:
        to: the address.
    """
    RELEASE.wait(30)
    return f"sent to {to}"


@nbagent.tool(requires_approval=True)
def send(to: str) -> str:
    """Send.

    Args:
        to: the address.
    """
    return f"sent to {to}"


def two_calls(tool: str, first_id: str = "c1", second_id: str = "c2") -> list:
    return [[ToolCall(tool, {"to": "a"}, id=first_id), ToolCall(tool, {"to": "b"}, id=second_id)], "done"]


def test_a_call_decided_while_another_runs_stops_waiting_when_decided():
    RELEASE.clear()
    agent = nbagent.Agent(fast_model(two_calls("slow_send")), tools=[slow_send])
    run = nbagent.start(agent, "go", limits=nbagent.Limits(max_wait_seconds=0.5))
    wait_until(lambda: len(run.pending_approvals) == 2)
    assert run.approve("c1") and run.approve("c2")
    # c1's tool runs well past the wait budget; nobody is waiting for a person any more.
    wait_until(lambda: any(c.started_at is not None for c in run.record.tool_calls if c.call_id == "c1"))
    threading.Timer(1.0, RELEASE.set).start()
    record = run.wait()
    assert record.status == "success", (record.status, record.stop_reason, record.error)
    waits = {c.call_id: c.approval_wait_s for c in record.tool_calls}
    assert all(c.approval == "approved" for c in record.tool_calls)
    assert waits["c2"] < 0.9, waits  # decided at once: its wait ends at the decision, not at its turn


def test_stop_after_step_while_a_call_waits_denies_it_and_ends_the_run():
    agent = nbagent.Agent(fast_model([[ToolCall("send", {"to": "a"}, id="c1")], "done"]), tools=[send])
    run = nbagent.start(agent, "go")  # no approval timeout: without the fix this waits forever
    wait_until(lambda: run.pending_approvals)
    run.interrupt("after_step")
    record = run.wait(timeout=30)
    assert record.status == "interrupted" and record.stop_reason == "user_after_step"
    (call,) = record.tool_calls
    assert call.status == "denied" and call.approval == "denied"
    assert "stopped after this step" in call.error


def test_an_approval_after_a_stop_does_not_count():
    agent = nbagent.Agent(fast_model([[ToolCall("send", {"to": "a"}, id="c1")], "done"]), tools=[send])
    run = nbagent.start(agent, "go")
    wait_until(lambda: run.pending_approvals)
    run.interrupt()
    assert run.approve("c1") is False
    record = run.wait(timeout=30)
    assert record.status == "interrupted"
    assert [c.status for c in record.tool_calls] == ["cancelled"]


def test_calls_that_share_an_id_are_told_apart():
    agent = nbagent.Agent(fast_model(two_calls("send", "0", "0")), tools=[send])
    run = nbagent.start(agent, "go")
    wait_until(lambda: len(run.pending_approvals) == 2)
    pending = {p.call_id: p.arguments["to"] for p in run.pending_approvals}
    assert pending == {"0": "a", "0#2": "b"}
    run.approve("0")
    run.deny("0#2", "not b")
    record = run.wait(timeout=30)
    assert record.status == "success", record.error
    assert [(c.call_id, c.status, c.result) for c in record.tool_calls] == [
        ("0", "ok", "sent to a"),
        ("0#2", "denied", None),
    ]
    sent_back = [m["tool_call_id"] for m in agent.memory if m["role"] == "tool"]
    assert sent_back == ["0", "0#2"]  # the model is answered once per call, under the ids it was sent


def test_approve_is_refused_for_an_agent_that_cannot_hold_its_calls():
    class Elsewhere(Source):
        name = "elsewhere"
        model_name = "m"

        async def drive(self, task, ctx, reset=True):
            return "done"

    with pytest.raises(TypeError, match="approve= is not supported for Elsewhere"):
        nbagent.start(Elsewhere(), "go", approve=True)
    assert nbagent.run(Elsewhere(), "go").status == "success"  # without approve= it runs


def test_a_source_can_name_the_model_a_run_option_chooses():
    class Switchable(Source):
        name = "switchable"
        model_name = "cheap"

        def model_name_for(self, options):
            return options.get("model", self.model_name)

        async def drive(self, task, ctx, reset=True, *, model=None):
            return "done"

    nbagent.analytics.cost.set_price("cheap", input_per_mtok=0.1, output_per_mtok=0.1)
    assert nbagent.run(Switchable(), "go").model == "cheap"
    assert nbagent.run(Switchable(), "go", model="pricey-unknown").model == "pricey-unknown"
    with pytest.raises(ValueError, match="pricey-unknown"):  # priced at the model it will use
        nbagent.start(Switchable(), "go", model="pricey-unknown", limits=nbagent.Limits(max_cost_usd=1))


def test_a_terminal_question_left_by_a_stopped_run_does_not_take_the_next_runs_answer():
    lines: queue.Queue[str] = queue.Queue()  # the terminal: one line per Enter
    prompts: list[tuple[int, str]] = []

    def ask(prompt: str) -> str:
        prompts.append((threading.get_ident(), prompt))
        return lines.get(timeout=30)

    def started(to: str) -> nbagent.Run:
        agent = nbagent.Agent(fast_model([[ToolCall("send", {"to": to}, id="c1")], "done"]), tools=[send])
        run = nbagent.Run(agent, "go", approval_timeout_s=30)
        run.add_sink(TerminalApprovals(run, ask=ask, interactive=lambda: True))
        run.launch()
        return run

    first = started("first")
    wait_until(lambda: len(prompts) == 1)
    first.interrupt()  # Stop while its question is on the screen
    assert first.wait(timeout=30).status == "interrupted"
    second = started("second")
    lines.put("n")  # typed at the first run's question: that run has ended, so it is ignored
    wait_until(lambda: len(prompts) == 2)
    assert "second" in prompts[1][1]
    lines.put("y")
    record = second.wait(timeout=30)
    assert [(c.status, c.approval) for c in record.tool_calls] == [("ok", "approved")]
    assert len({thread for thread, _ in prompts}) == 1  # one reader of stdin for the process
