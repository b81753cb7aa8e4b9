"""pydantic-ai agents under nbagent: the same records, Stop and continue, with pydantic-ai's own
test doubles (``FunctionModel`` streaming, ``TestModel``); no network."""

from __future__ import annotations

import asyncio
import sys
import threading
from dataclasses import dataclass

import pytest
from pydantic_ai import Agent, ModelRetry, RunContext, UsageLimits
from pydantic_ai.exceptions import UsageLimitExceeded
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.models.test import TestModel
from support import HANG_S, wait_until

import nbagent
from nbagent.adapters import source_for
from nbagent.adapters.pydantic_ai import source as adapter

pytestmark = pytest.mark.needs("pydantic-ai")

"""A model or tool that 'hangs' waits this long: only a Stop ends it within a test."""


def last_part(messages: list[ModelMessage]):
    return messages[-1].parts[-1]


def tool_then_answer(tool: str = "add", args: str = '{"a": 1, "b": 2}', answer=("The ", "answer ", "is 3")):
    """A streamed model: first a call of ``tool``, then ``answer`` word by word."""
    calls: list[list[ModelMessage]] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo):
        calls.append(list(messages))
        if last_part(messages).part_kind == "user-prompt":
            yield {0: DeltaToolCall(name=tool, json_args=args, tool_call_id=f"c{len(calls)}")}
        else:
            for word in answer:
                yield word

    return FunctionModel(stream_function=stream), calls


async def drain(ctx, events) -> None:
    """An ``event_stream_handler``: makes a plain ``agent.run`` stream, as nbagent's runs do."""
    async for _ in events:
        pass


def adder(model) -> Agent:
    agent = Agent(model, name="adder")

    @agent.tool_plain
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    return agent


def test_detected_without_importing_and_runs_to_success():
    model, _calls = tool_then_answer()
    agent = adder(model)
    assert isinstance(source_for(agent), adapter.PydanticAISource)
    assert source_for(object()) is None

    record = nbagent.run(agent, "what is 1 + 2?")

    assert record.status == "success" and record.output == "The answer is 3"
    assert record.agent == "adder" and record.model == "function::stream"
    first, final = record.steps
    assert (first.kind, final.kind) == ("action", "final")
    assert [(c.tool, c.arguments, c.status, c.result) for c in first.tool_calls] == [
        ("add", {"a": 1, "b": 2}, "ok", 3)
    ]
    assert final.model_output == "The answer is 3"
    assert all(s.usage_source == "reported" and s.input_tokens for s in record.steps)
    assert record.usage_complete
    assert [m["role"] for m in record.messages] == ["user", "assistant", "tool", "assistant"]


def test_text_streams_into_the_record_while_the_model_replies():
    gate = threading.Event()

    async def stream(messages, info):
        yield "first words "
        while not gate.is_set():
            await asyncio.sleep(0.005)
        yield "and the rest"

    run = nbagent.start(Agent(FunctionModel(stream_function=stream)), "talk")
    wait_until(lambda: run.live_text(1) == "first words ")
    assert run.status == "running"
    gate.set()
    assert run.wait(timeout=20).output == "first words and the rest"


def test_stop_mid_stream_keeps_the_finished_step_and_the_cut_text():
    async def stream(messages, info):
        if last_part(messages).part_kind == "user-prompt":
            yield {0: DeltaToolCall(name="add", json_args='{"a": 1, "b": 2}', tool_call_id="c1")}
            return
        yield "The answer "
        await asyncio.sleep(HANG_S)
        yield "never"

    run = nbagent.start(adder(FunctionModel(stream_function=stream)), "add")
    wait_until(lambda: run.live_text(2) == "The answer ")
    assert run.interrupt()
    record = run.wait(timeout=20)

    assert record.status == "interrupted" and record.stop_reason == "user" and record.error is None
    first, cut = record.steps
    assert first.tool_calls[0].status == "ok" and not first.interrupted and first.usage_known
    assert cut.interrupted and cut.model_output == "The answer "
    # a cut reply's partial count is not its usage: unknown, never a made-up number
    assert cut.usage_source == "unknown" and cut.input_tokens is None and cut.output_tokens is None
    assert not record.usage_complete


