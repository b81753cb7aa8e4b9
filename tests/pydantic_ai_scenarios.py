"""Scenarios for the pydantic-ai compatibility suite
(``tests/adapters/pydantic_ai/test_pydantic_ai_compat.py``), in the style of pydantic-ai's own agent
tests: its ``TestModel`` and ``FunctionModel`` test doubles, streamed and not, tools, structured
output, retries, limits, deferred tools, run keywords.

Each scenario builds a fresh agent and says how to run it: ``Case(agent, task, options)``. The
suite runs it plainly with ``agent.run`` as a user runs it (no ``event_stream_handler`` unless the
scenario gives one) and through nbagent, and compares what came out (see the suite's docstring for
the one documented difference: test models' token estimates, streamed or not).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent, ModelRetry, RunContext, UsageLimits
from pydantic_ai.exceptions import CallDeferred
from pydantic_ai.messages import (
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.output import NativeOutput, PromptedOutput, ToolOutput
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolDenied
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai.usage import RequestUsage, RunUsage


class Weather(BaseModel):
    city: str
    celsius: int


@dataclass
class Case:
    agent: Agent
    task: Any = "a task"
    options: dict[str, Any] = field(default_factory=dict)
    tool_usage: bool = False
    """A tool adds usage (requests the steps do not count one by one)."""
    resumes: bool = False
    """The run starts with the calls of its history's last response (``deferred_tool_results``, or
    a history that ends in calls): nbagent gives them a step of their own, with no model request."""


def last_part(messages: list[ModelMessage]) -> Any:
    return messages[-1].parts[-1]


def first_turn(messages: list[ModelMessage]) -> bool:
    return last_part(messages).part_kind == "user-prompt"


def with_tools(agent: Agent) -> Agent:
    @agent.tool_plain
    def double(x: int) -> int:
        """Double x."""
        return 2 * x

    @agent.tool_plain
    def shout(text: str) -> str:
        """Upper-case a text."""
        return text.upper()

    return agent


def call_then_text(name: str = "double", args: str = '{"x": 21}') -> Callable[..., Any]:
    """A streamed model: one call of ``name``, then it answers with what the call returned."""

    async def stream(messages: list[ModelMessage], info: AgentInfo):
        if first_turn(messages):
            yield {0: DeltaToolCall(name=name, json_args=args, tool_call_id="c1")}
        else:
            yield f"got {last_part(messages).content}"

    return stream


def reply_of(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A non-streamed model: one call of ``double``, then text with what it returned."""
    if first_turn(messages):
        return ModelResponse(parts=[ToolCallPart("double", {"x": 4}, tool_call_id="c1")])
    return ModelResponse(parts=[TextPart(f"got {last_part(messages).content}")])


# -- TestModel -------------------------------------------------------------------------------


def text_plain() -> Case:
    return Case(Agent(TestModel()))


def custom_text() -> Case:
    return Case(Agent(TestModel(custom_output_text="custom answer")))


def tools_all() -> Case:
    return Case(with_tools(Agent(TestModel())))


def tools_subset() -> Case:
    return Case(with_tools(Agent(TestModel(call_tools=["shout"]))))


def structured() -> Case:
    return Case(Agent(TestModel(), output_type=Weather))


def structured_custom_args() -> Case:
    return Case(Agent(TestModel(custom_output_args={"city": "Oslo", "celsius": -3}), output_type=Weather))


def structured_with_tools() -> Case:
    return Case(with_tools(Agent(TestModel(), output_type=Weather)))


def union_output() -> Case:
    return Case(Agent(TestModel(), output_type=[Weather, str]))


def tool_output_named() -> Case:
    return Case(Agent(TestModel(), output_type=ToolOutput(Weather, name="report_weather")))


def native_output() -> Case:
    return Case(
        Agent(
            TestModel(custom_output_text='{"city": "Rome", "celsius": 30}'), output_type=NativeOutput(Weather)
        )
    )


