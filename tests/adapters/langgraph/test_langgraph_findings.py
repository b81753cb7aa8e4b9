"""LangGraph under nbagent, as LangGraph users expect it: graph nodes are node lines (not tool
calls), ``run.result`` is what ``ainvoke`` returns, and the hostile tries of the adapter (a Stop
between parallel calls, going on after a Stop, edited approvals, questions in a terminal,
structured output in a node, graphs that end on a tool-calling reply, threads, several
interrupts at once) each leave the thread and the record as a plain run would."""

from __future__ import annotations

import asyncio
import io
import operator
from typing import Annotated, Any

import pytest

pytest.importorskip("langgraph", reason="the langgraph extra is not installed")
pytest.importorskip("langchain", reason="LangChain agents (create_agent) need langchain")

from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import interrupt
from langgraph_fakes import ScriptedChatModel, reply
from langgraph_scenarios import MapState, _hitl_agent, add, lookup
from pydantic import BaseModel
from support import wait_until
from typing_extensions import TypedDict

import nbagent
from nbagent.adapters.langgraph.source import LangGraphSource
from nbagent.adapters.langgraph.threads import INTERRUPTED_OUTPUT
from nbagent.view.html import step_html
from nbagent.view.terminal import TextView
from nbagent.view.terminal_approvals import TerminalApprovals

SENT: list[str] = []
SLOW_STARTED: list[str] = []


@tool
def send_email(to: str) -> str:
    """Send an email."""
    SENT.append(to)
    return f"sent to {to}"


@tool
async def slow_charge(amount: int) -> str:
    """Charge a card, slowly."""
    SLOW_STARTED.append("charge")
    await asyncio.sleep(30)
    return f"charged {amount}"


@tool
async def charge(amount: int) -> str:
    """Charge a card."""
    return f"charged {amount}"


def _config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _three_nodes() -> Any:
    builder = StateGraph(MapState)
    builder.add_node("plan", lambda s: {"jokes": ["planned"]})
    builder.add_node("write", lambda s: {"jokes": ["written"]})
    builder.add_node("check", lambda s: {"jokes": ["checked"]})
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "write")
    builder.add_edge("write", "check")
    return builder.compile()


def test_graph_nodes_are_node_lines_not_tool_calls_nor_counted_by_max_tool_calls() -> None:
    from nbagent.analytics import tool_calls_frame

    out = io.StringIO()
    record = nbagent.run(
        _three_nodes(),
        {"topics": []},
        display=False,
        sinks=[TextView(out)],
        limits=nbagent.Limits(max_tool_calls=1),
    )
    assert record.status == "success"
    assert record.tool_calls == [] and len(tool_calls_frame([record])) == 0
    nodes = [(n.name, n.status) for s in record.steps for n in s.nodes]
    assert nodes == [("plan", "ok"), ("write", "ok"), ("check", "ok")]
    assert "plan" in step_html(record.steps[0]) and "◇ plan" in str(record) and "◇ plan" in out.getvalue()


def test_a_stored_run_keeps_its_node_lines_and_an_older_store_reads_without_them(tmp_path) -> None:
    """The store writes a step's nodes with its row (schema 7); a version 6 file, which has no
    ``nodes`` column, reads back with none and migrates."""
    import dataclasses
    import sqlite3

    from nbagent.analytics.store import SCHEMA_VERSION, RunStore

    path = tmp_path / "runs.db"
    store = RunStore(path)
    record = nbagent.run(_three_nodes(), {"topics": []}, display=False, store=store)
    stored = store.record(record.run_id)
    assert [(n.name, n.status) for s in stored.steps for n in s.nodes] == [
        ("plan", "ok"), ("write", "ok"), ("check", "ok")
    ]  # fmt: skip
    assert [dataclasses.asdict(n) for s in stored.steps for n in s.nodes] == [
        dataclasses.asdict(n) for s in record.steps for n in s.nodes
    ]
    store.close()
    with sqlite3.connect(path) as conn:  # the file as version 6 wrote it
        conn.execute("ALTER TABLE steps DROP COLUMN nodes")
        conn.execute("PRAGMA user_version = 6")
    old = RunStore(path, readonly=True).record(record.run_id)
    assert [n for s in old.steps for n in s.nodes] == [] and len(old.steps) == len(record.steps)
    migrated = RunStore(path)
    assert migrated.schema_version == SCHEMA_VERSION == 7
    again = nbagent.run(_three_nodes(), {"topics": []}, display=False, store=migrated)
    assert len([n for s in migrated.record(again.run_id).steps for n in s.nodes]) == 3
    migrated.close()


