"""LangGraph's stream, as nbagent steps: what the live adapter reports of each chunk.

The adapter runs ``graph.astream(..., stream_mode=["messages", "updates", "tasks", "values"],
subgraphs=True)``; every chunk comes here, on the runner's loop, as ``(namespace, mode, data)``:

- ``messages``: a model's reply as it streams (``AIMessageChunk``s sharing one id), or whole when
  the model cannot stream. Each model call is one step: its first chunk starts it, its text
  streams into the view, and when the reply is whole (the last chunk, the whole message, or the
  end of the node's task) its usage (``usage_metadata``; none stays unknown) and tool calls are
  reported. A ``ToolMessage`` answers a call: ``ok``, or ``error`` when the tool failed.
- ``updates``: tool messages a node wrote (a tool that returned a ``Command``), and the root
  graph's ``__interrupt__`` (the run's pending interrupts).
- ``tasks``: when each node starts and ends. A node that calls no model and runs no tool (a
  router, a retriever, a node that runs a subgraph) is a node line (``nbagent.events.NodeStarted``,
  never a tool call) named by its path (``researcher › summarize``), with what it wrote; a node
  that wrote nothing is not shown.
  A tool node that raised ends its calls ``error``.
- ``values``: the root graph's state after each super-step (the run's final state at the end).

Steps run side by side when the graph runs model calls in parallel (``Send``, parallel
branches); each event is stamped with its own step, and steps close in the order they started,
so the live view, which freezes finished steps, never sees a later step end before an earlier
one. A model step stays open until every call it made is answered (or the run ends).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from nbagent import events as ev
from nbagent.adapters.langgraph.records import (
    compact,
    content_text,
    message_type,
    messages_of,
    tool_outcome,
    usage_of,
)
from nbagent.context import RunContext

TOOL_NODES = frozenset({"tools"})
"""Node names of tool nodes (``create_agent``, ``create_react_agent``, ``ToolNode`` by default)."""


def tool_nodes_of(graph: Any) -> frozenset[str]:
    """The names of ``graph``'s tool nodes: its ``ToolNode``s under any name (LangGraph's classic
    tutorial calls one ``action``), and the default name, which subgraphs use."""
    try:
        from langgraph.prebuilt import ToolNode
    except ImportError:  # pragma: no cover - the prebuilt module ships with langgraph
        return TOOL_NODES
    nodes = getattr(graph, "nodes", None) or {}
    named = {name for name, node in nodes.items() if isinstance(getattr(node, "bound", None), ToolNode)}
    return TOOL_NODES | named


@dataclass
class _Open:
    """A step not finished yet."""

    kind: ev.StepKind = "action"
    calls: set[str] = field(default_factory=set)
    text: str | None = None
    closable: bool = False


@dataclass
class _Node:
    """A node task that has started and not ended."""

    namespace: tuple[str, ...]
    name: str
    started: float
    quiet: bool
    """A tool node, or a node whose model streamed: its calls or its step show it, not a line."""


@dataclass
class _Model:
    """One model call in progress."""

    step: int
    task_id: str | None
    chunk: Any = None


@dataclass
class _Held:
    """The tool calls of a whole reply whose node has not ended yet: they are the graph's tool
    calls only if the node writes the reply into the state (``with_structured_output`` inside a
    node asks the model for a call that no tool ever answers)."""

    step: int
    calls: list[dict[str, Any]]
    at: float


def _task_of(meta: dict[str, Any]) -> str | None:
    ns = meta.get("langgraph_checkpoint_ns") or meta.get("checkpoint_ns") or ""
    last = ns.split("|")[-1]
    return last.split(":", 1)[1] if ":" in last else None


def _path(namespace: tuple[str, ...], name: str) -> str:
    return " › ".join([*(part.split(":", 1)[0] for part in namespace), name])


def _written_messages(value: Any) -> list[Any]:
    """The messages a node wrote (its task's ``result``: a dict of writes, a ``Command``...)."""
    if isinstance(value, dict):
        return [m for item in value.values() for m in _written_messages(item)]
    if isinstance(value, (list, tuple)):
        return [m for item in value for m in _written_messages(item)]
    if type(value).__name__ == "Command":
        return _written_messages(getattr(value, "update", None))
    return [value] if message_type(value) is not None else []


def _is_tool_input(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) and "id" in v for v in value)


