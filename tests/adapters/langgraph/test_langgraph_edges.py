"""LangGraph threads after a Stop, graphs without a checkpointer, and answers an interrupt cannot
take: each refused with its reason, none leaving a thread a model API would reject."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph_fakes import ScriptedChatModel, reply
from langgraph_scenarios import MapState, _ask_graph, _failing_graph, _hitl_agent, add
from support import wait_until

import nbagent
from nbagent.adapters.langgraph.threads import INTERRUPTED_OUTPUT

pytestmark = pytest.mark.needs("langgraph")

STARTED: list[str] = []


@tool
async def hang(seconds: float) -> str:
    """Wait, then answer."""
    STARTED.append("hang")
    await asyncio.sleep(seconds)
    return "done"


def _config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _every_call_answered(messages: list[Any]) -> bool:
    """What OpenAI-style APIs check: each assistant tool call is answered before the next turn."""
    waiting: set[str] = set()
    for message in messages:
        if message.type == "tool":
            waiting.discard(message.tool_call_id)
        elif waiting:
            return False
        if message.type == "ai":
            waiting = {c["id"] for c in message.tool_calls}
    return not waiting


def _stopped_mid_tool(thread: str) -> tuple[ScriptedChatModel, Any, int, nbagent.RunRecord]:
    """A react agent stopped while its ``hang`` tool runs: its model, graph, the ``STARTED``
    count before the run, and the run's record."""
    model = ScriptedChatModel(replies=[reply("", [("hang", {"seconds": 30})]), reply("after")])
    graph = create_agent(model, tools=[hang], checkpointer=InMemorySaver())
    started = len(STARTED)
    run = nbagent.start(graph, "wait", display=False, config=_config(thread))
    wait_until(lambda: len(STARTED) > started, timeout=20)
    run.interrupt("now")
    return model, graph, started, run.wait(timeout=20)


def test_a_new_message_after_a_stop_mid_tool_answers_the_cut_call_as_interrupted() -> None:
    model, graph, _, record = _stopped_mid_tool("cut")
    [call] = record.steps[0].tool_calls
    assert (call.status, call.error) == ("cancelled", "interrupted")
    again = nbagent.run(graph, "go on", display=False, reset=False, config=_config("cut"))
    assert again.status == "success" and again.output == "after", again.error
    seen = model.seen[-1]
    assert _every_call_answered(seen), [(m.type, m.content) for m in seen]
    [answer] = [m for m in seen if m.type == "tool"]
    assert answer.content == INTERRUPTED_OUTPUT and answer.status == "error"
    assert [m.type for m in seen] == ["human", "ai", "tool", "human"]


def test_none_after_a_stop_mid_tool_runs_the_cut_tool_again() -> None:
    _, graph, started, _ = _stopped_mid_tool("rerun")
    again = nbagent.start(graph, None, display=False, reset=False, config=_config("rerun"))
    wait_until(lambda: len(STARTED) > started + 1, timeout=20)  # LangGraph's resume: the tool again
    again.interrupt("now")
    assert again.wait(timeout=20).status == "interrupted"


def test_a_new_message_for_a_thread_paused_at_a_review_is_refused_and_none_asks_again() -> None:
    graph = _hitl_agent([reply("", [("add", {"a": 1, "b": 2})]), reply("3")], [add], ["approve", "reject"])()
    run = nbagent.start(graph, "add", display=False, config=_config("paused"))
    wait_until(lambda: run.pending_approvals, timeout=20)
    run.interrupt("now")
    [call] = run.wait(timeout=20).steps[0].tool_calls
    assert (call.status, call.error) == ("cancelled", "interrupted")
    refused = nbagent.run(graph, "go on", display=False, reset=False, config=_config("paused"))
    assert refused.status == "error" and refused.error_type == "ThreadPausedError"
    assert "Command(resume=...)" in refused.error and "None" in refused.error
    assert graph.get_state(_config("paused")).interrupts  # the pause is kept
    asked = nbagent.start(graph, None, display=False, reset=False, config=_config("paused"))
    wait_until(lambda: asked.pending_approvals, timeout=20)
    assert asked.approve(asked.pending_approvals[0].call_id)
    record = asked.wait(timeout=20)
    assert record.status == "success" and record.output == "3"
    assert _every_call_answered(graph.get_state(_config("paused")).values["messages"])


