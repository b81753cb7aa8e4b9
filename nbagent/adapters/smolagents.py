"""Run smolagents agents (``CodeAgent``, ``ToolCallingAgent``, any ``MultiStepAgent``) under nbagent.

``nbagent.start(agent, task)`` on a smolagents agent gets the same live view, Stop button and
records as a native agent. ``SmolagentsSource`` drives ``agent.run(task, stream=True)`` on a worker
thread and translates what the stream yields (``PlanningStep``, ``ActionStep``,
``FinalAnswerStep``, ``ToolCall``, ``ToolOutput``, ``ActionOutput``, ``ChatMessageStreamDelta``)
into nbagent events on the runner's loop.

How a Stop lands. ``interrupt("now")`` cancels ``drive``; it aborts the run (every agent's
``interrupt()``, then every guarded call is released, see ``smolagents_guards``) and returns at once,
without waiting for the worker. The worker sees its in-flight call fail, smolagents unwinds to its
own interrupt check, and the guards are removed when the worker ends, a few milliseconds later. The
stream generator is always drained, never closed mid-step (smolagents #2703). A later run on the
same agent waits for that worker first. ``interrupt("after_step")`` is smolagents' own
``interrupt()``: the step in progress finishes, and smolagents' bare ``AgentError`` that follows is
recognised by its exact type and the agent's ``interrupt_switch``, never by its message.

Steps. A step opens when its first model call starts (so a slow ``generate()`` shows as a running
step) and closes with the memory step smolagents yields: its timing, its token usage (planning
steps included, which smolagents' Monitor leaves out; once per step, never also per stream delta)
and its error. The ``ActionStep`` smolagents yields twice at max steps (#1816) closes the final-answer
step instead, and the run ends ``"max_steps"``. A ``CodeAgent``'s code runs as one
``python_interpreter`` tool call; the tools and managed agents it calls show as tool calls too.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import events as ev
from ..config import settings
from ..context import RunContext
from ..errors import AgentError, AgentInterrupted, MaxStepsReached, ModelError, describe
from .smolagents_guards import Abort, CallAbandoned, Guarded, ModelGuard
from .smolagents_memory import (
    agent_name,
    error_of,
    interrupted_step_error,
    model_name,
    records_from_smolagents,
    require_smolagents,
    text_of,
    usage_of,
)

__all__ = ["SmolagentsSource", "is_smolagents_agent", "records_from_smolagents", "wait_idle"]

AFTER_STEP_POLL_S = 0.05
"""How often ``drive`` looks for an ``interrupt("after_step")`` (it only needs to beat a step)."""

MANAGED_AGENT_JOIN_S = 5.0
"""After a Stop, how long the worker waits for abandoned managed agents before removing the guards."""


def is_smolagents_agent(obj: Any) -> bool:
    """True for a smolagents ``MultiStepAgent``. Never imports smolagents itself."""
    import sys

    module = sys.modules.get("smolagents.agents")
    return module is not None and isinstance(obj, module.MultiStepAgent)


# -- what the worker thread hands to the loop ------------------------------------------------


@dataclass(frozen=True, slots=True)
class _ModelCall:
    """A model call of the top agent started: the step it belongs to is running."""


@dataclass(frozen=True, slots=True)
class _Nested:
    """A tool or managed agent called from a CodeAgent's code started or ended."""

    key: str
    tool: str
    status: str
    value: Any
    error: str | None


@dataclass(frozen=True, slots=True)
class _MaxStepsFinal:
    """The duplicated ActionStep of max steps (#1816), replaced by the memory step of the final answer."""

    step: Any


@dataclass(frozen=True, slots=True)
class _Done:
    error: BaseException | None


Entry = tuple[float, float, Any]
"""``(perf_counter, time.time(), item)`` read together on the worker as the item arrived."""