def test_stop_mid_tool_cancels_the_tool():
    started, cancelled = threading.Event(), threading.Event()
    model, _ = tool_then_answer(tool="slow", args="{}")
    agent = Agent(model)

    @agent.tool_plain
    async def slow() -> str:
        """Takes forever."""
        started.set()
        try:
            await asyncio.sleep(HANG_S)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    run = nbagent.start(agent, "go")
    wait_until(started.is_set)
    run.interrupt()
    record = run.wait(timeout=20)
    assert record.status == "interrupted" and cancelled.is_set()
    assert run.result is None  # a Stop: pydantic-ai returned nothing
    (step,) = record.steps
    assert step.interrupted and step.usage_known
    assert [(c.tool, c.status) for c in step.tool_calls] == [("slow", "cancelled")]


def test_stop_after_step_lets_the_tools_finish_and_makes_no_new_request():
    entered, release = threading.Event(), threading.Event()
    model, calls = tool_then_answer(tool="wait_for_it", args="{}")
    agent = Agent(model)

    @agent.tool_plain
    async def wait_for_it() -> str:
        """Waits for the test."""
        entered.set()
        while not release.is_set():
            await asyncio.sleep(0.005)
        return "done"

    run = nbagent.start(agent, "go")
    wait_until(entered.is_set)
    assert run.interrupt("after_step")
    release.set()
    record = run.wait(timeout=20)

    assert record.status == "interrupted" and record.stop_reason == "user_after_step"
    (step,) = record.steps
    assert not step.interrupted and step.tool_calls[0].status == "ok" and step.tool_calls[0].result == "done"
    assert len(calls) == 1


def test_continue_after_a_stop_sends_the_kept_history():
    model, calls = tool_then_answer()
    agent = adder(model)
    first = nbagent.run(agent, "what is 1 + 2?")
    second = nbagent.run(agent, "and again?", reset=False)

    assert first.status == second.status == "success"
    seen = calls[-1]
    prompts = [p.content for m in seen for p in m.parts if p.part_kind == "user-prompt"]
    assert prompts == ["what is 1 + 2?", "and again?"]
    fresh = nbagent.run(agent, "new start")
    assert fresh.status == "success"
    assert [p.content for m in calls[-1] for p in m.parts if p.part_kind == "user-prompt"] == ["new start"]


def test_continue_after_stop_mid_stream():
    hang = {"on": True}

    async def stream(messages, info):
        yield "partial "
        if hang["on"]:
            await asyncio.sleep(HANG_S)
        yield f"seen {len(messages)} messages"

    agent = Agent(FunctionModel(stream_function=stream))
    run = nbagent.start(agent, "one")
    wait_until(lambda: run.live_text(1) == "partial ")
    run.interrupt()
    assert run.wait(timeout=20).status == "interrupted"
    hang["on"] = False
    record = nbagent.run(agent, "two", reset=False)
    # the first request, the cut reply (kept by pydantic-ai) and the new request
    assert record.status == "success" and record.output == "partial seen 3 messages"


@dataclass
class Deps:
    factor: int


def test_run_arguments_pass_through():
    seen = {}

    async def stream(messages, info: AgentInfo):
        seen["settings"] = info.model_settings
        if last_part(messages).part_kind == "user-prompt":
            yield {0: DeltaToolCall(name="scale", json_args='{"x": 2}', tool_call_id="c1")}
        else:
            yield f"{last_part(messages).content}"

    agent = Agent(FunctionModel(stream_function=stream), deps_type=Deps)

    @agent.tool
    def scale(ctx: RunContext[Deps], x: int) -> int:
        """Scale x."""
        seen["deps"] = ctx.deps
        return x * ctx.deps.factor

    deps = Deps(factor=21)
    history = nbagent.run(agent, "earlier").messages
    assert history is not None
    record = nbagent.run(agent, "scale 2", deps=deps, model_settings={"temperature": 0.25})
    assert record.output == "42" and seen["deps"] is deps and seen["settings"]["temperature"] == 0.25

    with pytest.raises(TypeError, match="max_steps"):
        nbagent.start(agent, "x", max_steps=3)


