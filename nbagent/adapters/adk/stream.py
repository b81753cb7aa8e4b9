"""ADK's events, as nbagent steps: what the live adapter reports of each one.

Two things tell nbagent what an ADK run does, both on the runner's loop:

- ``Watcher``, a plugin on the run's own copy of the runner (``nbagent.adapters.adk.source``):
  ADK calls it before each model call, tool and agent. A model call opens a step *when it is
  sent*, so a Stop while the model thinks (no event yet) cuts a step that exists, with its time;
  a tool's start is known before it returns; a sub-agent is a node line, not a tool call.
- ``Translator.event`` for each event ``runner.run_async`` yields: streamed text (``partial``
  events under ``StreamingMode.SSE``), the model's whole reply (text, function calls,
  ``usage_metadata``), function responses (a call's result, or its error), the events ADK writes
  to seal an aborted invocation.

A step is one model call: it opens when the call is sent, its text streams in, it ends when its
calls are all answered (or when the next call is sent, or the run ends). Who acted is the event's
``author``: a root agent's step has no node line; every other agent (a sub-agent it transferred
to, the agents of a Sequential/Parallel/Loop agent, a ``Workflow``'s nodes) shows as a node line
while it works.
"""

from __future__ import annotations

import time
from typing import Any

from nbagent import events as ev
from nbagent.adapters.adk.records import (
    call_arguments,
    is_abort_event,
    response_outcome,
    text_of,
    usage_of,
)
from nbagent.context import RunContext

ABANDONED_ERROR = "stopped: the sync tool goes on in ADK's thread pool until it returns"
"""The error of a sync tool's call a Stop cut: Python cannot stop a thread, so it runs on."""

INTERRUPTED = "interrupted"


