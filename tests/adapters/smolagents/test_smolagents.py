"""smolagents agents under nbagent: end states, a Stop in every phase, continuing, and old runs as records.

Every agent here runs offline on a scripted smolagents model (tests/smolagents_fakes.py). A call a
test wants to stop in is *held* (it waits until the test releases it), so "the run ended while the
call was still in flight" is a fact the test checks, not a timing. The agent itself is never
wrapped: tests check that the user's objects are the ones smolagents runs on, during and after
the run. The Stop against a real HTTP server lives in tests/adapters/smolagents/test_smolagents_http.py.
"""

from __future__ import annotations

import dataclasses
import gc
import re
import sys
import threading
import weakref

import pytest
from smolagents import CodeAgent, FinalAnswerTool, Tool, ToolCallingAgent
from smolagents.agent_types import AgentImage
from smolagents.memory import ActionStep, FinalAnswerStep
from smolagents_fakes import (
    HOLD_S,
    ScriptedSmolModel,
    SlowTool,
    StreamingScriptedSmolModel,
    Turn,
    answer,
    call,
    code,
    fails,
    plan,
)
from support import run_threads, wait_until

import nbagent
from nbagent import events as ev
from nbagent.adapters.smolagents import source as adapter
from nbagent.extras import install_hint
from nbagent.runtime.cancel import current_scope
from nbagent.secrets import StreamScrub

pytestmark = pytest.mark.needs("smolagents")

KINDS = [("tool", False), ("tool", True), ("code", False), ("code", True)]
KIND_IDS = ["tools", "tools-streaming", "code", "code-streaming"]


class Fakes:
    """Builds agents on fakes, and after the test releases every held call and waits for the threads."""

    def __init__(self) -> None:
        self.releasable: list[ScriptedSmolModel | SlowTool] = []
        self.agents: list[object] = []
        self.wait_hooks: list[threading.Event] = []

    def model(self, turns: list[Turn], stream: bool = False, **options: object) -> ScriptedSmolModel:
        model = (StreamingScriptedSmolModel if stream else ScriptedSmolModel)(turns, **options)
        self.releasable.append(model)
        return model

    def tool(self, **options: object) -> SlowTool:
        tool = SlowTool(**options)
        self.releasable.append(tool)
        return tool

    def agent(
        self, kind: str, model: ScriptedSmolModel, tools: list[object] | None = None, **options: object
    ):
        tools = [self.tool()] if tools is None else tools
        stream = isinstance(model, StreamingScriptedSmolModel)
        if kind == "tool":
            agent = ToolCallingAgent(tools=tools, model=model, stream_outputs=stream, **options)
        else:
            agent = CodeAgent(tools=tools, model=model, stream_outputs=stream, **options)
        self.agents.append(agent)
        return agent

    def close(self) -> None:
        for hook in self.wait_hooks:
            hook.set()
        for item in self.releasable:
            item.release()
        for agent in self.agents:
            assert adapter.wait_idle(agent, timeout=20)
        wait_until(lambda: not run_threads())


@pytest.fixture
def fakes():
    made = Fakes()
    yield made
    made.close()


def lookup_turn(kind: str, **options: object) -> Turn:
    turn = call("lookup", query="paris") if kind == "tool" else code("print(lookup('paris'))")
    return dataclasses.replace(turn, **options)


def answer_turn(kind: str, **options: object) -> Turn:
    return answer("42", **options) if kind == "tool" else code("final_answer('42')", **options)


def held(turn: Turn) -> Turn:
    """The same turn, but its call waits until the test releases the model."""
    return dataclasses.replace(turn, delay_s=HOLD_S)


def parts_of(agent: object) -> dict[str, object]:
    """The objects a smolagents run works with: nbagent must never replace any of them."""
    parts = {
        "model": agent.model,
        "tools": agent.tools,
        "managed_agents": agent.managed_agents,
        "logger": agent.logger,
        "console": agent.logger.console,
        "level": agent.logger.level,
        **{f"tool {name}": tool for name, tool in agent.tools.items()},
    }
    if hasattr(agent, "python_executor"):
        parts["python_executor"] = agent.python_executor
    return parts


def assert_untouched(agent: object, before: dict[str, object]) -> None:
    assert adapter.wait_idle(agent, timeout=20)
    after = parts_of(agent)
    assert after.keys() == before.keys()
    for name, value in before.items():
        assert after[name] is value, name


# -- end states ------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "stream"), KINDS, ids=KIND_IDS)
def test_success_records_steps_tool_calls_and_tokens(fakes, kind, stream):
    model = fakes.model([lookup_turn(kind), answer_turn(kind)], stream=stream)
    agent = fakes.agent(kind, model)
    before = parts_of(agent)
    record = nbagent.run(agent, "What is the answer?")
    assert record.status == "success", record.error
    assert record.output == "42"
    assert record.agent == type(agent).__name__
    assert record.model == "scripted-smol"
    assert [s.kind for s in record.steps] == ["action", "final"]
    assert [(s.input_tokens, s.output_tokens, s.usage_source) for s in record.steps] == [
        (100, 10, "reported")
    ] * 2
    assert record.usage_complete and record.input_tokens == 200
    lookups = [c for c in record.steps[0].tool_calls if c.tool == "lookup"]
    assert len(lookups) == 1 and lookups[0].status == "ok"
    assert lookups[0].arguments == {"query": "paris"}
    if kind == "code":
        code_call = record.steps[0].tool_calls[0]
        assert code_call.tool == "python_interpreter" and code_call.status == "ok"
        assert "facts about paris" in code_call.result
        assert "<code>" in record.steps[0].model_output
    else:
        assert lookups[0].result == "facts about paris"
    assert all(s.end_s >= s.start_s for s in record.steps)
    assert all(c.status is not None for c in record.tool_calls)
    assert_untouched(agent, before)


