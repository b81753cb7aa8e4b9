"""Scenarios for the LangGraph compatibility suite, in the style of LangGraph's and LangChain's own
agent tests (``libs/prebuilt/tests/test_react_agent.py``, ``libs/langgraph/tests/test_pregel_async.py``,
LangChain's ``tests/unit_tests/agents``): a scripted fake chat model, small tools, a checkpointer.

Each scenario builds a fresh graph (its fake model keeps its place in the script) and lists the
turns to run on one thread: an input, and for a graph that pauses on ``interrupt()`` how to answer
it, both plainly (``Command(resume=...)``) and through nbagent (a pending item's ``resume`` / ``approve`` /
``deny`` / ``edit``)."""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, HumanInTheLoopMiddleware
from langchain.agents.structured_output import ToolStrategy
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.func import entrypoint, task
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command, Send, interrupt
from langgraph_fakes import NonStreamingChatModel, ScriptedChatModel, reply
from pydantic import BaseModel
from support import wait_until
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
    unkept_usage: tuple[int, int] = (0, 0)
    """Tokens of model replies a node used and did not keep in the state (the record counts them)."""


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
                    [lambda run: run.pending_approvals[0].edit({"a": 5, "b": 5})],
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
                    [lambda run: _approve_then_deny(run, "not today")],
                )
            ],
        ),
        "interrupt_text": Scenario(
            _ask_graph, [Turn({"question": "name?"}, ["Ada"], [lambda run: _ask(run).resume("Ada")])]
        ),
        "interrupt_twice": Scenario(
            _ask_twice_graph,
            [
                Turn(
                    {"question": "q"},
                    ["first", "second"],
                    [lambda run: _ask(run).resume("first"), lambda run: _ask(run).resume("second")],
                )
            ],
        ),
        "interrupt_dict_answer": Scenario(
            _ask_graph, [Turn({"question": "config?"}, [{"k": 1}], [lambda run: _ask(run).resume({"k": 1})])]
        ),
    }


def _ask(run: Any) -> Any:
    """The one interrupt pending (a question), to answer with its ``resume(value)``."""
    [pending] = [p for p in run.pending_approvals if p.form is not None]
    return pending


def _pending(run: Any) -> list[str]:
    return [p.call_id for p in run.pending_approvals]


def _approve_then_deny(run: Any, reason: str) -> None:
    """Approve the first of two pending calls and deny the second (both read before deciding)."""
    wait_until(lambda: len(run.pending_approvals) == 2, timeout=30)
    first, second = _pending(run)
    run.approve(first)
    run.deny(second, reason)


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


def _chain_graph(checkpointer: Any = "memory", **compile_kw: Any) -> Any:
    builder = StateGraph(MapState)
    builder.add_node("first", lambda s: {"jokes": [f"first {s['topics'][0]}"]})
    builder.add_node("second", lambda s: {"jokes": ["second"]})
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    saver = InMemorySaver() if checkpointer == "memory" else checkpointer
    return builder.compile(checkpointer=saver, **compile_kw)


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


def _entrypoint_graph(checkpointer: Any = "memory") -> Any:
    @task
    def shout(topic: str) -> str:
        return topic.upper()

    @entrypoint(checkpointer=InMemorySaver() if checkpointer == "memory" else checkpointer)
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


class Plan(BaseModel):
    steps: list[str]


class AskIn(TypedDict):
    question: str


class AskOut(TypedDict):
    answer: str


class AskInner(TypedDict, total=False):
    question: str
    answer: str
    draft: str


class Counter(BaseModel):
    count: int = 0
    notes: list[str] = []


