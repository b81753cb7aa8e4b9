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
from dataclasses import dataclass
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
from nbagent.guardrails.approvals import denial_observation
from nbagent.guardrails.limits import tool_call_allowed

ABANDONED_ERROR = "stopped: the sync tool goes on in ADK's thread pool until it returns"
"""The error of a sync tool's call a Stop cut: Python cannot stop a thread, so it runs on."""

INTERRUPTED = "interrupted"

CONFIRMATION_CALL = "adk_request_confirmation"
"""The function call ADK writes to ask its client to confirm a tool call (ADK's
``REQUEST_CONFIRMATION_FUNCTION_CALL_NAME``): not a tool call of the agent's, the question about one."""

NEEDS_CONFIRMATION = "This tool call requires confirmation, please approve or reject."
"""The error ADK answers a call with while its confirmation is asked (and what nbagent's
``approve=`` answers a call it holds with, the same way)."""

REJECTED = "This tool call is rejected."
"""What ADK answers a call whose confirmation was refused with."""


@dataclass
class Waiting:
    """A call ADK's run ended waiting on, for a person to decide: a tool call whose confirmation
    ADK asked for (``confirmation_id`` the ``adk_request_confirmation`` call's id), or a
    long-running tool's call that has no response yet (``confirmation_id`` None)."""

    adk_id: str
    tool: str
    arguments: Any
    confirmation_id: str | None = None
    hint: str | None = None
    payload: Any = None

    def answer(self, approved: bool, reason: str | None) -> Any:
        """The function response that tells ADK the decision, as ADK's own clients send it: a
        ``ToolConfirmation`` for a confirmation; for a long-running call, its status (ADK's
        human-in-the-loop sample answers ``{"status": "approved"}``)."""
        from google.genai import types

        if self.confirmation_id is not None:
            body: dict[str, Any] = {"confirmed": approved}
            if self.payload is not None:
                body["payload"] = self.payload
            response = types.FunctionResponse(id=self.confirmation_id, name=CONFIRMATION_CALL, response=body)
        else:
            body = {"status": "approved"} if approved else {"status": "denied", "reason": reason or "denied"}
            response = types.FunctionResponse(id=self.adk_id, name=self.tool, response=body)
        return types.Part(function_response=response)


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
        self.arguments: dict[str, Any] = {}
        self.threaded: set[str] = set()
        """ADK call ids whose tool runs in ADK's thread pool (a sync function tool has begun)."""
        self.step_calls = 0
        self.nodes: dict[str, tuple[str, float]] = {}
        """Agents at work (not the root): node id -> (name, when it began)."""
        self.shown_nodes: set[str] = set()
        """Node ids whose ``NodeStarted`` was reported (a node begun before any step waits)."""
        self.node_ids = 0
        self.model_calls = 0
        self.step_agent: str | None = None
        """The agent whose model call the open step is."""
        self.confirming: dict[str, Waiting] = {}
        """``adk_request_confirmation`` call id -> the call it asks about, until answered."""
        self.long_running: set[str] = set()
        """ADK ids of long-running tools' calls (``Event.long_running_tool_ids``)."""
        self.error_event: Any = None
        """The first error event of the run (``error_code`` set, not an abort's), if any."""
        self.last_t = time.perf_counter()

    # -- from the plugin ---------------------------------------------------------------------

    def overlaps(self, agent: str) -> bool:
        """True when ``agent``'s model call is sent while another agent's is still unanswered (the
        branches of a ``ParallelAgent``): it opens no step of its own then, and its reply fills
        the step open when it comes, or a new one (a record has one open step at a time)."""
        if self.open and not self.ended and not self.step_calls and agent != self.step_agent:
            self.model_calls += 1
            return True
        return False

    def model_called(self, agent: str, prompt_tokens: int) -> None:
        """ADK is about to send a model request for ``agent``."""
        self.close()
        self.model_calls += 1
        self.ctx.start_step("action")
        self.open, self.streamed, self.text, self.ended, self.step_calls = True, False, "", False, 0
        self.step_agent = agent
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
            if self.error_event is None:
                self.error_event = event
            self.fail(f"{event.error_code}: {event.error_message or ''}".strip())
        for response in responses:
            status, result, error = response_outcome(response)
            if error == NEEDS_CONFIRMATION:
                continue  # ADK's answer while it asks to confirm the call: the call waits on it
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
        self.long_running.update(str(i) for i in getattr(event, "long_running_tool_ids", None) or ())
        for call in calls:
            if call.name == CONFIRMATION_CALL:
                self._confirmation(call)
            elif str(call.id) not in self.tools:  # not started already (held for approve=)
                self.start_call(str(call.id), str(call.name), call_arguments(call))
        if not calls and not getattr(event, "long_running_tool_ids", None):
            self.close()

    def _confirmation(self, call: Any) -> None:
        """ADK asks to confirm a call: it waits on the call (not a tool call of its own)."""
        args = call_arguments(call) or {}
        original = args.get("originalFunctionCall") or {}
        asked = args.get("toolConfirmation") or {}
        self.long_running.discard(str(call.id))
        self.confirming[str(call.id)] = Waiting(
            str(original.get("id")), str(original.get("name")), original.get("args") or {},
            str(call.id), asked.get("hint") or None, asked.get("payload"),
        )  # fmt: skip

    def waiting(self) -> list[Waiting]:
        """What the run ended waiting on: each confirmation ADK asked for and nobody answered yet,
        and each long-running call still unanswered."""
        found = list(self.confirming.values())
        asked = {w.adk_id for w in found}
        for adk_id in self.calls:
            if adk_id in self.long_running and adk_id not in asked:
                found.append(Waiting(adk_id, self.tools.get(adk_id, "tool"), self.arguments.get(adk_id)))
        return found

    def answered(self, waiting: Waiting, approved: bool) -> None:
        """The person's decision on ``waiting`` goes to ADK: a confirmation is answered; a
        long-running call is, by the decision itself (ADK reads it as the call's response)."""
        if waiting.confirmation_id is not None:
            self.confirming.pop(waiting.confirmation_id, None)
        elif approved:
            answer = waiting.answer(True, None).function_response.response
            self.finish_call(waiting.adk_id, "ok", answer)

    def call_for(self, waiting: Waiting) -> str:
        """The nbagent call a decision is about: the call still open, or (a tool that asked for
        confirmation itself and answered meanwhile, which ADK runs again once confirmed) a new one."""
        found = self.calls.get(waiting.adk_id)
        if found is not None:
            return found
        self._ensure_open()
        return self.start_call(waiting.adk_id, waiting.tool, waiting.arguments)

    def _ensure_open(self) -> None:
        """A reply with no model call before it (a callback answered for the model; a
        ``BaseLlm`` called outside the flow): a step of its own."""
        if not self.open:
            self.ctx.start_step("action")
            self.open, self.streamed, self.text, self.ended, self.step_calls = True, False, "", False, 0
            self.step_agent = None
            self._show_nodes()

    def start_call(self, adk_id: str, tool: str, arguments: Any) -> str:
        call_id = f"{self.ctx.step}:{adk_id}"
        self.calls[adk_id] = call_id
        self.tools[adk_id] = tool
        self.arguments[adk_id] = arguments
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
            self.invocation: str | None = None
            """The run's invocation: an ``AgentTool`` runs its agent in a runner of its own that
            shares the plugins, and its callbacks are the tool's business, not steps of this run."""

        def mine(self, context: Any) -> bool:
            found = getattr(context, "invocation_id", None)
            return self.invocation is None or found is None or found == self.invocation

        async def before_run_callback(self, *, invocation_context: Any) -> Any:
            if self.invocation is None:
                self.invocation = getattr(invocation_context, "invocation_id", None)
            return None

        async def before_model_callback(self, *, callback_context: Any, llm_request: Any) -> Any:
            if not self.mine(callback_context) or translator.overlaps(callback_context.agent_name):
                return None
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
            if not self.mine(tool_context):
                return None
            translator.tool_began(getattr(tool_context, "function_call_id", None), is_sync_tool(tool))
            if ctx.scope.interrupted or not tool_call_allowed(ctx.scope):
                # over ``max_tool_calls`` (or stopped): the budget's trip cancels the run, and the
                # event that reports the call can reach the budget after a fast tool already ran
                await asyncio.Event().wait()  # cancelled as the run unwinds
            return await held(tool, tool_args, tool_context)

        async def before_agent_callback(self, *, agent: Any, callback_context: Any) -> Any:
            if not self.mine(callback_context):
                return None
            self.agents.setdefault(agent.name, []).append(translator.agent_began(agent.name))
            return None

        async def after_agent_callback(self, *, agent: Any, callback_context: Any) -> Any:
            if not self.mine(callback_context):
                return None
            began = self.agents.get(agent.name)
            if began:  # ADK ends an agent it aborted too: that one was cut
                error = INTERRUPTED if abort.is_set() or ctx.scope.interrupted else None
                translator.agent_ended(began.pop(), error=error, cut=error is not None)
            return None

    async def held(tool: Any, tool_args: Any, tool_context: Any) -> Any:
        """nbagent's ``approve=``: a call the policy picks waits here, before ADK runs it, for
        the person's decision (the panel, or ``run.approve`` / ``run.deny``); a denied call is
        answered with the denial, as the model sees it in every other source. ADK's own
        confirmation (``require_confirmation=``, ``request_confirmation``) goes its own way."""
        approvals = ctx.approvals
        adk_id = str(getattr(tool_context, "function_call_id", None) or "")
        if approvals.policy in (None, False) or not approvals.wants(tool.name, tool_args, adk_id):
            return None
        if getattr(tool_context, "tool_confirmation", None) is not None:
            return None  # decided already, through ADK's confirmation
        if await tool.check_require_confirmation(tool_args, tool_context):
            return None  # ADK asks for it itself: one question, not two
        call_id = translator.call_for(Waiting(adk_id, tool.name, dict(tool_args or {})))
        approvals.request(ctx, call_id, tool.name, tool_args)
        decision = await approvals.wait(ctx, call_id)
        if decision.approved:
            return None
        translator.finish_call(adk_id, "denied", error=decision.reason or "denied")
        return {"error": denial_observation(decision.reason)}

    return Watcher()