@pytest.mark.parametrize("kind", ["tool", "code"])
def test_streamed_text_arrives_as_deltas_before_the_step_ends(fakes, kind):
    model = fakes.model([answer_turn(kind, usage=(7, 3))], stream=True)
    agent = fakes.agent(kind, model)
    seen: list[ev.RunEvent] = []
    record = nbagent.start(agent, "answer", sinks=[seen.append]).wait(timeout=30)
    assert record.status == "success"
    deltas = [e for e in seen if isinstance(e, ev.TextDelta)]
    if kind == "code":
        assert len(deltas) == model.chunks
        assert "".join(d.text for d in deltas) in record.steps[0].model_output
    finished = next(e for e in seen if isinstance(e, ev.StepFinished))
    assert all(d.t <= finished.t for d in deltas)
    usages = [e for e in seen if isinstance(e, ev.Usage)]
    assert [(u.input_tokens, u.output_tokens) for u in usages] == [(7, 3)]  # once, not per delta


@pytest.mark.parametrize("stream", [False, True], ids=["generate", "streaming"])
def test_a_slow_model_call_shows_as_a_running_step(fakes, stream):
    model = fakes.model([held(answer_turn("tool"))], stream=stream)
    run = nbagent.start(fakes.agent("tool", model), "slow")
    assert model.wait_for_call(1)
    wait_until(lambda: len(run.record.steps) == 1)
    assert run.record.steps[0].kind == "action" and run.record.steps[0].ended_at is None
    model.release()
    assert run.wait(timeout=30).status == "success"


@pytest.mark.parametrize("stream", [False, True], ids=["generate", "streaming"])
def test_planning_steps_are_recorded_with_their_tokens(fakes, stream):
    turns = [plan(usage=(50, 5)), lookup_turn("tool"), answer_turn("tool")]
    model = fakes.model(turns, stream=stream)
    agent = fakes.agent("tool", model, planning_interval=5)
    record = nbagent.run(agent, "plan first")
    assert record.status == "success"
    assert [s.kind for s in record.steps] == ["planning", "action", "final"]
    assert "Look it up" in record.steps[0].model_output
    assert (record.steps[0].input_tokens, record.steps[0].output_tokens) == (50, 5)
    assert record.input_tokens == 250  # smolagents' own Monitor leaves the planning tokens out


def test_planning_repeats_at_its_interval(fakes):
    turns = [plan(), lookup_turn("tool"), lookup_turn("tool"), plan(), answer_turn("tool")]
    agent = fakes.agent("tool", fakes.model(turns), planning_interval=2)
    record = nbagent.run(agent, "plan twice")
    assert [s.kind for s in record.steps] == ["planning", "action", "action", "planning", "final"]


@pytest.mark.parametrize(("kind", "stream"), KINDS, ids=KIND_IDS)
def test_max_steps_ends_max_steps_and_keeps_the_forced_answer(fakes, kind, stream):
    turns = [lookup_turn(kind), lookup_turn(kind), Turn(text="My best guess is 41.", usage=(30, 4))]
    agent = fakes.agent(kind, fakes.model(turns, stream=stream), max_steps=2)
    before = parts_of(agent)
    record = nbagent.run(agent, "never finishes")
    assert record.status == "max_steps"
    assert record.error_type == "MaxStepsReached"
    assert "after 2 steps" in record.error
    assert record.output == "My best guess is 41."  # what agent.run returns
    assert [s.kind for s in record.steps] == ["action", "action", "final"]
    final = record.steps[-1]
    assert final.model_output == "My best guess is 41."
    assert (final.input_tokens, final.output_tokens) == (30, 4)
    assert not final.interrupted and final.error is None
    with pytest.raises(nbagent.MaxStepsReached):
        record.raise_for_status()
    assert_untouched(agent, before)


@pytest.mark.parametrize(("kind", "stream"), KINDS, ids=KIND_IDS)
def test_a_model_that_raises_ends_the_run_with_a_model_error(fakes, kind, stream):
    turns = [lookup_turn(kind), fails(ConnectionError("the endpoint is down"))]
    agent = fakes.agent(kind, fakes.model(turns, stream=stream))
    before = parts_of(agent)
    record = nbagent.run(agent, "the model fails in step 2")
    assert record.status == "error"
    assert record.error_type == "ModelError"
    assert "the endpoint is down" in record.error
    assert len(record.steps) == 2
    assert record.steps[0].error is None and record.steps[0].tool_calls
    assert record.steps[1].error == record.error and not record.steps[1].interrupted
    with pytest.raises(nbagent.ModelError):
        record.raise_for_status()
    assert_untouched(agent, before)


@pytest.mark.parametrize(("kind", "stream"), KINDS, ids=KIND_IDS)
def test_a_tool_that_raises_is_a_step_error_and_the_run_goes_on(fakes, kind, stream):
    agent = fakes.agent(
        kind,
        fakes.model([lookup_turn(kind), answer_turn(kind)], stream=stream),
        tools=[fakes.tool(fail=True)],
    )
    record = nbagent.run(agent, "the tool fails")
    assert record.status == "success"
    first = record.steps[0]
    assert "the lookup service is down" in first.error
    assert first.tool_calls and all(c.status == "error" for c in first.tool_calls)
    assert record.steps[1].error is None


def test_usage_the_model_does_not_report_stays_unknown(fakes):
    turns = [lookup_turn("code", usage=None), answer_turn("code")]
    record = nbagent.run(fakes.agent("code", fakes.model(turns, stream=True)), "no usage in step 1")
    assert record.steps[0].input_tokens is None and record.steps[0].usage_source == "unknown"
    assert record.input_tokens == 100 and not record.usage_complete