def test_an_interrupt_without_a_checkpointer_ends_the_run_as_ainvoke_does() -> None:
    graph = _ask_graph().builder.compile()  # no checkpointer: nothing could resume the pause
    plain = asyncio.run(graph.ainvoke({"question": "q"}))
    record = nbagent.run(graph, {"question": "q"}, display=False)
    assert record.status == "success", record.error
    assert set(record.output) == set(plain) and record.output["__interrupt__"][0].value == {"question": "q"}
    assert not [c for s in record.steps for c in s.tool_calls if c.tool == "interrupt"]


def test_approve_and_deny_refuse_a_question_that_asks_for_an_answer() -> None:
    run = nbagent.start(_ask_graph(), {"question": "name?"}, display=False, config=_config("q"))
    wait_until(lambda: run.pending_approvals, timeout=20)
    [pending] = run.pending_approvals
    with pytest.raises(ValueError, match=r"\.resume\(value\)"):
        run.approve(pending.call_id)
    with pytest.raises(ValueError, match=r"\.resume\(value\)"):
        pending.deny("no")
    assert pending.resume("Ada")
    assert run.wait(timeout=20).output["log"] == ["asked", "got Ada"]


@pytest.mark.parametrize(
    ("allowed", "refused", "taken"),
    [(["approve", "edit"], "deny", "approve"), (["reject", "edit"], "approve", "deny")],
)
def test_approve_and_deny_refuse_a_decision_the_review_does_not_allow(
    allowed: list[str], refused: str, taken: str
) -> None:
    graph = _hitl_agent([reply("", [("add", {"a": 1, "b": 2})]), reply("ok")], [add], allowed)()
    run = nbagent.start(graph, "add", display=False, config=_config(f"allowed-{refused}"))
    wait_until(lambda: run.pending_approvals, timeout=20)
    call_id = run.pending_approvals[0].call_id
    with pytest.raises(ValueError, match="does not allow"):
        getattr(run, refused)(call_id)
    assert run.pending_approvals  # still waiting: nothing was sent to the graph
    assert getattr(run, taken)(call_id)
    record = run.wait(timeout=20)
    assert record.status == "success", record.error
    assert record.steps[0].tool_calls[0].status == ("ok" if taken == "approve" else "denied")


def test_a_timeout_on_a_review_that_allows_no_rejection_ends_the_run_and_keeps_the_pause() -> None:
    graph = _hitl_agent([reply("", [("add", {"a": 1, "b": 2})]), reply("ok")], [add], ["approve", "edit"])()
    record = nbagent.run(graph, "add", display=False, approval_timeout_s=0.2, config=_config("tmo"))
    assert record.status == "interrupted" and record.stop_reason == "timed_out", record.error
    assert record.steps[0].tool_calls[0].approval == "timed_out"
    assert graph.get_state(_config("tmo")).interrupts  # answer it later with Command(resume=...)


@pytest.mark.filterwarnings("ignore::nbagent.runtime.interrupts.BlockingWaitWarning")
def test_the_view_draws_only_allowed_decisions_and_a_second_click_says_so(views: list[Any]) -> None:
    graph = _hitl_agent([reply("", [("add", {"a": 1, "b": 2})]), reply("no")], [add], ["reject", "edit"])()
    run = nbagent.start(graph, "add", display=True, config=_config("view-allowed"))
    [view] = views
    wait_until(lambda: view.approvals.rows, timeout=20)
    [row] = view.approvals.rows.values()
    assert not hasattr(row, "approve_button") and hasattr(row, "edit_button")
    row.deny_button.click()
    row.deny_button.click()  # a double click: said in the row, never raised into the kernel
    assert "already answered" in row.message.value
    assert run.wait(timeout=20).status == "success"


