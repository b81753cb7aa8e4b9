"""The Agents SDK's stream, read as nbagent events (used by ``nbagent.adapters.openai_agents.source``).

``Translator.apply`` takes each public stream event of ``Runner.run_streamed`` on the runner's loop:
a step is one turn (it opens with the model's ``response.created``, its text streams from
``response.output_text.delta``, its usage comes with ``response.completed``); tool calls and
handoffs are the run items that follow, and the turn ends when each call of the reply has its answer
(or, for a reply without calls, when the run ends). A handoff call ends when its ``handoff_occured``
item arrives or, as a handoff whose ``input_filter`` dropped that item never sends one, when the SDK
says another agent now acts (``AgentUpdatedStreamEvent``).

How a run ends decides what becomes of the calls still open: a Stop cancels them (``cut_calls``;
a sync tool the SDK had begun runs on in its thread and is ``abandoned``), an error ends them with
that error (``fail_calls``). Only a Stop adds answers to the kept history (``cut_turn``): the turn
the SDK's cancel throws away, and "interrupted" for each call it cut, so the next request is valid.
"""

from __future__ import annotations

import inspect
import re
import time
from typing import Any

from nbagent import events as ev
from nbagent.adapters.openai_agents.records import arguments_of, message_text, raw_field, usage_of
from nbagent.context import RunContext

INTERRUPTED_OUTPUT = "interrupted: the run was stopped before this call returned"
"""What a call cut by a Stop answers in the kept history (the model sees it if the run goes on)."""

ABANDONED_ERROR = "a sync tool runs in a thread the Stop cannot end; abandoned (it may still be running)"

THREAD_NOTE = "a sync tool runs in a thread the SDK cannot cancel; abandoned (it may still be running)"