async def _all_messages(agent: Agent, prompt: str) -> list[ModelMessage]:
    async with agent.run_stream(prompt) as result:
        await result.get_output()
    return result.all_messages()


def test_explicit_message_history_wins():
    model, calls = tool_then_answer()
    agent = adder(model)
    kept = asyncio.run(_all_messages(agent, "first question"))  # a plain (streamed) run's history
    nbagent.run(agent, "unrelated")
    record = nbagent.run(agent, "follow up", message_history=kept)
    assert record.status == "success"
    prompts = [p.content for m in calls[-1] for p in m.parts if p.part_kind == "user-prompt"]
    assert prompts == ["first question", "follow up"]


def test_request_limit_ends_max_steps_and_a_token_limit_ends_limit():
    async def loop_forever(messages, info):
        yield {0: DeltaToolCall(name="add", json_args='{"a": 1, "b": 1}', tool_call_id=f"c{len(messages)}")}

    agent = adder(FunctionModel(stream_function=loop_forever))
    record = nbagent.run(agent, "loop", usage_limits=UsageLimits(request_limit=3))
    assert record.status == "max_steps" and record.stop_reason == "max_steps"
    assert len(record.steps) == 3 and "request_limit" in record.error

    record = nbagent.run(agent, "loop", usage_limits=UsageLimits(total_tokens_limit=60))
    assert record.status == "limit" and record.stop_reason == "total_tokens_limit"
    assert record.error_type == "LimitExceeded" and len(record.steps) == 2
    with pytest.raises(UsageLimitExceeded) as plain:
        asyncio.run(
            agent.run("loop", usage_limits=UsageLimits(total_tokens_limit=60), event_stream_handler=drain)
        )
    assert record.error == f"UsageLimitExceeded: {plain.value}"


def test_a_tool_that_raises_ends_the_run_with_its_error():
    model, _ = tool_then_answer(tool="broken", args="{}")
    agent = Agent(model)

    @agent.tool_plain
    def broken() -> str:
        """Always fails."""
        raise ValueError("the tool broke")

    record = nbagent.run(agent, "go")
    assert record.status == "error" and record.error_type == "ValueError"
    assert record.error == "ValueError: the tool broke"
    call = record.steps[0].tool_calls[0]
    assert (call.tool, call.status, call.error) == ("broken", "error", "ValueError: the tool broke")


def test_a_model_retry_is_an_error_the_model_sees_and_the_run_goes_on():
    model, _calls = tool_then_answer(tool="picky", args='{"n": 1}', answer=("fine",))
    agent = Agent(model)

    @agent.tool_plain
    def picky(n: int) -> int:
        """Wants 2."""
        raise ModelRetry("n must be 2")

    record = nbagent.run(agent, "go")
    assert record.status == "success" and record.output == "fine"
    call = record.steps[0].tool_calls[0]
    assert call.status == "error" and "n must be 2" in call.error


def test_the_agent_is_left_as_a_plain_run_leaves_it():
    model, _ = tool_then_answer()
    agent = adder(model)
    agent.name = None
    before = (agent.model, agent.name, dict(vars(agent)))
    record = nbagent.run(agent, "what is 1 + 2?")
    assert record.status == "success"
    assert (agent.model, agent.name) == before[:2]
    assert set(vars(agent)) == set(before[2])
    assert all(vars(agent)[k] is v for k, v in before[2].items())


def test_test_model_structured_output():
    from pydantic import BaseModel

    class City(BaseModel):
        name: str
        population: int

    agent = Agent(TestModel(), output_type=City)
    record = nbagent.run(agent, "a city")
    assert isinstance(record.output, City)
    assert record.output == agent.run_sync("a city").output
    assert [c.tool for c in record.tool_calls] == ["final_result"]


