"""Run LangGraph graphs (any compiled ``StateGraph``, ``create_react_agent``, LangChain's
``create_agent``) under nbagent.

``nbagent.start(graph, task, config=...)`` on a compiled graph gets the live view, the Stop button
and the record. The run is the real ``graph.astream(...)`` on the user's graph, driven on the
runner's loop through LangGraph's public streaming API (``stream_mode=["messages", "updates",
"tasks", "values"]``, ``subgraphs=True``); what each chunk becomes in the record is in
``nbagent.adapters.langgraph.stream``. Nothing on the graph is wrapped or swapped.

Inputs. A string is one user message (``{"messages": [...]}``; a graph without a ``messages``
channel needs its state as a dict), a list is the messages (or, for a graph whose whole state is a
list, that list), a dict is the input state, a ``Command`` (``Command(resume=...)``) and ``None``
(go on from the checkpoint) pass as they are.

Result. ``run.result`` is the graph's final state exactly as ``ainvoke`` returns it (only the
``output_schema``'s channels; LangGraph's ``__interrupt__`` when the run ends paused);
``record.output`` is the answer in it (``structured_response``, else the last model message's
text, else that state).
``config``, ``context``, ``interrupt_before`` / ``interrupt_after``, ``durability`` pass through;
``stream_mode`` adds modes, whose chunks go to ``on_chunk(namespace, mode, data)``.

How a Stop lands. ``interrupt("now")`` cancels the run's task: the stream is closed, which
cancels the node tasks in flight (a streaming HTTP model drops its connection) and keeps what
LangGraph checkpointed: every finished super-step (the thread goes on from there). "Stop after
step" asks LangGraph to drain (``RunControl.request_drain``): the super-step in flight finishes,
is checkpointed, and no other starts.

Token streaming and usage. The ``messages`` mode is LangGraph's own token stream: it attaches a
streaming callback, so LangChain chat models call their streaming API, as they do under any
``graph.astream(stream_mode="messages")``. A model that reports no usage when it streams then
reports none, in the record (unknown, never zero) and in the ``AIMessage`` the thread keeps:
``langchain_openai.ChatOpenAI`` with a ``base_url`` (an OpenAI-compatible server) streams without
``stream_options.include_usage`` unless it was made with ``stream_usage=True``. nbagent cannot
ask for it per run: ``ChatOpenAI`` reads ``stream_usage`` only from the call's own keyword
arguments, ``model_kwargs`` or the model's field, and neither a ``RunnableConfig`` nor a callback
reaches those (an agent node calls ``model.ainvoke(messages)`` with its own bound arguments), so
the only ways are changing the user's model object or not streaming tokens; nbagent does
neither. Make the model with ``ChatOpenAI(..., stream_usage=True)`` to keep usage (the server
must support ``include_usage``).

Threads and turns. A graph with a checkpointer keeps its state per thread (``thread_id`` in
``config["configurable"]``), in the checkpointer, not on the graph: runs on different threads run
side by side, and a run on a thread waits for the live run on the same thread
(``turn_key``, ``nbagent.runtime.turns``). An explicit ``thread_id`` is LangGraph's own: the
thread's state is used whatever ``reset`` says. Without one, nbagent picks the thread: a new one
for ``reset=True``, the thread of the graph's previous run for ``reset=False``. A graph without a
checkpointer keeps nothing: ``reset=False`` is refused with the reason, and a pending
``interrupt()`` ends the run as with ``interrupts="end"`` (nothing could resume it). Before a new
input goes to a thread, a pause at ``interrupt()`` is refused with how to answer it, and tool
calls a Stop cut are answered "interrupted" (``nbagent.adapters.langgraph.threads``).

End states. ``GraphRecursionError`` (``recursion_limit``, or ``max_steps=`` which sets it) is
``"max_steps"``; a node that raised is ``"error"`` with its exception; a pending ``interrupt()``
waits for a person (``nbagent.adapters.langgraph.interrupts``), or with ``interrupts="end"`` (and
always for a graph without a checkpointer) ends the run ``"success"`` with LangGraph's own
``__interrupt__`` in the output, as ``ainvoke`` does. A call a Stop cut ends ``cancelled`` with the
error "interrupted"; a call the graph ended on without running it (an extraction graph, a pause at
``interrupt_before``) ends ``deferred``: the thread hands it to its caller, and a run that goes on
from there records it again with its result.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from nbagent.adapters import instance_of
from nbagent.adapters.langgraph.fork import copy_to_thread, fork_data, fork_plan
from nbagent.adapters.langgraph.interrupts import answer_interrupts
from nbagent.adapters.langgraph.records import (
    chat_messages,
    content_text,
    messages_of,
    output_of,
    records_from_langgraph,
    require_langgraph,
)
from nbagent.adapters.langgraph.stream import StepTracker, tool_nodes_of
from nbagent.adapters.langgraph.threads import pending_calls, prepare_thread, resumes
from nbagent.context import RunContext
from nbagent.errors import AgentInterrupted, MaxStepsReached
from nbagent.guardrails.limits import tool_call_allowed
from nbagent.runtime.identity_map import IdentityMap
from nbagent.runtime.source import Source
from nbagent.text import safe_text, shorten

if TYPE_CHECKING:
    from nbagent.forks.origins import ForkOrigin

__all__ = ["LangGraphSource", "is_langgraph_graph", "records_from_langgraph"]

BASE_MODES = ("messages", "updates", "tasks", "values")

_last_threads = IdentityMap()
"""Each graph's newest nbagent-picked or given thread (for ``reset=False`` without a thread)."""

