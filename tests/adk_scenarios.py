"""Google ADK scenarios for tests/adapters/adk/test_adk_compat.py, in the style of ADK's own flow, agent and
runner tests (``tests/unittests/flows/llm_flows/``, ``tests/unittests/agents/``,
``tests/unittests/test_runners.py`` in google/adk-python): the function-call flow (one call,
calls in parallel, calls over turns, long-running tools), agent transfer, workflow agents,
callbacks before and after the agent, model and tool (watching, and replacing what they would
give), plugins, ``output_key``, ``output_schema``, ``max_llm_calls``, SSE streaming, usage
metadata, model errors, a tool that raises, an unknown tool, instruction state.

Each scenario builds a fresh agent (a scripted model is used up by a run), so one build runs
plainly and another through nbagent. A scenario's script ends with the follow-up turn's reply
(``FOLLOW_UP``): both sides take the same next turn on the same session.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from adk_fakes import Turn, scripted
from google.adk import Agent
from google.adk.agents import LoopAgent, ParallelAgent, SequentialAgent
from google.adk.agents.run_config import RunConfig, StreamingMode
from google.adk.apps.app import App
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.tools import AgentTool, LongRunningFunctionTool, ToolContext, exit_loop
from google.genai import types
from pydantic import BaseModel

FOLLOW_UP = "and then?"
NEXT = Turn("the next turn")
"""The model's reply to ``FOLLOW_UP`` (every script ends with it)."""


@dataclass
class Case:
    """One scenario, built fresh: what runs (an agent or an ``App``), its task, the run's
    ``RunConfig`` and the new session's state."""

    agent: Any
    task: Any = "a task"
    """A str, or a ``types.Content``."""
    run_config: RunConfig | None = None
    state: dict[str, Any] | None = None
    follow_up: bool = True
    """False when the session cannot take a plain next turn (an invocation ended on an error
    event that plain ADK leaves as it is): the follow-up is then not compared."""
    notes: list[str] = field(default_factory=list)


def says(text: str, usage: tuple[int, int] = (10, 5), **kwargs: Any) -> Turn:
    return Turn(text, usage=usage, **kwargs)


def calls(*items: tuple[str, dict[str, Any]], text: str = "", usage: tuple[int, int] = (20, 4)) -> Turn:
    return Turn(text, list(items), usage=usage)


def model(*turns: Turn, follow_up: bool = True) -> Any:
    return scripted([*turns, NEXT] if follow_up else list(turns))


# -- tools ---------------------------------------------------------------------------------------


def multiply(a: int, b: int) -> int:
    """Multiplies two integers."""
    return a * b


async def weather(city: str) -> str:
    """The weather in a city."""
    await asyncio.sleep(0)
    return f"sunny in {city}"


def profile(name: str) -> dict:
    """A structured result."""
    return {"name": name, "age": 36}


def explode() -> str:
    """Always fails."""
    raise RuntimeError("kaboom")


def remember(fact: str, tool_context: ToolContext) -> str:
    """Keeps a fact in the session's state."""
    tool_context.state["fact"] = fact
    return "kept"


def quietly(tool_context: ToolContext) -> str:
    """A tool whose result ends the turn (no summary by the model)."""
    tool_context.actions.skip_summarization = True
    return "done quietly"


def escalate(tool_context: ToolContext) -> str:
    """Escalates (a loop agent stops)."""
    tool_context.actions.escalate = True
    return "escalated"


def start_job(job: str) -> dict:
    """Starts a long job; its result comes later."""
    return {"status": "pending", "job": job}


def start_job_quietly(job: str) -> None:
    """Starts a long job and returns nothing yet."""
    return None


class Answer(BaseModel):
    value: int


# -- the scenarios -------------------------------------------------------------------------------


def text_only() -> Case:
    return Case(Agent(name="greeter", model=model(says("hello there"))))


def text_only_sse() -> Case:
    config = RunConfig(streaming_mode=StreamingMode.SSE)
    return Case(Agent(name="streamer", model=model(says("hello in pieces"))), run_config=config)


def instruction_with_state() -> Case:
    turn = Turn(respond=lambda request: f"told: {request.config.system_instruction}")
    agent = Agent(name="greeter", model=model(turn), instruction="Greet {name}.")
    return Case(agent, state={"name": "Ada"})


