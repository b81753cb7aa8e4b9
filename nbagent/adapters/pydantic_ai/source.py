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
record keeps every finished step; the cut request's usage is unknown (NA), as pydantic-ai's own
``RunCancelled`` keeps only the finished requests' usage. pydantic-ai has no
"after this step" mode, so ``interrupt("after_step")`` is a check before each model request: the
step in progress, tools included, finishes and the next request is never made.

Memory. pydantic-ai agents are stateless; nbagent keeps the messages each run ended with beside
the agent (``nbagent.runtime.turns``), so ``reset=False`` passes them as the next run's
``message_history`` (pydantic-ai closes a cut tool call itself). An explicit ``message_history``
wins. Fresh runs of one agent run at once, side by side; a continued run waits (reported as
queued) for the run it continues. A run that ended at its request limit keeps the tool returns it
had gathered, so it can be continued.

What a run takes. ``nbagent.start(agent, task, **options)`` takes every keyword the installed
pydantic-ai's ``agent.run`` takes (read from its signature), and passes them on unchanged; the task
may be a ``str``, a sequence of user content (text, ``ImageUrl``, ``BinaryContent``...), or ``None``
(with ``message_history`` or ``deferred_tool_results``). An ``event_stream_handler`` (the run's or
the agent's own) gets every event, as under ``agent.run``; a model that cannot stream is asked with
``model.request``, as ``agent.run`` asks it (``nbagent.adapters.pydantic_ai.stream``).

End states. A ``UsageLimits(request_limit=...)`` reached is ``"max_steps"``; any other limit of
``usage_limits`` crossed is ``"limit"``, its ``stop_reason`` the field's name (``total_tokens_limit``)
and its error pydantic-ai's message; a tool that raised, or a model error, is ``"error"`` with
pydantic-ai's own message (a model API error as ``ModelError``). A run the agent's own code
cancels (``ctx.cancel()`` in a tool, the run's ``cancellation_token``) is ``"interrupted"`` with
``stop_reason="agent"``.

Approvals. Deferred calls that need approval (``requires_approval=True``, ``ApprovalRequired``)
show in nbagent's approval panel and the run goes on with the decisions, in the same run. A run
that no view shows (``display=False``: a script, a batch, CI) and has no ``approve=`` has no one to
decide: it ends as ``agent.run`` ends, its output (and ``run.result.output``) the
``DeferredToolRequests`` to resume with ``deferred_tool_results``. nbagent's
``approve=`` policy maps onto the same path: the run's toolset is wrapped for that run only in
pydantic-ai's ``ApprovalRequiredToolset``.

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

import functools
import inspect
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from nbagent.adapters import instance_of
from nbagent.adapters.pydantic_ai.clients import own_client
from nbagent.adapters.pydantic_ai.records import (
    agent_name,
    chat_messages,
    content_text,
    model_name,
    records_from_pydantic_ai,
    require_pydantic_ai,
)
from nbagent.adapters.pydantic_ai.stream import Steps
from nbagent.context import RunContext
from nbagent.errors import AgentInterrupted, ForkError, MaxStepsReached, ModelError, describe
from nbagent.runtime.source import Source

if TYPE_CHECKING:
    from nbagent.forks.origins import ForkOrigin

__all__ = ["PydanticAISource", "is_pydantic_ai_agent", "records_from_pydantic_ai"]


def is_pydantic_ai_agent(obj: Any) -> bool:
    """True for a pydantic-ai agent. Never imports pydantic-ai itself."""
    return instance_of(obj, "pydantic_ai.agent", "AbstractAgent")


@functools.cache
def run_keywords() -> tuple[str, ...]:
    """The keywords the installed pydantic-ai's ``agent.run`` takes (``agent.iter``'s and
    ``event_stream_handler``)."""
    from pydantic_ai.agent import AbstractAgent

    parameters = inspect.signature(AbstractAgent.run).parameters.values()
    return tuple(p.name for p in parameters if p.kind is p.KEYWORD_ONLY)


def _drive_signature() -> inspect.Signature:
    """``drive``'s signature as ``check_options`` reads it: one keyword-only option per run keyword,
    so an option pydantic-ai does not take is refused when the run starts, naming those it takes."""
    head = list(inspect.signature(PydanticAISource.drive).parameters.values())[:4]
    options = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None) for n in run_keywords()]
    return inspect.Signature(head + options)