class Translator:
    """Turns one run's ADK events and plugin callbacks into ``ctx`` calls. Loop thread only."""

    def __init__(self, ctx: RunContext, root: str) -> None:
        self.ctx = ctx
        self.root = root
        """The root agent's name: its steps show no node line."""
        self.open = False
        self.streamed = False
        self.text = ""
        self.ended = False
        """The open step's model reply is whole (``model_ended`` was reported)."""
        self.calls: dict[str, str] = {}
        """ADK function call id -> nbagent call id, for calls not answered yet."""
        self.tools: dict[str, str] = {}
        """ADK function call id -> tool name (all calls of the run)."""
        self.threaded: set[str] = set()
        """ADK call ids whose tool runs in ADK's thread pool (a sync function tool has begun)."""
        self.step_calls = 0
        self.nodes: dict[str, tuple[str, float]] = {}
        """Agents at work (not the root): node id -> (name, when it began)."""
        self.shown_nodes: set[str] = set()
        """Node ids whose ``NodeStarted`` was reported (a node begun before any step waits)."""
        self.node_ids = 0
        self.model_calls = 0
        self.last_t = time.perf_counter()

    # -- from the plugin ---------------------------------------------------------------------

    def model_called(self, agent: str, prompt_tokens: int) -> None:
        """ADK is about to send a model request for ``agent``."""
        self.close()
        self.model_calls += 1
        self.ctx.start_step("action")
        self.open, self.streamed, self.text, self.ended, self.step_calls = True, False, "", False, 0
        self._show_nodes()
        self.ctx.model_starting(prompt_tokens)

    def tool_began(self, call_id: str | None, threaded: bool) -> None:
        if call_id is not None and threaded:
            self.threaded.add(call_id)

    def agent_began(self, name: str) -> str | None:
        """A non-root agent (or workflow node) began: a node line; returns its id."""
        if name == self.root:
            return None
        self.node_ids += 1
        node_id = f"agent-{self.node_ids}:{name}"
        self.nodes[node_id] = (name, time.perf_counter())
        if self.open:
            self._show_nodes()
        return node_id

    def agent_ended(
        self, node_id: str | None, output: Any = None, error: str | None = None, cut: bool = False
    ) -> None:
        if node_id is None or node_id not in self.nodes:
            return
        self.nodes.pop(node_id)
        if node_id in self.shown_nodes:
            self.shown_nodes.discard(node_id)
            status: ev.NodeStatus = "cancelled" if cut else "error" if error else "ok"
            self.ctx.node_finished(node_id, status, output, error)

    def _show_nodes(self) -> None:
        for node_id, (name, began) in self.nodes.items():
            if node_id not in self.shown_nodes:
                self.shown_nodes.add(node_id)
                self.ctx.node_started(node_id, name, at=began)

    # -- from the event stream ---------------------------------------------------------------

    def event(self, event: Any) -> None:
        self.last_t = time.perf_counter()
        if getattr(event, "author", None) == "user":
            return
        if is_abort_event(event):
            return  # ADK sealing an aborted invocation: the calls are cut already
        content = getattr(event, "content", None)
        if getattr(event, "partial", None):
            piece = text_of(content)
            if piece:
                self._ensure_open()
                self.streamed = True
                self.text += piece
                self.ctx.text(piece)
            return
        calls = event.get_function_calls()
        responses = event.get_function_responses()
        model_reply = not responses and (
            calls or text_of(content) or getattr(event, "usage_metadata", None) is not None
        )
        if model_reply and getattr(content, "role", "model") == "model":
            self._reply(event, calls)
        elif getattr(event, "error_code", None) and not responses:
            # ADK's error event (what it also raises): it ends the step it cut, if any
            self.fail(f"{event.error_code}: {event.error_message or ''}".strip())
        for response in responses:
            status, result, error = response_outcome(response)
            self.finish_call(str(response.id), status, result, error)
        if responses and not self.calls:
            self.close()

    def _reply(self, event: Any, calls: list[Any]) -> None:
        self._ensure_open()
        text = text_of(event.content)
        if text and not self.streamed:
            self.ctx.text(text)
        if text:
            self.text = text
        tokens_in, tokens_out = usage_of(getattr(event, "usage_metadata", None))
        if tokens_in is not None or tokens_out is not None:
            self.ctx.usage(tokens_in, tokens_out, "reported")
        if not self.ended:
            self.ended = True
            self.ctx.model_ended()
        for call in calls:
            self.start_call(str(call.id), str(call.name), call_arguments(call))
        if not calls and not getattr(event, "long_running_tool_ids", None):
            self.close()

    def _ensure_open(self) -> None:
        """A reply with no model call before it (a callback answered for the model; a
        ``BaseLlm`` called outside the flow): a step of its own."""
        if not self.open:
            self.ctx.start_step("action")
            self.open, self.streamed, self.text, self.ended, self.step_calls = True, False, "", False, 0
            self._show_nodes()

    def start_call(self, adk_id: str, tool: str, arguments: Any) -> str:
        call_id = f"{self.ctx.step}:{adk_id}"
        self.calls[adk_id] = call_id
        self.tools[adk_id] = tool
        self.step_calls += 1
        self.ctx.tool_started(call_id, tool, arguments)
        return call_id

    def finish_call(
        self, adk_id: str, status: ev.ToolCallStatus, result: Any = None, error: str | None = None
    ) -> None:
        call_id = self.calls.pop(adk_id, None)
        if call_id is not None:
            self.ctx.tool_finished(call_id, status, result, error)

    # -- the end -----------------------------------------------------------------------------

    def cut(self) -> None:
        """After a Stop now: the open calls end (a sync tool ADK began in its pool goes on:
        abandoned), so do the agents at work; the open step is the cut one."""
        for adk_id in list(self.calls):
            if adk_id in self.threaded:
                self.finish_call(adk_id, "abandoned", error=ABANDONED_ERROR)
            else:
                self.finish_call(adk_id, "cancelled", error=INTERRUPTED)
        for node_id in list(self.nodes):
            if node_id in self.shown_nodes:
                self.ctx.node_finished(node_id, "cancelled", error=INTERRUPTED)
        self.nodes.clear()
        self.shown_nodes.clear()
        self.close(interrupted=True)

    def fail(self, error: str) -> None:
        """After an error: the open calls and agents end with it."""
        for adk_id in list(self.calls):
            self.finish_call(adk_id, "error", error=error)
        for node_id in list(self.nodes):
            self.agent_ended(node_id, error=error)
        self.close(error=error)

    def pending(self, status: ev.ToolCallStatus, error: str) -> None:
        """The run ended with calls unanswered (long-running tools, confirmations ADK waits for)."""
        for adk_id in list(self.calls):
            self.finish_call(adk_id, status, error=error)

    def close(self, error: str | None = None, interrupted: bool = False) -> None:
        """End the open step."""
        if not self.open:
            return
        self.open = False
        final = not self.step_calls and error is None and not interrupted
        kind: ev.StepKind = "final" if final else "action"
        self.ctx.finish_step(model_output=self.text or None, kind=kind, error=error, interrupted=interrupted)