# -- smolagents' run() options ---------------------------------------------------------------


def test_additional_args_images_and_max_steps_pass_through(fakes):
    from PIL import Image

    picture = Image.new("RGB", (4, 4))
    turns = [code("print(colour)"), code("print(colour)"), Turn(text="out of steps")]
    model = fakes.model(turns)
    agent = fakes.agent("code", model, max_steps=10)
    record = nbagent.run(agent, "use them", additional_args={"colour": "teal"}, images=[picture], max_steps=2)
    assert "teal" in record.steps[0].tool_calls[0].result  # the code saw the variable
    assert "colour" in model.prompts[0]  # smolagents told the model about it
    assert agent.memory.steps[0].task_images == [picture]
    assert record.status == "max_steps" and record.output == "out of steps"
    assert [s.kind for s in record.steps] == ["action", "action", "final"]  # the run's max_steps


def test_max_steps_per_run_decides_when_the_final_answer_comes_with_planning(fakes):
    turns = [plan(), lookup_turn("tool"), Turn(text="a guess")]
    agent = fakes.agent("tool", fakes.model(turns), max_steps=20, planning_interval=1)
    record = nbagent.run(agent, "one step only", max_steps=1)
    assert [s.kind for s in record.steps] == ["planning", "action", "final"]
    assert record.status == "max_steps" and record.output == "a guess"


def test_unknown_run_options_are_refused_naming_the_accepted_ones(fakes):
    agent = fakes.agent("tool", fakes.model([answer_turn("tool")]))
    with pytest.raises(TypeError, match="additional_args") as refused:
        nbagent.start(agent, "task", return_full_result=True)
    assert "return_full_result" in str(refused.value) and "max_steps" in str(refused.value)


# -- the agent is the user's, unwrapped -------------------------------------------------------


def test_callbacks_checks_and_tools_see_the_real_objects(fakes):
    seen: dict[str, object] = {}
    model = fakes.model([call("inspect", query="x"), answer("done")])

    class Inspect(Tool):
        name = "inspect"
        description = "Looks at the agent."
        inputs = {"query": {"type": "string", "description": "anything"}}  # noqa: RUF012
        output_type = "string"

        def forward(self, query: str) -> str:
            seen["tool"] = current_scope.get()
            return "looked"

    def callback(step, agent):
        seen.setdefault("callback", (agent.model, dict(agent.tools), agent.logger.console))

    def check(answer, memory, agent):
        seen["check"] = (agent.model, all(isinstance(t, Tool) for t in agent.tools.values()))
        return True

    tool_agent = fakes.agent(
        "tool", model, tools=[Inspect(), fakes.tool()], step_callbacks=[callback], final_answer_checks=[check]
    )
    before = parts_of(tool_agent)
    run = nbagent.start(tool_agent, "inspect")
    record = run.wait(timeout=30)
    assert record.steps[0].tool_calls[0].result == "looked"
    assert seen["tool"] is run.scope  # tools see the run, for nbagent.check_interrupt()
    model_seen, tools_seen, console_seen = seen["callback"]
    assert model_seen is before["model"] and console_seen is before["console"]
    assert all(tools_seen[name] is before[f"tool {name}"] for name in tools_seen)
    assert seen["check"] == (before["model"], True)

    # Code sees its tools as under plain smolagents (which wraps them in a checking function).
    source = code("final_answer(f'{lookup(query=1)} {isinstance(lookup, Tool)} {callable(lookup)}')")
    outputs = []
    for through_nbagent in (False, True):
        code_agent = fakes.agent(
            "code", fakes.model([source]), executor_kwargs={"additional_functions": {"Tool": Tool}}
        )
        outputs.append(nbagent.run(code_agent, "a").output if through_nbagent else code_agent.run("a"))
    assert outputs[0] == outputs[1] == "facts about 1 False True"


def test_the_run_header_names_the_real_model(fakes, capfd):
    agent = fakes.agent("tool", fakes.model([answer_turn("tool")]))
    nbagent.configure(quiet_smolagents=False)
    try:
        nbagent.run(agent, "loud please", display=True)
    finally:
        nbagent.configure(quiet_smolagents=True)
    out = capfd.readouterr().out
    assert "loud please" in out and "ScriptedSmolModel - scripted-smol" in out


def test_changes_made_during_a_run_stay(fakes):
    extra = SlowTool()
    extra.name = "extra"

    def grow(step, agent):
        agent.tools["extra"] = extra
        agent.model.note = "set during the run"
        agent.custom_flag = step.step_number

    model = fakes.model([lookup_turn("tool"), answer_turn("tool")])
    agent = fakes.agent("tool", model, step_callbacks=[grow])
    assert nbagent.run(agent, "grow").status == "success"
    assert agent.tools["extra"] is extra
    assert model.note == "set during the run" and agent.custom_flag == 2


def test_a_model_set_after_a_stop_is_used_by_the_next_run_and_named_in_its_record(fakes):
    agent = fakes.agent("tool", fakes.model([]))
    for attempt in range(10):
        stopped = fakes.model([held(answer_turn("tool"))], model_id=f"old-{attempt}")
        agent.model = stopped
        run = nbagent.start(agent, "stop me")
        assert stopped.wait_for_call(1)
        assert run.interrupt() and run.wait(timeout=30).status == "interrupted"
        stopped.release()  # the held call returns; the stopped run unwinds in the background
        new = fakes.model([answer_turn("tool")], model_id=f"new-{attempt}")
        agent.model = new  # at once, while the stopped run may still be unwinding
        record = nbagent.run(agent, "go on", reset=False)
        assert (record.status, record.model) == ("success", f"new-{attempt}")
        assert new.calls_started == 1 and stopped.calls_started == 1
        assert agent.model is new


# -- Stop now, in every phase ----------------------------------------------------------------


