"""Run OpenAI Agents SDK agents (``agents.Agent``, handoffs included) under nbagent.

``nbagent.start(agent, task)`` on an Agents SDK agent gets the same live view, Stop button and
records as a native agent. The run is the real ``Runner.run_streamed(agent, task, ...)``, on the
runner's loop, and this module translates its public stream events into nbagent events: a step
is one turn (it opens with the model's ``response.created``; its text streams from
``response.output_text.delta``; its usage comes with ``response.completed``), tool calls and
handoffs are the run items that follow (a handoff is a call whose result names the agent that
takes over), and an ``AgentUpdatedStreamEvent`` says which agent acts. Nothing on the agent is
wrapped or swapped; the run's ``hooks`` are nbagent's, which note each tool the SDK begins and pass
every callback on to the ``hooks=`` you gave.

How a Stop lands. ``interrupt("now")`` cancels the run's task; ``drive`` then calls the SDK's own
``result.cancel(mode="immediate")``, which cancels the SDK's run task, its model stream (an HTTP
model drops its connection) and its tools. The SDK's cancel forgets the turn in flight, usage
included; nbagent does not: a turn whose ``response.completed`` had arrived keeps its usage, its
finished tool calls and its text, and a turn cut mid-stream keeps its text with usage unknown.
``interrupt("after_step")`` is the SDK's own ``cancel(mode="after_turn")``: the turn in progress,
tools included, finishes and no new turn starts.

Memory. Agents SDK agents are stateless; nbagent keeps the items each run ended with
(``result.to_input_list()``) beside the agent, so ``reset=False`` sends them, then the new task, as
the next run's input. A ``session`` passed through keeps its own history instead. Fresh runs of one
agent run at once; a continued run waits (reported as queued) for the run it continues
(``nbagent.runtime.turns``).

End states. ``max_turns`` reached is ``"max_steps"``; a model API error is ``ModelError``; any
other exception (a guardrail tripped, a model behaviour error) is ``"error"`` with the SDK's
message. A call open at a Stop is ``"cancelled"`` when its tool is async (the SDK's cancel ends
it) or had not begun, and ``"abandoned"`` when it is a sync ``function_tool`` the SDK had begun: the
SDK runs those in a thread, which nothing can stop, so the tool may still be running (and its side
effects still happening) after the run has ended.

Model and cost. The record's ``model``, and the price a ``Limits(max_cost_usd=...)`` budget uses,
is the model the run starts on (``model_name_for``): ``run_config.model`` when given, else the
agent's. Known gap: a handoff to an agent on another model (and without ``run_config.model``) is
still priced at the starting model's rate, so a cost budget over such a run is only as right as that
price; give such a run a ``max_tokens`` budget, or one ``run_config.model`` for all its agents.
"""

from __future__ import annotations

import inspect
import sys
import time
from typing import Any

from nbagent import events as ev
from nbagent.adapters import instance_of
from nbagent.adapters.openai_agents_records import (
    arguments_of,
    message_text,
    model_name,
    raw_field,
    records_from_openai_agents,
    require_openai_agents,
    usage_of,
)
from nbagent.context import RunContext
from nbagent.errors import AgentInterrupted, MaxStepsReached, ModelError, describe

__all__ = ["OpenAIAgentsSource", "is_openai_agents_agent", "records_from_openai_agents"]

"""The input items each agent's last nbagent run ended with (for ``reset=False``)."""


def is_openai_agents_agent(obj: Any) -> bool:
    """True for an Agents SDK ``Agent``. Never imports the SDK itself."""
    return "agents.run" in sys.modules and instance_of(obj, "agents.agent", "Agent")