class Translator:
    """Turns the SDK's stream events into nbagent events. Runs on the runner's loop."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.open = False
        self.last_t = 0.0
        self.calls = 0
        self.text = ""
        self.open_calls: dict[str, str] = {}
        """SDK call id -> nbagent call id, for calls without an output yet."""
        self.handoffs: dict[str, str] = {}
        """SDK call id -> nbagent call id, for handoff calls whose handoff has not happened yet."""
        self.turn_output: list[Any] = []
        """The output items of the open turn's model response, once it completed."""
        self.turn_answers: list[Any] = []
        """The open turn's tool and handoff outputs, as input items."""
        self.total_usage: Any = None
        """A callable giving the SDK's usage of the whole run so far (its context's ``usage``)."""
        self.reported = [0, 0]
        """The input and output tokens the stream reported, over the whole run."""
        self.threaded: set[str] = set()
        """The SDK call ids whose tool is a sync function tool (run in a thread the SDK cannot stop)."""
        self.tools_started: set[str] = set()
        """The SDK call ids whose tool the SDK has begun (its ``on_tool_start`` hook ran)."""
        self.tools: dict[str, str] = {}
        """SDK call id -> the tool it calls."""
        self.awaiting_reply: float | None = None
        """When the SDK began a model call (its ``on_llm_start`` hook) whose reply this reader has
        not seen begin (``response.created``) yet. The SDK starts a turn only once this reader
        took the last event of the one before, so the hook never runs ahead of a turn unread. A
        reply that begins again with no call begun since is the SDK retrying that call (the same
        step, one more retry)."""
        self.hooked = False
        """The SDK has told of a model call (its run hooks are nbagent's)."""
        self.raised: dict[str, str] = {}
        """SDK call id -> the exception its tool raised, which the SDK answered the model with its
        failure text (``tool_raised``)."""
        self.request_items: int | None = None
        """How many input items the model call the SDK began is sent (its ``on_llm_start``): the
        fork point of the turn that call opens."""

    def apply(self, event: Any) -> None:
        t = time.perf_counter()
        kind = getattr(event, "type", None)
        if kind == "raw_response_event":
            self._raw(event.data)
        elif kind == "run_item_stream_event":
            self._item(event.name, event.item)
        elif kind == "agent_updated_stream_event":
            self._handed_off(getattr(event.new_agent, "name", "agent"))
        self.last_t = max(self.last_t, t)

    def _raw(self, data: Any) -> None:
        kind = getattr(data, "type", None)
        if kind == "response.created":
            if self.open and self.hooked and self.awaiting_reply is None:
                self.text, self.turn_output = "", []  # what the failed attempt said is dropped
                self.ctx.retrying(1, 0.0, "the SDK retried the model call")
            else:
                self._open_turn()
            self.awaiting_reply = None
        elif kind == "response.output_text.delta" and self.open and data.delta:
            self.text += data.delta
            self.ctx.text(data.delta)
        elif kind == "response.completed" and self.open:
            self.ctx.model_ended()
            self.turn_output = list(getattr(data.response, "output", None) or [])
            self._usage(*usage_of(getattr(data.response, "usage", None)))

    def _open_turn(self, at: float | None = None) -> None:
        self.close()
        self.ctx.start_step("action", at=at)
        if self.request_items is not None:  # a fork at this turn sends these items again
            self.ctx.fork_point(self.request_items)
            self.request_items = None
        self.open, self.calls, self.text = True, 0, ""
        self.turn_output, self.turn_answers = [], []
        self.last_t = time.perf_counter()  # a turn ends no earlier than it began

    def model_called(self, items: Any = None) -> None:
        """The SDK is about to call the model (on its own task) with ``items`` as its input."""
        self.hooked = True
        self.awaiting_reply = time.perf_counter()
        if isinstance(items, list):
            self.request_items = len(items)
            self.ctx.conversation = list(items)  # forks of the turns that ended, while it runs

    def open_unanswered_call(self) -> None:
        """At a Stop or an error: a model call the SDK began whose reply never started (a model
        still thinking, a server that refused) is a step too, from when the call began, so its
        time is in the record as any other model call's."""
        if self.awaiting_reply is not None:
            called_at, self.awaiting_reply = self.awaiting_reply, None
            self._open_turn(at=max(called_at, self.last_t))

    def resume(self, state: Any) -> None:
        """A run resumed from a ``RunState`` starts with the turn it paused in: one step with the
        usage the state carries (the SDK counts it in the resumed run's usage) and the calls it
        paused on, which run now (or are answered with their rejection)."""
        context = getattr(state, "_context", None)
        self.ctx.start_step("action")
        self.open, self.calls, self.text = True, 0, ""
        self._usage(*usage_of(getattr(context, "usage", None)))
        for item in state.get_interruptions():
            raw = item.raw_item
            sdk_id = str(raw_field(raw, "call_id") or raw_field(raw, "id"))
            tool = str(getattr(item, "tool_name", None) or raw_field(raw, "name") or "tool")
            self.start_call(sdk_id, tool, raw_field(raw, "arguments"))
            approved = context.is_tool_approved(tool, sdk_id) if context is not None else None
            if approved is False:
                self.finish_call(sdk_id, "denied", error="rejected in the RunState")

    def _usage(self, tokens_in: int | None, tokens_out: int | None) -> None:
        self.ctx.usage(tokens_in, tokens_out, "unknown" if tokens_in is None else "reported")
        if tokens_in is not None:
            self.reported[0] += tokens_in
            self.reported[1] += tokens_out or 0

    def _item(self, name: str, item: Any) -> None:
        if name in ("tool_output", "handoff_occured"):
            self.turn_answers.append(item.raw_item)
        if not self.open:
            return
        if name in ("tool_called", "handoff_requested"):
            raw = item.raw_item
            sdk_id = str(raw_field(raw, "call_id") or raw_field(raw, "id") or len(self.open_calls))
            tool = raw_field(raw, "name") or raw_field(raw, "type") or "tool"
            if name == "tool_called" and runs_in_thread(getattr(item, "agent", None), tool):
                self.threaded.add(sdk_id)
            self.start_call(sdk_id, tool, raw_field(raw, "arguments"))
            if name == "handoff_requested":
                self.handoffs[sdk_id] = self.open_calls[sdk_id]
        elif name == "tool_output":
            sdk_id = str(raw_field(item.raw_item, "call_id"))
            error = self.raised.pop(sdk_id, None)
            if error is None:
                self.finish_call(sdk_id, "ok", item.output)
            else:  # the model was told the failure text; the record keeps the exception
                self.finish_call(sdk_id, "error", item.output, error=error)
            self._close_if_answered()
        elif name == "handoff_occured":
            self.handoffs.pop(str(raw_field(item.raw_item, "call_id")), None)
            target = item.target_agent.name
            self.finish_call(str(raw_field(item.raw_item, "call_id")), "ok", f"handoff to {target}")
            self._close_if_answered()
        elif name == "message_output_created" and not self.text:
            self.text = message_text(item)

    def tool_raised(self, sdk_id: str, error: BaseException) -> None:
        """The tool of call ``sdk_id`` raised ``error``, and the SDK's failure function answered
        the model for it: its call is a failed one, whatever text the model was shown."""
        self.raised[sdk_id] = f"{type(error).__name__}: {error}"

    def _close_if_answered(self) -> None:
        """End the turn once every call its reply made has its answer: the step is over before
        the SDK decides on the next turn, so a "Stop after step" asked for as it ends (a step
        budget's, say) reaches the SDK's ``cancel(mode="after_turn")`` in time."""
        asked = sum(1 for output in self.turn_output if raw_field(output, "type") == "function_call")
        if asked and self.calls >= asked and not self.open_calls:
            self.close()

    def start_call(self, sdk_id: str, tool: str, arguments: Any) -> str:
        call_id = f"{self.ctx.step}:{sdk_id}"
        self.open_calls[sdk_id] = call_id
        self.tools[sdk_id] = tool
        self.calls += 1
        self.ctx.tool_started(call_id, tool, arguments_of(arguments))
        return call_id

    def finish_call(
        self, sdk_id: str, status: ev.ToolCallStatus, result: Any = None, error: str | None = None
    ) -> None:
        call_id = self.open_calls.pop(sdk_id, None)
        if call_id is not None:
            self.ctx.tool_finished(call_id, status, result, error)

    def _handed_off(self, agent_name: str) -> None:
        """Another agent acts now: the handoff calls still open happened (their ``handoff_occured``
        item is missing when the handoff's ``input_filter`` dropped it)."""
        for sdk_id in list(self.handoffs):
            del self.handoffs[sdk_id]
            self.finish_call(sdk_id, "ok", f"handoff to {agent_name}")

    def catch_up(self) -> None:
        """Report, on the open turn, usage the SDK counted that no turn's ``response.completed``
        did: an agent used as a tool, the earlier turns of a resumed ``RunState``, a turn an input
        guardrail's tripwire cut before it completed. So the record's totals are the SDK's.
        Called only where the SDK's run is quiet (it ended, or paused for approval): the SDK
        counts a turn's usage before this reader sees the turn's events, so earlier the
        difference would count the turn twice."""
        usage = self.total_usage() if self.total_usage is not None else None
        if not self.open or usage is None:
            return
        tokens_in, tokens_out = usage_of(usage)
        if tokens_in is None:
            return
        extra_in, extra_out = tokens_in - self.reported[0], (tokens_out or 0) - self.reported[1]
        if extra_in > 0 or extra_out > 0:
            self._usage(max(extra_in, 0), max(extra_out, 0))

    def fail_calls(self, error: str, cancelled: bool, raised_by: str | None = None) -> None:
        """After an error: end the calls still open. When a tool raised it (``raised_by``, see
        ``raising_tool``), only that tool's call is ``"error"``; the SDK cancelled the others in
        its turn (``"cancelled"``; a sync tool it had begun goes on in its thread: ``"abandoned"``).
        Two open calls of the raising tool cannot be told apart: both are ``"error"``. When no
        tool raised it (a model error, a guardrail, a handoff filter), the open calls end with the
        error, or ``"cancelled"`` if the run was cancelled (by the agent's own code: no Stop)."""
        for sdk_id in list(self.open_calls):
            tool = self.tools.get(sdk_id)
            if cancelled:
                self.finish_call(sdk_id, "cancelled", error="cancelled")
            elif raised_by is None or tool == raised_by:
                self.finish_call(sdk_id, "error", error=error)
            elif sdk_id in self.threaded and sdk_id in self.tools_started:
                self.finish_call(sdk_id, "abandoned", error=f"{raised_by} raised; {THREAD_NOTE}")
            else:
                self.finish_call(sdk_id, "cancelled", error=f"cancelled: {raised_by} raised")
        self.handoffs.clear()

    def cut_calls(self) -> None:
        """After a Stop now: end the calls still open. An async tool was cancelled with the run, as
        was a call the SDK had not begun; a sync tool that had begun goes on in its thread, so its
        call is abandoned."""
        for sdk_id in list(self.open_calls):
            if sdk_id in self.threaded and sdk_id in self.tools_started:
                self.finish_call(sdk_id, "abandoned", error=ABANDONED_ERROR)
            else:
                self.finish_call(sdk_id, "cancelled", error="interrupted")
        self.handoffs.clear()

    def cut_turn(self, kept: list[Any]) -> list[Any]:
        """After a Stop now: the input items of the turn the SDK's cancel throws away (the model's
        reply, or the text it had streamed; the outputs of the calls that ended; an "interrupted"
        output for each call that did not, as the API wants every call answered), minus what
        ``kept`` already holds."""
        if not self.open:
            return []
        items: list[Any] = [_input_item(o) for o in self.turn_output]
        if not items and self.text:
            items.append({"role": "assistant", "content": self.text})
        items.extend(self.turn_answers)
        answered = {
            raw_field(a, "call_id")
            for a in [*self.turn_answers, *kept]
            if raw_field(a, "type") == "function_call_output"
        }
        for item in [*kept, *items]:
            call_id = raw_field(item, "call_id")
            if raw_field(item, "type") == "function_call" and call_id not in answered:
                items.append(
                    {"type": "function_call_output", "call_id": call_id, "output": INTERRUPTED_OUTPUT}
                )
                answered.add(call_id)
        have = {_key(i) for i in kept}
        return [i for i in items if _key(i) is None or _key(i) not in have]

    def close(self, error: str | None = None) -> None:
        """End the open turn at the time of its last event."""
        if not self.open:
            return
        self.open = False
        # a turn with no calls is the final answer, unless an error ended it before any text
        final = not self.calls and (error is None or bool(self.text))
        kind: ev.StepKind = "final" if final else "action"
        ctx = self.ctx
        ctx.emit(
            ev.StepFinished(
                ctx.run_id,
                ctx.step,
                self.last_t,
                model_output=self.text or None,
                kind=kind,
                error=error,
            )
        )


