"""Run pydantic-ai agents (``pydantic_ai.Agent`` and any ``AbstractAgent``) under nbagent.

``nbagent.start(agent, task)`` on a pydantic-ai agent gets the same live view, Stop button and
records as a native agent. The run is the real ``agent.iter(task, ...)`` on the user's agent,
driven node by node on the runner's loop through pydantic-ai's public streaming API: a step is one
model request (``ModelRequestNode.stream``: its text streams into the view, its usage closes it)
plus the tool calls that answer it (``CallToolsNode.stream``: each call with its arguments, its
return, or the retry prompt the model sees when the tool asked for one). Nothing on the agent is
wrapped or swapped; ``infer_name=False`` keeps the agent's ``name`` as it is.

How a Stop lands. pydantic-ai is async and reacts to the cancellation of the task that drives
it: ``interrupt("now")`` cancels the run's task (``nbagent.runtime.cancel``), which tears the model
stream down (an HTTP model drops its connection) and cancels the tools in flight; pydantic-ai
then writes what was done into the run's messages (the cut reply marked ``interrupted``). The
record keeps every finished step and, for the cut request, the usage its stream had reported, if
any (pydantic-ai's own ``RunCancelled`` keeps only the finished requests'). pydantic-ai has no
"after this step" mode, so ``interrupt("after_step")`` is a check before each model request: the
step in progress, tools included, finishes and the next request is never made.

Memory. pydantic-ai agents are stateless; nbagent keeps the messages each run ended with beside
the agent (``nbagent.runtime.turns``), so ``reset=False`` passes them as the next run's
``message_history`` (pydantic-ai closes a cut tool call itself). An explicit ``message_history``
wins. Fresh runs of one agent run at once, side by side; a continued run waits (reported as
queued) for the run it continues.

End states. A ``UsageLimits(request_limit=...)`` reached is ``"max_steps"``; any other limit of
``usage_limits`` crossed is ``"limit"``, its ``stop_reason`` the field's name (``total_tokens_limit``)
and its error pydantic-ai's message; a tool that raised, or a model error, is ``"error"`` with
pydantic-ai's own message (a model API error as ``ModelError``).

Model and cost. A run given ``model=`` uses that model: the record's ``model`` and a
``Limits(max_cost_usd=...)`` budget take its name and price (``model_name_for``), not the agent's.

``Limits(max_tool_calls=n)`` and a step with several calls. pydantic-ai validates and announces
every call of a step (``FunctionToolCallEvent``) before it runs any of them, then runs them
together, and nbagent sees no event when one call actually begins. The limit trips on the first
announced call over the budget, and the run stops right there, before pydantic-ai runs any call of
that step: all of the step's calls are ``"cancelled"`` and none runs, those within the budget
included (with ``max_tool_calls=1`` and two calls in the first step, neither runs). pydantic-ai's
own ``UsageLimits(tool_calls_limit=...)`` also refuses a step's calls all together.
"""

from __future__ import annotations

import asyncio
from typing import Any

from nbagent.adapters import instance_of
from nbagent.adapters.pydantic_ai_records import (
    agent_name,
    chat_messages,
    model_name,
    records_from_pydantic_ai,
    require_pydantic_ai,
    response_text,
    tool_outcome,
    usage_of,
)
from nbagent.context import RunContext
from nbagent.errors import AgentInterrupted, MaxStepsReached, ModelError, describe

__all__ = ["PydanticAISource", "is_pydantic_ai_agent", "records_from_pydantic_ai"]

"""The messages each agent's last nbagent run ended with (for ``reset=False``)."""


def is_pydantic_ai_agent(obj: Any) -> bool:
    """True for a pydantic-ai agent. Never imports pydantic-ai itself."""
    return instance_of(obj, "pydantic_ai.agent", "AbstractAgent")