def test_run_result_is_what_ainvoke_returns_with_the_output_schema() -> None:
    class Question(TypedDict):
        q: str

    class Answer(TypedDict):
        a: str

    class Inner(TypedDict, total=False):
        q: str
        a: str
        scratch: str

    builder = StateGraph(Inner, input_schema=Question, output_schema=Answer)
    builder.add_node("answer", lambda s: {"a": s["q"] + "!", "scratch": "internal"})
    builder.add_edge(START, "answer")
    graph = builder.compile()
    plain = asyncio.run(graph.ainvoke({"q": "hi"}))
    run = nbagent.start(graph, {"q": "hi"}, display=False)
    record = run.wait(timeout=20)
    assert run.result == plain == {"a": "hi!"} and record.output == {"a": "hi!"}


def test_a_graph_whose_state_is_a_list_gets_the_list_and_a_stop_has_no_result() -> None:
    builder = StateGraph(Annotated[list, operator.add])
    builder.add_node("more", lambda items: [len(items)])
    builder.add_edge(START, "more")
    run = nbagent.start(builder.compile(), ["a", "b"], display=False)
    assert run.wait(timeout=20).status == "success" and run.result == ["a", "b", 2]
    slow = ScriptedChatModel(replies=[reply("slow " * 50)], delay_s=0.05, chunk_size=2)
    stopped = nbagent.start(create_agent(slow, tools=[]), "talk", display=False)
    wait_until(lambda: stopped.live_text(1), timeout=20)
    stopped.interrupt("now")
    assert stopped.wait(timeout=20).status == "interrupted" and stopped.result is None


