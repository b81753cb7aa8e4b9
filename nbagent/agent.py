"""The native ``Agent``: a small async tool-calling loop.

Each step streams one model reply; if it asks for tools they run and their results go back to
the model, otherwise the reply is the final answer. Every ``await`` is a cancellation point, so a
Stop lands mid-stream or mid-tool. Tool failures (unknown tool, bad JSON, a tool that raises or
times out) become observations the model sees, and the run goes on. Memory stays on the agent
and is left consistent after an interrupt, so ``start(agent, task, reset=False)`` continues.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable, Iterable
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from nbagent.context import RunContext
from nbagent.errors import AgentError, AgentInterrupted, MaxStepsReached, ModelError, describe
from nbagent.guardrails.approvals import (
    ApprovalCall,
    ApprovalPolicy,
    check_policy,
    denial_observation,
    policy_wants,
)
from nbagent.guardrails.limits import PromptEstimate
from nbagent.models.base import (
    Message,
    Model,
    ModelRetry,
    ModelText,
    ModelUsage,
    ToolCall,
    ToolCallDelta,
)
from nbagent.runtime.source import Source
from nbagent.runtime.tasks import spawn_contained, stop_within
from nbagent.text import observation
from nbagent.tools import Tool, ToolAbandoned, ToolFinishedWhileStopping, Toolset, tool

if TYPE_CHECKING:
    from nbagent.forks.origins import ForkOrigin

INTERRUPTED_TOOL_RESULT = "Interrupted by the user before this tool finished."

MODEL_GRACE_S = 0.02
"""How long a cancelled model stream gets to end before it is abandoned."""


class _Reading:
    """Shared by a model turn and the task reading its stream: set once the turn gave up on it."""

    abandoned = False


def _check_max_steps(max_steps: Any) -> None:
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(f"max_steps must be an int of at least 1, not {max_steps!r}")


def _add_tool(tools: dict[str, Tool], new: Tool, toolset: Toolset | None = None) -> None:
    if new.name in tools:
        source = f" (listed by {toolset!r})" if toolset is not None else ""
        raise ValueError(
            f"two tools are named {new.name!r}{source}: a model calls tools by name, so names must be "
            "unique (rename one with @nbagent.tool(name=...))"
        )
    tools[new.name] = new


class Agent(Source):
    """A tool-calling agent over any ``nbagent.models.Model``.

    Args:
        model: the language model.
        tools: ``Tool`` objects or plain typed functions (wrapped with ``@tool``).
        instructions: the system prompt.
        max_steps: how many model turns a run may take before it ends ``"max_steps"``.
        name: shown in the live view and the frames; defaults to ``"Agent"``.
        approve: which tool calls wait for a person's approval in every run of this agent: True,
            tool names, or a predicate on an ``ApprovalCall`` (besides the tools marked
            ``@tool(requires_approval=True)`` and the run's own ``approve=``).
    """

    supports_approvals = True
    """Its tool calls can wait for a person (``approve=``, ``@tool(requires_approval=True)``)."""

    framework = "nbagent"

    def __init__(
        self,
        model: Model,
        tools: Iterable[Tool | Callable[..., Any]] = (),
        instructions: str | None = None,
        max_steps: int = 10,
        name: str | None = None,
        approve: ApprovalPolicy = None,
    ) -> None:
        _check_max_steps(max_steps)
        self.approve = check_policy(approve)
        if not callable(getattr(model, "stream", None)):
            hint = f" (a model name such as {model!r})" if isinstance(model, str) else ""
            raise TypeError(
                f"Agent needs a model object, not {type(model).__name__}{hint}: pass e.g. "
                "nbagent.models.OpenAIChatModel('gpt-4.1-mini') or nbagent.models.ScriptedModel([...])"
            )
        if isinstance(tools, (str, bytes)) or callable(tools):
            raise TypeError("tools must be a list of tools or functions, e.g. tools=[word_count]")
        self.model = model
        self.toolsets: list[Toolset] = []
        self.tools: dict[str, Tool] = {}
        for t in tools:
            if isinstance(t, Toolset):  # an MCP server: its tools are listed as a run starts
                self.toolsets.append(t)
                continue
            t = t if isinstance(t, Tool) else tool(t)
            _add_tool(self.tools, t)
        self._own_tools = dict(self.tools)
        self.instructions = instructions
        self.max_steps = max_steps
        self.name = name or "Agent"
        self.memory: list[Message] = []
        self._prompt_estimate = PromptEstimate()  # the prompt size checked before each request

    @property
    def model_name(self) -> str:
        name = getattr(self.model, "name", None)
        return name if isinstance(name, str) and name else type(self.model).__name__

    def model_params(self) -> dict[str, Any]:
        """The model's request settings (``OpenAIChatModel(..., temperature=0)``), when it has any."""
        params = getattr(self.model, "params", None)
        return dict(params) if isinstance(params, dict) else {}

    def reset(self) -> None:
        """Forget past runs."""
        self.memory = [{"role": "system", "content": self.instructions}] if self.instructions else []

    def __repr__(self) -> str:
        return f"Agent(name={self.name!r}, model={self.model!r}, tools={list(self.tools)})"

    async def drive(
        self, task: str, ctx: RunContext, reset: bool = True, *, max_steps: int | None = None
    ) -> Any:
        """Run ``task`` to its end, reporting through ``ctx``. Returns the final answer.

        Runs of one agent take turns (``nbagent.runtime.turns``), so the memory stays a valid
        chat. ``max_steps`` overrides the agent's for this run.
        """
        if max_steps is not None:
            _check_max_steps(max_steps)
        try:
            return await self._drive(task, ctx, reset, max_steps or self.max_steps)
        finally:
            ctx.messages = [dict(m) for m in self.memory]
            # A copy: a later run of this agent with reset=False goes on in the same list.
            ctx.conversation = list(self.memory)

    def fork_data(self, conversation: Any, options: dict[str, Any]) -> dict[str, Any] | None:
        """The memory is chat messages already: JSON as it is."""
        return {"conversation": [dict(m) for m in conversation]}

    def fork_input(self, origin: ForkOrigin) -> list[Message]:
        """The memory as it was when step ``at_step`` sent its request (its ``fork_point`` is the
        memory's length then), with the edited tool results and the added user message."""
        messages = [dict(m) for m in origin.prefix()]
        if origin.tool_results:
            for m in messages:
                if m.get("role") == "tool" and m.get("tool_call_id") in origin.tool_results:
                    m["content"] = observation(origin.tool_results[m["tool_call_id"]])
        if origin.message is not None:
            messages.append({"role": "user", "content": origin.message})
        return messages  # type: ignore[return-value]

    async def _drive(self, task: str, ctx: RunContext, reset: bool, max_steps: int) -> Any:
        if self.toolsets:
            await self._list_toolsets()
        if ctx.fork is not None:  # a fork: the memory as it was at its step, task included
            self.memory = list(ctx.fork.input)
        else:
            if reset or not self.memory:
                self.reset()
            self.memory.append({"role": "user", "content": task})
        ctx.conversation = self.memory  # live: a fork of a step that has ended needs no wait
        for _ in range(max_steps):
            if ctx.scope.stop_after_step:
                raise AgentInterrupted("stopped after the step")
            ctx.start_step("action")
            text, calls = await self._model_turn(ctx)
            if not calls:
                ctx.finish_step(model_output=text, kind="final")
                ctx.set_result(text)
                return text
            await self._run_tools(ctx, calls)
            ctx.finish_step(model_output=text)
        raise MaxStepsReached(f"no final answer after {max_steps} steps")

    async def _list_toolsets(self) -> None:
        """The tools of each toolset (an MCP server) as this run starts: a server's list may have
        changed since the last run, and one that cannot start fails the run here, by name."""
        tools = dict(self._own_tools)
        for toolset in self.toolsets:
            for listed in await toolset.tools():
                _add_tool(tools, listed, toolset)
        self.tools = tools

    async def _model_turn(self, ctx: RunContext) -> tuple[str, list[ToolCall]]:
        """Stream one reply. The stream is read by a task of its own, so a model that swallows its
        cancel (a bare ``except`` in its retry loop) is abandoned after ``MODEL_GRACE_S`` like a
        stubborn tool, and whatever it yields later is dropped."""
        pieces: list[str] = []
        calls: list[ToolCall] = []
        reading = _Reading()
        ctx.fork_point(len(self.memory))  # a fork at this step is sent these messages
        ctx.model_starting(self._prompt_estimate.of(self.memory))
        if ctx.scope.interrupted:  # a budget refused this request: nothing is sent
            raise asyncio.CancelledError()
        # SystemExit and the like from a model must not leave its task: they would end the loop.
        reader = spawn_contained(
            self._read_reply(ctx, pieces, calls, reading),
            lambda exc: ModelError(f"{self.model_name}: {describe(exc)}"),
            name=f"model {self.model_name}",
        )
        try:
            await asyncio.wait({reader})
            if ctx.scope.interrupted:  # the reader saw the Stop first and stopped reading
                raise asyncio.CancelledError()
        except asyncio.CancelledError:
            await stop_within(reader, MODEL_GRACE_S)
            reading.abandoned = True
            self._keep_cut_text(pieces, "interrupted")
            raise
        if reader.cancelled():
            self._keep_cut_text(pieces, "cut short by an error")
            raise ModelError(f"{self.model_name}: the reply was cancelled inside the model, not by a Stop")
        exc = reader.exception()
        if exc is not None:
            self._keep_cut_text(pieces, "cut short by an error")
            if isinstance(exc, AgentError):
                raise exc
            raise ModelError(f"{self.model_name}: {describe(exc)}") from exc
        ctx.model_ended()
        calls = _unique_ids(calls)
        text = "".join(pieces)
        message: Message = {"role": "assistant", "content": text}
        if calls:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {
                        "name": c.name,
                        "arguments": observation(c.arguments),
                    },
                }
                for c in calls
            ]
        self.memory.append(message)
        return text, calls

    async def _read_reply(
        self, ctx: RunContext, pieces: list[str], calls: list[ToolCall], reading: _Reading
    ) -> None:
        specs = [t.spec for t in self.tools.values()]
        scope = ctx.scope
        async with aclosing(self.model.stream(list(self.memory), specs)) as parts:
            async for part in parts:
                if reading.abandoned:
                    return  # the run has moved on: nothing late reaches its record
                if isinstance(part, ModelText):
                    pieces.append(part.text)
                    ctx.text(part.text)
                elif isinstance(part, ToolCallDelta):
                    ctx.tool_arguments(part.arguments)
                elif isinstance(part, ToolCall):
                    calls.append(part)
                elif isinstance(part, ModelUsage):
                    ctx.usage(part.input_tokens, part.output_tokens, part.source)
                elif isinstance(part, ModelRetry):
                    ctx.retrying(part.attempt, part.delay_s, part.reason)
                if scope.interrupted:
                    # A Stop, or a budget this part crossed: read no further, even what the
                    # model has buffered already (a server's chunks arrive many to a packet).
                    return

    def _keep_cut_text(self, pieces: list[str], cut: str) -> None:
        """Keep what the model said before it was cut, so a continued run knows where it stopped."""
        if pieces:
            self.memory.append({"role": "assistant", "content": "".join(pieces) + f" [{cut}]"})

    def _wants_approval(self, ctx: RunContext, call: ToolCall) -> bool:
        found = self.tools.get(call.name)
        required = found is not None and found.requires_approval
        return ctx.approvals.wants(call.name, call.arguments, call.id, required=required) or policy_wants(
            self.approve, ApprovalCall(call.name, call.arguments, call.id)
        )

    async def _run_tools(self, ctx: RunContext, calls: list[ToolCall]) -> None:
        answered: set[str] = set()
        try:
            # Every call of the step that needs approval is pending at once: decided together.
            waiting = {call.id for call in calls if self._wants_approval(ctx, call)}
            for call in calls:
                if call.id in waiting:
                    ctx.tool_started(call.id, call.name, call.arguments)
                    ctx.approvals.request(ctx, call.id, call.name, call.arguments)
            if ctx.scope.interrupted:  # a budget (max_tool_calls) stopped the run: nothing runs
                raise asyncio.CancelledError()
            for call in calls:
                stopping = False
                try:
                    if call.id in waiting:
                        decision = await ctx.approvals.wait(ctx, call.id)
                        if not decision.approved:
                            ctx.tool_finished(call.id, "denied", error=decision.reason or "denied")
                            result = denial_observation(decision.reason)
                        else:
                            result = await self._run_tool(ctx, call, started=True)
                    else:
                        result = await self._run_tool(ctx, call)
                except ToolFinishedWhileStopping as finished:  # the Stop came, but so did its result
                    result, stopping = observation(finished.result), True
                self.memory.append({"role": "tool", "tool_call_id": call.id, "content": result})
                answered.add(call.id)
                if stopping or ctx.scope.interrupted:  # a Stop that landed as the tool returned stops
                    raise asyncio.CancelledError()
        finally:
            # Every tool call the model made needs an answer, or the next request is invalid.
            for call in calls:
                if call.id not in answered:
                    self.memory.append(
                        {"role": "tool", "tool_call_id": call.id, "content": INTERRUPTED_TOOL_RESULT}
                    )

    async def _run_tool(self, ctx: RunContext, call: ToolCall, started: bool = False) -> str:
        """Run one tool call; return the observation the model will see. ``started``: the call
        was reported already (it waited for its approval)."""
        arguments: Any = call.arguments
        if not started:
            ctx.tool_started(call.id, call.name, arguments)
            if ctx.scope.interrupted:  # a budget (max_tool_calls) stopped the run: it does not run
                ctx.tool_finished(call.id, "cancelled", error="interrupted")
                raise asyncio.CancelledError()
        try:
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments) if arguments.strip() else {}
                except json.JSONDecodeError as exc:
                    raise ValueError(
                        f"the arguments are not valid JSON ({exc.msg}): {call.arguments!r}"
                    ) from None
            if not isinstance(arguments, dict):
                kind = {list: "a JSON list", str: "a JSON string"}.get(
                    type(arguments), type(arguments).__name__
                )
                raise ValueError(
                    f"the arguments must be a JSON object of named parameters, not {kind}: "
                    f"{observation(call.arguments)[:200]}"
                )
            found = self.tools.get(call.name)
            if found is None:
                raise LookupError(
                    f"unknown tool {call.name!r}; the tools are: {', '.join(self.tools) or 'none'}"
                )
            with ctx.calling(call.id):
                result = await found.acall(arguments)
        except ToolFinishedWhileStopping as finished:  # it did its work: the record says so
            ctx.tool_finished(call.id, "ok", result=finished.result)
            raise
        except ToolAbandoned:
            ctx.tool_finished(call.id, "abandoned", error="did not stop when interrupted; abandoned")
            raise asyncio.CancelledError() from None
        except AgentInterrupted as exc:
            if not ctx.scope.interrupted:  # e.g. raise_for_status() on another run: not our Stop
                error = describe(exc)
                ctx.tool_finished(call.id, "error", error=error)
                return f"Error calling {call.name}: {error}"
            ctx.tool_finished(call.id, "cancelled", error="interrupted")
            raise asyncio.CancelledError() from None
        except asyncio.CancelledError:
            ctx.tool_finished(call.id, "cancelled", error="interrupted")
            raise
        except Exception as exc:
            error = describe(exc)
            ctx.tool_finished(call.id, "error", error=error)
            return f"Error calling {call.name}: {error}"
        ctx.tool_finished(call.id, "ok", result=result)
        return observation(result)


def _unique_ids(calls: list[ToolCall]) -> list[ToolCall]:
    """The calls with ids unique within the step: a model (or server) may repeat an id, and a
    call's id is how its result, its record and a person's approval find it. A repeat becomes
    ``id#2``, ``id#3``... in the record and in what the model is sent back."""
    seen: set[str] = set()
    unique = []
    for call in calls:
        new_id, n = call.id, 2
        while new_id in seen:
            new_id, n = f"{call.id}#{n}", n + 1
        seen.add(new_id)
        unique.append(call if new_id == call.id else dataclasses.replace(call, id=new_id))
    return unique