def more_graph_scenarios() -> dict[str, Scenario]:
    """Modelled on LangGraph's ``test_pregel_async.py``: schemas, fan-in, deferred nodes,
    subgraphs, retries, the functional API, interrupts in loops, subgraphs and parallel nodes;
    graphs without a checkpointer; graphs whose whole state is a list."""
    both = [
        lambda run: (
            wait_until(lambda: len(run.pending_approvals) == 2, timeout=30),
            [p.resume(p.arguments.rstrip("?")) for p in run.pending_approvals],
        )
    ]
    return {
        "list_state": Scenario(_list_graph, [Turn(["a"])]),
        "list_state_two_turns": Scenario(_list_graph, [Turn(["a"]), Turn(["b", "c"])]),
        "list_state_without_checkpointer": Scenario(lambda: _list_graph(checkpointer=None), [Turn(["x"])]),
        "chain_without_checkpointer": Scenario(
            lambda: _chain_graph(checkpointer=None), [Turn({"topics": ["a"]}), Turn({"topics": ["b"]})]
        ),
        "agent_without_checkpointer": Scenario(
            lambda: create_agent(
                ScriptedChatModel(replies=[reply("", [("add", {"a": 2, "b": 5})]), reply("7")]), tools=[add]
            ),
            _once("2+5"),
        ),
        "output_schema": Scenario(_schema_graph, [Turn({"question": "why"})]),
        "output_schema_without_checkpointer": Scenario(
            lambda: _schema_graph(checkpointer=None), [Turn({"question": "how"})]
        ),
        "pydantic_state": Scenario(_pydantic_graph, [Turn({"count": 1})]),
        "fan_in_waiting_edge": Scenario(_fan_in_graph, [Turn({"topics": ["t"]})]),
        "deferred_node": Scenario(_deferred_graph, [Turn({"topics": ["t"]})]),
        "conditional_entry": Scenario(_conditional_entry_graph, [Turn({"topics": ["p", "q"]})]),
        "nested_subgraphs": Scenario(_nested_graph, [Turn({"topics": ["deep"]})]),
        "parent_command": Scenario(_parent_command_graph, [Turn({"topics": ["up"]})]),
        "retry_policy": Scenario(_retry_graph, [Turn({"topics": ["again"]})]),
        "interrupt_loop": Scenario(
            _interrupt_loop_graph,
            [Turn({"topics": []}, ["a", "b", "c"], [lambda run, v=v: _ask(run).resume(v) for v in "abc"])],
        ),
        "interrupt_in_subgraph": Scenario(
            _interrupt_subgraph_graph,
            [Turn({"topics": []}, ["inner"], [lambda run: _ask(run).resume("inner")])],
        ),
        "interrupts_in_parallel_nodes": Scenario(
            _parallel_interrupts_graph,
            [Turn({"topics": []}, [lambda r: {i.id: i.value.rstrip("?") for i in r["__interrupt__"]}], both)],
        ),
        "interrupt_functional": Scenario(
            _interrupt_entrypoint, [Turn({"topics": ["f"]}, ["yes"], [lambda run: _ask(run).resume("yes")])]
        ),
        "interrupt_after": Scenario(
            lambda: _chain_graph(interrupt_after=["first"]), [Turn({"topics": ["a"]}), Turn(None)]
        ),
        "interrupt_before_agent_tools": Scenario(
            _agent([reply("", [("add", {"a": 1, "b": 1})]), reply("2")], [add], interrupt_before=["tools"]),
            [Turn("1+1"), Turn(None)],
        ),
        "entrypoint_previous": Scenario(_stateful_entrypoint, [Turn(1), Turn(2), Turn(3)]),
        "entrypoint_without_checkpointer": Scenario(
            lambda: _entrypoint_graph(checkpointer=None), [Turn({"topics": ["n"]})]
        ),
        "tasks_in_parallel": Scenario(_parallel_tasks_entrypoint, [Turn({"topics": ["a", "b", "c"]})]),
        "structured_output_in_a_node": Scenario(
            _structured_router, [Turn({"messages": [("user", "plan it")]})], unkept_usage=(10, 5)
        ),
        "planner_then_agent": Scenario(_planner_then_agent, [Turn({"messages": [("user", "plan and add")]})]),
        "middleware_hooks": Scenario(
            _agent([reply("", [("add", {"a": 3, "b": 3})]), reply("6")], [add], middleware=[_Notes()]),
            _once("3+3"),
        ),
        "prebuilt_react_agent_with_pre_model_hook": Scenario(_prebuilt_react_agent, _once("4+4")),
        "extraction_ends_on_a_tool_call": Scenario(_extraction_graph, [Turn("Ada is 36"), Turn("and Bob?")]),
    }


def _list_graph(checkpointer: Any = "memory") -> Any:
    builder = StateGraph(Annotated[list, operator.add])
    builder.add_node("count", lambda items: [f"seen {len(items)}"])
    builder.add_node("close", lambda items: ["closed"])
    builder.add_edge(START, "count")
    builder.add_edge("count", "close")
    return builder.compile(checkpointer=InMemorySaver() if checkpointer == "memory" else checkpointer)