@pytest.mark.filterwarnings("ignore::nbagent.runtime.interrupts.BlockingWaitWarning")
def test_a_late_send_on_an_answered_question_is_said_in_the_row(views: list[Any]) -> None:
    run = nbagent.start(_ask_graph(), {"question": "name?"}, display=True, config=_config("view-late"))
    [view] = views
    wait_until(lambda: view.approvals.rows, timeout=20)
    [row] = view.approvals.rows.values()
    row.answer.value = "Grace"
    row.send_button.click()
    run.wait(timeout=20)
    row.send_button.click()  # the request is gone: no exception, a note in the row
    assert "no single pending interrupt" in row.message.value


def test_a_stop_reaches_a_node_that_swallowed_the_first_cancel() -> None:
    """LangGraph cancels a running node once and waits for it; a node that loses that cancel (as
    CPython 3.11's ``asyncio.wait_for`` can, inside langchain-openai's chunk timeout) would hold
    the Stop until it finished. nbagent delivers the cancel again until the node ends."""
    from langgraph.graph import END, START, MessagesState, StateGraph

    progress: list[str] = []

    async def stubborn(state: MessagesState) -> dict[str, Any]:
        progress.append("started")
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            progress.append("swallowed")
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            progress.append("cancelled again")
            raise
        return {"messages": []}

    builder = StateGraph(MessagesState)
    builder.add_node("stubborn", stubborn)
    builder.add_edge(START, "stubborn")
    builder.add_edge("stubborn", END)
    graph = builder.compile(checkpointer=InMemorySaver())
    run = nbagent.start(graph, "go", display=False, config=_config("swallow"))
    wait_until(lambda: progress == ["started"])
    assert run.interrupt() is True
    record = run.wait(timeout=60)
    assert record.status == "interrupted"
    assert progress == ["started", "swallowed", "cancelled again"]


def test_a_model_that_fails_before_it_says_anything_is_a_step_with_the_error() -> None:
    graph = create_agent(ScriptedChatModel(replies=[]), tools=[add])
    record = nbagent.run(graph, "go", display=False)
    assert record.status == "error" and record.error_type == "IndexError"
    (failed,) = record.steps  # the node's time and error, though its model never streamed
    (node,) = failed.nodes
    assert not failed.tool_calls
    assert (node.name, node.status, node.error) == ("model", "error", "the scripted model has no reply left")


def test_a_tool_node_under_another_name_stopped_mid_tool_shows_its_call_once() -> None:
    """LangGraph's classic tutorial names its ``ToolNode`` ``action``: still a tool node."""
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    model = ScriptedChatModel(replies=[reply("", [("hang", {"seconds": 30})]), reply("after")])

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("action", ToolNode([hang]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition, {"tools": "action", END: END})
    builder.add_edge("action", "agent")
    started = len(STARTED)
    run = nbagent.start(builder.compile(), "wait", display=False)
    wait_until(lambda: len(STARTED) > started, timeout=20)
    run.interrupt("now")
    record = run.wait(timeout=20)
    assert record.status == "interrupted"
    assert [[(c.tool, c.status) for c in s.tool_calls] for s in record.steps] == [[("hang", "cancelled")]]


def test_a_failing_node_inside_a_subgraph_is_one_line_named_by_its_path() -> None:
    from langgraph.graph import START, StateGraph

    outer = StateGraph(MapState)
    outer.add_node("researcher", _failing_graph())
    outer.add_edge(START, "researcher")
    record = nbagent.run(outer.compile(), {"topics": []}, display=False)
    assert record.status == "error" and record.error_type == "RuntimeError"
    lines = [(n.name, n.status, n.error) for s in record.steps for n in s.nodes]
    assert lines == [("researcher › fail", "error", "the node failed")] and not record.tool_calls