def test_with_structured_output_in_a_node_is_no_tool_call() -> None:
    class Route(BaseModel):
        to: str

    model = ScriptedChatModel(replies=[reply("", [("Route", {"to": "sales"})])])

    async def route(state: MessagesState) -> dict[str, Any]:
        decision = await model.with_structured_output(Route).ainvoke(state["messages"])
        return {"messages": [AIMessage(f"routed to {decision.to}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("route", route)
    builder.add_edge(START, "route")
    record = nbagent.run(builder.compile(), "where?", display=False)
    assert record.status == "success" and record.tool_calls == []
    assert record.output == "routed to sales"


def _parallel_stopped(thread: str) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(
        replies=[reply("", [("send_email", {"to": "bob"}), ("slow_charge", {"amount": 5})]), reply("done")]
    )
    graph = create_agent(model, tools=[send_email, slow_charge], checkpointer=InMemorySaver())
    started = len(SLOW_STARTED)
    run = nbagent.start(graph, "email and charge", display=False, config=_config(thread))
    wait_until(lambda: len(SLOW_STARTED) > started and run.record.tool_calls[0].status == "ok", timeout=20)
    run.interrupt("now")
    assert run.wait(timeout=20).status == "interrupted"
    return graph, model


def test_a_new_message_after_a_stop_between_parallel_calls_keeps_the_finished_result() -> None:
    graph, model = _parallel_stopped("p1")
    record = nbagent.run(graph, "and now?", display=False, reset=False, config=_config("p1"))
    assert record.status == "success" and record.output == "done"
    answers = {m.tool_call_id: (m.content, m.status) for m in model.seen[-1] if m.type == "tool"}
    assert answers == {
        "call_send_email_0_": ("sent to bob", "success"),
        "call_slow_charge_1_": (INTERRUPTED_OUTPUT, "error"),
    }


def test_going_on_with_none_after_a_stop_mid_tool_records_the_tool_that_runs_again() -> None:
    model = ScriptedChatModel(replies=[reply("", [("slow_charge", {"amount": 5})]), reply("paid")])
    graph = create_agent(model, tools=[slow_charge], checkpointer=InMemorySaver())
    started = len(SLOW_STARTED)
    run = nbagent.start(graph, "charge", display=False, config=_config("g1"))
    wait_until(lambda: len(SLOW_STARTED) > started, timeout=20)
    run.interrupt("now")
    run.wait(timeout=20)
    again = nbagent.start(graph, None, display=False, reset=False, config=_config("g1"))
    wait_until(lambda: len(SLOW_STARTED) > started + 1, timeout=20)
    again.interrupt("now")  # the tool really ran again: this run's record says so
    calls = [(c.tool, c.arguments, c.status) for c in again.wait(timeout=20).tool_calls]
    assert calls == [("slow_charge", {"amount": 5}, "cancelled")]


def test_going_on_with_none_after_interrupt_before_records_the_call_and_its_result() -> None:
    model = ScriptedChatModel(replies=[reply("", [("charge", {"amount": 7})]), reply("paid")])
    graph = create_agent(model, tools=[charge], checkpointer=InMemorySaver(), interrupt_before=["tools"])
    first = nbagent.run(graph, "charge", display=False, config=_config("g2"))
    assert first.status == "success" and [c.status for c in first.tool_calls] == ["deferred"]
    record = nbagent.run(graph, None, display=False, reset=False, config=_config("g2"))
    assert [(c.tool, c.status, c.result) for c in record.tool_calls] == [("charge", "ok", "charged 7")]
    assert record.output == "paid"


def test_a_review_answered_in_a_later_run_records_the_tools_result_not_the_decision() -> None:
    graph = _hitl_agent([reply("", [("add", {"a": 1, "b": 2})]), reply("3")], [add], ["approve", "reject"])()
    paused = nbagent.run(graph, "add", display=False, interrupts="end", config=_config("g3"))
    assert "__interrupt__" in paused.output
    run = nbagent.start(graph, None, display=False, reset=False, config=_config("g3"))
    wait_until(lambda: run.pending_approvals, timeout=20)
    run.approve(run.pending_approvals[0].call_id)
    record = run.wait(timeout=20)
    assert [(c.tool, c.approval, c.status, c.result) for c in record.tool_calls] == [
        ("add", "approved", "ok", "3")
    ]


def test_an_edited_approval_records_the_arguments_the_tool_ran_with() -> None:
    build = _hitl_agent(
        [reply("", [("lookup", {"city": "Rome"})]), reply("ok")], [lookup], ["approve", "edit"]
    )
    run = nbagent.start(build(), "weather", display=False, config=_config("e1"))
    wait_until(lambda: run.pending_approvals, timeout=20)
    run.pending_approvals[0].edit({"city": "Lima"})
    [call] = run.wait(timeout=20).tool_calls
    assert (call.arguments, call.approval) == ({"city": "Lima"}, "approved")
    assert call.result.endswith("sunny in Lima")


def _question_graph() -> Any:
    def ask(state: MapState) -> dict[str, Any]:
        return {"jokes": [f"told {interrupt('a topic?')}"]}

    builder = StateGraph(MapState)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    return builder.compile(checkpointer=InMemorySaver())


def _asked_at_a_terminal(thread: str, answer: str) -> nbagent.Run:
    graph = _question_graph()
    run = nbagent.Run(
        graph, {"topics": []}, source=LangGraphSource(graph), options={"config": _config(thread)}
    )
    run.add_sink(TerminalApprovals(run, ask=lambda prompt: answer, interactive=lambda: True))
    run.launch()
    return run


def test_a_question_in_a_pipe_ends_the_run_and_at_a_terminal_the_answer_resumes_the_graph() -> None:
    piped = nbagent.start(_question_graph(), {"topics": []}, display=True, config=_config("q1"))
    assert piped.wait(timeout=20).status == "interrupted"  # no one can answer: not a hang
    first, later = _asked_at_a_terminal("q2", "owls"), _asked_at_a_terminal("q3", "cats")
    assert first.wait(timeout=20).output == {"topics": [], "jokes": ["told owls"]}
    assert later.wait(timeout=20).output == {"topics": [], "jokes": ["told cats"]}


def test_a_graph_that_ends_on_a_tool_calling_reply_gets_no_interrupted_answer() -> None:
    model = ScriptedChatModel(replies=[reply("", [("Person", {"name": "Ada"})]), reply("next")])

    async def extract(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("extract", extract)
    builder.add_edge(START, "extract")
    graph = builder.compile(checkpointer=InMemorySaver())
    nbagent.run(graph, "Ada is here", display=False, config=_config("x1"))
    nbagent.run(graph, "more", display=False, reset=False, config=_config("x1"))
    contents = [m.content for m in graph.get_state(_config("x1")).values["messages"]]
    assert INTERRUPTED_OUTPUT not in contents


def test_reset_false_on_a_thread_continues_that_threads_latest_run() -> None:
    graph = create_agent(
        ScriptedChatModel(replies=[reply("a")], cycle=True), tools=[], checkpointer=InMemorySaver()
    )
    on_a = nbagent.run(graph, "one", display=False, config=_config("A"))
    nbagent.run(graph, "two", display=False, config=_config("B"))
    again = nbagent.run(graph, "three", display=False, reset=False, config=_config("A"))
    assert again.continues_run_id == on_a.run_id


def test_several_pending_interrupts_are_answered_together() -> None:
    class Two(TypedDict, total=False):
        answers: Annotated[list[str], operator.add]

    builder = StateGraph(Two)
    builder.add_node("left", lambda s: {"answers": [f"left {interrupt('left?')}"]})
    builder.add_node("right", lambda s: {"answers": [f"right {interrupt('right?')}"]})
    builder.add_edge(START, "left")
    builder.add_edge(START, "right")
    graph = builder.compile(checkpointer=InMemorySaver())
    run = nbagent.start(graph, {"answers": []}, display=False, config=_config("m1"))
    wait_until(lambda: len(run.pending_approvals) == 2, timeout=20)
    for pending in run.pending_approvals:
        pending.resume(pending.arguments.rstrip("?"))
    record = run.wait(timeout=20)
    assert record.status == "success" and sorted(record.output["answers"]) == ["left left", "right right"]
    questions = sorted(n.output for s in record.steps for n in s.nodes if n.name == "interrupt")
    assert record.tool_calls == [] and questions == ["left", "right"]