def instruction_missing_state_key() -> Case:
    agent = Agent(name="greeter", model=model(says("never")), instruction="Greet {name}.")
    return Case(agent, follow_up=False)


def instruction_optional_state_key() -> Case:
    turn = Turn(respond=lambda request: f"told: {request.config.system_instruction}")
    return Case(Agent(name="greeter", model=model(turn), instruction="Greet {name?}."))


def instruction_provider() -> Case:
    turn = Turn(respond=lambda request: f"told: {request.config.system_instruction}")
    agent = Agent(name="greeter", model=model(turn), instruction=lambda ctx: f"Be brief, {ctx.agent_name}.")
    return Case(agent)


def one_tool() -> Case:
    agent = Agent(
        name="calc", model=model(calls(("multiply", {"a": 6, "b": 7})), says("42")), tools=[multiply]
    )
    return Case(agent)


def async_tool() -> Case:
    turns = calls(("weather", {"city": "Oslo"})), says("sunny")
    return Case(Agent(name="forecaster", model=model(*turns), tools=[weather]))


def calls_in_parallel() -> Case:
    turns = calls(("multiply", {"a": 2, "b": 3}), ("weather", {"city": "Rome"})), says("both")
    return Case(Agent(name="pair", model=model(*turns), tools=[multiply, weather]))


def calls_over_turns() -> Case:
    turns = (
        calls(("multiply", {"a": 2, "b": 3})),
        calls(("multiply", {"a": 6, "b": 7}), text="then"),
        calls(("weather", {"city": "Lima"})),
        says("done", (40, 1)),
    )
    return Case(Agent(name="chain", model=model(*turns), tools=[multiply, weather]))


def tool_returns_a_dict() -> Case:
    turns = calls(("profile", {"name": "ada"})), says("ada is 36")
    return Case(Agent(name="profiles", model=model(*turns), tools=[profile]))


def tool_writes_state() -> Case:
    turn = Turn(respond=lambda request: "noted")
    turns = calls(("remember", {"fact": "tea"})), turn
    return Case(Agent(name="memo", model=model(*turns), tools=[remember], output_key="said"))


def tool_skips_summarization() -> Case:
    turns = calls(("quietly", {})), says("never")
    return Case(Agent(name="quiet", model=model(*turns), tools=[quietly]))


def tool_raises() -> Case:
    turns = calls(("explode", {})), says("never")
    return Case(Agent(name="unlucky", model=model(*turns), tools=[explode]))


def tool_raises_handled_by_callback() -> Case:
    def on_error(tool, args, tool_context, error):
        return {"error": f"handled: {error}"}

    turns = calls(("explode", {})), says("it failed")
    agent = Agent(name="careful", model=model(*turns), tools=[explode], on_tool_error_callback=on_error)
    return Case(agent)


def unknown_tool() -> Case:
    turns = calls(("no_such_tool", {})), says("never")
    return Case(Agent(name="lost", model=model(*turns), tools=[multiply]))


def long_running_tool() -> Case:
    turns = calls(("start_job", {"job": "report"})), says("started it")
    return Case(Agent(name="jobs", model=model(*turns), tools=[LongRunningFunctionTool(func=start_job)]))


def long_running_tool_without_result() -> Case:
    turns = calls(("start_job_quietly", {"job": "report"})), says("never")
    tool = LongRunningFunctionTool(func=start_job_quietly)
    return Case(Agent(name="jobs", model=model(*turns), tools=[tool]))


def transfer_to_sub_agent() -> Case:
    billing = Agent(name="billing", model=model(says("billing here", (7, 2))), description="Bills.")
    turns = (calls(("transfer_to_agent", {"agent_name": "billing"})),)
    return Case(Agent(name="triage", model=model(*turns, follow_up=False), sub_agents=[billing]))


def transfer_and_back() -> Case:
    billing = Agent(
        name="billing",
        model=model(calls(("transfer_to_agent", {"agent_name": "triage"})), follow_up=False),
        description="Bills.",
    )
    turns = calls(("transfer_to_agent", {"agent_name": "billing"})), says("back at triage")
    return Case(Agent(name="triage", model=model(*turns), sub_agents=[billing]))


