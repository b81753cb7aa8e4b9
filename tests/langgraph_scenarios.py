"""Scenarios for the LangGraph compatibility suite, in the style of LangGraph's and LangChain's own
agent tests (``libs/prebuilt/tests/test_react_agent.py``, ``libs/langgraph/tests/test_pregel_async.py``,
LangChain's ``tests/unit_tests/agents``): a scripted fake chat model, small tools, a checkpointer.

Each scenario builds a fresh graph (its fake model keeps its place in the script) and lists the
turns to run on one thread: an input, and for a graph that pauses on ``interrupt()`` how to answer
it, both plainly (``Command(resume=...)``) and through nbagent (``run.resume`` / ``approve`` /
``deny`` / ``edit``)."""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain.agents.structured_output import ToolStrategy
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.func import entrypoint, task
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command, Send, interrupt
from langgraph_fakes import NonStreamingChatModel, ScriptedChatModel, reply
from pydantic import BaseModel
from typing_extensions import TypedDict

from nbagent.guardrails.approvals import denial_observation


@dataclass
class Turn:
    input: Any
    plain_resume: list[Any] = field(default_factory=list)
    """Values for ``Command(resume=...)``, one per pause, for the plain run."""
    answer: list[Callable[[Any], Any]] = field(default_factory=list)
    """One per pause: answers the nbagent run's pending request(s) (``run`` given)."""
    config: dict[str, Any] = field(default_factory=dict)
    """Extra config (``recursion_limit``); ``thread_id`` is added by the suite."""
    context: Any = None


