"""What a smolagents stream yields, as nbagent events: the translator of one run.

Part of the smolagents adapter (``nbagent.adapters.smolagents.source``, whose docstring tells how steps,
tool calls, usage and approvals map), kept apart so each file reads in one sitting. It runs on the
runner's loop, fed in order with what the worker posted (``smolagents.worker``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from nbagent import events as ev
from nbagent.adapters.smolagents.fork import Memory
from nbagent.adapters.smolagents.records import error_of, model_name, text_of, usage_of
from nbagent.adapters.smolagents.worker import ApprovalAsked, Held, MaxStepsFinal, Nested, StepStarting
from nbagent.context import RunContext
from nbagent.errors import AgentInterrupted, MaxStepsReached, ModelError, describe
from nbagent.guardrails.approvals import Decision


class Translator:
    """Turns what a smolagents stream yields into nbagent events. Runs on the runner's loop."""

    def __init__(self, ctx: RunContext, agent: Any, max_steps: int, memory: Memory | None = None) -> None:
        self.ctx = ctx
        self.memory = memory if memory is not None else Memory()
        """The run's history: each call's observation is noted there (``smolagents.fork``)."""
        self.pending_point: int | None = None
        """The next step's ``fork_point`` (``StepStarting.memory``), marked as it opens."""
        self.agent = agent
        self.max_steps = max_steps
        self.open = False
        self.step_t0 = 0.0
        self.actions = 0
        """ActionSteps finished in this run (smolagents counts only these as steps)."""
        self.planned_for = 0
        """The action step (1-based) the last planning step was made for."""
        self.calls: dict[str, str] = {}
        """smolagents call id -> event call id, for the open step."""
        self.open_calls: set[str] = set()
        self.output: Any = None
        self.hit_max_steps = False
        self.denied = False
        """A call of the open step was denied: smolagents ran none of its tools."""
        self.deciding: set[asyncio.Task[None]] = set()
        self.model_ended = False
        """True once the open step's model reply is known complete (``ModelCallEnded`` sent)."""
        self.last_delta_t: float | None = None

    def _emit(self, cls: type[ev.RunEvent], t: float, *args: Any, **kwargs: Any) -> None:
        self.ctx.emit(cls(self.ctx.run_id, self.ctx.step, t, *args, **kwargs))

    def _next_kind(self) -> ev.StepKind:
        """What smolagents runs next: planning when scheduled, the max-steps final answer, or an action."""
        n = self.actions + 1
        if n > self.max_steps:  # no planning before the forced final answer
            return "final"
        interval = getattr(self.agent, "planning_interval", None)
        if interval and (n == 1 or (n - 1) % interval == 0) and self.planned_for != n:
            return "planning"
        return "action"

    def _open(self, t: float) -> None:
        if self.open:
            return
        self.ctx.step += 1
        self.open, self.step_t0 = True, t
        self.model_ended, self.last_delta_t, self.denied = False, None, False
        self.calls.clear()
        self._emit(ev.StepStarted, t, self._next_kind())
        if self.pending_point is not None:
            self.ctx.fork_point(self.pending_point)
            self.pending_point = None

    def _end_time(self, step: Any, t: float, wall: float) -> float:
        end = getattr(step.timing, "end_time", None)
        if end is None:
            return t
        return min(t, max(self.step_t0, t - (wall - end)))

    def _model_ended(self, t: float) -> None:
        if not self.model_ended:
            self.model_ended = True
            self._emit(ev.ModelCallEnded, t)

    def _close(
        self, step: Any, t: float, wall: float, kind: ev.StepKind, output: Any, error: str | None
    ) -> None:
        end = self._end_time(step, t, wall)
        # smolagents says nothing when its model call ends: the step's first tool call (parsed
        # from the whole reply) tells, else its last streamed delta, else the step's end when
        # the step holds a reply.
        if self.last_delta_t is not None:
            self._model_ended(min(self.last_delta_t, end))
        elif getattr(step, "model_output_message", None) is not None or kind == "planning":
            self._model_ended(end)
        observations = getattr(step, "observations", None)
        for call_id in sorted(self.open_calls):
            if self.denied:
                note = "not run: another call of this step was denied"
                self._emit(ev.ToolCallFinished, end, call_id, "cancelled", None, note)
            elif error:
                self._emit(ev.ToolCallFinished, end, call_id, "error", None, error)
            else:
                self._emit(ev.ToolCallFinished, end, call_id, "ok", observations)
        self.open_calls.clear()
        tokens_in, tokens_out = usage_of(step)
        if tokens_in is not None:
            self._emit(ev.Usage, end, tokens_in, tokens_out, "reported")
        self._emit(ev.StepFinished, end, model_output=text_of(output), kind=kind, error=error)
        self.open = False

    def _call_id(self, smol_id: Any) -> str:
        base = f"{self.ctx.step}:{smol_id or len(self.calls) + 1}"
        call_id, n = base, 1
        while call_id in self.calls.values():
            n += 1
            call_id = f"{base}#{n}"
        self.calls[str(smol_id)] = call_id
        return call_id

    def apply(self, t: float, wall: float, item: Any) -> None:
        from smolagents.agents import ToolOutput
        from smolagents.memory import ActionStep, FinalAnswerStep, PlanningStep, ToolCall
        from smolagents.models import ChatMessageStreamDelta

        if isinstance(item, ChatMessageStreamDelta):
            self._open(t)
            self.last_delta_t = t
            if item.content:
                self._emit(ev.TextDelta, t, item.content)
        elif isinstance(item, StepStarting):
            self.pending_point = item.memory
            scope = self.ctx.scope
            if scope.interrupted or not scope.stop_after_step:  # after a step smolagents may not start one
                self._open(t)
        elif isinstance(item, ToolCall):
            self._open(t)
            self._model_ended(t if self.last_delta_t is None else self.last_delta_t)
            call_id = self._call_id(item.id)
            self.open_calls.add(call_id)
            self._emit(ev.ToolCallStarted, t, call_id, item.name, item.arguments)
        elif isinstance(item, ToolOutput):
            call_id = self.calls.get(str(item.id))
            if call_id is not None and isinstance(getattr(item, "observation", None), str):
                self.memory.observations[call_id] = item.observation
            if call_id in self.open_calls:
                self.open_calls.discard(call_id)
                self._emit(ev.ToolCallFinished, t, call_id, "ok", item.output)
        elif isinstance(item, Nested):
            self._nested(t, item)
        elif isinstance(item, ApprovalAsked):
            self._ask(item)
        elif isinstance(item, Held):
            self.apply(t, wall, item.call)
            self._held(t, item)
        elif isinstance(item, PlanningStep):
            self._open(t)
            self.planned_for = self.actions + 1
            output = text_of(item.model_output_message.content) or item.plan
            self._close(item, t, wall, "planning", output, None)
        elif isinstance(item, MaxStepsFinal):
            self._open(t)
            self.hit_max_steps = True
            self._close(item.step, t, wall, "final", item.step.action_output, None)
        elif isinstance(item, ActionStep):
            self._open(t)
            self.actions += 1
            if item.model_output_message is None and item.error is None:
                return  # cut short by the exception that ends the run; the recorder closes it with it
            kind: ev.StepKind = "final" if item.is_final_answer else "action"
            self._close(item, t, wall, kind, item.model_output, error_of(item))
        elif isinstance(item, FinalAnswerStep):
            self.output = item.output

    def _nested(self, t: float, item: Nested) -> None:
        self._open(t)
        call_id = f"{self.ctx.step}:{item.key}"
        if item.status == "started":
            self.open_calls.add(call_id)
            self._emit(ev.ToolCallStarted, t, call_id, item.tool, item.value)
        elif call_id in self.open_calls:
            self.open_calls.discard(call_id)
            self._emit(ev.ToolCallFinished, t, call_id, item.status, item.value, item.error)

    def _held(self, t: float, item: Held) -> None:
        """Calls a budget stopped before they ran: cancelled, not abandoned (nothing was running)."""
        for ref in item.refs:
            call_id = f"{self.ctx.step}:{ref}" if item.nested else self.calls.get(ref)
            if call_id in self.open_calls:
                self.open_calls.discard(call_id)
                self._emit(ev.ToolCallFinished, t, call_id, "cancelled", None, f"not run: {item.reason}")

    def _ask(self, item: ApprovalAsked) -> None:
        """Report the call as waiting, and answer the worker once a person decided."""
        call_id = f"{self.ctx.step}:{item.ref}" if item.nested else self.calls.get(item.ref)
        if call_id is None or call_id not in self.open_calls:
            item.answer.set_result(Decision("approved", None, time.perf_counter()))
            return
        self.ctx.approvals.request(self.ctx, call_id, item.tool, item.arguments)
        task = asyncio.get_running_loop().create_task(self._decide(call_id, item))
        self.deciding.add(task)
        task.add_done_callback(self.deciding.discard)

    async def _decide(self, call_id: str, item: ApprovalAsked) -> None:
        decision = await self.ctx.approvals.wait(self.ctx, call_id)
        if not decision.approved and call_id in self.open_calls:
            self.open_calls.discard(call_id)
            self.denied = self.denied or not item.nested
            reason = decision.reason or "denied"
            self._emit(ev.ToolCallFinished, time.perf_counter(), call_id, "denied", None, reason)
        item.answer.set_result(decision)

    def abandon(self) -> None:
        """The run was stopped now: the calls in flight were stopped with it."""
        for task in list(self.deciding):
            task.cancel()
        t = time.perf_counter()
        for call_id in sorted(self.open_calls):
            self._emit(
                ev.ToolCallFinished, t, call_id, "abandoned", None, "interrupted; the call was stopped"
            )
        self.open_calls.clear()

    def finish(self, error: BaseException | None) -> Any:
        """The run's result, or the typed error its end state calls for."""
        if error is None:
            if self.hit_max_steps:
                raise MaxStepsReached(f"no final answer after {self.actions} steps", output=self.output)
            return self.output
        from smolagents.utils import AgentError as SmolAgentError
        from smolagents.utils import AgentGenerationError

        if type(error) is SmolAgentError and getattr(self.agent, "interrupt_switch", False):
            raise AgentInterrupted("stopped after the step") from error
        if isinstance(error, AgentGenerationError):
            cause = error.__cause__ or error
            raise ModelError(f"{model_name(self.agent.model)}: {describe(cause)}") from error
        raise error