def watching_hooks(hooks: Any, translator: Translator) -> Any:
    """Run hooks that tell ``translator`` each model call and each tool the SDK begins, then call
    ``hooks``'s own (every other callback is ``hooks``'s, unchanged)."""
    from agents.lifecycle import RunHooks, RunHooksBase

    if hooks is not None and not isinstance(hooks, RunHooksBase):
        return hooks  # not run hooks: the SDK refuses them with its own message

    class Watching(RunHooks):
        async def on_llm_start(self, context: Any, agent: Any, *args: Any) -> None:
            translator.model_called(args[1] if len(args) > 1 else None)  # (system_prompt, input_items)
            if hooks is not None:
                await hooks.on_llm_start(context, agent, *args)

        async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
            call_id = getattr(context, "tool_call_id", None)
            if call_id is not None:
                translator.tools_started.add(str(call_id))
            if hooks is not None:
                await hooks.on_tool_start(context, agent, tool)

    watching = Watching()
    if hooks is not None:
        for name in vars(RunHooksBase):
            if name.startswith("on_") and name not in ("on_tool_start", "on_llm_start"):
                setattr(watching, name, getattr(hooks, name))
    return watching


def runs_in_thread(agent: Any, tool_name: str) -> bool:
    """True if ``agent``'s tool ``tool_name`` is a ``function_tool`` made from a sync function,
    which the SDK runs with ``asyncio.to_thread``. Unknown tools (MCP, hosted, custom) are async."""
    for tool in getattr(agent, "tools", None) or ():
        if getattr(tool, "name", None) != tool_name:
            continue
        try:
            func = tool.__wrapped__  # the callable given to function_tool (openai-agents >= 0.24)
        except AttributeError:
            return False
        call = type(func).__call__  # an object with an async __call__ is async too
        return not (inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(call))
    return False


def raising_tool(exc: BaseException) -> str | None:
    """The tool whose raising ended the run with ``exc``, when the SDK says: it wraps a function
    tool's exception as ``UserError("Error running tool <name>: ...")`` (agents 0.24) and names the
    tool of a ``ToolTimeoutError``. None for any other error."""
    from agents.exceptions import UserError

    name = getattr(exc, "tool_name", None)
    if isinstance(name, str):
        return name
    if isinstance(exc, UserError) and exc.__cause__ is not None:
        found = re.match(r"Error running tool ([\w.-]+): ", str(exc))
        return found.group(1) if found else None
    return None


def _input_item(output: Any) -> Any:
    """A response output item as the input item the SDK would send back."""
    if hasattr(output, "model_dump"):
        return output.model_dump(exclude_unset=True)
    return output


def _key(item: Any) -> tuple[Any, Any] | None:
    ident = raw_field(item, "call_id") or raw_field(item, "id")
    return None if ident is None else (raw_field(item, "type"), ident)