class _Translator:
    """Turns the SDK's stream events into nbagent events. Runs on the runner's loop."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.open = False
        self.last_t = 0.0
        self.calls = 0
        self.text = ""
        self.open_calls: dict[str, str] = {}
        """SDK call id -> nbagent call id, for calls without an output yet."""
        self.turn_output: list[Any] = []
        """The output items of the open turn's model response, once it completed."""
        self.turn_answers: list[Any] = []
        """The open turn's tool and handoff outputs, as input items."""
        self.threaded: set[str] = set()
        """The SDK call ids whose tool is a sync function tool (run in a thread the SDK cannot stop)."""
        self.tools_started: set[str] = set()
        """The SDK call ids whose tool the SDK has begun (its ``on_tool_start`` hook ran)."""

    def apply(self, event: Any) -> None:
        t = time.perf_counter()
        kind = getattr(event, "type", None)
        if kind == "raw_response_event":
            self._raw(event.data)
        elif kind == "run_item_stream_event":
            self._item(event.name, event.item)
        self.last_t = t

    def _raw(self, data: Any) -> None:
        kind = getattr(data, "type", None)
        if kind == "response.created":
            self.close()
            self.ctx.start_step("action")
            self.open, self.calls, self.text = True, 0, ""
            self.turn_output, self.turn_answers = [], []
        elif kind == "response.output_text.delta" and self.open and data.delta:
            self.text += data.delta
            self.ctx.text(data.delta)
        elif kind == "response.completed" and self.open:
            self.ctx.model_ended()
            self.turn_output = list(getattr(data.response, "output", None) or [])
            tokens_in, tokens_out = usage_of(getattr(data.response, "usage", None))
            self.ctx.usage(tokens_in, tokens_out, "unknown" if tokens_in is None else "reported")

    def _item(self, name: str, item: Any) -> None:
        if not self.open:
            return
        if name in ("tool_called", "handoff_requested"):
            raw = item.raw_item
            sdk_id = str(raw_field(raw, "call_id") or raw_field(raw, "id") or len(self.open_calls))
            call_id = f"{self.ctx.step}:{sdk_id}"
            self.open_calls[sdk_id] = call_id
            self.calls += 1
            tool = raw_field(raw, "name") or raw_field(raw, "type") or "tool"
            if name == "tool_called" and _runs_in_thread(getattr(item, "agent", None), tool):
                self.threaded.add(sdk_id)
            self.ctx.tool_started(call_id, tool, arguments_of(raw_field(raw, "arguments")))
        elif name == "tool_output":
            self.turn_answers.append(item.raw_item)
            call_id = self.open_calls.pop(str(raw_field(item.raw_item, "call_id")), None)
            if call_id is not None:
                self.ctx.tool_finished(call_id, "ok", item.output)
        elif name == "handoff_occured":
            self.turn_answers.append(item.raw_item)
            call_id = self.open_calls.pop(str(raw_field(item.raw_item, "call_id")), None)
            if call_id is not None:
                self.ctx.tool_finished(call_id, "ok", f"handoff to {item.target_agent.name}")
        elif name == "message_output_created" and not self.text:
            self.text = message_text(item)

    def cut_calls(self) -> None:
        """After a Stop now: end the calls still open. An async tool was cancelled with the run, as
        was a call the SDK had not begun; a sync tool that had begun goes on in its thread, so its
        call is abandoned."""
        for sdk_id, call_id in self.open_calls.items():
            if sdk_id in self.threaded and sdk_id in self.tools_started:
                self.ctx.tool_finished(call_id, "abandoned", error=ABANDONED_ERROR)
            else:
                self.ctx.tool_finished(call_id, "cancelled", error="interrupted")
        self.open_calls.clear()

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
        answered = {raw_field(a, "call_id") for a in self.turn_answers}
        for item in list(items):
            call_id = raw_field(item, "call_id")
            if raw_field(item, "type") == "function_call" and call_id not in answered:
                items.append(
                    {"type": "function_call_output", "call_id": call_id, "output": INTERRUPTED_OUTPUT}
                )
        have = {_key(i) for i in kept}
        return [i for i in items if _key(i) is None or _key(i) not in have]

    def close(self) -> None:
        """End the open turn at the time of its last event."""
        if not self.open:
            return
        self.open = False
        kind: ev.StepKind = "action" if self.calls else "final"
        ctx = self.ctx
        ctx.emit(
            ev.StepFinished(ctx.run_id, ctx.step, self.last_t, model_output=self.text or None, kind=kind)
        )