def _schema_graph(checkpointer: Any = "memory") -> Any:
    builder = StateGraph(AskInner, input_schema=AskIn, output_schema=AskOut)
    builder.add_node("draft", lambda s: {"draft": f"draft for {s['question']}"})
    builder.add_node("answer", lambda s: {"answer": s["draft"].upper()})
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "answer")
    return builder.compile(checkpointer=InMemorySaver() if checkpointer == "memory" else checkpointer)


def _pydantic_graph() -> Any:
    builder = StateGraph(Counter)
    builder.add_node("bump", lambda s: {"count": s.count + 1, "notes": [*s.notes, "bumped"]})
    builder.add_edge(START, "bump")
    return builder.compile(checkpointer=InMemorySaver())


def _fan_in_graph() -> Any:
    builder = StateGraph(MapState)
    builder.add_node("left", lambda s: {"jokes": ["left"]})
    builder.add_node("right", lambda s: {"jokes": ["right"]})
    builder.add_node("join", lambda s: {"route": f"joined {len(s['jokes'])}"})
    builder.add_edge(START, "left")
    builder.add_edge(START, "right")
    builder.add_edge(["left", "right"], "join")
    return builder.compile(checkpointer=InMemorySaver())


def _deferred_graph() -> Any:
    builder = StateGraph(MapState)
    builder.add_node("quick", lambda s: {"jokes": ["quick"]})
    builder.add_node("slow_a", lambda s: {"jokes": ["a"]})
    builder.add_node("slow_b", lambda s: {"jokes": ["b"]})
    builder.add_node("last", lambda s: {"route": ",".join(s["jokes"])}, defer=True)
    builder.add_edge(START, "quick")
    builder.add_edge("quick", "slow_a")
    builder.add_edge("slow_a", "slow_b")
    builder.add_edge("quick", "last")
    builder.add_edge("slow_b", "last")
    return builder.compile(checkpointer=InMemorySaver())


def _conditional_entry_graph() -> Any:
    builder = StateGraph(MapState)
    builder.add_node("many", lambda s: {"jokes": ["many"]})
    builder.add_node("one", lambda s: {"jokes": ["one"]})
    builder.add_conditional_edges(START, lambda s: "many" if len(s["topics"]) > 1 else "one", ["many", "one"])
    return builder.compile(checkpointer=InMemorySaver())


def _nested_graph() -> Any:
    deepest = StateGraph(MapState)
    deepest.add_node("bottom", lambda s: {"jokes": ["bottom"]})
    deepest.add_edge(START, "bottom")
    middle = StateGraph(MapState)
    middle.add_node("deeper", deepest.compile())
    middle.add_node("mid", lambda s: {"jokes": ["mid"]})
    middle.add_edge(START, "deeper")
    middle.add_edge("deeper", "mid")
    builder = StateGraph(MapState)
    builder.add_node("outer", middle.compile())
    builder.add_edge(START, "outer")
    return builder.compile(checkpointer=InMemorySaver())


def _parent_command_graph() -> Any:
    def leave(state: MapState) -> Command:
        return Command(graph=Command.PARENT, goto="landing", update={"jokes": ["left the subgraph"]})

    inner = StateGraph(MapState)
    inner.add_node("leave", leave)
    inner.add_edge(START, "leave")
    builder = StateGraph(MapState)
    builder.add_node("sub", inner.compile(), destinations=("landing",))
    builder.add_node("landing", lambda s: {"route": "landed"})
    builder.add_edge(START, "sub")
    return builder.compile(checkpointer=InMemorySaver())


def _retry_graph() -> Any:
    from langgraph.types import RetryPolicy

    tries: list[int] = []

    def flaky(state: MapState) -> dict[str, Any]:
        tries.append(1)
        if len(tries) < 2:
            raise ConnectionError("the service blinked")
        return {"jokes": [f"worked after {len(tries)} tries"]}

    builder = StateGraph(MapState)
    builder.add_node("flaky", flaky, retry_policy=RetryPolicy(initial_interval=0.01, jitter=False))
    builder.add_edge(START, "flaky")
    return builder.compile(checkpointer=InMemorySaver())