@dataclass
class Scenario:
    build: Callable[[], Any]
    turns: list[Turn]
    error: str | None = None
    """The exception type name both runs end with, when they fail."""
    edited: dict[str, Any] = field(default_factory=dict)
    """Call id -> the arguments a person edited it to (the thread keeps the model's)."""


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def lookup(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@tool
async def slow_lookup(city: str) -> str:
    """The weather in a city, from a slow service."""
    await asyncio.sleep(0.01)
    return f"cloudy in {city}"


@tool
def broken(x: int) -> int:
    """A tool that fails."""
    raise ValueError(f"broken tool got {x}")


@tool
def remember(fact: str) -> Command:
    """Remember a fact (a tool that returns a Command)."""
    from langchain_core.tools import InjectedToolCallId  # noqa: F401

    return Command(update={"messages": [ToolMessage(f"remembered {fact}", tool_call_id="call_remember_0_")]})


class Weather(BaseModel):
    city: str
    celsius: int


def _agent(
    replies: list[AIMessage], tools: list[Any] = (), *, model_class: type = ScriptedChatModel, **kw: Any
) -> Any:
    def build() -> Any:
        return create_agent(
            model_class(replies=list(replies)), tools=list(tools), checkpointer=InMemorySaver(), **kw
        )

    return build


def _once(text: str) -> list[Turn]:
    return [Turn(text)]


def react_scenarios() -> dict[str, Scenario]:
    return {
        "direct_answer": Scenario(_agent([reply("hello there")]), _once("hi")),
        "one_tool_call": Scenario(
            _agent([reply("adding", [("add", {"a": 1, "b": 2})]), reply("it is 3", usage=(30, 4))], [add]),
            _once("what is 1+2?"),
        ),
        "parallel_tool_calls": Scenario(
            _agent(
                [reply("", [("add", {"a": 1, "b": 2}), ("lookup", {"city": "Oslo"})]), reply("3, and sunny")],
                [add, lookup],
            ),
            _once("two things"),
        ),
        "two_rounds_of_tools": Scenario(
            _agent(
                [
                    reply("", [("add", {"a": 1, "b": 2})]),
                    reply("", [("add", {"a": 3, "b": 4})]),
                    reply("done"),
                ],
                [add],
            ),
            _once("chain"),
        ),
        "async_tools": Scenario(
            _agent(
                [
                    reply("", [("slow_lookup", {"city": "Rome"}), ("slow_lookup", {"city": "Lima"})]),
                    reply("ok"),
                ],
                [slow_lookup],
            ),
            _once("weather twice"),
        ),
        "tool_error_returned_to_model": Scenario(
            _agent([reply("", [("broken", {"x": 1})]), reply("the tool failed")], [broken]),
            _once("break it"),
            error="ValueError",
        ),
        "unknown_tool": Scenario(
            _agent([reply("", [("nope", {"x": 1})]), reply("no such tool")], [add]), _once("call nope")
        ),
        "usage_unknown": Scenario(_agent([reply("no usage", usage=None)]), _once("hi")),
        "non_streaming_model": Scenario(
            _agent(
                [reply("", [("add", {"a": 2, "b": 2})]), reply("four")],
                [add],
                model_class=NonStreamingChatModel,
            ),
            _once("2+2"),
        ),
        "system_prompt": Scenario(_agent([reply("arr")], system_prompt="You are a pirate."), _once("hi")),
        "structured_output": Scenario(
            _agent(
                [reply("", [("Weather", {"city": "Oslo", "celsius": -3})])],
                response_format=ToolStrategy(Weather),
            ),
            _once("weather as data"),
        ),
        "tool_returns_command": Scenario(
            _agent([reply("", [("remember", {"fact": "blue"})]), reply("noted")], [remember]),
            _once("remember"),
        ),
        "message_list_input": Scenario(
            _agent([reply("seen both")]),
            [Turn([HumanMessage("first"), AIMessage("ok"), HumanMessage("second")])],
        ),
        "state_dict_input": Scenario(_agent([reply("from a dict")]), [Turn({"messages": [("user", "hi")]})]),
        "checkpointer_continue": Scenario(
            _agent(
                [reply("first answer"), reply("", [("add", {"a": 1, "b": 1})]), reply("second answer")], [add]
            ),
            [Turn("one"), Turn("two")],
        ),
        "three_turns": Scenario(
            _agent([reply("a"), reply("b"), reply("c")]), [Turn("one"), Turn("two"), Turn("three")]
        ),
        "recursion_limit": Scenario(
            _agent([reply("", [("add", {"a": 1, "b": 1})])] * 10, [add]),
            [Turn("loop", config={"recursion_limit": 4})],
            error="GraphRecursionError",
        ),
        "model_runs_out": Scenario(_agent([]), _once("hi"), error="IndexError"),
    }


def _hitl_agent(replies: list[AIMessage], tools: list[Any], allowed: list[str]) -> Callable[[], Any]:
    middleware = [
        HumanInTheLoopMiddleware(interrupt_on={t.name: {"allowed_decisions": allowed} for t in tools})
    ]
    return _agent(replies, tools, middleware=middleware)


def interrupt_scenarios() -> dict[str, Scenario]:
    deny = denial_observation("not today")
    return {
        "hitl_approve": Scenario(
            _hitl_agent([reply("", [("add", {"a": 1, "b": 2})]), reply("3")], [add], ["approve", "reject"]),
            [
                Turn(
                    "add", [{"decisions": [{"type": "approve"}]}], [lambda run: run.approve(_pending(run)[0])]
                )
            ],
        ),
        "hitl_reject": Scenario(
            _hitl_agent(
                [reply("", [("add", {"a": 1, "b": 2})]), reply("ok, not added")], [add], ["approve", "reject"]
            ),
            [
                Turn(
                    "add",
                    [{"decisions": [{"type": "reject", "message": deny}]}],
                    [lambda run: run.deny(_pending(run)[0], "not today")],
                )
            ],
        ),
        "hitl_edit": Scenario(
            _hitl_agent(
                [reply("", [("add", {"a": 1, "b": 2})]), reply("edited")],
                [add],
                ["approve", "edit", "reject"],
            ),
            [
                Turn(
                    "add",
                    [
                        {
                            "decisions": [
                                {"type": "edit", "edited_action": {"name": "add", "args": {"a": 5, "b": 5}}}
                            ]
                        }
                    ],
                    [lambda run: run.edit(_pending(run)[0], {"a": 5, "b": 5})],
                )
            ],
            edited={"call_add_0_": {"a": 5, "b": 5}},
        ),
        "hitl_two_calls": Scenario(
            _hitl_agent(
                [reply("", [("add", {"a": 1, "b": 2}), ("lookup", {"city": "Oslo"})]), reply("both")],
                [add, lookup],
                ["approve", "reject"],
            ),
            [
                Turn(
                    "two",
                    [{"decisions": [{"type": "approve"}, {"type": "reject", "message": deny}]}],
                    [lambda run: (run.approve(_pending(run)[0]), run.deny(_pending(run)[1], "not today"))],
                )
            ],
        ),
        "interrupt_text": Scenario(
            _ask_graph, [Turn({"question": "name?"}, ["Ada"], [lambda run: run.resume("Ada")])]
        ),
        "interrupt_twice": Scenario(
            _ask_twice_graph,
            [
                Turn(
                    {"question": "q"},
                    ["first", "second"],
                    [lambda run: run.resume("first"), lambda run: run.resume("second")],
                )
            ],
        ),
        "interrupt_dict_answer": Scenario(
            _ask_graph, [Turn({"question": "config?"}, [{"k": 1}], [lambda run: run.resume({"k": 1})])]
        ),
    }


def _pending(run: Any) -> list[str]:
    return [p.call_id for p in run.pending_approvals]


class AskState(TypedDict, total=False):
    question: str
    answer: Any
    log: Annotated[list[str], operator.add]


def _ask_graph() -> Any:
    def ask(state: AskState) -> dict[str, Any]:
        return {"answer": interrupt({"question": state["question"]}), "log": ["asked"]}

    def after(state: AskState) -> dict[str, Any]:
        return {"log": [f"got {state['answer']}"]}

    builder = StateGraph(AskState)
    builder.add_node("ask", ask)
    builder.add_node("after", after)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", "after")
    return builder.compile(checkpointer=InMemorySaver())


def _ask_twice_graph() -> Any:
    def ask(state: AskState) -> dict[str, Any]:
        first = interrupt("first?")
        second = interrupt("second?")
        return {"answer": f"{first}+{second}", "log": ["asked twice"]}

    builder = StateGraph(AskState)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    return builder.compile(checkpointer=InMemorySaver())


class MapState(TypedDict, total=False):
    topics: list[str]
    jokes: Annotated[list[str], operator.add]
    route: str


def graph_scenarios() -> dict[str, Scenario]:
    return {
        "plain_nodes": Scenario(_chain_graph, [Turn({"topics": ["a"]})]),
        "conditional_edges": Scenario(_router_graph, [Turn({"topics": ["x", "y"]})]),
        "command_goto": Scenario(_command_graph, [Turn({"topics": ["z"]})]),
        "send_fan_out": Scenario(_send_graph, [Turn({"topics": ["cats", "dogs", "owls"]})]),
        "subgraph": Scenario(_subgraph_graph, [Turn({"topics": ["inner"]})]),
        "subgraph_with_agent": Scenario(_agent_subgraph, [Turn({"messages": [("user", "delegate")]})]),
        "node_error": Scenario(_failing_graph, [Turn({"topics": ["boom"]})], error="RuntimeError"),
        "interrupt_before": Scenario(
            lambda: _chain_graph(interrupt_before=["second"]), [Turn({"topics": ["a"]}), Turn(None)]
        ),
        "functional_entrypoint": Scenario(_entrypoint_graph, [Turn({"topics": ["f"]})]),
        "runtime_context": Scenario(_context_graph, [Turn({"topics": ["c"]}, context={"user": "ada"})]),
        "parallel_model_calls": Scenario(_parallel_models, [Turn({"messages": [("user", "both")]})]),
    }


def _chain_graph(**compile_kw: Any) -> Any:
    builder = StateGraph(MapState)
    builder.add_node("first", lambda s: {"jokes": [f"first {s['topics'][0]}"]})
    builder.add_node("second", lambda s: {"jokes": ["second"]})
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    return builder.compile(checkpointer=InMemorySaver(), **compile_kw)


def _router_graph() -> Any:
    builder = StateGraph(MapState)
    builder.add_node("route", lambda s: {"route": "many" if len(s["topics"]) > 1 else "one"})
    builder.add_node("many", lambda s: {"jokes": ["many"]})
    builder.add_node("one", lambda s: {"jokes": ["one"]})
    builder.add_edge(START, "route")
    builder.add_conditional_edges("route", lambda s: s["route"], ["many", "one"])
    return builder.compile(checkpointer=InMemorySaver())


def _command_graph() -> Any:
    def start(state: MapState) -> Command:
        return Command(update={"jokes": ["jumped"]}, goto="target")

    builder = StateGraph(MapState)
    builder.add_node("start", start, destinations=("target",))
    builder.add_node("target", lambda s: {"jokes": ["landed"]})
    builder.add_edge(START, "start")
    return builder.compile(checkpointer=InMemorySaver())


def _send_graph() -> Any:
    builder = StateGraph(MapState)
    builder.add_node("joke", lambda s: {"jokes": [f"a joke about {s['topic']}"]})
    builder.add_conditional_edges(
        START, lambda s: [Send("joke", {"topic": t}) for t in s["topics"]], ["joke"]
    )
    return builder.compile(checkpointer=InMemorySaver())


def _subgraph_graph() -> Any:
    inner = StateGraph(MapState)
    inner.add_node("inner_node", lambda s: {"jokes": ["from inside"]})
    inner.add_edge(START, "inner_node")
    builder = StateGraph(MapState)
    builder.add_node("outer", inner.compile())
    builder.add_node("after", lambda s: {"jokes": ["after"]})
    builder.add_edge(START, "outer")
    builder.add_edge("outer", "after")
    return builder.compile(checkpointer=InMemorySaver())


def _agent_subgraph() -> Any:
    worker = create_agent(
        ScriptedChatModel(
            replies=[reply("", [("add", {"a": 2, "b": 3})]), reply("worker says 5", usage=(7, 3))]
        ),
        tools=[add],
    )
    builder = StateGraph(MessagesState)
    builder.add_node("worker", worker)
    builder.add_node("wrap", lambda s: {"messages": [AIMessage("wrapped up")]})
    builder.add_edge(START, "worker")
    builder.add_edge("worker", "wrap")
    return builder.compile(checkpointer=InMemorySaver())


def _failing_graph() -> Any:
    def fail(state: MapState) -> dict[str, Any]:
        raise RuntimeError("the node failed")

    builder = StateGraph(MapState)
    builder.add_node("fail", fail)
    builder.add_edge(START, "fail")
    return builder.compile(checkpointer=InMemorySaver())


def _entrypoint_graph() -> Any:
    @task
    def shout(topic: str) -> str:
        return topic.upper()

    @entrypoint(checkpointer=InMemorySaver())
    def flow(inputs: dict[str, Any]) -> dict[str, Any]:
        return {"jokes": [shout(t).result() for t in inputs["topics"]]}

    return flow


def _context_graph() -> Any:
    from langgraph.runtime import Runtime

    def greet(state: MapState, runtime: Runtime[dict]) -> dict[str, Any]:
        return {"jokes": [f"hello {runtime.context['user']}"]}

    builder = StateGraph(MapState, context_schema=dict)
    builder.add_node("greet", greet)
    builder.add_edge(START, "greet")
    builder.add_edge("greet", END)
    return builder.compile(checkpointer=InMemorySaver())


def _parallel_models() -> Any:
    left = ScriptedChatModel(replies=[reply("left says hi", usage=(3, 2), id="left")])
    right = ScriptedChatModel(replies=[reply("right says hi", usage=(4, 1), id="right")])

    async def call_left(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await left.ainvoke(state["messages"])]}

    async def call_right(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await right.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("left", call_left)
    builder.add_node("right", call_right)
    builder.add_edge(START, "left")
    builder.add_edge(START, "right")
    return builder.compile(checkpointer=InMemorySaver())


def all_scenarios() -> dict[str, Scenario]:
    return {**react_scenarios(), **interrupt_scenarios(), **graph_scenarios()}
