"""What nbagent reports of one pydantic-ai run as its nodes run: steps, text, tool calls, usage,
approvals. Used by ``nbagent.adapters.pydantic_ai.source``, on the runner's loop only.

A step is one model request plus the tool calls that answer it. Its text streams in when the
model can stream (``ModelRequestNode.stream``); a model that cannot (a ``FunctionModel`` without
``stream_function``) is run as pydantic-ai's own ``agent.run`` runs it, with ``model.request``,
and the step gets its whole reply at once. Tool calls come from ``CallToolsNode.stream``, which
needs no model streaming.

A run with a token limit in its ``UsageLimits`` is not streamed either (``streams_as_agent_run``),
so its limit trips where ``agent.run``'s does: once the whole reply is in, not mid-reply.

Usage. A step's usage is its model response's (``RequestUsage``); a reply cut by a Stop has
unknown usage (a stream's partial count, such as the ``output_tokens=1`` an Anthropic-style
message-start event carries, is not the reply's usage). Usage that a tool adds to the run
(``ctx.usage.incr``, an agent it delegates to with ``usage=ctx.usage``) goes to the step whose
tools added it, so the run's totals are pydantic-ai's own ``RunUsage``.

Calls pydantic-ai refused before running them (``UsageLimits(tool_calls_limit=...)``, a retry
over the budget) never get a call event; they are taken from the model's response and recorded
``cancelled``, with the reason. Calls a run hands back to its caller (its output a
``DeferredToolRequests``: a tool that raised ``CallDeferred``, an approval nothing here decided)
are ``"deferred"``: the caller resumes them with ``deferred_tool_results``.

A run that starts with calls (``deferred_tool_results``, or a history that ends in calls) starts
with a ``CallToolsNode``: those calls get a step of their own, with no model request in it (the
response, its text and its usage belong to the run that made it).

Approvals. A deferred call that needs approval (``requires_approval=True``, ``ApprovalRequired``,
or nbagent's ``approve=`` policy) reaches pydantic-ai's ``HandleDeferredToolCalls`` capability,
which nbagent adds to each run: the calls go to the run's approval panel (``ctx.approvals``), and
the decisions go back as ``DeferredToolResults``, so the run goes on in the same nbagent run.
"""

from __future__ import annotations

import asyncio
from typing import Any

from nbagent.adapters.pydantic_ai.records import response_text, tool_calls_of, tool_outcome, usage_of
from nbagent.context import RunContext
from nbagent.errors import describe
from nbagent.guardrails.approvals import denial_observation


def can_stream(model: Any) -> bool:
    """True when ``model`` implements ``request_stream`` (wrappers are asked about what they wrap)."""
    from pydantic_ai.models import Model
    from pydantic_ai.models.fallback import FallbackModel
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.models.wrapper import WrapperModel

    if isinstance(model, FunctionModel):
        return model.stream_function is not None
    if isinstance(model, FallbackModel) and type(model).request_stream is FallbackModel.request_stream:
        return all(can_stream(m) for m in model.models)
    if isinstance(model, WrapperModel) and type(model).request_stream is WrapperModel.request_stream:
        return can_stream(model.wrapped)
    return type(model).request_stream is not Model.request_stream


def streams_as_agent_run(model: Any, limits: Any) -> bool:
    """True when nbagent may stream a request that ``agent.run`` (without a handler) would send
    unstreamed, and the run ends the same: the model can stream, and no token limit is set. A
    streamed reply is checked against token limits as it comes (pydantic-ai cuts it where its
    count crosses the limit), an unstreamed one once it is whole; so a run with a token limit is
    asked as ``agent.run`` asks it, and its text comes at once rather than word by word."""
    if not can_stream(model):
        return False
    return not (limits is not None and limits.has_token_limits()) or not can_request(model)


def can_request(model: Any) -> bool:
    """False for a model that can only stream (a ``FunctionModel`` with only a ``stream_function``):
    ``agent.run`` cannot run it without a handler, so its users stream it."""
    from pydantic_ai.models.function import FunctionModel

    return not (isinstance(model, FunctionModel) and model.function is None)


DEFERRED_CALL = "deferred: the caller runs it and resumes the run with deferred_tool_results"
DEFERRED_APPROVAL = "deferred: waits for the caller's approval (deferred_tool_results)"