def interrupt_when(run: nbagent.Run, ready: threading.Event | bool) -> nbagent.RunRecord:
    assert ready, "the run never reached the phase to interrupt"
    assert run.interrupt() is True
    return run.wait(timeout=30)


def assert_cut(record: nbagent.RunRecord, steps: int, kind: str) -> None:
    assert record.status == "interrupted" and record.stop_reason == "user"
    assert len(record.steps) == steps
    cut = record.steps[-1]
    assert cut.kind == kind and cut.interrupted
    assert cut.input_tokens is None and cut.usage_source == "unknown"
    assert all(not s.interrupted and s.usage_source == "reported" for s in record.steps[:-1])
    with pytest.raises(nbagent.AgentInterrupted):
        record.raise_for_status()


@pytest.mark.parametrize(("kind", "stream"), KINDS, ids=KIND_IDS)
def test_stop_mid_model_call_ends_the_run_before_the_call_returns(fakes, kind, stream):
    tool = fakes.tool()
    model = fakes.model([lookup_turn(kind), held(lookup_turn(kind)), answer_turn(kind)], stream=stream)
    agent = fakes.agent(kind, model, tools=[tool])
    before = parts_of(agent)
    run = nbagent.start(agent, "stop me in step 2")
    record = interrupt_when(run, model.wait_for_call(2))
    assert model.calls_finished == 1  # the held call is still in flight: the run did not wait for it
    assert_cut(record, steps=2, kind="action")
    model.release()
    wait_until(lambda: not run_threads())  # the stopped call has returned (or its stream closed)
    assert tool.calls_started == 1  # the call was stopped where it was: no reply, no tool, no step 3
    assert model.calls_started == 2
    assert run.record.steps[-1].tool_calls == []
    assert_untouched(agent, before)