def transfer_to_a_peer() -> Case:
    refunds = Agent(name="refunds", model=model(says("refunded", (3, 1))), description="Refunds.")
    billing = Agent(
        name="billing",
        model=model(calls(("transfer_to_agent", {"agent_name": "refunds"})), follow_up=False),
        description="Bills.",
    )
    turns = (calls(("transfer_to_agent", {"agent_name": "billing"})),)
    return Case(Agent(name="triage", model=model(*turns, follow_up=False), sub_agents=[billing, refunds]))


def transfer_to_unknown_agent() -> Case:
    billing = Agent(name="billing", model=model(says("never")), description="Bills.")
    turns = (calls(("transfer_to_agent", {"agent_name": "nobody"})),)
    return Case(
        Agent(name="triage", model=model(*turns, follow_up=False), sub_agents=[billing]), follow_up=False
    )


def sequential_agents() -> Case:
    first = Agent(name="researcher", model=model(says("found it"), follow_up=False), output_key="found")
    turn = Turn(respond=lambda request: f"checked: {request.config.system_instruction}")
    second = Agent(name="checker", model=model(turn, follow_up=False), instruction="Check {found}.")
    return Case(SequentialAgent(name="pipeline", sub_agents=[first, second]), follow_up=False)


def sequential_with_tools() -> Case:
    first = Agent(
        name="calc", model=model(calls(("multiply", {"a": 3, "b": 3})), says("nine")), tools=[multiply]
    )
    second = Agent(name="writer", model=model(says("wrote nine", (4, 2)), says("wrote again")))
    return Case(SequentialAgent(name="pipeline", sub_agents=[first, second]))


def parallel_agents() -> Case:
    left = Agent(name="left", model=model(says("left side")))
    right = Agent(name="right", model=model(says("right side")))
    return Case(ParallelAgent(name="both", sub_agents=[left, right]))


def loop_agent_max_iterations() -> Case:
    worker = Agent(name="worker", model=model(says("once"), says("twice"), says("thrice")))
    return Case(LoopAgent(name="loop", sub_agents=[worker], max_iterations=2))


def loop_agent_exit_loop() -> Case:
    turns = says("round one"), calls(("exit_loop", {})), NEXT, NEXT
    worker = Agent(name="worker", model=scripted(list(turns)), tools=[exit_loop])
    return Case(LoopAgent(name="loop", sub_agents=[worker], max_iterations=5))


def loop_agent_escalates() -> Case:
    turns = calls(("escalate", {})), says("never"), NEXT, NEXT
    worker = Agent(name="worker", model=scripted(list(turns)), tools=[escalate])
    return Case(LoopAgent(name="loop", sub_agents=[worker], max_iterations=3))


def agent_as_a_tool() -> Case:
    helper = Agent(name="helper", model=model(says("helped", (2, 1))), description="Helps.")
    turns = calls(("helper", {"request": "please"})), says("the helper helped")
    return Case(Agent(name="boss", model=model(*turns), tools=[AgentTool(agent=helper)]))


def before_model_callback_watches() -> Case:
    seen: list[int] = []

    def before(callback_context, llm_request):
        seen.append(len(llm_request.contents))

    return Case(Agent(name="watched", model=model(says("hi")), before_model_callback=before))


def before_model_callback_replies() -> Case:
    def before(callback_context, llm_request):
        return LlmResponse(content=types.Content(role="model", parts=[types.Part(text="from the callback")]))

    return Case(Agent(name="answered", model=model(), before_model_callback=before))


def after_model_callback_replaces() -> Case:
    def after(callback_context, llm_response):
        if llm_response.content and llm_response.content.parts and llm_response.content.parts[0].text:
            return LlmResponse(
                content=types.Content(role="model", parts=[types.Part(text="replaced")]),
                usage_metadata=llm_response.usage_metadata,
            )
        return None

    return Case(Agent(name="edited", model=model(says("original")), after_model_callback=after))


def before_agent_callback_skips() -> Case:
    def before(callback_context):
        return types.Content(role="model", parts=[types.Part(text="skipped the agent")])

    return Case(Agent(name="skipped", model=model(), before_agent_callback=before))


def after_agent_callback_adds() -> Case:
    def after(callback_context):
        return types.Content(role="model", parts=[types.Part(text="and a postscript")])

    return Case(
        Agent(name="signed", model=model(says("the answer"), says("again")), after_agent_callback=after)
    )