def prompt_estimate(llm_request: Any) -> int:
    """About how many tokens a model request's prompt has (4 characters a token): what a budget
    on input tokens checks before the request is sent."""
    chars = 0
    for content in getattr(llm_request, "contents", None) or ():
        for part in getattr(content, "parts", None) or ():
            chars += len(getattr(part, "text", None) or "")
            call = getattr(part, "function_call", None) or getattr(part, "function_response", None)
            if call is not None:
                chars += len(str(getattr(call, "args", None) or getattr(call, "response", None) or ""))
    config = getattr(llm_request, "config", None)
    instruction = getattr(config, "system_instruction", None)
    chars += len(instruction) if isinstance(instruction, str) else len(text_of(instruction))
    return chars // 4


def is_sync_tool(tool: Any) -> bool:
    """True for a ``FunctionTool`` over a plain function (ADK runs it in its tool thread pool)."""
    import inspect

    func = getattr(tool, "func", None)
    if func is None:
        return False
    call = vars(type(func)).get("__call__")  # an object with an async __call__ is async too
    return not (inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(call))


def _over_llm_calls(callback_context: Any) -> bool:
    """True when ADK is about to refuse this model call (``RunConfig.max_llm_calls`` reached: it
    counts the call after the plugins' ``before_model_callback``), so no step opens for it. Reads
    ADK's counter (``_invocation_cost_manager``, ADK 2.13); False when it is not there."""
    try:
        invocation = callback_context.get_invocation_context()
    except Exception:  # an ADK without it: the step opens, as for any call
        return False
    manager = getattr(invocation, "_invocation_cost_manager", None)
    made = getattr(manager, "_number_of_llm_calls", None)
    limit = getattr(getattr(invocation, "run_config", None), "max_llm_calls", 0)
    return isinstance(made, int) and isinstance(limit, int) and 0 < limit <= made


def mark_fork_point(ctx: RunContext, callback_context: Any) -> None:
    """The request is made of the session's events so far: a fork at this step starts from them
    (``adk.fork``). The session's live list is the run's history until the run ends."""
    events = getattr(getattr(callback_context, "session", None), "events", None)
    if isinstance(events, list):
        ctx.conversation = events
        ctx.fork_point(len(events))


def make_watcher(translator: Translator, ctx: RunContext, abort: Any) -> Any:
    """nbagent's ADK plugin for one run (see the module): it only watches, and returns None from
    every callback, so ADK goes on to the runner's own plugins and the agents' callbacks."""
    import asyncio

    from google.adk.plugins.base_plugin import BasePlugin

    class Watcher(BasePlugin):
        def __init__(self) -> None:
            super().__init__(name="nbagent")
            self.agents: dict[str, list[str | None]] = {}

        async def before_model_callback(self, *, callback_context: Any, llm_request: Any) -> Any:
            translator.close()
            if translator.model_calls and ctx.scope.stop_after_step:
                # the step ended and a Stop after it was asked: ADK's abort, before the next call
                abort.set()
                await asyncio.Event().wait()  # cancelled as the run unwinds
            if not _over_llm_calls(callback_context):
                translator.model_called(callback_context.agent_name, prompt_estimate(llm_request))
                mark_fork_point(ctx, callback_context)
            return None

        async def before_tool_callback(self, *, tool: Any, tool_args: Any, tool_context: Any) -> Any:
            translator.tool_began(getattr(tool_context, "function_call_id", None), is_sync_tool(tool))
            return None

        async def before_agent_callback(self, *, agent: Any, callback_context: Any) -> Any:
            self.agents.setdefault(agent.name, []).append(translator.agent_began(agent.name))
            return None

        async def after_agent_callback(self, *, agent: Any, callback_context: Any) -> Any:
            began = self.agents.get(agent.name)
            if began:  # ADK ends an agent it aborted too: that one was cut
                error = INTERRUPTED if abort.is_set() or ctx.scope.interrupted else None
                translator.agent_ended(began.pop(), error=error, cut=error is not None)
            return None

    return Watcher()
