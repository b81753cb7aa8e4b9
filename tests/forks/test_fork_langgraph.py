"""``nbagent.fork`` of a LangGraph run: from the checkpoint before step k's model node on a new
thread, from the message prefix without a checkpointer, and from a SQLite checkpointer in a new
process."""

from __future__ import annotations

import asyncio

import pytest
from fork_support import fresh_process

pytestmark = pytest.mark.needs("langgraph")

from fork_langgraph_agents import five_steps, make_graph, texts  # noqa: E402
from langchain_core.messages import AIMessage  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph_fakes import ScriptedChatModel  # noqa: E402

import nbagent  # noqa: E402
from nbagent.errors import ForkError  # noqa: E402


def original(checkpointer=None, **options):
    model, calls = ScriptedChatModel(replies=five_steps()), []
    graph = make_graph(model, calls, checkpointer)
    record = nbagent.run(graph, "Add 1+1, 2+2, 3+3 and 4+4.", display=False, **options)
    assert record.status == "success" and len(record.steps) == 5 and len(calls) == 4
    return graph, model, calls, record


@pytest.mark.parametrize("saver", [InMemorySaver, None], ids=["checkpointer", "messages"])
def test_a_fork_at_step_3_sends_step_3s_messages_and_makes_no_earlier_call(saver):
    graph, model, calls, record = original(saver() if saver else None)
    other, other_calls = ScriptedChatModel(replies=[AIMessage("forty")]), []
    forked_graph = make_graph(other, other_calls, graph.checkpointer if saver else None)
    fork = nbagent.fork(record, at_step=3, agent=forked_graph, display=False).wait(20)
    assert other.calls == 1 and other_calls == [] and model.calls == 5 and len(calls) == 4
    assert texts(other.seen[0]) == texts(model.seen[2])
    assert fork.status == "success" and fork.output == "forty" and [s.number for s in fork.steps] == [3]


def test_the_original_thread_is_left_unchanged_and_edits_reach_the_model():
    graph, model, _calls, record = original(InMemorySaver())
    thread = record.fork_data["thread_id"]
    config = {"configurable": {"thread_id": thread}}
    before = asyncio.run(graph.aget_state(config))
    other = ScriptedChatModel(replies=[AIMessage("ok")])
    fork = nbagent.fork(record, 3, agent=make_graph(other, [], graph.checkpointer),
                        tool_results={"c2": "broken"}, message="Check the units.",
                        display=False).wait(20)  # fmt: skip
    after = asyncio.run(graph.aget_state(config))
    assert after.config == before.config
    assert texts(after.values["messages"]) == texts(before.values["messages"])
    assert fork.fork_data["thread_id"] != thread
    expected = texts(model.seen[2])
    expected[expected.index(("tool", "4", "c2"))] = ("tool", "broken", "c2")
    assert texts(other.seen[0]) == [*expected, ("human", "Check the units.", None)]
    # The fork's own thread holds the fork's messages (the system prompt is the model node's).
    state = asyncio.run(graph.aget_state({"configurable": {"thread_id": fork.fork_data["thread_id"]}}))
    assert texts(state.values["messages"])[: len(expected)] == texts(other.seen[0])[1:]


def test_a_fork_of_a_fork_and_after_the_last_step():
    graph, _model, _calls, record = original(InMemorySaver())
    first = ScriptedChatModel(replies=[AIMessage("forty")])
    fork = nbagent.fork(record, 6, agent=make_graph(first, [], graph.checkpointer), message="Double it.",
                        display=False).wait(20)  # fmt: skip
    assert texts(first.seen[0])[-1] == ("human", "Double it.", None) and fork.steps[0].number == 6
    again = ScriptedChatModel(replies=[AIMessage("eighty")])
    nbagent.fork(fork, 6, agent=make_graph(again, [], graph.checkpointer), display=False).wait(20)
    assert texts(again.seen[0]) == texts(first.seen[0])


def test_a_graph_without_checkpointer_or_messages_cannot_fork():
    def double(state: dict) -> dict:
        return {"n": state["n"] * 2}

    builder = StateGraph(dict)
    builder.add_node("double", double)
    builder.add_edge(START, "double")
    builder.add_edge("double", END)
    graph = builder.compile()
    record = nbagent.run(graph, {"n": 2}, display=False)
    with pytest.raises(ForkError, match="no checkpointer and its state is not a list of messages"):
        nbagent.fork(record, len(record.steps) + 1, display=False)


def test_a_stored_run_forks_in_a_fresh_process_from_a_sqlite_checkpointer(tmp_path):
    store, checkpoints = tmp_path / "runs.db", tmp_path / "checkpoints.db"
    setup = f"""
import asyncio, json, nbagent
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from nbagent.runtime.loop import runner_loop
from langgraph_fakes import ScriptedChatModel
from fork_langgraph_agents import five_steps, make_graph, texts
from langchain_core.messages import AIMessage
import aiosqlite

async def saver():  # made on the loop the graph runs on
    return AsyncSqliteSaver(await aiosqlite.connect({str(checkpoints)!r}))

checkpointer = asyncio.run_coroutine_threadsafe(saver(), runner_loop()).result()
"""
    first = fresh_process(
        setup
        + f"""
model, calls = ScriptedChatModel(replies=five_steps()), []
graph = make_graph(model, calls, checkpointer)
record = nbagent.run(graph, "Add 1+1, 2+2, 3+3 and 4+4.", store={str(store)!r}, display=False)
print(json.dumps({{"run_id": record.run_id, "status": record.status, "seen": texts(model.seen[2])}}))
"""
    )
    assert first["status"] == "success"
    out = fresh_process(
        setup
        + f"""
other, calls = ScriptedChatModel(replies=[AIMessage("forty")]), []
graph = make_graph(other, calls, checkpointer)
fork = nbagent.fork({first["run_id"]!r}, 3, agent=graph, store={str(store)!r}, display=False).wait(20)
seen = texts(other.seen[0])
print(json.dumps({{"status": fork.status, "calls": calls, "requests": other.calls, "seen": seen}}))
"""
    )
    assert out["status"] == "success" and out["calls"] == [] and out["requests"] == 1
    assert out["seen"] == first["seen"]
    # A fresh process whose checkpointer does not have the thread is told before anything runs.
    refused = fresh_process(f"""
import json, nbagent
from langgraph.checkpoint.memory import InMemorySaver
from langgraph_fakes import ScriptedChatModel
from fork_langgraph_agents import make_graph
try:
    nbagent.fork({first["run_id"]!r}, 3, agent=make_graph(ScriptedChatModel(replies=[]), [], InMemorySaver()),
                 store={str(store)!r}, display=False)
except nbagent.errors.ForkError as exc:
    print(json.dumps({{"error": str(exc)}}))
""")
    assert "checkpointer has no checkpoint" in refused["error"] and "AsyncSqliteSaver" in refused["error"]