def prompted_output() -> Case:
    return Case(
        Agent(
            TestModel(custom_output_text='{"city": "Lima", "celsius": 18}'),
            output_type=PromptedOutput(Weather),
        )
    )


def output_function() -> Case:
    def to_upper(text: str) -> str:
        """Upper-case the answer."""
        return text.upper()

    return Case(Agent(TestModel(custom_output_args={"text": "loud"}), output_type=to_upper))


def run_output_type() -> Case:
    return Case(Agent(TestModel()), options={"output_type": Weather})


def tool_raises() -> Case:
    agent = Agent(TestModel())

    @agent.tool_plain
    def explode() -> str:
        """Always fails."""
        raise RuntimeError("kaboom")

    return Case(agent)


def tool_retry_then_ok() -> Case:
    agent = Agent(TestModel())
    tries = []

    @agent.tool_plain
    def flaky(x: int) -> int:
        """Fails once."""
        tries.append(x)
        if len(tries) == 1:
            raise ModelRetry("try again")
        return x

    return Case(agent)


def tool_retries_exhausted() -> Case:
    agent = Agent(TestModel(), retries=1)

    @agent.tool_plain
    def picky(x: int) -> int:
        """Never satisfied."""
        raise ModelRetry("no")

    return Case(agent)


def run_retries_keyword() -> Case:
    case = tool_retries_exhausted()
    case.options = {"retries": 3}
    return case


def deps_tool() -> Case:
    agent = Agent(TestModel(), deps_type=int)

    @agent.tool
    def scaled(ctx: RunContext[int], x: int) -> int:
        """Scale x by the deps."""
        return x * ctx.deps

    return Case(agent, options={"deps": 7})


def dynamic_system_prompt() -> Case:
    agent = Agent(TestModel(), deps_type=str)

    @agent.system_prompt
    def who(ctx: RunContext[str]) -> str:
        return f"You help {ctx.deps}."

    return Case(agent, options={"deps": "Ada"})


def run_toolsets() -> Case:
    toolset = FunctionToolset()

    @toolset.tool_plain
    def triple(x: int) -> int:
        """Triple x."""
        return 3 * x

    return Case(Agent(TestModel()), options={"toolsets": [toolset]})


def metadata_keyword() -> Case:
    return Case(Agent(TestModel()), options={"metadata": {"ticket": "T-1"}})


def run_model_keyword() -> Case:
    return Case(
        Agent(TestModel(custom_output_text="agent's own")),
        options={"model": TestModel(custom_output_text="the run's")},
    )


def request_limit() -> Case:
    return Case(with_tools(Agent(TestModel())), options={"usage_limits": UsageLimits(request_limit=1)})


def token_limit() -> Case:
    # crossed by the second request, whether the test model's estimate is streamed or not
    return Case(with_tools(Agent(TestModel())), options={"usage_limits": UsageLimits(total_tokens_limit=100)})


def tool_calls_limit() -> Case:
    return Case(with_tools(Agent(TestModel())), options={"usage_limits": UsageLimits(tool_calls_limit=1)})


def usage_incr_in_tool() -> Case:
    agent = Agent(TestModel())

    @agent.tool
    def costly(ctx: RunContext[None], x: int) -> int:
        """Calls a paid service."""
        ctx.usage.incr(RunUsage(requests=5, input_tokens=2, output_tokens=7))
        return x

    return Case(agent, tool_usage=True)


def delegation() -> Case:
    helper = Agent(TestModel(custom_output_text="helper says hi"))
    agent = Agent(TestModel())

    @agent.tool
    async def ask_helper(ctx: RunContext[None], question: str) -> str:
        """Ask another agent."""
        result = await helper.run(question, usage=ctx.usage)
        return result.output

    return Case(agent, tool_usage=True)


def carried_usage() -> Case:
    return Case(Agent(TestModel()), options={"usage": RunUsage(requests=1, input_tokens=10, output_tokens=3)})