def before_tool_callback_replaces() -> Case:
    def before(tool, args, tool_context):
        return {"result": "from the callback"} if tool.name == "multiply" else None

    turns = calls(("multiply", {"a": 2, "b": 2})), says("four?")
    return Case(Agent(name="guarded", model=model(*turns), tools=[multiply], before_tool_callback=before))


def after_tool_callback_replaces() -> Case:
    def after(tool, args, tool_context, tool_response):
        return {"result": f"checked {tool_response}"}

    turns = calls(("multiply", {"a": 5, "b": 5})), says("25")
    return Case(Agent(name="checked", model=model(*turns), tools=[multiply], after_tool_callback=after))


def model_error_callback_recovers() -> Case:
    def on_error(callback_context, llm_request, error):
        return LlmResponse(
            content=types.Content(role="model", parts=[types.Part(text=f"recovered: {error}")])
        )

    turn = Turn(raise_=ConnectionError("gone"))
    return Case(Agent(name="resilient", model=model(turn), on_model_error_callback=on_error))


class Counting(BasePlugin):
    """A plugin that watches every callback (returns None), as ADK's logging plugin does."""

    def __init__(self) -> None:
        super().__init__(name="counting")
        self.seen: list[str] = []

    async def before_model_callback(self, *, callback_context, llm_request):
        self.seen.append("model")

    async def after_tool_callback(self, *, tool, tool_args, tool_context, result):
        self.seen.append("tool")


class Replying(BasePlugin):
    """A plugin that answers for the model."""

    def __init__(self) -> None:
        super().__init__(name="replying")

    async def before_model_callback(self, *, callback_context, llm_request):
        return LlmResponse(content=types.Content(role="model", parts=[types.Part(text="the plugin says")]))


class ToolEditing(BasePlugin):
    def __init__(self) -> None:
        super().__init__(name="tool_editing")

    async def after_tool_callback(self, *, tool, tool_args, tool_context, result):
        return {"result": f"plugin saw {result}"}


class EarlyExit(BasePlugin):
    def __init__(self) -> None:
        super().__init__(name="early_exit")

    async def before_run_callback(self, *, invocation_context):
        return types.Content(role="model", parts=[types.Part(text="closed today")])


class ErrorHandling(BasePlugin):
    def __init__(self) -> None:
        super().__init__(name="error_handling")

    async def on_tool_error_callback(self, *, tool, tool_args, tool_context, error):
        return {"error": f"plugin handled {error}"}


def app(agent: Any, *plugins: BasePlugin) -> App:
    return App(name="compat", root_agent=agent, plugins=list(plugins))


def plugin_watches() -> Case:
    turns = calls(("multiply", {"a": 2, "b": 4})), says("eight")
    return Case(app(Agent(name="calc", model=model(*turns), tools=[multiply]), Counting()))


def plugin_replies_for_the_model() -> Case:
    return Case(app(Agent(name="plugged", model=model()), Replying()))


def plugin_edits_a_tool_result() -> Case:
    turns = calls(("multiply", {"a": 3, "b": 4})), says("twelve")
    return Case(app(Agent(name="calc", model=model(*turns), tools=[multiply]), ToolEditing()))


def plugin_ends_the_run_early() -> Case:
    return Case(app(Agent(name="closed", model=model(says("never"))), EarlyExit()), follow_up=False)


def plugin_handles_a_tool_error() -> Case:
    turns = calls(("explode", {})), says("it failed")
    return Case(app(Agent(name="calc", model=model(*turns), tools=[explode]), ErrorHandling()))


def output_key() -> Case:
    return Case(Agent(name="keeper", model=model(says("keep this")), output_key="kept"))


def output_schema() -> Case:
    return Case(Agent(name="typed", model=model(says('{"value": 7}', (4, 3))), output_schema=Answer))


def output_schema_with_tools() -> Case:
    turns = (
        calls(("multiply", {"a": 3, "b": 4})),
        calls(("set_model_response", {"value": 12})),
    )
    agent = Agent(
        name="typed", model=model(*turns), tools=[multiply], output_schema=Answer, output_key="answer"
    )
    return Case(agent)