class _Worker:
    """Runs one smolagents run on a daemon thread and posts everything it yields, in order."""

    def __init__(
        self, agent: Any, task: str, reset: bool, post: Callable[[Entry], None], quiet: bool
    ) -> None:
        self.agent = agent
        self.task = task
        self.reset = reset
        self.quiet = quiet
        self.abort = Abort()
        self._post_entry = post
        self._after_step = False
        self.finished: concurrent.futures.Future[None] = concurrent.futures.Future()
        self.finished.set_running_or_notify_cancel()  # a waiter's cancel must not complete it
        self.phase = "starting"
        """What the worker is doing, for the message when a run waits on it too long."""

    def start(self) -> None:
        context = contextvars.copy_context()  # the run's cancel scope, for check_interrupt() in tools
        threading.Thread(
            target=context.run, args=(self._work,), name="nbagent-smolagents-worker", daemon=True
        ).start()

    def stop_after_step(self) -> None:
        """smolagents' own interrupt: the step in progress finishes, then the run stops."""
        self._after_step = True
        agent = self.agent
        if agent is not None:
            agent.interrupt()

    def post(self, item: Any) -> None:
        if not self.abort.aborted:  # after an abort nobody listens
            self._post_entry((time.perf_counter(), time.time(), item))

    def _announce(self, key: str, tool: str, status: str, value: Any, error: str | None) -> None:
        self.post(_Nested(key, tool, status, value, error))

    def _work(self) -> None:
        from smolagents.memory import ActionStep

        error: BaseException | None = None
        try:
            if self.abort.aborted:
                raise CallAbandoned("run")
            guards = Guarded(
                self.agent, self.abort, lambda: self.post(_ModelCall()), self._announce, self.quiet
            )
            try:
                self.phase = "running"
                stream = self.agent.run(self.task, stream=True, reset=self.reset)
                if self._after_step or self.abort.aborted:
                    self.agent.interrupt()  # run() has just cleared the switch
                last_action = None
                # Drained to its end, never closed mid-step (smolagents #2703); after an abort the
                # guards make every call fail at once, so the end comes within milliseconds.
                for item in stream:
                    if isinstance(item, ActionStep):
                        if item is last_action:
                            item = _MaxStepsFinal(self.agent.memory.steps[-1])
                        else:
                            last_action = item
                    self.post(item)
            finally:
                if self.abort.aborted:
                    # An abandoned managed agent still runs on its guards: let it unwind first.
                    self.phase = "waiting for its managed agents to stop"
                    self.abort.join_agent_calls(MANAGED_AGENT_JOIN_S)
                    _mark_cut_step(self.agent)
                self.phase = "restoring the agent"
                guards.restore()
        except BaseException as exc:  # handed to drive(), which decides what it means
            error = exc
        finally:
            self.phase = "finished"
            # The registry maps agent -> worker weakly; a worker that kept its agent would keep it alive.
            self.agent = None
            self.abort.agents.clear()
            self.finished.set_result(None)
            self.post(_Done(error))


def _mark_cut_step(agent: Any) -> None:
    """Leave a note on the memory step a Stop cut mid-call, so a continued run tells the model."""
    from smolagents.memory import ActionStep

    steps = agent.memory.steps
    if steps and isinstance(steps[-1], ActionStep):
        last = steps[-1]
        if last.is_final_answer:
            return
        if last.error is None and last.model_output_message is None:
            last.error = interrupted_step_error()
        elif last.error is not None and _caused_by_abort(last.error):
            # smolagents wrapped our abandoned tool or code call into its own error: say what it was.
            last.error = interrupted_step_error(f"({last.error})")