def cancel_from_tool() -> Case:
    agent = Agent(TestModel())

    @agent.tool
    async def give_up(ctx: RunContext[None]) -> str:
        """Ends the run."""
        ctx.cancel()
        await asyncio.sleep(0)
        return "never seen"

    return Case(agent)


def deferred_external() -> Case:
    agent = Agent(TestModel(), output_type=[str, DeferredToolRequests])

    @agent.tool_plain
    def run_elsewhere(job: str) -> str:
        """Runs outside the agent."""
        raise CallDeferred

    return Case(agent)


def approval_agent() -> Agent:
    agent = Agent(TestModel(), output_type=[str, DeferredToolRequests])

    @agent.tool_plain(requires_approval=True)
    def send(to: str) -> str:
        """Sends a message."""
        return f"sent to {to}"

    return agent


def approval_left_to_the_caller() -> Case:
    """A call that needs approval, and no one in the run to decide it: handed back to the caller."""
    return Case(approval_agent())


def approval_without_deferred_output() -> Case:
    """A call that needs approval in an agent that cannot hand it back: pydantic-ai's own error."""
    agent = Agent(TestModel())

    @agent.tool_plain(requires_approval=True)
    def send(to: str) -> str:
        """Sends a message."""
        return f"sent to {to}"

    return Case(agent)


def resumed(agent: Agent, answer: Callable[[Any], DeferredToolResults]) -> Case:
    """The run pydantic-ai resumes: ``agent``'s paused run's history, and ``answer`` to its calls."""
    paused = agent.run_sync("a task")
    return Case(
        agent,
        None,
        {"message_history": paused.all_messages(), "deferred_tool_results": answer(paused.output)},
        resumes=True,
    )


def deferred_approved_resumed() -> Case:
    return resumed(
        approval_agent(), lambda out: DeferredToolResults(approvals={out.approvals[0].tool_call_id: True})
    )


def deferred_denied_resumed() -> Case:
    return resumed(
        approval_agent(),
        lambda out: DeferredToolResults(approvals={out.approvals[0].tool_call_id: ToolDenied("not now")}),
    )


def deferred_external_resumed() -> Case:
    agent = deferred_external().agent
    return resumed(
        agent, lambda out: DeferredToolResults(calls={out.calls[0].tool_call_id: "done elsewhere"})
    )


def history_ends_in_calls() -> Case:
    """A history whose last response has calls, and no new prompt: pydantic-ai runs the calls."""
    history = [
        ModelRequest(parts=[UserPromptPart("double 3")]),
        ModelResponse(parts=[ToolCallPart("double", {"x": 3}, tool_call_id="h1")]),
    ]
    return Case(with_tools(Agent(TestModel())), None, {"message_history": history}, resumes=True)


# -- FunctionModel, streamed -----------------------------------------------------------------


def stream_tool_then_text() -> Case:
    return Case(with_tools(Agent(FunctionModel(stream_function=call_then_text()))))


def stream_parallel_calls() -> Case:
    async def stream(messages, info):
        if first_turn(messages):
            yield {
                0: DeltaToolCall(name="double", json_args='{"x": 1}', tool_call_id="a"),
                1: DeltaToolCall(name="shout", json_args='{"text": "hi"}', tool_call_id="b"),
            }
        else:
            yield "both done"

    return Case(with_tools(Agent(FunctionModel(stream_function=stream))))


def stream_output_retry() -> Case:
    async def stream(messages, info):
        yield "draft" if sum(m.kind == "response" for m in messages) == 0 else "final"

    agent = Agent(FunctionModel(stream_function=stream))

    @agent.output_validator
    def no_drafts(output: str) -> str:
        if output == "draft":
            raise ModelRetry("not a draft, please")
        return output

    return Case(agent)


def stream_unknown_tool() -> Case:
    return Case(with_tools(Agent(FunctionModel(stream_function=call_then_text("no_such_tool", "{}")))))


def stream_invalid_args() -> Case:
    return Case(with_tools(Agent(FunctionModel(stream_function=call_then_text("double", '{"x": "many"}')))))