_threads = IdentityMap()
"""Each graph's threads, by id: the object a thread's runs are remembered by (``memory_of``)."""


class _Thread:
    """One thread of one graph: what a ``reset=False`` run on it continues."""


def is_langgraph_graph(obj: Any) -> bool:
    """True for a compiled LangGraph graph (``Pregel``: ``CompiledStateGraph``, a LangChain agent,
    an ``@entrypoint``). Never imports LangGraph itself."""
    return instance_of(obj, "langgraph.pregel.main", "Pregel")


def _has_checkpointer(graph: Any) -> bool:
    saver = getattr(graph, "checkpointer", None)
    return saver is not None and not isinstance(saver, bool)


def _thread_of(config: Any) -> Any:
    configurable = config.get("configurable") if isinstance(config, dict) else None
    return configurable.get("thread_id") if isinstance(configurable, dict) else None


class LangGraphSource(Source):
    """An nbagent source for a compiled LangGraph graph; ``nbagent.start`` makes one per run."""

    takes_turns = False
    """The graph keeps nothing on itself; a thread's runs take turns by ``turn_key``."""
    framework = "langgraph"

    def __init__(self, graph: Any) -> None:
        require_langgraph()
        if not is_langgraph_graph(graph):
            raise TypeError(f"not a compiled LangGraph graph: {type(graph).__name__}")
        self.graph = graph
        self.agent = graph
        """What the runner orders and continues runs of (``nbagent.runtime.turns``)."""
        self.name = safe_text(getattr(graph, "name", None) or type(graph).__name__)
        self.thread_id: Any = None
        """The thread this run used (nbagent picks one when the config names none)."""
        self.values: Any = None
        """The graph's state when the run ended (as ``graph.ainvoke`` would return it)."""

    @property
    def model_name(self) -> str:
        return _model_name(self.graph)

    def approvals_refusal(self) -> str:
        return (
            "approve= is not supported for LangGraph graphs: call interrupt() in a node (or use "
            "HumanInTheLoopMiddleware), and nbagent shows the question for an answer"
        )

    def __repr__(self) -> str:
        return f"LangGraphSource({self.name})"

    def memory_of(self, options: dict[str, Any]) -> Any:
        """Whose latest run a ``reset=False`` run continues: the thread the config names (runs on
        another thread of the graph are not its past), else the graph (its newest thread)."""
        thread = _thread_of(options.get("config"))
        if thread is None or not _has_checkpointer(self.graph):
            return self.graph
        threads = _threads.get(self.graph)
        if threads is None:
            threads = {}
            with contextlib.suppress(TypeError):
                _threads.set(self.graph, threads)
        return threads.setdefault(str(thread), _Thread())

    def task_text(self, task: Any) -> str:
        """The run's task as text for its record: a message list or state dict reads as its last
        user message, a ``Command`` as what it resumes with."""
        if isinstance(task, str):
            return task
        if task is None:
            return "(go on from the checkpoint)"
        if type(task).__name__ == "Command":
            return shorten(f"resume: {safe_text(getattr(task, 'resume', None))}", 2000)
        messages = task if isinstance(task, (list, tuple)) else messages_of(task)
        for message in reversed(messages):
            text = _user_text(message)
            if text is not None:
                return text
        return shorten(safe_text(task), 2000)

    def turn_key(self, options: dict[str, Any], reset: bool = True) -> str | None:
        """The thread whose runs take turns (``nbagent.runtime.turns``): a graph with a
        checkpointer keeps a thread's state in it, so two runs on one thread must not overlap.
        Called once, on the loop, as the run joins its line. When the config names no thread it
        picks one and writes it into this run's own ``options`` (a new config: the user's dict is
        left as given), so the run drives the thread it queued for, whatever other runs do."""
        config = options.get("config")
        if not _has_checkpointer(self.graph) or (config is not None and not isinstance(config, dict)):
            return None
        thread = _thread_of(config)
        if thread is None:
            last = _last_threads.get(self.graph) if not reset else None
            thread = last if last is not None else f"nbagent-{uuid.uuid4().hex[:12]}"
            configurable = {**((config or {}).get("configurable") or {}), "thread_id": thread}
            options["config"] = {**(config or {}), "configurable": configurable}
        with contextlib.suppress(TypeError):
            _last_threads.set(self.graph, thread)
        return str(thread)

    def fork_data(self, conversation: Any, options: dict[str, Any]) -> dict[str, Any] | None:
        """The run's thread (a fork copies its checkpoints) and its messages (a graph without a
        checkpointer forks from them): ``nbagent.adapters.langgraph.fork``."""
        return fork_data(conversation)

    def fork_input(self, origin: ForkOrigin) -> dict[str, Any]:
        """A plan: copy the checkpoint before step ``at_step`` to the fork's thread, or start from
        the message prefix (``nbagent.adapters.langgraph.fork``)."""
        return fork_plan(self.graph, self.name, origin)

    async def drive(
        self,
        task: Any,
        ctx: RunContext,
        reset: bool = True,
        *,
        config: dict[str, Any] | None = None,
        context: Any = None,
        max_steps: int | None = None,
        stream_mode: str | list[str] | None = None,
        on_chunk: Callable[[tuple[str, ...], str, Any], Any] | None = None,
        interrupt_before: Any = None,
        interrupt_after: Any = None,
        durability: str | None = None,
        interrupts: Literal["ask", "end"] = "ask",
    ) -> Any:
        """Run ``task`` with ``graph.astream``, reporting through ``ctx``; returns the run's answer
        (``structured_response``, else the last model message's text, else the final state).

        ``interrupts``: ``"ask"`` shows a pending ``interrupt()`` in the view and resumes the graph
        with the answer; ``"end"`` ends the run with it, as ``ainvoke`` does. A graph without a
        checkpointer always behaves as ``"end"``: LangGraph cannot resume it without one."""
        from langgraph.errors import GraphDrained, GraphRecursionError
        from langgraph.runtime import RunControl
        from langgraph.types import Command

        if interrupts not in ("ask", "end"):
            raise ValueError(f"interrupts must be 'ask' or 'end', not {interrupts!r}")
        config = with_tool_budget(self._config(config, reset, max_steps), ctx)
        tracker = StepTracker(ctx, tool_nodes_of(self.graph))
        ctx.conversation = {"thread_id": self.thread_id, "messages": []}
        if ctx.fork is not None:  # a fork: from a copied checkpoint, or from the message prefix
            plan = ctx.fork.input
            if plan["mode"] == "checkpoint":
                task = await copy_to_thread(self.graph, plan, config)
            else:
                task = {"messages": plan["messages"]}
        if not _has_checkpointer(self.graph):
            interrupts = "end"  # nothing keeps the pause, so no Command(resume=...) can answer it
        elif not resumes(task):
            await prepare_thread(self.graph, config, self.name)
        else:
            await self._go_on(tracker, config)
        extra = [stream_mode] if isinstance(stream_mode, str) else list(stream_mode or ())
        # each checkpoint's id: the fork point of the model step that follows it
        modes = [*BASE_MODES, *(["checkpoints"] if _has_checkpointer(self.graph) else []), *extra]
        kwargs = {
            "context": context, "interrupt_before": interrupt_before,
            "interrupt_after": interrupt_after, "durability": durability,
        }  # fmt: skip
        kwargs = {name: value for name, value in kwargs.items() if value is not None}
        graph_input = self._input(task)
        control = RunControl()
        watcher = asyncio.ensure_future(_drain_on_stop(ctx, control, tracker))
        try:
            while True:
                tracker.interrupts.clear()
                stream = self.graph.astream(
                    graph_input, config, stream_mode=list(dict.fromkeys(modes)), subgraphs=True,
                    control=control, **kwargs,
                )  # fmt: skip
                async with contextlib.aclosing(stream):
                    async for namespace, mode, data in stream:
                        tracker.feed(namespace, mode, data)
                        if ctx.scope.stop_after_step and tracker.drain_due():
                            _drain(control)
                        if on_chunk is not None and mode in extra:
                            on_chunk(namespace, mode, data)
                self.values = tracker.values
                if not tracker.interrupts or interrupts == "end":
                    break
                graph_input = Command(resume=await answer_interrupts(ctx, tracker, tracker.interrupts))
            tracker.close_all("deferred")
        except GraphDrained as exc:
            tracker.cut_calls()
            raise AgentInterrupted("stopped after the step") from exc
        except GraphRecursionError as exc:
            tracker.close_all("cancelled")
            raise MaxStepsReached(safe_text(exc)) from exc
        except BaseException:
            if ctx.scope.interrupted:  # a Stop (or a pause ended unanswered): no call goes on
                tracker.cut_nodes()
                tracker.cut_calls()
            raise
        finally:
            watcher.cancel()
            ctx.messages = chat_messages(messages_of(tracker.values))
            ctx.conversation = {"thread_id": self.thread_id, "messages": messages_of(tracker.values)}
        result = self._output(self.values)
        if tracker.interrupts:  # interrupts="end": the run ends paused, as ainvoke returns
            values = dict(self.values) if isinstance(self.values, dict) else {}
            self.values = {**values, "__interrupt__": list(tracker.interrupts)}
            paused = dict(result) if isinstance(result, dict) else {}
            ctx.set_result({**paused, "__interrupt__": list(tracker.interrupts)})
            return self.values
        ctx.set_result(result)
        return output_of(result)

    async def _go_on(self, tracker: StepTracker, config: dict[str, Any]) -> None:
        """A run that goes on from the thread's checkpoint runs the model's calls still pending
        there: they are this run's calls (the messages already in the thread are not new)."""
        state = await self.graph.aget_state(config)
        tracker.ended.update(m.id for m in messages_of(state.values) if getattr(m, "id", None))
        tracker.adopt(pending_calls(state))

    def _output(self, values: Any) -> Any:
        """The final state as ``ainvoke`` returns it: only the channels of the graph's
        ``output_schema`` (the stream's values hold the whole state)."""
        keys = getattr(self.graph, "output_channels", None)
        if not isinstance(values, dict) or not isinstance(keys, (list, tuple)):
            return values
        return {key: values[key] for key in keys if key in values}

    def _config(self, config: dict[str, Any] | None, reset: bool, max_steps: int | None) -> dict[str, Any]:
        if config is not None and not isinstance(config, dict):
            raise TypeError(f"config must be a dict (a RunnableConfig), not {type(config).__name__}")
        config = dict(config or {})
        if not _has_checkpointer(self.graph):
            if not reset:
                raise ValueError(
                    f"reset=False cannot continue {self.name}: it has no checkpointer, so it keeps "
                    "nothing between runs (compile it with checkpointer=InMemorySaver() and pass "
                    'config={"configurable": {"thread_id": ...}})'
                )
        else:
            if _thread_of(config) is None:  # driven without the runner's turn (which picks it)
                options = {"config": config}
                self.turn_key(options, reset)
                config = dict(options["config"])
            self.thread_id = _thread_of(config)
        if max_steps is not None:
            if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
                raise ValueError(f"max_steps must be a positive int, not {max_steps!r}")
            config["recursion_limit"] = max_steps
        return config

    def _input(self, task: Any) -> Any:
        if isinstance(task, str):
            if "messages" not in getattr(self.graph, "channels", {}):
                raise TypeError(
                    f"{self.name} has no messages in its state, so a text task cannot be its input: "
                    "pass the input state as a dict"
                )
            return {"messages": [{"role": "user", "content": task}]}
        if isinstance(task, (list, tuple)) and "messages" in getattr(self.graph, "channels", {}):
            return {"messages": list(task)}
        return task  # a graph whose whole state is a list takes the list itself