def _caused_by_abort(error: BaseException) -> bool:
    """True if ``error`` comes from a guarded call the Stop abandoned (followed by type, not text)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, CallAbandoned):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


class _Translator:
    """Turns what a smolagents stream yields into nbagent events. Runs on the runner's loop."""

    def __init__(self, ctx: RunContext, agent: Any) -> None:
        self.ctx = ctx
        self.agent = agent
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
        self.max_steps = False

    def _emit(self, cls: type[ev.RunEvent], t: float, *args: Any, **kwargs: Any) -> None:
        self.ctx.emit(cls(self.ctx.run_id, self.ctx.step, t, *args, **kwargs))

    def _next_kind(self) -> ev.StepKind:
        """What smolagents runs next: planning when scheduled, the max-steps final answer, or an action."""
        n = self.actions + 1
        if n > self.agent.max_steps:  # no planning before the forced final answer
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
        self.calls.clear()
        self._emit(ev.StepStarted, t, self._next_kind())

    def _end_time(self, step: Any, t: float, wall: float) -> float:
        end = getattr(step.timing, "end_time", None)
        if end is None:
            return t
        return min(t, max(self.step_t0, t - (wall - end)))

    def _close(
        self, step: Any, t: float, wall: float, kind: ev.StepKind, output: Any, error: str | None
    ) -> None:
        end = self._end_time(step, t, wall)
        observations = getattr(step, "observations", None)
        for call_id in sorted(self.open_calls):
            if error:
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
            if item.content:
                self._emit(ev.TextDelta, t, item.content)
        elif isinstance(item, _ModelCall):
            self._open(t)
        elif isinstance(item, ToolCall):
            self._open(t)
            call_id = self._call_id(item.id)
            self.open_calls.add(call_id)
            self._emit(ev.ToolCallStarted, t, call_id, item.name, item.arguments)
        elif isinstance(item, ToolOutput):
            call_id = self.calls.get(str(item.id))
            if call_id in self.open_calls:
                self.open_calls.discard(call_id)
                self._emit(ev.ToolCallFinished, t, call_id, "ok", item.output)
        elif isinstance(item, _Nested):
            self._nested(t, item)
        elif isinstance(item, PlanningStep):
            self._open(t)
            self.planned_for = self.actions + 1
            output = text_of(item.model_output_message.content) or item.plan
            self._close(item, t, wall, "planning", output, None)
        elif isinstance(item, _MaxStepsFinal):
            self._open(t)
            self.max_steps = True
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

    def _nested(self, t: float, item: _Nested) -> None:
        self._open(t)
        call_id = f"{self.ctx.step}:{item.key}"
        if item.status == "started":
            self.open_calls.add(call_id)
            self._emit(ev.ToolCallStarted, t, call_id, item.tool, item.value)
        elif call_id in self.open_calls:
            self.open_calls.discard(call_id)
            self._emit(ev.ToolCallFinished, t, call_id, item.status, item.value, item.error)

    def abandon(self) -> None:
        """The run was stopped now: the calls in flight go on in the background, unheard."""
        t = time.perf_counter()
        for call_id in sorted(self.open_calls):
            self._emit(
                ev.ToolCallFinished, t, call_id, "abandoned", None, "interrupted; the call was abandoned"
            )
        self.open_calls.clear()

    def finish(self, error: BaseException | None) -> Any:
        """The run's result, or the typed error its end state calls for."""
        if error is None:
            if self.max_steps:
                raise MaxStepsReached(f"no final answer after {self.actions} steps")
            return self.output
        from smolagents.utils import AgentError as SmolAgentError
        from smolagents.utils import AgentGenerationError

        if type(error) is SmolAgentError and getattr(self.agent, "interrupt_switch", False):
            raise AgentInterrupted("stopped after the step") from error
        if isinstance(error, AgentGenerationError):
            cause = error.__cause__ or error
            raise ModelError(f"{model_name(_unguarded(self.agent.model))}: {describe(cause)}") from error
        raise error


def _unguarded(model: Any) -> Any:
    return model._model if isinstance(model, ModelGuard) else model


_workers: weakref.WeakKeyDictionary[Any, _Worker] = weakref.WeakKeyDictionary()
_workers_lock = threading.Lock()


