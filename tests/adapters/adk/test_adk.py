"""Google ADK under nbagent: a Stop at each point a run can be, and the session afterwards.

Each Stop test checks the session, not only the record: every function call in it has a response
(the cut one an "aborted" one), and the user's own ``runner.run_async`` on that session takes the
next turn, whose model request (what a real model API would check) answers every call.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from support import wait_until

import nbagent

pytestmark = pytest.mark.needs("adk")

from adk_fakes import Turn, scripted  # noqa: E402
from google.adk import Agent, Workflow  # noqa: E402
from google.adk.agents import ParallelAgent, SequentialAgent  # noqa: E402
from google.adk.agents.run_config import RunConfig, StreamingMode  # noqa: E402
from google.adk.runners import InMemoryRunner  # noqa: E402
from google.adk.workflow import START  # noqa: E402
from google.genai import types  # noqa: E402

GATE_S = 60.0


def unanswered(session) -> list[str]:
    answered = {r.id for e in session.events for r in e.get_function_responses()}
    return [c.id for e in session.events for c in e.get_function_calls() if c.id not in answered]


def request_is_whole(request) -> bool:
    """Every call in a model request has its response (what a model API insists on)."""
    calls = {p.function_call.id for c in request.contents for p in c.parts or () if p.function_call}
    answers = {p.function_response.id for c in request.contents for p in c.parts or () if p.function_response}
    return calls <= answers


async def _plain_turn(runner, user_id, session_id, text):
    message = types.Content(role="user", parts=[types.Part(text=text)])
    return [e async for e in runner.run_async(user_id=user_id, session_id=session_id, new_message=message)]


def plain_turn(runner, user_id, session_id, text="and now?"):
    return asyncio.run(_plain_turn(runner, user_id, session_id, text))


class Gate:
    def __init__(self) -> None:
        self.opened = threading.Event()
        self.entered = threading.Event()

    def sync_tool(self) -> str:
        """Waits (sync)."""
        self.entered.set()
        self.opened.wait(GATE_S)
        return "opened"

    async def async_tool(self) -> str:
        """Waits (async)."""
        self.entered.set()
        while not self.opened.is_set():  # a fake tool's own poll
            await asyncio.sleep(0.005)
        return "opened"


def stop_and_check(agent, model, runner, until, task="go", **options):
    """Start on ``runner``, Stop once ``until(run)``, then check the record and the session."""
    session = asyncio.run(runner.session_service.create_session(app_name=runner.app_name, user_id="user"))
    run = nbagent.start(agent, task, display=False, runner=runner, session_id=session.id, **options)
    wait_until(lambda: until(run))
    assert run.interrupt()
    record = run.wait(timeout=30)
    assert (record.status, record.stop_reason) == ("interrupted", "user"), record.error
    assert record.steps and record.steps[-1].interrupted
    after = asyncio.run(
        runner.session_service.get_session(app_name=runner.app_name, user_id="user", session_id=session.id)
    )
    assert unanswered(after) == []
    before = len(model.script.requests)
    events = plain_turn(runner, "user", session.id)
    assert any(e.is_final_response() for e in events)
    assert len(model.script.requests) == before + 1 and request_is_whole(model.script.requests[-1])
    return record, after


def test_stop_mid_stream_keeps_the_words_and_the_next_plain_turn_works():
    model = scripted([Turn("Thinking about the trip", hold=True), Turn("next turn")])
    agent = Agent(name="planner", model=model)
    runner = InMemoryRunner(agent=agent)
    record, _ = stop_and_check(
        agent, model, runner, lambda run: "Thinking" in run.live_text(1),
        run_config=RunConfig(streaming_mode=StreamingMode.SSE),
    )  # fmt: skip
    assert "Thinking" in record.steps[-1].model_output


def test_stop_while_the_model_thinks_cuts_a_step_that_exists():
    model = scripted([Turn(think=True), Turn("next turn")])
    agent = Agent(name="planner", model=model)
    runner = InMemoryRunner(agent=agent)
    record, _ = stop_and_check(agent, model, runner, lambda run: model.script.calls == 1)
    assert len(record.steps) == 1 and record.steps[0].model_output == ""


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_stop_mid_tool_answers_the_cut_call_in_the_session(kind):
    gate = Gate()
    tool = gate.sync_tool if kind == "sync" else gate.async_tool
    model = scripted([Turn("Waiting.", [(tool.__name__, {})]), Turn("next turn")])
    agent = Agent(name="waiter", model=model, tools=[tool])
    runner = InMemoryRunner(agent=agent)
    try:
        record, session = stop_and_check(agent, model, runner, lambda run: gate.entered.is_set())
    finally:
        gate.opened.set()
    (call,) = record.steps[-1].tool_calls
    assert call.status == ("abandoned" if kind == "sync" else "cancelled")
    sealed = [r for e in session.events for r in e.get_function_responses()]
    assert [r.name for r in sealed] == [tool.__name__] and "aborted" in str(sealed[0].response)


def test_stop_inside_a_sub_agent_of_a_sequential_agent():
    gate = Gate()
    first = Agent(name="researcher", model=scripted([Turn("found it")]))
    model = scripted([Turn("Checking.", [("async_tool", {})]), Turn("next turn")])
    second = Agent(name="checker", model=model, tools=[gate.async_tool])
    pipeline = SequentialAgent(name="pipeline", sub_agents=[first, second])
    runner = InMemoryRunner(agent=pipeline)
    try:
        record, _ = stop_and_check(pipeline, model, runner, lambda run: gate.entered.is_set())
    finally:
        gate.opened.set()
    nodes = [(n.name, n.status) for s in record.steps for n in s.nodes]
    assert ("researcher", "ok") in nodes and ("checker", "cancelled") in nodes
    assert not [c for s in record.steps for c in s.tool_calls if c.tool in ("researcher", "checker")]


def test_stop_inside_a_workflow_node():
    gate = Gate()
    model = scripted([Turn("Checking.", [("async_tool", {})]), Turn("next turn")])
    checker = Agent(name="checker", model=model, tools=[gate.async_tool])

    def prepare(node_input: str) -> str:
        return f"prepared: {node_input}"

    flow = Workflow(name="flow", edges=[(START, prepare, checker)])
    runner = InMemoryRunner(node=flow)
    session = asyncio.run(runner.session_service.create_session(app_name=runner.app_name, user_id="user"))
    run = nbagent.start(flow, "go", display=False, runner=runner, session_id=session.id)
    try:
        wait_until(gate.entered.is_set)
        assert run.interrupt()
        record = run.wait(timeout=30)
    finally:
        gate.opened.set()
    assert record.status == "interrupted"
    assert ("checker", "cancelled") in [(n.name, n.status) for s in record.steps for n in s.nodes]
    after = asyncio.run(
        runner.session_service.get_session(app_name=runner.app_name, user_id="user", session_id=session.id)
    )
    assert unanswered(after) == []


def test_reset_false_continues_the_session_after_a_stop():
    gate = Gate()
    model = scripted([Turn("Waiting.", [("async_tool", {})]), Turn("all done")])
    agent = Agent(name="waiter", model=model, tools=[gate.async_tool])
    run = nbagent.start(agent, "wait", display=False)
    wait_until(gate.entered.is_set)
    run.interrupt()
    first = run.wait(timeout=30)
    gate.opened.set()
    record = nbagent.run(agent, "go on", reset=False, display=False)
    assert (record.status, record.continues_run_id) == ("success", first.run_id)
    assert record.output.strip() == "all done"
    assert request_is_whole(model.script.requests[-1])
    assert run.result is None and nbagent.start(agent, "x", reset=False, display=False).wait(timeout=30)


def test_result_usage_and_steps_of_a_tool_run():
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    adding = Turn("Adding.", [("add", {"a": 2, "b": 3})], usage=(12, 4))
    model = scripted([adding, Turn("It is 5", usage=(20, 3))])
    agent = Agent(name="adder", model=model, tools=[add])
    run = nbagent.start(agent, "2+3?", display=False)
    record = run.wait(timeout=30)
    assert (record.status, record.output) == ("success", "It is 5 ")
    steps = [(s.input_tokens, s.output_tokens, s.kind) for s in record.steps]
    assert steps == [(12, 4, "action"), (20, 3, "final")]
    (call,) = record.steps[0].tool_calls
    assert (call.tool, call.arguments, call.status, call.result) == ("add", {"a": 2, "b": 3}, "ok", 5)
    result = run.result
    assert result.text == "It is 5 " and result.final_response.is_final_response()
    assert result.events[0].author == "user" and len(result.events) == 4
    (read,) = nbagent.adapters.records_from_adk(result.events, agent)
    assert [(s.input_tokens, s.output_tokens) for s in read.steps] == [(12, 4), (20, 3)]
    assert [c.result for s in read.steps for c in s.tool_calls] == [5] and read.status == "success"


def test_max_llm_calls_is_max_steps():
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    model = scripted([Turn("", [("add", {"a": 1, "b": 1})])] * 5)
    agent = Agent(name="looper", model=model, tools=[add])
    record = nbagent.run(agent, "loop", display=False, run_config=RunConfig(max_llm_calls=2))
    assert (record.status, record.stop_reason) == ("max_steps", "max_steps"), record.error
    assert len(record.steps) == 2


def test_a_model_error_is_the_error_plain_adk_raises():
    model = scripted([Turn(raise_=ConnectionError("server gone"))])
    record = nbagent.run(Agent(name="broken", model=model), "hi", display=False)
    assert (record.status, record.error_type) == ("error", "ConnectionError")
    assert "server gone" in record.error and record.steps[-1].end_s is not None


def test_parallel_sub_agents_are_nodes_not_tool_calls():
    one = Agent(name="one", model=scripted([Turn("first")]))
    two = Agent(name="two", model=scripted([Turn("second")]))
    record = nbagent.run(ParallelAgent(name="both", sub_agents=[one, two]), "go", display=False)
    assert record.status == "success"
    assert sorted(n.name for s in record.steps for n in s.nodes) == ["one", "two"]
    assert not [c for s in record.steps for c in s.tool_calls]


def test_bad_input_is_refused_before_anything_runs(monkeypatch):
    for name in ("GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match="has no model"):
        nbagent.start(Agent(name="nomodel"), "hi", display=False)
    model = scripted([])
    agent = Agent(name="mine", model=model)
    other = InMemoryRunner(agent=Agent(name="other", model=scripted([])))
    with pytest.raises(ValueError, match="runner= runs 'other', not 'mine'"):
        nbagent.start(agent, "hi", runner=other, display=False)
    with pytest.raises(ValueError, match="has none under nbagent yet"):
        nbagent.start(Agent(name="fresh", model=scripted([])), "hi", reset=False, display=False)
    record = nbagent.run(agent, "hi", session_id="nope", display=False)
    assert record.status == "error" and "no session 'nope'" in record.error
    assert model.script.calls == 0 and record.steps == []


def test_the_users_runner_its_session_state_and_a_plain_turn_between_runs():
    model = scripted([Turn("hello Ada"), Turn("plain"), Turn("again")])
    agent = Agent(name="greeter", model=model, instruction="Greet {name}.")
    runner = InMemoryRunner(agent=agent)
    first = nbagent.start(runner, "hi", display=False, user_id="ada", state={"name": "Ada"})
    assert first.wait(timeout=30).status == "success"
    assert "Greet Ada." in str(model.script.requests[0].config.system_instruction)
    session_id = first.result.session_id
    plain_turn(runner, "ada", session_id)
    record = nbagent.run(runner, "again", reset=False, display=False)
    assert (record.status, record.output) == ("success", "again ")
    session = asyncio.run(
        runner.session_service.get_session(app_name=runner.app_name, user_id="ada", session_id=session_id)
    )
    assert [e.author for e in session.events] == ["user", "greeter"] * 3