class _Step:
    """What nbagent reports of one pydantic-ai run, as its nodes run. On the runner's loop."""

    def __init__(self, ctx: RunContext, limits: Any) -> None:
        self.ctx = ctx
        self.limits = limits
        self.response: Any = None
        self.function_calls = 0
        self.open_calls: dict[str, str] = {}
        """pydantic-ai tool call id -> nbagent call id, for calls still running."""

    async def request(self, node: Any, run: Any) -> None:
        """One model request: a new step whose text streams in; usage once the stream ends (or is cut)."""
        if self.limits is not None:  # a request the limits forbid is never a step (pydantic-ai's own check)
            self.limits.check_before_request(run.usage)
        self.ctx.start_step("action")
        self.response, self.function_calls = None, 0
        stream = None
        try:
            async with node.stream(run.ctx) as stream:
                async for event in stream:
                    self._text_of(event)
        except BaseException:
            partial = getattr(stream, "response", None) if stream is not None else None
            if partial is not None:
                tokens_in, tokens_out = usage_of(partial.usage)
                if tokens_in is not None:  # the cut stream had reported usage: keep it
                    self.ctx.usage(tokens_in, tokens_out, "reported")
            raise
        self.response = stream.response
        self.ctx.model_ended()
        tokens_in, tokens_out = usage_of(self.response.usage)
        self.ctx.usage(tokens_in, tokens_out, "unknown" if tokens_in is None else "reported")

    def _text_of(self, event: Any) -> None:
        kind = getattr(event, "event_kind", None)
        text = None
        if kind == "part_start" and getattr(event.part, "part_kind", None) == "text":
            text = event.part.content
        elif kind == "part_delta" and getattr(event.delta, "part_delta_kind", None) == "text":
            text = event.delta.content_delta
        if text:
            self.ctx.text(text)

    async def tools(self, node: Any, run: Any) -> None:
        """The tool calls answering the step's request; then the step ends."""
        try:
            async with node.stream(run.ctx) as events:
                async for event in events:
                    self._tool_event(event)
                    if self.ctx.scope.interrupted:  # e.g. max_tool_calls tripped by this call: stop
                        self._not_run()  # before pydantic-ai runs any announced call
                        raise asyncio.CancelledError()
        except Exception as exc:  # a tool that raised ends the run: its call says so
            for call_id in list(self.open_calls.values()):
                self.ctx.tool_finished(call_id, "error", error=describe(exc))
            self.open_calls.clear()
            raise
        self.finish()

    def _not_run(self) -> None:
        """The calls announced but not begun when the run stopped: cancelled."""
        for call_id in self.open_calls.values():
            self.ctx.tool_finished(call_id, "cancelled", error="interrupted")
        self.open_calls.clear()

    def _tool_event(self, event: Any) -> None:
        kind = getattr(event, "event_kind", None)
        if kind in ("function_tool_call", "output_tool_call"):
            part = event.part
            call_id = f"{self.ctx.step}:{part.tool_call_id}"
            self.open_calls[part.tool_call_id] = call_id
            if kind == "function_tool_call":
                self.function_calls += 1
            self.ctx.tool_started(call_id, part.tool_name, part.args_as_dict())
        elif kind in ("function_tool_result", "output_tool_result"):
            part = event.part
            call_id = self.open_calls.pop(part.tool_call_id, None)
            if call_id is None:
                return
            status, result, error = tool_outcome(part)
            self.ctx.tool_finished(call_id, status, result, error)

    def finish(self) -> None:
        if self.response is None:
            return
        kind = "action" if self.function_calls else "final"
        self.ctx.finish_step(model_output=response_text(self.response), kind=kind)
        self.response = None