def wait_idle(agent: Any, timeout: float | None = None) -> bool:
    """Block until no nbagent run uses ``agent`` (its guards removed); False if ``timeout`` passed.

    After an ``interrupt("now")`` the run ends at once, and the agent's worker finishes unwinding in
    the background, normally within milliseconds. A new run on the agent waits for it by itself;
    this is for code that inspects the agent (``agent.model``, ``agent.memory``) right after a Stop.
    """
    with _workers_lock:
        worker = _workers.get(agent)
    if worker is None:
        return True
    try:
        worker.finished.result(timeout)
    except concurrent.futures.TimeoutError:
        return False
    return True


class SmolagentsSource:
    """An nbagent source for a smolagents agent; ``nbagent.start`` makes one for you.

    Args:
        agent: a smolagents ``MultiStepAgent``.
        join_timeout_s: how long a run waits for the previous, interrupted run of the same agent
            to finish unwinding before it gives up with an error.
    """

    join_timeout_s: float = 10.0

    def __init__(self, agent: Any, join_timeout_s: float | None = None) -> None:
        require_smolagents()
        if not is_smolagents_agent(agent):
            raise TypeError(f"not a smolagents agent: {type(agent).__name__}")
        self.agent = agent
        self.name = agent_name(agent)
        if join_timeout_s is not None:
            self.join_timeout_s = join_timeout_s

    @property
    def model_name(self) -> str:
        return model_name(_unguarded(self.agent.model))

    def __repr__(self) -> str:
        return f"SmolagentsSource({self.name}, model={self.model_name!r})"

    async def _wait_for_previous_run(self) -> None:
        with _workers_lock:
            previous = _workers.get(self.agent)
        if previous is None or previous.finished.done():
            return
        if not previous.abort.aborted:
            raise AgentError(
                f"{self.name} is already running in another nbagent run; interrupt that run or await it first"
            )
        try:
            await asyncio.wait_for(asyncio.wrap_future(previous.finished), self.join_timeout_s)
        except asyncio.TimeoutError:
            raise AgentError(
                f"the interrupted run of {self.name} is still {previous.phase} in the background after "
                f"{self.join_timeout_s:g} s; wait for it (nbagent.adapters.smolagents.wait_idle(agent)) "
                "or use a new agent"
            ) from None

    async def drive(self, task: str, ctx: RunContext, reset: bool = True) -> Any:
        """Run ``task`` on the smolagents agent, reporting through ``ctx``; returns the final answer."""
        await self._wait_for_previous_run()
        loop = asyncio.get_running_loop()
        entries: asyncio.Queue[Entry] = asyncio.Queue()

        def post(entry: Entry) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits for this run
                loop.call_soon_threadsafe(entries.put_nowait, entry)

        worker = _Worker(self.agent, task, reset, post, quiet=settings.quiet_smolagents)
        with _workers_lock:
            _workers[self.agent] = worker
        translator = _Translator(ctx, self.agent)
        watcher = loop.create_task(_watch_stop_after_step(ctx, worker))
        worker.start()
        try:
            while True:
                t, wall, item = await entries.get()
                if isinstance(item, _Done):
                    return translator.finish(item.error)
                translator.apply(t, wall, item)
        except BaseException:
            if not worker.finished.done():
                worker.abort.abort()  # stop now; the worker unwinds on its own, unwaited for
            # What the worker posted before the Stop happened before it: record it, then close.
            while not entries.empty():
                t, wall, item = entries.get_nowait()
                if not isinstance(item, _Done):
                    translator.apply(t, wall, item)
            translator.abandon()
            raise
        finally:
            watcher.cancel()


async def _watch_stop_after_step(ctx: RunContext, worker: _Worker) -> None:
    while not ctx.scope.stop_after_step:
        await asyncio.sleep(AFTER_STEP_POLL_S)
    worker.stop_after_step()