class PydanticAISource(Source):
    """An nbagent source for a pydantic-ai agent; ``nbagent.start`` makes one for you."""

    takes_turns = False
    """The agent keeps nothing between runs: only a continued run waits (``nbagent.runtime.turns``)."""
    supports_approvals = True
    """``approve=`` holds calls in the approval panel (through pydantic-ai's deferred tools)."""
    framework = "pydantic-ai"

    def __init__(self, agent: Any) -> None:
        require_pydantic_ai()
        if not is_pydantic_ai_agent(agent):
            raise TypeError(f"not a pydantic-ai agent: {type(agent).__name__}")
        self.agent = agent
        self.name = agent_name(agent)
        if "__signature__" not in vars(PydanticAISource.drive):
            PydanticAISource.drive.__signature__ = _drive_signature()  # type: ignore[attr-defined]

    @property
    def model_name(self) -> str:
        return model_name(getattr(self.agent, "model", None))

    def model_name_for(self, options: dict[str, Any]) -> str:
        """The model a run with these ``drive`` options uses: its ``model=``, else the agent's own.
        The run's record and a cost budget use this name."""
        model = options.get("model")
        return self.model_name if model is None else model_name(model)

    def task_text(self, task: Any) -> str:
        """The task as the record shows it; pydantic-ai takes a ``str``, a sequence of user content
        (text, images, documents...), or ``None`` (with ``message_history``)."""
        if task is None or isinstance(task, str):
            return task or ""
        if isinstance(task, Sequence) and not isinstance(task, (bytes, bytearray)):
            return content_text(task)
        raise TypeError(
            "a pydantic-ai task is a str or a sequence of user content (text, ImageUrl, BinaryContent...), "
            f"not {type(task).__name__}"
        )

    def check_run(self, options: dict[str, Any], reset: bool = True) -> None:
        """Refuse an agent whose MCP toolset is running on another loop (``mcp``)."""
        from nbagent.adapters.pydantic_ai.mcp import refusal

        refused = refusal(self.agent, options)
        if refused:
            raise ValueError(refused)

    def __repr__(self) -> str:
        return f"PydanticAISource({self.name}, model={self.model_name!r})"

    async def drive(self, task: Any, ctx: RunContext, reset: bool = True, **options: Any) -> Any:
        """Run ``task`` with ``agent.iter``, reporting through ``ctx``; returns the run's output.

        ``options`` are ``agent.run``'s own keywords (``run_keywords``) and pass through unchanged.
        """
        options = {name: value for name, value in options.items() if value is not None}
        if ctx.fork is not None:  # a fork: the history as step k's request had it (fork_input)
            task, options["message_history"] = ctx.fork.input
        elif options.get("message_history") is None and not reset:
            options["message_history"] = ctx.kept_history
        return await self._run(task, ctx, options)

    @classmethod
    def warm_up(cls) -> None:
        """Build ``ModelMessagesTypeAdapter``'s serializer (about 50 ms, on its first use), which
        ``fork_data`` needs as each run ends."""
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        ModelMessagesTypeAdapter.dump_python([], mode="json")

    def fork_data(self, conversation: Any, options: dict[str, Any]) -> dict[str, Any] | None:
        """The messages as pydantic-ai's own JSON (``ModelMessagesTypeAdapter``)."""
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        return {"conversation": ModelMessagesTypeAdapter.dump_python(list(conversation), mode="json")}

    def fork_input(self, origin: ForkOrigin) -> tuple[Any, list[Any]]:
        """``(user_prompt, message_history)`` for ``agent.iter``: the messages up to and with
        step ``at_step``'s request (pydantic-ai sends a history that ends with a request as the
        next request), its tool returns edited and the message added as a ``UserPromptPart``;
        past the last step, the whole history and the message as the new prompt, as
        ``reset=False`` does."""
        import dataclasses

        from pydantic_ai.messages import ModelMessagesTypeAdapter, ToolReturnPart, UserPromptPart

        history = origin.prefix(ModelMessagesTypeAdapter.validate_python)
        if origin.point is None:
            return origin.message, history
        last = history[-1] if history else None
        if last is None or last.kind != "request":
            where = f"step {origin.at_step} of run {origin.record.run_id}"
            raise ForkError(f"{where} has no request in its history to send again")
        if origin.tool_results or origin.message is not None:
            # the record names a call "<step>:<pydantic-ai's id>" (ids are unique per run there)
            edits = {key.partition(":")[2]: value for key, value in origin.tool_results.items()}
            parts = [
                dataclasses.replace(p, content=edits[p.tool_call_id])
                if isinstance(p, ToolReturnPart) and p.tool_call_id in edits
                else p
                for p in last.parts
            ]
            if origin.message is not None:
                parts.append(UserPromptPart(origin.message))
            history[-1] = dataclasses.replace(last, parts=parts)
        return None, history

    def _capabilities(self, options: dict[str, Any], steps: Steps) -> list[Any]:
        """The run's capabilities: the user's, then nbagent's approvals (asked last, so a handler of
        the user's decides first). A run that no view shows and that has no ``approve=`` has no one
        to decide: its deferred calls end it with ``DeferredToolRequests``, as ``agent.run`` does."""
        from pydantic_ai.capabilities import HandleDeferredToolCalls

        from nbagent.adapters.pydantic_ai.approvals import approval_policy

        policy = approval_policy(steps.ctx.approvals)
        if policy is None and not steps.ctx.shown:
            return list(options.get("capabilities", ()))
        mine = [HandleDeferredToolCalls(handler=steps.decide)]
        if policy is not None:
            mine.insert(0, policy)
        return [*options.get("capabilities", ()), *mine]

    async def _run(self, task: Any, ctx: RunContext, options: dict[str, Any]) -> Any:
        from pydantic_ai import Agent
        from pydantic_ai.exceptions import ModelAPIError, RunCancelled, UsageLimitExceeded

        handler = options.pop("event_stream_handler", None) or getattr(
            self.agent, "event_stream_handler", None
        )
        steps = Steps(ctx, options.get("usage_limits"), handler)
        options["capabilities"] = self._capabilities(options, steps)
        options.setdefault("infer_name", False)  # the agent's name stays as it is
        run = pending = None
        failed = False
        model = options.get("model") or self.agent.model
        try:
            async with (
                own_client(model) as for_run,
                self.agent.iter(task, **_using(options, model, for_run)) as run,
            ):
                steps.begin(run)
                ctx.conversation = run.ctx.state.message_history  # live: forks of ended steps
                async for node in run:
                    if Agent.is_model_request_node(node):
                        pending = node.request
                        steps.finish()  # the previous step: its tools ran, or an output retry follows
                        if ctx.step and ctx.scope.stop_after_step:
                            raise AgentInterrupted("stopped after the step")
                        await steps.request(node, run)
                    elif Agent.is_call_tools_node(node):
                        await steps.tools(node, run)
                    elif Agent.is_end_node(node):
                        steps.deferred(node.data.output)
                        steps.finish(final=True)
                steps.finish()
            ctx.set_result(run.result)  # the ``AgentRunResult`` that ``agent.run`` returns
            return run.result.output if run.result is not None else None
        except UsageLimitExceeded as exc:
            if run is not None:  # a whole reply the limit tripped on (not streamed) is the step's
                steps.tripped_on(run.all_messages())
            limits = steps.limits
            limit = getattr(limits, "request_limit", None)
            if run is not None and limit is not None and run.usage.requests >= limit:
                raise MaxStepsReached(str(exc)) from exc
            trip = getattr(ctx.scope, "trip", None)
            if trip is None:
                raise
            # a budget crossed: the run ends "limit", the limit's name as its stop reason
            trip(_crossed(limits, run.usage if run is not None else None), describe(exc), mode="after_step")
            raise AgentInterrupted(describe(exc)) from exc
        except RunCancelled as exc:  # the agent's own code cancelled its run (a Stop cancels the task)
            raise AgentInterrupted(describe(exc)) from exc
        except ModelAPIError as exc:
            failed = True
            # (a FunctionModel's name ends in ":", "function:reply:")
            raise ModelError(f"{self.model_name_for(options).rstrip(':')}: {describe(exc)}") from exc
        except Exception as exc:
            failed = not isinstance(exc, AgentInterrupted)
            raise
        finally:
            if run is not None:
                # (only nbagent's own streaming leaves that cut reply: a run with a handler keeps it)
                messages = _continuable(run.all_messages(), pending, failed and handler is None)
                ctx.keep_history(messages)
                ctx.messages = chat_messages(messages)
                ctx.conversation = messages


def _using(options: dict[str, Any], model: Any, for_run: Any) -> dict[str, Any]:
    """``options`` with the run's own copy of ``model`` when it got one (``pydantic_ai.clients``)."""
    return options if for_run is model else {**options, "model": for_run}


def _continuable(messages: list[Any], pending: Any, failed: bool) -> list[Any]:
    """The run's messages, with its last request if pydantic-ai never sent it (a request limit
    reached, a model that failed): its tool returns answer the model's last calls, so a continued
    run can go on from there. A request nbagent streamed that failed (``failed``) before any of its
    reply came leaves an empty "interrupted" response, which ``agent.run`` (not streamed) never
    has: it is dropped."""
    last = messages[-1] if messages else None
    if (
        failed
        and last is not None
        and last.kind == "response"
        and last.state == "interrupted"
        and not last.parts
    ):
        messages = messages[:-1]
    if pending is not None and (not messages or messages[-1].kind == "response") and pending not in messages:
        messages.append(pending)
    return messages


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