def _interrupt_loop_graph() -> Any:
    def collect(state: MapState) -> dict[str, Any]:
        return {"jokes": [interrupt(f"item {i}?") for i in range(3)]}

    builder = StateGraph(MapState)
    builder.add_node("collect", collect)
    builder.add_edge(START, "collect")
    return builder.compile(checkpointer=InMemorySaver())


def _interrupt_subgraph_graph() -> Any:
    inner = StateGraph(MapState)
    inner.add_node("ask", lambda s: {"jokes": [f"inner said {interrupt('inside?')}"]})
    inner.add_edge(START, "ask")
    builder = StateGraph(MapState)
    builder.add_node("sub", inner.compile())
    builder.add_node("after", lambda s: {"route": "after"})
    builder.add_edge(START, "sub")
    builder.add_edge("sub", "after")
    return builder.compile(checkpointer=InMemorySaver())


def _parallel_interrupts_graph() -> Any:
    builder = StateGraph(MapState)
    builder.add_node("left", lambda s: {"jokes": [f"left {interrupt('left?')}"]})
    builder.add_node("right", lambda s: {"jokes": [f"right {interrupt('right?')}"]})
    builder.add_edge(START, "left")
    builder.add_edge(START, "right")
    return builder.compile(checkpointer=InMemorySaver())


def _interrupt_entrypoint() -> Any:
    @entrypoint(checkpointer=InMemorySaver())
    def confirm(inputs: dict[str, Any]) -> dict[str, Any]:
        return {"jokes": [f"{t}: {interrupt(f'keep {t}?')}" for t in inputs["topics"]]}

    return confirm


def _stateful_entrypoint() -> Any:
    @entrypoint(checkpointer=InMemorySaver())
    def total(number: int, *, previous: Any = None) -> int:
        return (previous or 0) + number

    return total


def _parallel_tasks_entrypoint() -> Any:
    @task
    async def shout(topic: str) -> str:
        await asyncio.sleep(0.001)
        return topic.upper()

    @entrypoint(checkpointer=InMemorySaver())
    async def flow(inputs: dict[str, Any]) -> dict[str, Any]:
        futures = [shout(t) for t in inputs["topics"]]
        return {"jokes": [await f for f in futures]}

    return flow


def _structured_router() -> Any:
    model = ScriptedChatModel(replies=[reply("", [("Plan", {"steps": ["look", "leap"]})])])

    async def plan(state: MessagesState) -> dict[str, Any]:
        decided = await model.with_structured_output(Plan).ainvoke(state["messages"])
        return {"messages": [AIMessage(" then ".join(decided.steps))]}

    builder = StateGraph(MessagesState)
    builder.add_node("plan", plan)
    builder.add_edge(START, "plan")
    return builder.compile(checkpointer=InMemorySaver())


def _planner_then_agent() -> Any:
    worker = create_agent(
        ScriptedChatModel(replies=[reply("", [("add", {"a": 1, "b": 4})]), reply("5", usage=(6, 2))]),
        tools=[add],
    )
    builder = StateGraph(MessagesState)
    builder.add_node("planner", lambda s: {"messages": [AIMessage("plan: add 1 and 4")]})
    builder.add_node("worker", worker)
    builder.add_edge(START, "planner")
    builder.add_edge("planner", "worker")
    return builder.compile(checkpointer=InMemorySaver())


class _Notes(AgentMiddleware):
    """A middleware whose hooks are graph nodes: one before the model, one after the agent."""

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return None

    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return {"messages": [AIMessage("(noted)")]}


def _prebuilt_react_agent() -> Any:
    import warnings

    from langgraph.prebuilt import create_react_agent

    def trim(state: Any) -> dict[str, Any]:
        return {"llm_input_messages": state["messages"][-5:]}

    model = ScriptedChatModel(replies=[reply("", [("add", {"a": 4, "b": 4})]), reply("8")])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create_react_agent(model, [add], pre_model_hook=trim, checkpointer=InMemorySaver())


def _extraction_graph() -> Any:
    model = ScriptedChatModel(
        replies=[
            reply("", [("Person", {"name": "Ada", "age": 36})]),
            reply("", [("Person", {"name": "Bob"})], id="bob"),
        ]
    )

    async def extract(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("extract", extract)
    builder.add_edge(START, "extract")
    return builder.compile(checkpointer=InMemorySaver())


def all_scenarios() -> dict[str, Scenario]:
    return {**react_scenarios(), **interrupt_scenarios(), **graph_scenarios(), **more_graph_scenarios()}