class _Observed:
    """The node's event stream as the user's ``event_stream_handler`` sees it: every event it
    reads is reported to nbagent first; everything else is the stream's own (``response``...)."""

    def __init__(self, stream: Any, observe: Any) -> None:
        self._stream, self._observe = stream, observe

    async def __aiter__(self) -> Any:
        async for event in self._stream:
            self._observe(event)
            yield event

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class Steps:
    """The steps of one pydantic-ai run, reported through ``ctx`` as its nodes run."""

    def __init__(self, ctx: RunContext, limits: Any, handler: Any) -> None:
        self.ctx = ctx
        self.limits = limits
        self.handler = handler
        """The run's ``event_stream_handler`` (the user's, or the agent's own): it gets every node's
        events, and its presence makes the run stream as ``agent.run`` does."""
        self.response: Any = None
        self.responded = False
        self.open_calls: dict[str, str] = {}
        """pydantic-ai tool call id -> nbagent call id, for calls announced and not yet answered."""
        self.reported: set[str] = set()
        """pydantic-ai tool call ids of the step that nbagent has reported."""
        self.denied: dict[str, str] = {}
        """pydantic-ai tool call id -> the reason nbagent's approval panel denied it with."""
        self.counted = (0, 0)
        """(input, output) tokens of the run's usage the steps account for so far."""
        self.open = False
        """A step is open (a request started it, or the calls a run started with)."""
        self.resumed = False
        """The open step holds the calls the run started with: no model request of this run."""

    def begin(self, run: Any) -> None:
        """The run's usage before its first request (``usage=`` carries earlier runs' usage in),
        and the limits it runs under: pydantic-ai's own, its defaults when none were given
        (``UsageLimits()``: a request limit of 50)."""
        self.counted = (run.usage.input_tokens or 0, run.usage.output_tokens or 0)
        self.limits = getattr(run.ctx.deps, "usage_limits", None) or self.limits

    async def request(self, node: Any, run: Any) -> None:
        """A model request starts a step; its text streams in when the model can stream."""
        if self.limits is not None:  # a request the limits forbid is never a step (pydantic-ai's own check)
            self.limits.check_before_request(run.usage)
        self._open(None)
        # The step's request is sent with the messages so far: a fork at this step sends those.
        self.ctx.fork_point(len(run.ctx.state.message_history) + 1)
        if self.handler is None and not streams_as_agent_run(run.ctx.deps.model, self.limits):
            return  # ``model.request`` runs when the loop advances; the reply comes with the next node
        from pydantic_ai.exceptions import UsageLimitExceeded

        stream = None
        try:
            async with node.stream(run.ctx) as stream:
                await self._consume(stream, run, self._text_of)
        except UsageLimitExceeded:  # checked once the whole reply is in: its usage counts
            if stream is not None:
                self.reply(stream.response)
            raise
        self.reply(stream.response)

    def reply(self, response: Any) -> None:
        """The step's whole model response: its usage closes the model call."""
        if self.responded or response is None:
            return
        self.response, self.responded = response, True
        self.ctx.model_ended()
        tokens_in, tokens_out = usage_of(response.usage)
        self.ctx.usage(tokens_in, tokens_out, "unknown" if tokens_in is None else "reported")
        self.counted = (self.counted[0] + (tokens_in or 0), self.counted[1] + (tokens_out or 0))

    def tripped_on(self, messages: list[Any]) -> None:
        """A usage limit tripped: a reply that came whole (unstreamed) and was never reported,
        the last of ``messages``, is the open step's, so its usage counts as ``agent.run``'s."""
        last = messages[-1] if messages else None
        if self.open and not self.responded and last is not None and last.kind == "response":
            self.reply(last)

    async def _consume(self, stream: Any, run: Any, observe: Any) -> None:
        if self.handler is None:
            async for event in stream:
                observe(event)
            return
        from pydantic_ai._agent_graph import build_run_context

        observed = _Observed(stream, observe)
        await self.handler(build_run_context(run.ctx), observed)
        async for _ in observed:  # what the handler left unread, as ``agent.run`` drains it
            pass

    def _text_of(self, event: Any) -> None:
        kind = getattr(event, "event_kind", None)
        text = None
        if kind == "part_start" and getattr(event.part, "part_kind", None) == "text":
            text = event.part.content
        elif kind == "part_delta" and getattr(event.delta, "part_delta_kind", None) == "text":
            text = event.delta.content_delta
        if text:
            self.ctx.text(text)

    def _open(self, resumed: Any) -> None:
        """Start a step: for a model request, or (``resumed``) for the response a run starts with."""
        self.ctx.start_step("action")
        self.open, self.resumed = True, resumed is not None
        self.response, self.responded = resumed, resumed is not None
        self.open_calls.clear()
        self.reported.clear()
        if resumed is not None:  # no request in this step: no tokens (not unknown ones)
            self.ctx.usage(0, 0, "reported")

    async def tools(self, node: Any, run: Any) -> None:
        """The tool calls answering the step's request, or those the run starts with."""
        if self.open:
            self.reply(node.model_response)
        elif tool_calls_of(node.model_response):
            self._open(node.model_response)
        try:
            async with node.stream(run.ctx) as events:
                await self._consume(events, run, self._tool_event)
        except Exception as exc:  # a tool that raised, or a limit that refused the calls
            for call_id in list(self.open_calls.values()):
                self.ctx.tool_finished(call_id, "error", error=describe(exc))
            self.open_calls.clear()
            self.refused(describe(exc))
            raise
        self.added_usage(run)

    def _not_run(self, reason: str) -> None:
        """The calls announced but not begun when the run stopped: cancelled."""
        for call_id in self.open_calls.values():
            self.ctx.tool_finished(call_id, "cancelled", error=reason)
        self.open_calls.clear()

    def refused(self, reason: str) -> None:
        """Calls of the step's response that pydantic-ai refused before announcing them."""
        if self.response is None:
            return
        for part in tool_calls_of(self.response):
            if part.tool_call_id not in self.reported:
                call_id = self._started(part)
                self.open_calls.pop(part.tool_call_id, None)
                self.ctx.tool_finished(call_id, "cancelled", error=f"not run: {reason}")

    def _started(self, part: Any) -> str:
        call_id = f"{self.ctx.step}:{part.tool_call_id}"
        self.reported.add(part.tool_call_id)
        self.open_calls[part.tool_call_id] = call_id
        self.ctx.tool_started(call_id, part.tool_name, part.args_as_dict())
        return call_id

    def _tool_event(self, event: Any) -> None:
        kind = getattr(event, "event_kind", None)
        if kind in ("function_tool_call", "output_tool_call"):
            if event.part.tool_call_id not in self.reported:
                self._started(event.part)
            if self.ctx.scope.interrupted:  # e.g. max_tool_calls tripped by this call: stop
                self._not_run("interrupted")  # before pydantic-ai runs any announced call
                raise asyncio.CancelledError()
        elif kind in ("function_tool_result", "output_tool_result"):
            part = event.part
            call_id = self.open_calls.pop(part.tool_call_id, None)
            if call_id is None:
                return
            if part.tool_call_id in self.denied:  # the reason the person gave, not the model's text
                self.ctx.tool_finished(call_id, "denied", error=self.denied.pop(part.tool_call_id))
                return
            status, result, error = tool_outcome(part)
            self.ctx.tool_finished(call_id, status, result, error)

    def added_usage(self, run: Any) -> None:
        """Usage the run has that no model response accounts for (added by tools): this step's."""
        usage = run.usage
        extra_in = (usage.input_tokens or 0) - self.counted[0]
        extra_out = (usage.output_tokens or 0) - self.counted[1]
        if extra_in > 0 or extra_out > 0:
            self.ctx.usage(max(extra_in, 0), max(extra_out, 0), "reported")
            self.counted = (self.counted[0] + max(extra_in, 0), self.counted[1] + max(extra_out, 0))

    def finish(self, *, final: bool = False) -> None:
        """End the step: ``"final"`` when it ended the run, or when it called no tool."""
        if not self.responded:
            return
        kind = "final" if final or not tool_calls_of(self.response) else "action"
        text = None if self.resumed else response_text(self.response)
        self.ctx.finish_step(model_output=text, kind=kind)
        self.response, self.responded, self.open, self.resumed = None, False, False, False

    def deferred(self, output: Any) -> None:
        """The calls a run ending in ``DeferredToolRequests`` hands back to its caller: ``"deferred"``."""
        from pydantic_ai.tools import DeferredToolRequests

        if not isinstance(output, DeferredToolRequests):
            return
        for parts, why in ((output.calls, DEFERRED_CALL), (output.approvals, DEFERRED_APPROVAL)):
            for part in parts:
                call_id = self.open_calls.pop(part.tool_call_id, None)
                if call_id is None and part.tool_call_id not in self.reported and self.open:
                    call_id = self._started(part)
                    self.open_calls.pop(part.tool_call_id, None)
                if call_id is not None:
                    self.ctx.tool_finished(call_id, "deferred", error=why)

    async def decide(self, pa_ctx: Any, requests: Any) -> Any:
        """pydantic-ai's deferred calls that need approval, decided in nbagent's approval panel."""
        from pydantic_ai.tools import ToolDenied

        calls = list(requests.approvals)
        if not calls:
            return None
        approvals = self.ctx.approvals
        waiting = []
        for part in calls:
            call_id = self.open_calls.get(part.tool_call_id) or self._started(part)
            approvals.request(self.ctx, call_id, part.tool_name, part.args_as_dict())
            waiting.append((part, call_id))
        answers: dict[str, Any] = {}
        for part, call_id in waiting:
            decision = await approvals.wait(self.ctx, call_id)
            if decision.approved:
                answers[part.tool_call_id] = True
            else:
                self.denied[part.tool_call_id] = decision.reason or decision.decision
                answers[part.tool_call_id] = ToolDenied(denial_observation(decision.reason))
        return requests.build_results(approvals=answers)