class StepTracker:
    """Turns stream chunks into the run's events. One per nbagent run (it spans the passes of a
    run that resumes after an interrupt); loop thread only."""

    def __init__(self, ctx: RunContext, tool_nodes: frozenset[str] = TOOL_NODES) -> None:
        self.ctx = ctx
        self.tool_nodes = tool_nodes
        self.top = ctx.step
        self.open: dict[int, _Open] = {}
        self.models: dict[str, _Model] = {}
        self.ended: set[str] = set()
        self.calls: dict[str, int] = {}
        """Open tool call id -> its step."""
        self.call_info: dict[str, tuple[str, Any]] = {}
        self.denied: set[str] = set()
        self.asking: dict[str, int] = {}
        """Requests of a pause that are no model tool call (a question) -> their step."""
        self.tasks: dict[str, _Node] = {}
        """The node tasks running now, by task id."""
        self.parents: set[str] = set()
        """Task ids of nodes that run a subgraph (named in an inner node's namespace): their inner
        nodes are the lines, so the parent never gets one of its own."""
        self.held: dict[str, list[_Held]] = {}
        """Tool calls of ended replies, by the task id of the node that asked for them."""
        self.values: Any = None
        self.interrupts: list[Any] = []
        self.checkpoint_id: str | None = None
        """The root graph's latest checkpoint (``checkpoints`` mode): the state a model step that
        starts now began from, where a fork of it starts (``StepRecord.fork_point``)."""

    # -- stamping -----------------------------------------------------------------------------

    def _at(self, step: int) -> RunContext:
        self.ctx.step = step
        return self.ctx

    def _done(self) -> None:
        self.ctx.step = self.top

    def _start(self, kind: ev.StepKind, at: float | None = None) -> int:
        self.ctx.step = self.top
        self.top = self.ctx.start_step(kind, at=at)
        self.open[self.top] = _Open(kind)
        return self.top

    # -- the stream ----------------------------------------------------------------------------

    def feed(self, namespace: tuple[str, ...], mode: str, data: Any) -> None:
        try:
            if mode == "messages":
                message, meta = data
                kind = message_type(message)
                if kind == "ai":
                    self._model_chunk(message, meta)
                elif kind == "tool":
                    self._answered(message)
            elif mode == "updates" and isinstance(data, dict):
                self._updates(namespace, data)
            elif mode == "tasks" and isinstance(data, dict):
                self._task(namespace, data)
            elif mode == "values" and not namespace:
                self.values = data
            elif mode == "checkpoints" and not namespace and isinstance(data, dict):
                configurable = (data.get("config") or {}).get("configurable") or {}
                self.checkpoint_id = configurable.get("checkpoint_id", self.checkpoint_id)
        finally:
            self._done()

    def _model_chunk(self, message: Any, meta: dict[str, Any]) -> None:
        key = message.id or f"task:{_task_of(meta)}"
        if key in self.ended:
            return  # the whole reply again (a node's output): already reported
        call = self.models.get(key)
        if call is None:
            task_id = _task_of(meta)
            if task_id in self.tasks:
                self.tasks[task_id].quiet = True
            call = self.models[key] = _Model(self._start("action"), task_id)
            # a fork at this step starts from the state before its super-step
            point = {"checkpoint_id": self.checkpoint_id, "messages": len(messages_of(self.values))}
            self._at(call.step).fork_point(point)
        text = content_text(message.content)
        if text:
            self._at(call.step).text(text)
        if "Chunk" not in type(message).__name__:
            call.chunk = message
            self._model_end(key)
            return
        call.chunk = message if call.chunk is None else call.chunk + message
        if getattr(message, "chunk_position", None) == "last":
            self._model_end(key)

    def _model_end(self, key: str) -> None:
        call = self.models.pop(key)
        self.ended.add(key)
        message = call.chunk
        ctx, step = self._at(call.step), self.open[call.step]
        ctx.model_ended()
        tokens_in, tokens_out = usage_of(message)
        ctx.usage(tokens_in, tokens_out, "unknown" if tokens_in is None else "reported")
        step.text = content_text(message.content)
        tool_calls = [c for c in getattr(message, "tool_calls", None) or () if c.get("id")]
        step.kind = "action" if tool_calls else "final"
        if tool_calls and call.task_id in self.tasks:  # reported once its node writes them
            self.held.setdefault(call.task_id, []).append(_Held(call.step, tool_calls, time.perf_counter()))
            return
        self._call(call.step, tool_calls)

    def _call(self, number: int, tool_calls: list[dict[str, Any]], at: float | None = None) -> None:
        """Report ``tool_calls`` of step ``number`` as started; the step closes once all are answered."""
        ctx, step = self._at(number), self.open[number]
        for tool_call in tool_calls:
            call_id = tool_call["id"]
            ctx.emit(
                ev.ToolCallStarted(
                    ctx.run_id, number, time.perf_counter() if at is None else at,
                    call_id, tool_call["name"], tool_call["args"],
                )
            )  # fmt: skip
            self.calls[call_id] = number
            self.call_info[call_id] = (tool_call["name"], tool_call["args"])
            step.calls.add(call_id)
        step.kind = "action" if step.calls else "final"
        step.closable = not step.calls
        self._close_ready()

    def _release(self, task_id: str, result: Any) -> None:
        """The node ``task_id`` ended: its replies' calls that it wrote are tool calls; the rest
        (a structured answer it parsed, a node that failed) are not."""
        messages = _written_messages(result)
        written = {c.get("id") for m in messages for c in getattr(m, "tool_calls", None) or ()}
        for held in self.held.pop(task_id, ()):
            self._call(held.step, [c for c in held.calls if c["id"] in written], held.at)
        for message in messages:  # the node answered some itself (a structured response)
            if message_type(message) == "tool":
                self._answered(message)

    def adopt(self, calls: list[dict[str, Any]]) -> None:
        """A run that goes on from a checkpoint (``None``, a ``Command``) where the model's calls
        are still unanswered (a Stop cut them, ``interrupt_before``, a review): they run in this
        run, so they are its calls, in a step of their own."""
        if calls:
            self._call(self._start("action"), calls)

    def _answered(self, message: Any) -> None:
        call_id = getattr(message, "tool_call_id", None)
        number = self.calls.pop(call_id, None)
        if number is None:
            return
        status, result, error = tool_outcome(message)
        if call_id in self.denied:
            status, result, error = "denied", None, error or content_text(message.content)
        self._at(number).tool_finished(call_id, status, result, error)  # type: ignore[arg-type]
        self._settle(number, call_id)

    def _settle(self, number: int, call_id: str) -> None:
        step = self.open.get(number)
        if step is not None:
            step.calls.discard(call_id)
            step.closable = not step.calls
            self._close_ready()

    def _updates(self, namespace: tuple[str, ...], data: dict[str, Any]) -> None:
        for node, update in data.items():
            if node == "__interrupt__":
                if not namespace:
                    self.interrupts.extend(update)
                continue
            for value in update if isinstance(update, (list, tuple)) else (update,):
                messages = value.get("messages") if isinstance(value, dict) else None
                for message in messages if isinstance(messages, (list, tuple)) else (messages,):
                    if message_type(message) == "tool":
                        self._answered(message)

    def _task(self, namespace: tuple[str, ...], data: dict[str, Any]) -> None:
        task_id, name = data.get("id"), str(data.get("name"))
        if "input" in data:  # a node starts
            self.parents.update(part.split(":", 1)[-1] for part in namespace)
            quiet = _is_tool_input(data["input"]) or name in self.tool_nodes
            self.tasks[task_id] = _Node(namespace, name, time.perf_counter(), quiet)
            return
        node = self.tasks.pop(task_id, None)
        started, quiet = (node.started, node.quiet) if node is not None else (time.perf_counter(), False)
        for key in [k for k, m in self.models.items() if m.task_id == task_id]:
            self._model_end(key)  # a reply with no "last" chunk is whole once its node ends
        error = data.get("error")
        self._release(task_id, data.get("result") if error is None else None)
        if error is not None and (name in self.tool_nodes or quiet):
            for call_id, number in list(self.calls.items()):
                self.calls.pop(call_id)
                self._at(number).tool_finished(call_id, "error", error=content_text(str(error)))
                self._settle(number, call_id)
            return
        result = data.get("result")
        if error is not None and not quiet and task_id not in self.parents:  # failed before its model spoke
            self._node_line(namespace, name, task_id, started, None, error=content_text(str(error)))
            return
        if quiet or error is not None or not result or data.get("interrupts"):
            return
        self._node_line(namespace, name, task_id, started, result)

    def _node_line(
        self,
        namespace: tuple[str, ...],
        name: str,
        task_id: str,
        started: float,
        result: Any,
        error: str | None = None,
    ) -> None:
        """A node that is neither a model call nor a tool (or one that failed before its model
        said anything): one compact line, in the newest open step, or in a step of its own."""
        number = max(self.open) if self.open else self._start("action", at=started)
        ctx, node_id = self._at(number), f"node:{task_id}"
        ctx.node_started(node_id, _path(namespace, name), at=started)
        if error is None:
            ctx.node_finished(node_id, "ok", compact(result))
        else:
            ctx.node_finished(node_id, "error", error=error)
        if number == self.top and not self.open[number].calls and self.open[number].text is None:
            self.open[number].closable = True
            self._close_ready()

    # -- closing -------------------------------------------------------------------------------

    def _close_ready(self) -> None:
        while self.open:
            number = min(self.open)
            step = self.open[number]
            if not step.closable:
                return
            del self.open[number]
            self._at(number).finish_step(model_output=step.text, kind=step.kind)

    def close_all(self, unanswered: ev.ToolCallStatus) -> None:
        """The graph ended: finish every open step. A call nothing answered ends ``unanswered``:
        ``deferred`` when the graph ended on it (the thread hands it to its caller: an extraction
        graph, ``interrupt_before``), ``cancelled`` when the recursion limit cut the run."""
        for key in list(self.models):
            self._model_end(key)
        for task_id in list(self.held):
            self._release(task_id, None)
        for call_id, number in self.calls.items():
            self._at(number).tool_finished(call_id, unanswered)
        self.calls.clear()
        for step in self.open.values():
            step.closable = True
        self._close_ready()
        self._done()

    def cut_nodes(self) -> None:
        """At a Stop: each node still running that has shown nothing yet (a model still thinking
        before its first token, a slow retriever) is a ``cancelled`` line in a step of its own,
        from when the node began, so its time is in the record. A tool node's calls and a node
        that runs a subgraph (its inner nodes are the lines) are not."""
        for task_id, node in self.tasks.items():
            if node.quiet or task_id in self.parents:
                continue
            number = self._start("action", at=node.started)
            ctx, node_id = self._at(number), f"node:{task_id}"
            ctx.node_started(node_id, _path(node.namespace, node.name), at=node.started)
            ctx.node_finished(node_id, "cancelled", error="interrupted")
        self.tasks.clear()
        self._done()

    def cut_calls(self) -> None:
        """After a Stop: end the calls still open, and the questions still asked, ``cancelled``
        with the error "interrupted" (they never returned)."""
        for call_id, number in self.calls.items():
            self._at(number).tool_finished(call_id, "cancelled", error="interrupted")
        for node_id, number in self.asking.items():
            self._at(number).node_finished(node_id, "cancelled", error="interrupted")
        self.calls.clear()
        self.asking.clear()
        self._done()

    def drain_due(self) -> bool:
        """True when a drain now would end the run at a step's end: no tool call is open, or a
        tool node runs (its super-step finishes). False while the calls of a reply wait for their
        node to start: a drain then would end the run with the step's calls never run."""
        return not self.calls or any(node.quiet for node in self.tasks.values())

    def open_calls(self) -> dict[str, tuple[str, Any, int]]:
        """The calls made and not answered yet: id -> (tool, arguments, step), for interrupts."""
        return {call_id: (*self.call_info[call_id], number) for call_id, number in self.calls.items()}

    def newest_step(self) -> int:
        """The newest open step, or a new one (an interrupt outside any model step)."""
        number = max(self.open) if self.open else self._start("action")
        self._done()
        return number