def stream_settings() -> Case:
    async def stream(messages, info):
        yield f"temperature {info.model_settings['temperature']}"

    return Case(
        Agent(FunctionModel(stream_function=stream)), options={"model_settings": {"temperature": 0.5}}
    )


def stream_instructions() -> Case:
    async def stream(messages, info):
        yield f"told: {info.instructions}"

    return Case(Agent(FunctionModel(stream_function=stream)), options={"instructions": "be brief"})


def multimodal_task() -> Case:
    async def stream(messages, info):
        content = messages[-1].parts[-1].content
        yield " | ".join(c if isinstance(c, str) else type(c).__name__ for c in content)

    return Case(
        Agent(FunctionModel(stream_function=stream)),
        task=["what is in", ImageUrl("https://example.com/cat.png")],
    )


def message_history_keyword() -> Case:
    async def stream(messages, info):
        yield f"seen {len(messages)} messages"

    history = Agent(TestModel()).run_sync("earlier").all_messages()
    return Case(Agent(FunctionModel(stream_function=stream)), options={"message_history": history})


# -- FunctionModel, not streamed (no stream_function) ----------------------------------------


def plain_text() -> Case:
    return Case(Agent(FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("plain reply")]))))


def plain_tool_then_text() -> Case:
    return Case(with_tools(Agent(FunctionModel(reply_of))))


def plain_structured() -> Case:
    def reply(messages, info):
        args = {"city": "Bergen", "celsius": 9}
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, args, tool_call_id="o1")])

    return Case(Agent(FunctionModel(reply), output_type=Weather))


def plain_reported_usage() -> Case:
    def reply(messages, info):
        return ModelResponse(
            parts=[TextPart("counted")], usage=RequestUsage(input_tokens=40, output_tokens=2)
        )

    return Case(Agent(FunctionModel(reply)))


def plain_output_retries_exhausted() -> Case:
    agent = Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("never good")])), retries=1)

    @agent.output_validator
    def never(output: str) -> str:
        raise ModelRetry("again")

    return Case(agent)


def plain_model_error() -> Case:
    def reply(messages, info):
        raise ValueError("the model broke")

    return Case(Agent(FunctionModel(reply)))


def both_functions() -> Case:
    """A model that can answer streamed or not (as a real provider's, the same answer either way)."""

    async def stream(messages, info):
        yield "the "
        yield "answer"

    return Case(
        Agent(
            FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("the answer")]), stream_function=stream)
        )
    )


def plain_with_handler() -> Case:
    """A model that cannot stream, with an ``event_stream_handler``: pydantic-ai streams, and fails."""

    async def handler(ctx, events):
        async for _ in events:
            pass

    return Case(
        Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("x")]))),
        options={"event_stream_handler": handler},
    )


SCENARIOS: dict[str, Callable[[], Case]] = {
    f.__name__: f
    for f in (
        text_plain, custom_text, tools_all, tools_subset, structured, structured_custom_args,
        structured_with_tools, union_output, tool_output_named, native_output, prompted_output,
        output_function, run_output_type, tool_raises, tool_retry_then_ok, tool_retries_exhausted,
        run_retries_keyword, deps_tool, dynamic_system_prompt, run_toolsets, metadata_keyword,
        run_model_keyword, request_limit, token_limit, tool_calls_limit, usage_incr_in_tool, delegation,
        carried_usage, cancel_from_tool, deferred_external, approval_left_to_the_caller,
        approval_without_deferred_output, deferred_approved_resumed,
        deferred_denied_resumed, deferred_external_resumed, history_ends_in_calls, stream_tool_then_text,
        stream_parallel_calls,
        stream_output_retry, stream_unknown_tool, stream_invalid_args, stream_settings, stream_instructions,
        multimodal_task, message_history_keyword, plain_text, plain_tool_then_text, plain_structured,
        plain_reported_usage, plain_output_retries_exhausted, plain_model_error, both_functions,
        plain_with_handler,
    )
}  # fmt: skip