class OpenAIAgentsSource:
    """An nbagent source for an OpenAI Agents SDK agent; ``nbagent.start`` makes one for you."""

    takes_turns = False
    """The agent keeps nothing between runs: only a continued run waits (``nbagent.runtime.turns``)."""

    def __init__(self, agent: Any) -> None:
        require_openai_agents()
        if not is_openai_agents_agent(agent):
            raise TypeError(f"not an OpenAI Agents SDK agent: {type(agent).__name__}")
        self.agent = agent
        self.name = str(getattr(agent, "name", None) or type(agent).__name__)

    @property
    def model_name(self) -> str:
        return model_name(self.agent)

    def model_name_for(self, options: dict[str, Any]) -> str:
        """The model a run with these ``drive`` options starts on: ``run_config.model`` when given
        (it overrides every agent's, as in the SDK), else the agent's own. The run's record and a
        cost budget use this name (see the module's note on handoffs)."""
        return model_name(self.agent, options.get("run_config"))

    def __repr__(self) -> str:
        return f"OpenAIAgentsSource({self.name}, model={self.model_name!r})"

    async def drive(
        self,
        task: str,
        ctx: RunContext,
        reset: bool = True,
        *,
        context: Any = None,
        max_turns: int | None = None,
        hooks: Any = None,
        run_config: Any = None,
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        session: Any = None,
    ) -> Any:
        """Run ``task`` with ``Runner.run_streamed``, reporting through ``ctx``; returns the final output.

        The keywords are ``Runner.run_streamed``'s own and pass through unchanged.
        """
        given = {
            "context": context, "max_turns": max_turns, "hooks": hooks, "run_config": run_config,
            "previous_response_id": previous_response_id, "conversation_id": conversation_id,
            "session": session,
        }  # fmt: skip
        options = {name: value for name, value in given.items() if value is not None}
        kept = None if reset or session is not None else ctx.kept_history
        run_input: Any = task if not kept else [*kept, {"role": "user", "content": task}]
        return await self._run(run_input, ctx, options)

    async def _run(self, run_input: Any, ctx: RunContext, options: dict[str, Any]) -> Any:
        from agents import Runner
        from agents.exceptions import MaxTurnsExceeded
        from openai import APIError

        translator = _Translator(ctx)
        # A run hook tells which tools the SDK has begun (it announces every call of a turn first).
        hooks = _noting_tool_starts(options.get("hooks"), translator.tools_started)
        result = Runner.run_streamed(self.agent, run_input, **{**options, "hooks": hooks})
        after_turn = stopped = False
        try:
            async for event in result.stream_events():
                translator.apply(event)
                # The SDK decides whether to start another turn only once the consumer has taken
                # the last event of this one, so asking here is never too late for that turn.
                if not after_turn and ctx.scope.stop_after_step:
                    after_turn = True
                    result.cancel(mode="after_turn")
            translator.close()
            if after_turn and result.final_output is None:
                raise AgentInterrupted("stopped after the turn")
            return result.final_output
        except MaxTurnsExceeded as exc:
            translator.close()
            raise MaxStepsReached(str(exc)) from exc
        except APIError as exc:
            raise ModelError(f"{self.model_name_for(options)}: {describe(exc)}") from exc
        except BaseException:
            stopped = True
            result.cancel(mode="immediate")  # the SDK's run task, model stream and tools stop with ours
            translator.cut_calls()
            raise
        finally:
            history = _input_list(result)
            if stopped:
                history += translator.cut_turn(history)
            ctx.messages = [item if isinstance(item, dict) else {"item": item} for item in history]
            ctx.keep_history(history)


INTERRUPTED_OUTPUT = "interrupted: the run was stopped before this call returned"
"""What a call cut by a Stop answers in the kept history (the model sees it if the run goes on)."""


ABANDONED_ERROR = "a sync tool runs in a thread the Stop cannot end; abandoned (it may still be running)"


def _noting_tool_starts(hooks: Any, started: set[str]) -> Any:
    """Run hooks that add each tool call id the SDK begins to ``started``, then call ``hooks``'s own
    (every other callback is ``hooks``'s, unchanged)."""
    from agents.lifecycle import RunHooks, RunHooksBase

    if hooks is not None and not isinstance(hooks, RunHooksBase):
        return hooks  # not run hooks: the SDK refuses them with its own message

    class NotingToolStarts(RunHooks):
        async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
            call_id = getattr(context, "tool_call_id", None)
            if call_id is not None:
                started.add(str(call_id))
            if hooks is not None:
                await hooks.on_tool_start(context, agent, tool)

    noting = NotingToolStarts()
    if hooks is not None:
        for name in vars(RunHooksBase):
            if name.startswith("on_") and name != "on_tool_start":
                setattr(noting, name, getattr(hooks, name))
    return noting


def _runs_in_thread(agent: Any, tool_name: str) -> bool:
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


def _input_list(result: Any) -> list[Any]:
    try:
        return list(result.to_input_list())
    except Exception:  # a result the SDK cannot turn into input (a run that failed early)
        return []


def _input_item(output: Any) -> Any:
    """A response output item as the input item the SDK would send back."""
    if hasattr(output, "model_dump"):
        return output.model_dump(exclude_unset=True)
    return output


def _key(item: Any) -> tuple[Any, Any] | None:
    ident = raw_field(item, "call_id") or raw_field(item, "id")
    return None if ident is None else (raw_field(item, "type"), ident)