@pytest.mark.parametrize("kind", ["tool", "code"])
def test_stop_mid_stream_keeps_the_text_so_far(fakes, kind):
    model = fakes.model([dataclasses.replace(answer_turn(kind), hold_after=2)], stream=True)
    agent = fakes.agent(kind, model)
    text = model.turns[0].text
    so_far = text[: 2 * -(-len(text) // model.chunks)]  # two chunks (tool calls stream no text)
    run = nbagent.start(agent, "stop me mid-stream")
    assert model.wait_for_chunks(2)
    # The view shows whole words only (a word in progress could begin a key: nbagent.secrets).
    wait_until(lambda: run.live_text(1) == StreamScrub().feed(so_far))
    record = interrupt_when(run, model.calls_finished == 0)
    assert_cut(record, steps=1, kind="action")
    assert record.steps[0].model_output == so_far


@pytest.mark.parametrize("stream", [False, True], ids=["generate", "streaming"])
def test_stop_mid_planning(fakes, stream):
    model = fakes.model([held(plan()), lookup_turn("tool")], stream=stream)
    agent = fakes.agent("tool", model, planning_interval=3)
    run = nbagent.start(agent, "stop me while planning")
    record = interrupt_when(run, model.wait_for_call(1))
    assert_cut(record, steps=1, kind="planning")
    model.release()
    assert adapter.wait_idle(agent, timeout=20)
    assert model.calls_started == 1  # smolagents alone would go on to run the next action step


@pytest.mark.parametrize("stream", [False, True], ids=["generate", "streaming"])
def test_stop_mid_tool_stops_the_call(fakes, stream):
    tool = fakes.tool(delay_s=HOLD_S)
    model = fakes.model([lookup_turn("tool"), answer_turn("tool")], stream=stream)
    agent = fakes.agent("tool", model, tools=[tool])
    run = nbagent.start(agent, "stop me mid-tool")
    record = interrupt_when(run, tool.wait_for_call(1))
    assert tool.calls_finished == 0
    assert_cut(record, steps=1, kind="action")
    [lookup] = record.steps[0].tool_calls
    assert lookup.status == "abandoned" and lookup.result is None
    tool.release()
    assert adapter.wait_idle(agent, timeout=20)
    assert tool.calls_finished == 0  # the exception landed in the tool as it woke up
    assert model.calls_started == 1
    assert run.record.steps[0].tool_calls[0].result is None


@pytest.mark.parametrize("stream", [False, True], ids=["generate", "streaming"])
def test_stop_mid_code_stops_the_code_and_the_tool_it_calls(fakes, stream):
    tool = fakes.tool(delay_s=HOLD_S)
    model = fakes.model([code("x = lookup('paris')\nprint(x)"), answer_turn("code")], stream=stream)
    agent = fakes.agent("code", model, tools=[tool])
    run = nbagent.start(agent, "stop me mid-code")
    record = interrupt_when(run, tool.wait_for_call(1))
    assert_cut(record, steps=1, kind="action")
    calls = {c.tool: c for c in record.steps[0].tool_calls}
    assert calls["python_interpreter"].status == "abandoned"
    assert calls["lookup"].status == "abandoned"
    tool.release()
    assert adapter.wait_idle(agent, timeout=20)
    assert tool.calls_finished == 0 and model.calls_started == 1


def test_stop_mid_plain_code_that_calls_no_tool(fakes):
    entered, gate = threading.Event(), threading.Event()
    fakes.wait_hooks.append(gate)
    after: list[str] = []

    def wait_for_gate() -> str:
        entered.set()
        gate.wait(HOLD_S)
        return "done"

    model = fakes.model([code("print(wait_for_gate())\nafter('ran on')"), answer_turn("code")])
    agent = fakes.agent(
        "code",
        model,
        executor_kwargs={"additional_functions": {"wait_for_gate": wait_for_gate, "after": after.append}},
    )
    run = nbagent.start(agent, "stop me mid-code")
    record = interrupt_when(run, entered.wait(20))
    assert_cut(record, steps=1, kind="action")
    assert record.steps[0].tool_calls[0].status == "abandoned"
    gate.set()
    assert adapter.wait_idle(agent, timeout=20)
    assert after == []  # the code thread stopped too: its next line never ran
    assert model.calls_started == 1


@pytest.mark.parametrize(("kind", "stream"), KINDS, ids=KIND_IDS)
def test_stop_while_the_final_answer_is_generated_is_not_ignored(fakes, kind, stream):
    model = fakes.model([lookup_turn(kind), held(answer_turn(kind))], stream=stream)
    agent = fakes.agent(kind, model)
    run = nbagent.start(agent, "stop me at the end")
    record = interrupt_when(run, model.wait_for_call(2))
    assert_cut(record, steps=2, kind="action")
    assert record.output is None


def test_stop_while_the_max_steps_answer_is_generated(fakes):
    model = fakes.model([lookup_turn("tool"), held(Turn(text="a guess"))])
    agent = fakes.agent("tool", model, max_steps=1)
    run = nbagent.start(agent, "stop me after max steps")
    record = interrupt_when(run, model.wait_for_call(2))
    assert_cut(record, steps=2, kind="final")


def test_stop_while_the_max_steps_answer_is_generated_with_planning(fakes):
    turns = [plan(), lookup_turn("tool"), lookup_turn("tool"), held(Turn(text="a guess"))]
    model = fakes.model(turns)
    agent = fakes.agent("tool", model, max_steps=2, planning_interval=2)
    run = nbagent.start(agent, "stop me after max steps")
    record = interrupt_when(run, model.wait_for_call(4))
    assert [s.kind for s in record.steps] == ["planning", "action", "action", "final"]
    assert record.steps[-1].interrupted


def test_stop_before_the_first_step(fakes):
    model = fakes.model([held(answer_turn("tool"))])
    agent = fakes.agent("tool", model)
    run = nbagent.start(agent, "never starts")
    run.interrupt()
    record = run.wait(timeout=30)
    assert record.status == "interrupted"
    assert record.steps == [] or record.steps[0].interrupted
    model.release()  # the worker may have reached the (held) model call before the Stop
    assert adapter.wait_idle(agent, timeout=20)
    assert model.calls_finished == 0


def test_stop_lands_even_when_smolagents_is_busy_outside_any_call(fakes, monkeypatch):
    entered, gate = threading.Event(), threading.Event()
    fakes.wait_hooks.append(gate)

    def slow_callback(step, agent):  # smolagents runs step callbacks itself
        entered.set()
        gate.wait(HOLD_S)

    model = fakes.model([lookup_turn("tool"), answer_turn("tool"), answer_turn("tool")])
    agent = fakes.agent("tool", model, step_callbacks=[slow_callback])
    first = interrupt_when(nbagent.start(agent, "first"), entered.wait(20))
    assert first.status == "interrupted"
    assert not adapter.wait_idle(agent, timeout=0.05)  # the worker is still in the callback

    monkeypatch.setattr(adapter.SmolagentsSource, "join_timeout_s", 0.1)
    second = nbagent.run(agent, "go on", reset=False)
    assert second.status == "error"
    assert "still running in the background" in second.error

    gate.set()
    assert adapter.wait_idle(agent, timeout=20)
    third = nbagent.run(agent, "go on", reset=False)
    assert third.status == "success" and third.output == "42"


# -- Stop after the step: smolagents' own semantics -------------------------------------------


@pytest.mark.parametrize(("kind", "stream"), KINDS, ids=KIND_IDS)
def test_stop_after_step_finishes_the_step_then_stops(fakes, kind, stream):
    tool = fakes.tool()
    model = fakes.model([held(lookup_turn(kind)), answer_turn(kind)], stream=stream)
    agent = fakes.agent(kind, model, tools=[tool])
    run = nbagent.start(agent, "stop after this step")
    assert model.wait_for_call(1)
    assert run.interrupt("after_step") is True  # asked mid-step: the step goes on
    model.release()
    record = run.wait(timeout=30)
    assert record.status == "interrupted" and record.stop_reason == "user_after_step"
    assert len(record.steps) == 1 and not record.steps[0].interrupted
    assert record.steps[0].input_tokens == 100
    assert tool.calls_finished == 1
    assert model.calls_started == 1


def test_stop_after_step_in_the_final_step_keeps_the_answer(fakes):
    model = fakes.model([held(answer_turn("tool"))])
    agent = fakes.agent("tool", model)
    run = nbagent.start(agent, "the last step finishes")
    assert model.wait_for_call(1)
    assert run.interrupt("after_step") is True
    model.release()
    record = run.wait(timeout=30)
    assert record.status == "success" and record.output == "42"


# -- continuing, and runs that take turns -----------------------------------------------------


@pytest.mark.parametrize(("kind", "stream"), KINDS, ids=KIND_IDS)
def test_continue_after_a_stop_keeps_the_memory(fakes, kind, stream):
    model = fakes.model([lookup_turn(kind), held(lookup_turn(kind)), answer_turn(kind)], stream=stream)
    agent = fakes.agent(kind, model)
    run = nbagent.start(agent, "first task")
    first = interrupt_when(run, model.wait_for_call(2))
    assert first.status == "interrupted"
    model.release()
    # no wait_idle here: the next run waits for the interrupted one to unwind by itself
    second = nbagent.run(agent, "go on", reset=False)
    assert second.status == "success", second.error
    assert second.output == "42"
    assert [s.kind for s in second.steps] == ["final"]
    prompt = model.prompts[-1]
    assert "first task" in prompt and "go on" in prompt
    assert "Interrupted by the user before this step finished." in prompt


def test_continue_after_a_stop_mid_tool_tells_the_model(fakes):
    tool = fakes.tool(delay_s=HOLD_S)
    model = fakes.model([lookup_turn("tool"), answer_turn("tool")])
    agent = fakes.agent("tool", model, tools=[tool])
    first = interrupt_when(nbagent.start(agent, "first task"), tool.wait_for_call(1))
    assert first.status == "interrupted"
    tool.release()
    second = nbagent.run(agent, "go on", reset=False)
    assert second.status == "success"
    assert "Interrupted by the user before this step finished." in model.prompts[-1]


@pytest.mark.parametrize("stop", [True, False], ids=["after-a-stop", "in-the-next-run"])
def test_a_function_the_code_defined_keeps_calling_its_tool(fakes, stop):
    tool = fakes.tool()
    turns = [
        code("def helper(x):\n    return lookup(query=x)\nprint('defined')"),
        held(code("final_answer(helper('x'))")) if stop else code("print('step 2')"),
    ]
    if not stop:
        turns.append(Turn(text="enough"))  # run 1 ends at max steps
    turns += [code("final_answer(helper('x'))"), code("final_answer(helper('y'))")]
    model = fakes.model(turns)
    agent = fakes.agent("code", model, tools=[tool], max_steps=2)
    first = nbagent.start(agent, "define a helper")
    if stop:
        assert interrupt_when(first, model.wait_for_call(2)).status == "interrupted"
        model.release()
    else:
        assert first.wait(timeout=30).status == "max_steps"
    second = nbagent.run(agent, "go on", reset=False)
    assert (second.status, second.output) == ("success", "facts about x")
    [step] = second.steps
    assert [c.tool for c in step.tool_calls] == ["python_interpreter", "lookup"]  # reported to this run
    assert all(c.tool != "lookup" for s in first.record.steps for c in s.tool_calls)
    assert agent.run("plain smolagents", reset=False) == "facts about y"  # and without nbagent


def test_a_second_run_waits_for_its_turn(fakes):
    model = fakes.model([held(answer_turn("tool")), answer("43")])
    agent = fakes.agent("tool", model)
    first = nbagent.start(agent, "first")
    assert model.wait_for_call(1)
    second = nbagent.start(agent, "second", reset=False)
    wait_until(lambda: second.record.queued_after == first.run_id)
    assert model.calls_started == 1
    model.release()
    assert first.wait(timeout=30).output == "42"
    record = second.wait(timeout=30)
    assert (record.status, record.output) == ("success", "43")
    assert record.queued_s > 0 and record.queued_after is None


def test_a_run_queued_behind_a_stopped_one_waits_for_it_to_unwind(fakes):
    model = fakes.model([held(answer_turn("tool")), answer("43")])
    agent = fakes.agent("tool", model)
    first = nbagent.start(agent, "first")
    assert model.wait_for_call(1)
    assert interrupt_when(first, True).status == "interrupted"
    second = nbagent.start(agent, "second", reset=False)
    wait_until(lambda: second.record.queued_after == first.run_id)
    model.release()
    assert second.wait(timeout=30).output == "43"


def test_reset_starts_from_an_empty_memory(fakes):
    model = fakes.model([answer_turn("tool"), answer_turn("tool")])
    agent = fakes.agent("tool", model)
    nbagent.run(agent, "first task")
    nbagent.run(agent, "second task")
    assert "first task" not in model.prompts[-1]


# -- managed agents, tools inside code, console output --------------------------------------


def test_managed_agents_show_as_tool_calls(fakes):
    helper_model = fakes.model([answer("Paris is in France.")])
    helper = fakes.agent("tool", helper_model, name="researcher", description="Finds facts.")
    manager_turns = [call("researcher", task="Where is Paris?"), answer_turn("tool")]
    manager = fakes.agent("tool", fakes.model(manager_turns), tools=[], managed_agents=[helper])
    record = nbagent.run(manager, "ask the researcher")
    assert record.status == "success"
    [asked] = record.steps[0].tool_calls
    assert asked.tool == "researcher" and asked.status == "ok"
    assert "Paris is in France." in str(asked.result)


def test_managed_agents_called_from_code_show_as_tool_calls(fakes):
    helper = fakes.agent(
        "tool", fakes.model([answer("Paris is in France.")]), name="researcher", description="Finds facts."
    )
    turns = [code("print(researcher(task='Where is Paris?'))"), answer_turn("code")]
    manager = fakes.agent("code", fakes.model(turns), tools=[], managed_agents=[helper])
    before = parts_of(manager)
    record = nbagent.run(manager, "ask the researcher")
    assert record.status == "success", record.error
    calls = {c.tool: c for c in record.steps[0].tool_calls}
    assert calls["researcher"].status == "ok"
    assert calls["researcher"].arguments == {"task": "Where is Paris?"}
    assert_untouched(manager, before)


@pytest.mark.parametrize("kind", ["tool", "code"])
def test_stop_inside_a_managed_agent_stops_both(fakes, kind):
    helper_model = fakes.model([held(answer("too late"))])
    helper = fakes.agent("tool", helper_model, name="researcher", description="Finds facts.")
    ask = call("researcher", task="Where?") if kind == "tool" else code("print(researcher(task='Where?'))")
    manager_model = fakes.model([ask, answer_turn(kind)])
    manager = fakes.agent(kind, manager_model, tools=[], managed_agents=[helper])
    helper_before, manager_before = parts_of(helper), parts_of(manager)
    run = nbagent.start(manager, "ask the researcher")
    record = interrupt_when(run, helper_model.wait_for_call(1))
    assert_cut(record, steps=1, kind="action")
    assert {c.status for c in record.steps[0].tool_calls} == {"abandoned"}
    helper_model.release()
    wait_until(lambda: not run_threads())
    assert_untouched(manager, manager_before)
    assert_untouched(helper, helper_before)
    assert manager_model.calls_started == 1 and helper_model.calls_finished == 0
    assert manager.memory.steps[-1].error is not None  # the cut step says so, for a continued run


def test_smolagents_console_output_is_silenced_while_nbagent_shows_the_run(fakes, capfd):
    turns = [lookup_turn("code"), answer_turn("code"), answer_turn("code")]
    agent = fakes.agent("code", fakes.model(turns, stream=True))
    console = agent.logger.console
    nbagent.run(agent, "quiet please", display=True)  # outside Jupyter, the text view shows it
    out = capfd.readouterr().out
    assert "quiet please" in out  # nbagent's own view
    assert "New run" not in out and "Executing parsed code" not in out and "━━━" not in out
    assert agent.logger.console is console and console._live_stack == []
    agent.run("plain smolagents run", max_steps=1)  # smolagents prints as usual
    assert "plain smolagents run" in capfd.readouterr().out


def test_a_quiet_streaming_run_stopped_mid_stream_leaves_the_console_as_it_was(fakes, capfd):
    model = fakes.model(
        [dataclasses.replace(answer_turn("code"), hold_after=2), answer_turn("code")], stream=True
    )
    agent = fakes.agent("code", model)
    run = nbagent.start(agent, "stop me quietly", display=True)
    assert model.wait_for_chunks(2)
    assert interrupt_when(run, True).status == "interrupted"
    model.release()
    assert adapter.wait_idle(agent, timeout=20)
    assert agent.logger.console._live_stack == []
    assert "New run" not in capfd.readouterr().out
    agent.run("plain smolagents run", max_steps=1)
    assert "plain smolagents run" in capfd.readouterr().out


def test_smolagents_prints_as_usual_when_no_view_shows_the_run(fakes, capfd):
    agent = fakes.agent("tool", fakes.model([answer_turn("tool")]))
    nbagent.run(agent, "nobody watches", display=False)
    assert "nobody watches" in capfd.readouterr().out


@pytest.mark.parametrize("display", [False, True], ids=["no-view", "view"])
@pytest.mark.parametrize("stream", [False, True], ids=["generate", "streaming"])
def test_a_console_capture_around_the_run_gets_smolagents_output(fakes, capfd, stream, display):
    agent = fakes.agent("code", fakes.model([lookup_turn("code"), answer_turn("code")], stream=stream))
    nbagent.configure(quiet_smolagents=False)
    try:
        with agent.logger.console.capture() as capture:
            nbagent.run(agent, "captured please", display=display)
    finally:
        nbagent.configure(quiet_smolagents=True)
    captured = capture.get()
    assert "New run" in captured and "captured please" in captured and "Executing parsed code" in captured
    assert "Executing parsed code" not in capfd.readouterr().out  # none of it escaped the capture


def test_records_from_smolagents_names_the_extra_when_smolagents_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "smolagents", None)
    with pytest.raises(ImportError, match=re.escape(install_hint("smolagents"))):
        adapter.records_from_smolagents(object())


@pytest.mark.parametrize("stop", [False, True], ids=["finished", "stopped"])
@pytest.mark.parametrize("kind", ["tool", "code"])
def test_nbagent_does_not_keep_a_smolagents_agent_alive(fakes, stop, kind):
    model = fakes.model([lookup_turn(kind), held(answer_turn(kind))])
    agent = fakes.agent(kind, model)
    fakes.agents.remove(agent)
    run = nbagent.start(agent, "task")
    assert model.wait_for_call(2)
    if stop:
        run.interrupt()
    else:
        model.release()
    assert run.wait(timeout=30).status == ("interrupted" if stop else "success")
    model.release()
    assert adapter.wait_idle(agent, timeout=20)
    alive = weakref.ref(agent)
    del agent, run
    wait_until(lambda: not run_threads())
    wait_until(lambda: gc.collect() is not None and alive() is None)


def test_is_smolagents_agent(fakes):
    agent = fakes.agent("tool", fakes.model([]))
    assert adapter.is_smolagents_agent(agent)
    assert not adapter.is_smolagents_agent(object())
    assert not adapter.is_smolagents_agent(nbagent.demo_agent())


# -- runs made without nbagent, as records ----------------------------------------------------


def test_records_from_smolagents_reads_runs_made_without_nbagent(fakes):
    turns = [plan(usage=(50, 5)), lookup_turn("tool"), answer_turn("tool"), answer("43", usage=None)]
    agent = fakes.agent("tool", fakes.model(turns), planning_interval=10)
    agent.run("first task")
    agent.planning_interval = None
    agent.run("second task", reset=False)
    first, second = adapter.records_from_smolagents(agent)
    assert (first.task, first.status, first.output) == ("first task", "success", "42")
    assert [s.kind for s in first.steps] == ["planning", "action", "final"]
    assert first.input_tokens == 250 and first.usage_complete
    assert first.steps[1].tool_calls[0].tool == "lookup"
    assert first.steps[1].tool_calls[0].result == "facts about paris"
    assert first.started_at <= first.steps[-1].ended_at == first.ended_at
    assert (second.task, second.status, second.output) == ("second task", "success", "43")
    assert second.steps[0].input_tokens is None and not second.usage_complete
    assert first.run_id != second.run_id
    assert [r.run_id for r in adapter.records_from_smolagents(agent)] == [first.run_id, second.run_id]


def test_records_from_smolagents_end_states(fakes):
    capped = fakes.agent("tool", fakes.model([lookup_turn("tool"), Turn(text="guess")]), max_steps=1)
    returned = capped.run("capped")
    [record] = adapter.records_from_smolagents(capped)
    assert record.status == "max_steps" and [s.kind for s in record.steps] == ["action", "final"]
    assert record.output == returned == "guess"

    broken = fakes.agent("tool", fakes.model([lookup_turn("tool"), fails(ValueError("boom"))]))
    with pytest.raises(Exception, match="boom"):
        broken.run("breaks")
    [record] = adapter.records_from_smolagents(broken)
    assert record.status == "error"

    def stop_now(step, agent):
        agent.interrupt()

    stopped = fakes.agent(
        "tool", fakes.model([lookup_turn("tool"), answer_turn("tool")]), step_callbacks=[stop_now]
    )
    with pytest.raises(Exception, match="interrupted"):
        stopped.run("stopped by smolagents' own interrupt")
    [record] = adapter.records_from_smolagents(stopped)
    assert record.status == "interrupted" and len(record.steps) == 1


class Painter(Tool):
    name = "paint"
    description = "Paints a picture."
    inputs = {"colour": {"type": "string", "description": "The colour."}}  # noqa: RUF012
    output_type = "image"

    def forward(self, colour: str):
        from PIL import Image

        return Image.new("RGB", (8, 8), colour)


class ShoutingFinalAnswer(FinalAnswerTool):
    inputs = {  # noqa: RUF012
        "first": {"type": "string", "description": "a"},
        "second": {"type": "string", "description": "b"},
    }
    output_type = "string"

    def forward(self, first: str, second: str) -> str:
        return f"{first.upper()} AND {second.upper()}"


class CountingFinalAnswer(FinalAnswerTool):
    output_type = "object"

    def forward(self, answer: str) -> dict:
        return {"answer": answer, "length": len(answer)}


@pytest.mark.parametrize("case", ["image", "custom-final-answer", "custom-object-answer"])
def test_records_from_smolagents_give_what_agent_run_returned(fakes, case):
    if case == "image":
        turns, tools = [call("paint", colour="red"), answer("image.png")], [Painter()]
    elif case == "custom-final-answer":
        turns, tools = [call("final_answer", first="one", second="two")], [ShoutingFinalAnswer()]
    else:
        turns, tools = [call("final_answer", answer="four")], [CountingFinalAnswer()]
    plain = fakes.agent("tool", fakes.model(turns), tools=tools)
    returned = plain.run("answer")
    [read] = adapter.records_from_smolagents(plain)
    live = nbagent.run(fakes.agent("tool", fakes.model(turns), tools=tools), "answer")
    for output in (read.output, live.output):
        assert type(output) is type(returned)
        if case == "image":
            assert isinstance(output, AgentImage) and output.tobytes() == returned.tobytes()
        else:
            assert output == returned
    assert case != "custom-final-answer" or returned == "ONE AND TWO"


def test_records_from_smolagents_agrees_with_the_live_record(fakes):
    turns = [plan(), lookup_turn("code"), answer_turn("code", usage=(120, 12))]
    agent = fakes.agent("code", fakes.model(turns, stream=True), planning_interval=4)
    live = nbagent.run(agent, "compare")
    [read] = adapter.records_from_smolagents(agent)
    assert read.status == live.status == "success"
    assert read.output == live.output
    assert [s.kind for s in read.steps] == [s.kind for s in live.steps]
    assert [(s.input_tokens, s.output_tokens) for s in read.steps] == [
        (s.input_tokens, s.output_tokens) for s in live.steps
    ]
    for a, b in zip(read.steps, live.steps, strict=True):
        assert abs(a.duration_s - b.duration_s) < 0.05


def test_records_from_smolagents_after_an_nbagent_stop_says_interrupted(fakes):
    model = fakes.model([lookup_turn("tool"), held(lookup_turn("tool"))])
    agent = fakes.agent("tool", model)
    interrupt_when(nbagent.start(agent, "stopped"), model.wait_for_call(2))
    model.release()
    assert adapter.wait_idle(agent, timeout=20)
    [record] = adapter.records_from_smolagents(agent)
    assert record.status == "interrupted"
    assert record.steps[-1].interrupted


@pytest.mark.parametrize("kind", ["tool", "code"])
def test_records_from_smolagents_after_a_stop_mid_tool_say_interrupted_even_after_continuing(fakes, kind):
    tool = fakes.tool(delay_s=HOLD_S)
    agent = fakes.agent(kind, fakes.model([lookup_turn(kind), answer_turn(kind)]), tools=[tool])
    run = nbagent.start(agent, "stopped mid tool")
    assert tool.wait_for_call(1)
    run.interrupt()
    assert run.wait(timeout=30).status == "interrupted"
    tool.release()
    assert adapter.wait_idle(agent, timeout=20)
    nbagent.run(agent, "go on", reset=False)
    first, second = adapter.records_from_smolagents(agent)
    assert (first.status, first.steps[-1].interrupted) == ("interrupted", True)
    assert second.status == "success"


def test_the_memory_keeps_the_cut_step_and_the_final_answer_steps_are_smolagents_own(fakes):
    model = fakes.model([lookup_turn("tool"), held(lookup_turn("tool")), answer_turn("tool")])
    agent = fakes.agent("tool", model)
    interrupt_when(nbagent.start(agent, "first"), model.wait_for_call(2))
    model.release()
    assert adapter.wait_idle(agent, timeout=20)
    steps = [s for s in agent.memory.steps if isinstance(s, ActionStep)]
    assert [s.error is None for s in steps] == [True, False]
    assert not any(isinstance(s, FinalAnswerStep) for s in agent.memory.steps)


def test_run_result_is_what_agent_run_returns(fakes):
    script = [code("final_answer({'city': 'Paris', 'rank': 1})")]
    plain = fakes.agent("code", fakes.model(script)).run("Which city?")
    agent = fakes.agent("code", fakes.model(script))
    run = nbagent.start(agent, "Which city?", display=False)
    run.wait(timeout=20)
    assert run.result == plain == {"city": "Paris", "rank": 1}