def with_tool_budget(config: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    """``config`` with a callback that counts each tool call against ``max_tool_calls`` as the
    tool starts, on the thread that runs it (``tool_call_allowed``), and refuses the one over the
    budget (and any call after a Stop) before it runs: a graph runs its tools node on its own
    tasks and threads, so a Stop from the loop can land after a sync tool already ran. The user's
    callbacks in ``config`` stay, first."""
    from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager

    class ToolBudget(BaseCallbackHandler):
        raise_error = True  # a refusal must keep the tool from running

        def on_tool_start(self, serialized: Any, input_str: str, **kwargs: Any) -> None:
            if ctx.scope.interrupted or not tool_call_allowed(ctx.scope):
                raise ToolCallRefused("the run was stopped before this tool call could run")

    guard = ToolBudget()
    callbacks = config.get("callbacks")
    if isinstance(callbacks, BaseCallbackManager):
        callbacks = callbacks.copy()
        callbacks.add_handler(guard, inherit=True)
    else:
        callbacks = [*(callbacks or ()), guard]
    return {**config, "callbacks": callbacks}


class ToolCallRefused(Exception):
    """A tool call refused before it ran: over ``max_tool_calls``, or after the run's Stop."""


async def _drain_on_stop(ctx: RunContext, control: Any, tracker: StepTracker) -> None:
    """Turn a "Stop after step" into LangGraph's drain: the super-step in flight finishes. Asked
    while the step's tool calls wait for their node to start, the drain waits for that node (the
    stream's next chunk asks for it then): a step is its reply and the calls it made."""
    await ctx.scope.after_step_requested()
    if tracker.drain_due():
        _drain(control)


def _drain(control: Any) -> None:
    if not control.drain_requested:
        control.request_drain("stopped after the step")


def _user_text(message: Any) -> str | None:
    if isinstance(message, str):
        return message
    if isinstance(message, dict):
        if message.get("role") in ("user", "human"):
            return content_text(message.get("content"))
        return None
    if isinstance(message, (list, tuple)) and len(message) == 2 and message[0] in ("user", "human"):
        return content_text(message[1])
    if getattr(message, "type", None) == "human":
        return content_text(message.content)
    return None


def _model_name(graph: Any) -> str:
    """The chat model a graph's agent node uses, when it can be found without running it."""
    for node in getattr(graph, "nodes", {}).values():
        bound = getattr(node, "bound", None)
        funcs = [getattr(bound, "func", None), getattr(bound, "afunc", None)]
        # LangChain's create_agent keeps its model in the model node's closure: read, never called
        cells = [c for f in funcs for c in getattr(f, "__closure__", None) or ()]
        captured = [c.cell_contents for c in cells if _filled(c)]
        for holder in (bound, *funcs, *captured):
            for model in (holder, getattr(holder, "model", None), getattr(holder, "__self__", None)):
                name = getattr(model, "model_name", None) or getattr(model, "model", None)
                if isinstance(name, str) and hasattr(model, "_llm_type"):
                    return name
    return "unknown"


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True