class PydanticAISource:
    """An nbagent source for a pydantic-ai agent; ``nbagent.start`` makes one for you."""

    takes_turns = False
    """The agent keeps nothing between runs: only a continued run waits (``nbagent.runtime.turns``)."""

    def __init__(self, agent: Any) -> None:
        require_pydantic_ai()
        if not is_pydantic_ai_agent(agent):
            raise TypeError(f"not a pydantic-ai agent: {type(agent).__name__}")
        self.agent = agent
        self.name = agent_name(agent)

    @property
    def model_name(self) -> str:
        return model_name(getattr(self.agent, "model", None))

    def model_name_for(self, options: dict[str, Any]) -> str:
        """The model a run with these ``drive`` options uses: its ``model=``, else the agent's own.
        The run's record and a cost budget use this name."""
        model = options.get("model")
        return self.model_name if model is None else model_name(model)

    def __repr__(self) -> str:
        return f"PydanticAISource({self.name}, model={self.model_name!r})"

    async def drive(
        self,
        task: str,
        ctx: RunContext,
        reset: bool = True,
        *,
        deps: Any = None,
        message_history: list[Any] | None = None,
        model_settings: Any = None,
        usage_limits: Any = None,
        model: Any = None,
        output_type: Any = None,
        instructions: Any = None,
        toolsets: Any = None,
        metadata: Any = None,
    ) -> Any:
        """Run ``task`` with ``agent.iter``, reporting through ``ctx``; returns the run's output.

        The keywords are ``agent.iter``'s own and pass through unchanged.
        """
        given = {
            "deps": deps, "model_settings": model_settings, "usage_limits": usage_limits, "model": model,
            "output_type": output_type, "instructions": instructions, "toolsets": toolsets,
            "metadata": metadata,
        }  # fmt: skip
        options = {name: value for name, value in given.items() if value is not None}
        history = message_history
        if history is None and not reset:
            history = ctx.kept_history
        return await self._run(task, ctx, history, options)

    async def _run(self, task: str, ctx: RunContext, history: Any, options: dict[str, Any]) -> Any:
        from pydantic_ai import Agent
        from pydantic_ai.exceptions import ModelAPIError, UsageLimitExceeded

        step = _Step(ctx, options.get("usage_limits"))
        run = None
        try:
            async with self.agent.iter(task, message_history=history, infer_name=False, **options) as run:
                async for node in run:
                    if Agent.is_model_request_node(node):
                        step.finish()  # a request that follows one without tools (an output retry)
                        if ctx.step and ctx.scope.stop_after_step:
                            raise AgentInterrupted("stopped after the step")
                        await step.request(node, run)
                    elif Agent.is_call_tools_node(node):
                        await step.tools(node, run)
                step.finish()
            return run.result.output if run.result is not None else None
        except UsageLimitExceeded as exc:
            limits = options.get("usage_limits")
            limit = getattr(limits, "request_limit", None)
            if run is not None and limit is not None and run.usage.requests >= limit:
                raise MaxStepsReached(str(exc)) from exc
            trip = getattr(ctx.scope, "trip", None)
            if trip is None:
                raise
            # a budget crossed: the run ends "limit", the limit's name as its stop reason
            trip(_crossed(limits, run.usage if run is not None else None), describe(exc), mode="after_step")
            raise AgentInterrupted(describe(exc)) from exc
        except ModelAPIError as exc:
            raise ModelError(f"{self.model_name_for(options)}: {describe(exc)}") from exc
        finally:
            if run is not None:
                messages = run.all_messages()
                ctx.keep_history(messages)
                ctx.messages = chat_messages(messages)


def _crossed(limits: Any, usage: Any) -> str:
    """The name of the ``UsageLimits`` field that a run's usage crossed (``usage_limits`` if unsure)."""
    for field, used in (
        ("total_tokens_limit", "total_tokens"),
        ("input_tokens_limit", "input_tokens"),
        ("output_tokens_limit", "output_tokens"),
        ("tool_calls_limit", "tool_calls"),
        ("cost_limit", "cost"),
    ):
        limit, value = getattr(limits, field, None), getattr(usage, used, None)
        if limit is not None and value is not None and value >= limit:
            return field
    return "usage_limits"