def test_records_from_a_plain_run_and_a_cancelled_one():
    model, _ = tool_then_answer()
    agent = adder(model)
    result = asyncio.run(agent.run("what is 1 + 2?", event_stream_handler=drain))
    (record,) = adapter.records_from_pydantic_ai(result)
    ours = nbagent.run(agent, "what is 1 + 2?")
    assert record.status == ours.status == "success" and record.output == ours.output
    assert [len(s.tool_calls) for s in record.steps] == [len(s.tool_calls) for s in ours.steps]
    assert (record.input_tokens, record.output_tokens) == (ours.input_tokens, ours.output_tokens)
    assert record.steps[0].tool_calls[0].result == 3

    async def cancelled():
        from pydantic_ai.exceptions import RunCancelled

        async def hang(messages, info):
            yield "cut "
            await asyncio.sleep(HANG_S)
            yield "never"

        slow = Agent(FunctionModel(stream_function=hang))
        async with slow.iter("go") as agent_run:
            async for node in agent_run:
                if Agent.is_model_request_node(node):
                    async with node.stream(agent_run.ctx) as stream:
                        async for _ in stream:
                            agent_run.cancel()
        raise AssertionError(f"not cancelled: {RunCancelled}")

    from pydantic_ai.exceptions import RunCancelled

    with pytest.raises(RunCancelled) as caught:
        asyncio.run(cancelled())
    (record,) = adapter.records_from_pydantic_ai(caught.value)
    assert record.status == "interrupted" and record.steps[-1].interrupted
    with pytest.raises(TypeError, match="records_from_pydantic_ai takes"):
        adapter.records_from_pydantic_ai(42)


def test_detection_does_not_import_pydantic_ai(monkeypatch):
    for name in [m for m in sys.modules if m == "pydantic_ai" or m.startswith("pydantic_ai.")]:
        monkeypatch.delitem(sys.modules, name)
    assert source_for(object()) is None
    assert "pydantic_ai" not in sys.modules


def test_runs_of_one_agent_take_turns():
    release = threading.Event()

    async def stream(messages, info):
        while not release.is_set():
            await asyncio.sleep(0.005)
        yield f"seen {len(messages)}"

    agent = Agent(FunctionModel(stream_function=stream))
    first = nbagent.start(agent, "one")
    wait_until(lambda: first.record.steps)
    second = nbagent.start(agent, "two", reset=False)
    wait_until(lambda: second.record.queued_after == first.run_id)
    release.set()
    assert first.wait(timeout=20).output == "seen 1"
    record = second.wait(timeout=20)
    assert record.output == "seen 3" and record.queued_s > 0  # it went on from the first run's end


def test_run_result_is_the_agent_run_result_that_agent_run_returns():
    from pydantic_ai.agent import AgentRunResult

    from nbagent.adapters.pydantic_ai.records import chat_messages

    def reply(messages: list[ModelMessage], info: AgentInfo):
        if last_part(messages).part_kind == "user-prompt":
            return ModelResponse(parts=[ToolCallPart("add", {"a": 1, "b": 2}, tool_call_id="c1")])
        return ModelResponse(parts=[TextPart("The answer is 3")])

    agent = adder(FunctionModel(reply))
    plain = asyncio.run(agent.run("what is 1 + 2?"))
    run = nbagent.start(agent, "what is 1 + 2?", display=False)
    assert run.result is None  # nothing before the end
    record = run.wait(timeout=20)

    result = run.result
    assert isinstance(result, AgentRunResult)
    assert result.output == plain.output == record.output
    assert result.usage == plain.usage and result.usage.requests == 2
    assert chat_messages(result.all_messages()) == chat_messages(plain.all_messages())
    assert [m.kind for m in result.new_messages()] == [m.kind for m in plain.new_messages()]
