"""LangGraph graphs under nbagent: Stop in each phase, end states, continuing a thread, turns per
thread, interrupts answered in the view and from code, and records of plain runs."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph_fakes import ScriptedChatModel, reply
from langgraph_scenarios import _ask_graph, _chain_graph, _hitl_agent, add
from support import wait_until

import nbagent
from nbagent.adapters.langgraph.source import records_from_langgraph

pytestmark = pytest.mark.needs("langgraph")

TOOL_STARTED: list[float] = []
TOOL_CANCELLED: list[float] = []


@tool
async def slow_tool(seconds: float) -> str:
    """Wait, then answer."""
    TOOL_STARTED.append(time.perf_counter())
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        TOOL_CANCELLED.append(time.perf_counter())
        raise
    return "slept"


def _config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _slow_model_agent(delay_s: float = 0.05) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(
        replies=[reply("a long streamed answer " * 20, usage=(10, 50))],
        delay_s=delay_s,
        chunk_size=3,
        cycle=True,
    )
    return create_agent(model, tools=[], checkpointer=InMemorySaver()), model


def test_stop_now_mid_model_stream_cancels_the_model_call_and_the_thread_goes_on() -> None:
    graph, model = _slow_model_agent()
    run = nbagent.start(graph, "talk", display=False, config=_config("s1"))
    wait_until(lambda: run.live_text(1), timeout=20)
    assert run.interrupt("now")
    record = run.wait(timeout=20)
    assert record.status == "interrupted" and record.stop_reason == "user"
    assert record.steps[0].interrupted and record.steps[0].model_output  # the text so far is kept
    wait_until(lambda: model.cancelled == 1)
    model.delay_s = 0.0
    again = nbagent.run(graph, "go on", display=False, reset=False, config=_config("s1"))
    assert again.status == "success", again.error
    texts = [m["content"] for m in again.messages if m["role"] == "user"]
    assert texts == ["talk", "go on"]


def test_stop_now_mid_tool_cancels_the_tool_and_keeps_the_finished_model_step() -> None:
    model = ScriptedChatModel(replies=[reply("", [("slow_tool", {"seconds": 30})]), reply("done")])
    graph = create_agent(model, tools=[slow_tool], checkpointer=InMemorySaver())
    TOOL_CANCELLED.clear()
    started = len(TOOL_STARTED)
    run = nbagent.start(graph, "wait", display=False, config=_config("s2"))
    wait_until(lambda: len(TOOL_STARTED) > started, timeout=20)
    run.interrupt("now")
    record = run.wait(timeout=20)
    assert record.status == "interrupted"
    assert record.steps[0].input_tokens == 10  # the finished model call keeps its usage
    assert [c.status for c in record.steps[0].tool_calls] == ["cancelled"]
    wait_until(lambda: TOOL_CANCELLED, timeout=5)
    # The thread's checkpoint is the one before the tools ran: going on runs them again.
    assert graph.get_state(_config("s2")).next == ("tools",)


def test_stop_after_step_finishes_the_super_step_and_starts_no_other() -> None:
    model = ScriptedChatModel(replies=[reply("", [("slow_tool", {"seconds": 0.5})]), reply("3")])
    graph = create_agent(model, tools=[slow_tool], checkpointer=InMemorySaver())
    started = len(TOOL_STARTED)
    run = nbagent.start(graph, "wait", display=False, config=_config("s3"))
    wait_until(lambda: len(TOOL_STARTED) > started, timeout=20)
    run.interrupt("after_step")
    record = run.wait(timeout=20)
    assert record.status == "interrupted" and record.stop_reason == "user_after_step"
    assert model.calls == 1  # the next model call never started
    [call] = record.steps[0].tool_calls
    assert call.status == "ok" and call.result == "slept"  # the super-step in flight finished
    after = nbagent.run(graph, None, display=False, reset=False, config=_config("s3"))
    assert after.status == "success" and after.output == "3"


def test_recursion_limit_is_max_steps_and_max_steps_sets_it() -> None:
    model = ScriptedChatModel(replies=[reply("", [("add", {"a": 1, "b": 1})])], cycle=True)
    graph = create_agent(model, tools=[add], checkpointer=InMemorySaver())
    record = nbagent.run(graph, "loop", display=False, max_steps=5, config=_config("r1"))
    assert record.status == "max_steps" and "Recursion limit of 5" in record.error
    assert record.steps and all(s.end_s is not None for s in record.steps)


def test_a_failing_node_ends_error_with_its_exception() -> None:
    from langgraph_scenarios import _failing_graph

    record = nbagent.run(_failing_graph(), {"topics": ["x"]}, display=False)
    assert (
        record.status == "error" and record.error_type == "RuntimeError" and "the node failed" in record.error
    )


def test_continuing_a_graph_without_checkpointer_says_why_it_cannot() -> None:
    graph = create_agent(ScriptedChatModel(replies=[reply("hi")], cycle=True), tools=[])
    record = nbagent.run(graph, "again", display=False, reset=False)
    assert record.status == "error" and "has no checkpointer" in record.error


def test_a_text_task_for_a_graph_without_messages_is_refused_clearly() -> None:
    record = nbagent.run(_chain_graph(), "text", display=False)
    assert record.status == "error" and "pass the input state as a dict" in record.error


def test_runs_on_one_thread_take_turns_and_other_threads_run_side_by_side() -> None:
    graph, _model = _slow_model_agent(delay_s=0.01)
    first = nbagent.start(graph, "one", display=False, config=_config("same"))
    second = nbagent.start(graph, "two", display=False, config=_config("same"))
    other = nbagent.start(graph, "three", display=False, config=_config("other"))
    wait_until(lambda: second.record.queued_after == first.run_id, timeout=20)
    wait_until(lambda: other.record.steps, timeout=20)  # not queued behind "same"
    assert other.record.queued_after is None
    for run in (first, second, other):
        assert run.wait(timeout=60).status == "success"
    humans = [m for m in graph.get_state(_config("same")).values["messages"] if m.type == "human"]
    assert [m.content for m in humans] == ["one", "two"]


def test_one_source_object_shared_by_runs_on_two_threads_keeps_each_run_on_its_thread() -> None:
    from nbagent.adapters.langgraph.source import LangGraphSource

    graph, _model = _slow_model_agent(delay_s=0.01)
    source = LangGraphSource(graph)
    a0 = nbagent.start(source, "a0", display=False, config=_config("A"))
    a1 = nbagent.start(source, "a1", display=False, config=_config("A"))  # queued behind a0
    b = nbagent.start(graph, "b", display=False, config=_config("B"))  # the graph itself: same line
    wait_until(lambda: a1.record.queued_after == a0.run_id, timeout=20)
    for run in (a0, a1, b):
        assert run.wait(timeout=60).status == "success"
    for thread, asked in (("A", ["a0", "a1"]), ("B", ["b"])):
        humans = [m for m in graph.get_state(_config(thread)).values["messages"] if m.type == "human"]
        assert [m.content for m in humans] == asked


def test_without_a_thread_id_nbagent_picks_one_and_reset_false_continues_it() -> None:
    graph = create_agent(
        ScriptedChatModel(replies=[reply("a"), reply("b")]), tools=[], checkpointer=InMemorySaver()
    )
    first = nbagent.start(graph, "one", display=False)
    first.wait(timeout=20)
    second = nbagent.start(graph, "two", display=False, reset=False)
    record = second.wait(timeout=20)
    assert record.status == "success" and second.source.thread_id == first.source.thread_id
    assert [m["content"] for m in record.messages if m["role"] == "user"] == ["one", "two"]


def test_a_text_interrupt_is_answered_from_code_in_the_same_run() -> None:
    run = nbagent.start(_ask_graph(), {"question": "name?"}, display=False, config=_config("i1"))
    wait_until(lambda: run.pending_approvals, timeout=20)
    [pending] = run.pending_approvals
    assert pending.arguments == {"question": "name?"} and pending.form == {"kind": "text"}
    with pytest.raises(ValueError, match=r"\.resume\(value\)"):
        pending.edit({})
    assert pending.resume("Ada")
    record = run.wait(timeout=20)
    assert record.status == "success" and record.output["log"] == ["asked", "got Ada"]
    assert not record.tool_calls  # a question is a node line, not a tool call
    [node] = [n for s in record.steps for n in s.nodes if n.name == "interrupt"]
    assert (node.status, node.output) == ("ok", "Ada")


def test_interrupts_end_returns_as_ainvoke_does_and_a_command_resumes_later() -> None:
    from langgraph.types import Command

    graph = _ask_graph()
    record = nbagent.run(graph, {"question": "q"}, display=False, interrupts="end", config=_config("i2"))
    assert record.status == "success" and "__interrupt__" in record.output
    later = nbagent.run(graph, Command(resume="B"), display=False, reset=False, config=_config("i2"))
    assert later.status == "success" and later.output["answer"] == "B"


def test_a_timed_out_review_is_a_rejection_and_a_timed_out_question_ends_the_run() -> None:
    build = _hitl_agent(
        [reply("", [("add", {"a": 1, "b": 2})]), reply("not added")], [add], ["approve", "reject"]
    )
    record = nbagent.run(build(), "add", display=False, approval_timeout_s=0.2, config=_config("t1"))
    assert record.status == "success"
    [call] = record.steps[0].tool_calls
    assert call.approval == "timed_out" and call.status == "denied"
    asked = nbagent.run(
        _ask_graph(), {"question": "q"}, display=False, approval_timeout_s=0.2, config=_config("t2")
    )
    assert asked.status == "interrupted" and asked.stop_reason == "timed_out"


def test_stop_after_step_while_a_question_waits_ends_the_run_and_keeps_the_pause() -> None:
    graph = _ask_graph()
    run = nbagent.start(graph, {"question": "q"}, display=False, config=_config("t3"))
    wait_until(lambda: run.pending_approvals, timeout=20)
    run.interrupt("after_step")
    assert run.wait(timeout=20).status == "interrupted"
    assert graph.get_state(_config("t3")).interrupts  # still paused: answer it later


@pytest.mark.filterwarnings("ignore::nbagent.runtime.interrupts.BlockingWaitWarning")
def test_the_view_shows_an_interrupt_and_its_send_button_resumes_the_graph(views: list[Any]) -> None:
    from nbagent.view.interrupts import InterruptRow

    run = nbagent.start(_ask_graph(), {"question": "name?"}, display=True, config=_config("v1"))
    [view] = views
    wait_until(lambda: view.approvals.rows, timeout=20)
    [row] = view.approvals.rows.values()
    assert isinstance(row, InterruptRow) and "name?" in row.info.value
    row.answer.value = "Grace"
    row.send_button.click()
    assert run.wait(timeout=20).output["log"] == ["asked", "got Grace"]


@pytest.mark.filterwarnings("ignore::nbagent.runtime.interrupts.BlockingWaitWarning")
def test_the_view_edits_the_arguments_of_a_reviewed_call(views: list[Any]) -> None:
    build = _hitl_agent(
        [reply("", [("add", {"a": 1, "b": 2})]), reply("10")], [add], ["approve", "edit", "reject"]
    )
    run = nbagent.start(build(), "add", display=True, config=_config("v2"))
    [view] = views
    wait_until(lambda: view.approvals.rows, timeout=20)
    [row] = view.approvals.rows.values()
    row.arguments.value = "{not json"
    row.edit_button.click()
    assert "not JSON" in row.message.value and run.pending_approvals
    row.arguments.value = '{"a": 5, "b": 5}'
    row.edit_button.click()
    record = run.wait(timeout=20)
    assert record.status == "success"
    [answer] = [m["content"] for m in record.messages if m["role"] == "tool"]
    assert answer.endswith("10")  # the call ran with the edited arguments


def test_records_from_langgraph_match_the_live_record() -> None:
    def build() -> Any:
        model = ScriptedChatModel(
            replies=[reply("adding", [("add", {"a": 1, "b": 2})]), reply("3", usage=None)]
        )
        return create_agent(model, tools=[add], checkpointer=InMemorySaver())

    plain = build()
    asyncio.run(plain.ainvoke({"messages": [{"role": "user", "content": "add"}]}, _config("p")))
    [offline] = records_from_langgraph(plain.get_state(_config("p")))
    live = nbagent.run(build(), "add", display=False, config=_config("p"))
    assert offline.output == live.output == "3" and offline.task == live.task
    shape = [
        [(s.kind, s.model_output, s.input_tokens, s.output_tokens, s.usage_source) for s in r.steps]
        for r in (offline, live)
    ]
    assert shape[0] == shape[1]
    calls = [
        [(c.tool, c.arguments, c.status, c.result) for s in r.steps for c in s.tool_calls]
        for r in (offline, live)
    ]
    assert calls[0] == calls[1]
    assert records_from_langgraph(list(plain.get_state_history(_config("p"))))[0].output == "3"


def test_import_nbagent_does_not_import_langgraph() -> None:
    code = (
        "import sys, nbagent, nbagent.adapters; nbagent.adapters.source_for(object()); "
        "print('langgraph' in sys.modules)"
    )
    assert (
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()
        == "False"
    )