def max_llm_calls_reached() -> Case:
    turns = [calls(("multiply", {"a": 1, "b": i})) for i in range(4)]
    agent = Agent(name="looper", model=model(*turns), tools=[multiply])
    return Case(agent, run_config=RunConfig(max_llm_calls=2))


def max_llm_calls_not_reached() -> Case:
    turns = calls(("multiply", {"a": 1, "b": 2})), says("two")
    agent = Agent(name="bounded", model=model(*turns), tools=[multiply])
    return Case(agent, run_config=RunConfig(max_llm_calls=5))


def sse_with_a_tool() -> Case:
    turns = calls(("multiply", {"a": 6, "b": 6}), text="let me see"), says("thirty six in words")
    config = RunConfig(streaming_mode=StreamingMode.SSE)
    return Case(Agent(name="streamer", model=model(*turns), tools=[multiply]), run_config=config)


def usage_with_thoughts_and_cache() -> Case:
    turn = says("thought hard", (100, 7), thoughts=30, cached=60)
    return Case(Agent(name="thinker", model=model(turn)))


def usage_over_turns() -> Case:
    turns = calls(("multiply", {"a": 2, "b": 9}), usage=(50, 6)), says("eighteen", (70, 3), thoughts=4)
    return Case(Agent(name="counter", model=model(*turns), tools=[multiply]))


def model_error() -> Case:
    agent = Agent(name="broken", model=model(Turn(raise_=ValueError("bad reply"))))
    return Case(agent)


def model_error_after_a_tool() -> Case:
    turns = calls(("multiply", {"a": 2, "b": 2})), Turn(raise_=ConnectionError("gone"))
    return Case(Agent(name="flaky", model=model(*turns), tools=[multiply]))


def model_error_code() -> Case:
    turn = Turn("The model refused.", error_code="SAFETY")
    return Case(Agent(name="refused", model=model(turn)))


def include_contents_none() -> Case:
    turn = Turn(respond=lambda request: f"{len(request.contents)} contents")
    return Case(
        Agent(name="forgetful", model=model(turn, Turn(respond=turn.respond)), include_contents="none")
    )


def global_and_static_instruction() -> Case:
    turn = Turn(respond=lambda request: f"told: {request.config.system_instruction}")
    agent = Agent(
        name="told", model=model(turn), static_instruction="You are terse.", instruction="Answer {topic}."
    )
    return Case(agent, state={"topic": "tea"})


def content_task() -> Case:
    turn = Turn(respond=lambda request: f"got {len(request.contents[-1].parts)} parts")
    task = types.Content(role="user", parts=[types.Part(text="first"), types.Part(text="second")])
    return Case(Agent(name="parts", model=model(turn)), task=task)


SCENARIOS: dict[str, Callable[[], Case]] = {
    f.__name__: f
    for f in (
        text_only, text_only_sse, instruction_with_state, instruction_missing_state_key,
        instruction_optional_state_key, instruction_provider, one_tool, async_tool,
        calls_in_parallel, calls_over_turns, tool_returns_a_dict, tool_writes_state,
        tool_skips_summarization, tool_raises, tool_raises_handled_by_callback, unknown_tool,
        long_running_tool, long_running_tool_without_result, transfer_to_sub_agent,
        transfer_and_back, transfer_to_a_peer, transfer_to_unknown_agent, sequential_agents,
        sequential_with_tools, parallel_agents, loop_agent_max_iterations, loop_agent_exit_loop,
        loop_agent_escalates, agent_as_a_tool, before_model_callback_watches,
        before_model_callback_replies, after_model_callback_replaces, before_agent_callback_skips,
        after_agent_callback_adds, before_tool_callback_replaces, after_tool_callback_replaces,
        model_error_callback_recovers, plugin_watches, plugin_replies_for_the_model,
        plugin_edits_a_tool_result, plugin_ends_the_run_early, plugin_handles_a_tool_error,
        output_key, output_schema, output_schema_with_tools, max_llm_calls_reached,
        max_llm_calls_not_reached, sse_with_a_tool, usage_with_thoughts_and_cache,
        usage_over_turns, model_error, model_error_after_a_tool, model_error_code,
        include_contents_none, global_and_static_instruction, content_task,
    )
}  # fmt: skip
