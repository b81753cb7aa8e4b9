"""The thread that runs one smolagents run: the real ``agent.run(task, stream=True)``, unwrapped.

The worker iterates smolagents' stream and posts what it yields to the runner's loop, in order,
with the time each item arrived. It adds three kinds of items of its own: ``StepStarting`` just
before smolagents starts work that opens a step (so a slow model call shows as a running step),
``Nested`` for a tool or managed agent that a ``CodeAgent``'s code calls (smolagents reports
nothing for those), and ``MaxStepsFinal`` for the ``ActionStep`` smolagents yields twice at max
steps (#1816). ``Done`` ends every run.

A step's end is a handshake (``Boundary``): after posting the step, the worker waits until the loop
has read it, then looks at the run's cancel scope. A "Stop after step" the user asked for during the
step, or one a budget asked for as the loop read the step's end (``Limits(max_steps=)``), is seen
there, before smolagents can start the next step: the worker then sets smolagents' own
``interrupt()``, which smolagents reads at the top of its next step.

Tools called from code. smolagents hands a ``LocalPythonExecutor`` the agent's tools in every
``run()`` (``send_tools``); after that call the worker replaces the executor's tools with
``CodeTool``s, which the executor owns until smolagents rebuilds them next run. A ``CodeTool``
looks up the agent's nbagent run *when it is called* (a function the code defined keeps it across
runs): during a run it reports the call and runs the tool with the run's context (its cancel scope
for ``check_interrupt()``); after a Stop it refuses to run; with no nbagent run it just calls the
tool. In code, ``isinstance(tool, Tool)`` still holds.

Budgets and approvals hold a call on this thread, before it runs: the loop hears of a call only
after the worker moved on, too late to hold a tool already running. Each call (a ``ToolCall``
smolagents yields, which for a ``ToolCallingAgent`` comes before any call of its step runs, and
each call from code) is first counted against ``max_tool_calls`` (``tool_call_allowed``): one
over the budget stops the run before it starts. Then it waits for its approval, if it needs one.

A Stop (``StopSwitch``, see ``smolagents.stop``) raises ``RunStopped`` in the worker. The stream is
then let run to its end, never closed mid-step (smolagents #2703): smolagents' own ``finally``
yields the cut ``ActionStep`` into memory, and the worker marks it interrupted so a continued run
tells the model.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import itertools
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from nbagent.adapters.smolagents.console import RunConsole
from nbagent.adapters.smolagents.fork import ForkMemory, Memory
from nbagent.adapters.smolagents.records import interrupted_step_error
from nbagent.adapters.smolagents.stop import RunStopped, StopSwitch, agent_tree, current_switch
from nbagent.errors import describe
from nbagent.guardrails.approvals import Approvals, Decision, denial_observation
from nbagent.guardrails.limits import tool_call_allowed
from nbagent.runtime.cancel import CancelScope, current_scope


@dataclass(frozen=True, slots=True)
class StepStarting:
    """smolagents is about to start a step (planning, action, or the max-steps final answer)."""

    memory: int | None = None
    """How many memory steps the step's request is made of (its ``fork_point``)."""


@dataclass(frozen=True, slots=True)
class Nested:
    """A tool or managed agent called from a CodeAgent's code started (``"started"``) or ended."""

    key: str
    tool: str
    status: str
    value: Any
    error: str | None


@dataclass(frozen=True, slots=True)
class MaxStepsFinal:
    """The duplicated ActionStep of max steps (#1816), replaced by the memory step of the final answer."""

    step: Any


@dataclass(frozen=True, slots=True)
class Held:
    """``call`` (a smolagents ``ToolCall`` or a ``Nested`` start, not posted on its own) and the
    calls ``refs`` were stopped before they ran by a tripped budget: ``refs`` are smolagents call
    ids (``nested`` False) or ``Nested`` keys. One item, so the loop sees all of it or none."""

    call: Any
    refs: tuple[str, ...]
    nested: bool
    reason: str


@dataclass(frozen=True, slots=True)
class Boundary:
    """A step ended: the loop sets ``read`` once it has read everything posted before it."""

    read: threading.Event


@dataclass(frozen=True, slots=True)
class Done:
    error: BaseException | None


@dataclass(frozen=True, slots=True)
class ApprovalAsked:
    """A call waits for a person: ``ref`` is the smolagents call id (``nested`` False) or the
    ``Nested`` key; the loop answers ``answer`` with the ``Decision``."""

    ref: str
    nested: bool
    tool: str
    arguments: Any
    answer: concurrent.futures.Future[Decision]


DECISION_POLL_S = 0.05
"""How often a thread waiting for an approval looks for a Stop (its exception lands between)."""

BUDGET_STOP_WAIT_S = 5.0
"""How long a call over the budget waits for the run's Stop to reach this thread before it raises
``RunStopped`` itself (the Stop comes from the loop, within a loop iteration)."""


Entry = tuple[float, float, Any]
"""``(perf_counter, time.time(), item)`` read together on the worker as the item arrived."""

_workers: weakref.WeakKeyDictionary[Any, Worker] = weakref.WeakKeyDictionary()
_workers_lock = threading.Lock()


def latest_worker(agent: Any) -> Worker | None:
    """The worker of the agent's latest nbagent run (finished or not)."""
    with _workers_lock:
        return _workers.get(agent)


def _live_worker(agent: Any) -> Worker | None:
    worker = latest_worker(agent)
    return worker if worker is not None and not worker.finished.done() else None


class Worker:
    """Runs one smolagents run on a daemon thread and posts everything it yields, in order.

    Args:
        agent: the smolagents agent.
        task, reset, run_options: what ``agent.run`` gets (``run_options``: images, additional_args,
            max_steps).
        post: hands an ``Entry`` to the runner's loop (thread-safe).
        console: the run's console handling.
        run_id, scope: the nbagent run.
    """

    def __init__(
        self,
        agent: Any,
        task: str,
        reset: bool,
        run_options: dict[str, Any],
        post: Callable[[Entry], None],
        console: RunConsole,
        run_id: str,
        scope: CancelScope,
        approvals: Approvals | None = None,
        memory: Memory | None = None,
        fork: ForkMemory | None = None,
    ) -> None:
        self.agent: Any = agent
        self.memory = memory if memory is not None else Memory()
        """The run's history, for forks of it (``smolagents.fork``): its steps once ``run()`` made them."""
        self.fork = fork
        """For a fork: the memory it starts from (handed to smolagents before its stream starts)."""
        self.approvals = approvals if approvals is not None else Approvals()
        self.task = task
        self.reset = reset
        self.run_options = run_options
        self.console = console
        self.run_id = run_id
        self.scope = scope
        self.switch = StopSwitch(agent_tree(agent))
        self._post_entry = post
        self._boundary: Boundary | None = None
        self._keys = itertools.count(1)
        self._step_calls: list[Any] = []
        """The ToolCalls of the step so far, until the last one (then they are decided)."""
        self.finished: concurrent.futures.Future[None] = concurrent.futures.Future()
        self.finished.set_running_or_notify_cancel()  # a waiter's cancel must not complete it
        self.phase = "starting"
        """What the worker is doing, for the message when a run waits on it too long."""
        with _workers_lock:
            _workers[agent] = self

    def start(self) -> None:
        context = contextvars.copy_context()  # the run's cancel scope, for check_interrupt() in tools
        threading.Thread(
            target=context.run, args=(self._work,), name="nbagent-smolagents-worker", daemon=True
        ).start()

    def stop_now(self) -> None:
        """Stop the run at once (any thread); the worker unwinds on its own."""
        self.switch.stop()
        boundary = self._boundary
        if boundary is not None:  # nobody will read it: let the worker see the Stop
            boundary.read.set()

    def post(self, item: Any) -> None:
        if not self.switch.stopped:  # after a Stop nobody listens
            self._post_entry((time.perf_counter(), time.time(), item))

    # -- on the worker thread ---------------------------------------------------------------

    def _work(self) -> None:
        error: BaseException | None = None
        try:
            try:
                self.console.open()
                self.switch.enter()
                self.phase = "running"
                self._run()
            finally:
                self.switch.seal()
        except BaseException as exc:  # handed to drive(), which decides what it means
            error = exc
        try:
            self.phase = "closing"
            self.console.close()
        finally:
            self.phase = "finished"
            # The registry maps agent -> worker weakly; a worker that kept its agent would keep it alive.
            self.agent = None
            self.finished.set_result(None)
            self.post(Done(error))

    def _at_boundary(self, agent: Any) -> None:
        """Wait until the loop has read the step just posted, then stop if the run asks to."""
        self._caught_up()
        self._stop_if_asked(agent)

    def _caught_up(self) -> None:
        """Wait until the loop has read everything posted so far; ``RunStopped`` if that stopped
        the run. Before a tool runs: a budget the step's reply crossed (tokens, cost: the loop
        counts them as it reads the reply) stops the run before its call runs, however fast the
        model answered."""
        boundary = self._boundary = Boundary(threading.Event())
        self.post(boundary)
        boundary.read.wait()
        self._boundary = None
        if self.switch.stopped or self.scope.interrupted:  # the Stop may not have reached us yet
            self._await_stop()

    def _await_stop(self) -> NoReturn:
        """The run is stopping: wait here for the Stop's exception, so nothing more of the run runs
        first (the loop stops the worker once it next awaits), then raise it."""
        deadline = time.monotonic() + BUDGET_STOP_WAIT_S
        while not self.switch.stopped and time.monotonic() < deadline:
            time.sleep(DECISION_POLL_S / 10)  # the Stop's exception lands here
        raise RunStopped()

    def _stop_if_asked(self, agent: Any) -> None:
        if self.scope.stop_after_step:
            agent.interrupt()  # smolagents' own: read at the top of its next step

    def _run(self) -> None:
        from smolagents.memory import ActionStep, FinalAnswerStep, PlanningStep, ToolCall

        agent = self.agent
        fork = self.fork
        task = self.task if fork is None or fork.message is None else fork.message
        stream = agent.run(task, stream=True, reset=self.reset, **self.run_options)
        if fork is not None:  # the stream has not started: smolagents goes on from this memory
            made = agent.memory.steps[-1:] if fork.message is not None else []  # the message's TaskStep
            agent.memory.steps = [*fork.steps, *made]
        self.memory.steps = agent.memory.steps
        step_ahead, last_action = True, None
        denial: BaseException | None = None
        try:
            self._stop_if_asked(agent)  # run() has just cleared smolagents' switch
            self._hand_tools_to_code(agent)
            while True:
                if step_ahead and not agent.interrupt_switch:
                    self.post(StepStarting(len(agent.memory.steps)))
                try:
                    item = next(stream) if denial is None else stream.throw(denial)
                except StopIteration:
                    return
                denial = None
                if self.switch.stopped:
                    self._unwind(stream, item)
                    raise RunStopped()
                if isinstance(item, ActionStep):
                    self._step_calls.clear()
                    if item is last_action:
                        item, step_ahead = MaxStepsFinal(agent.memory.steps[-1]), False
                    else:
                        last_action, step_ahead = item, not item.is_final_answer
                elif isinstance(item, PlanningStep):
                    step_ahead = True
                elif isinstance(item, FinalAnswerStep) or step_ahead:
                    step_ahead = False
                if step_ahead:
                    self.console.drop_captured()  # a step ended
                    self.post(item)
                    self._at_boundary(agent)
                    continue
                if isinstance(item, ToolCall):
                    # The step's calls so far have not run (a ToolCallingAgent yields them all first).
                    self._within_budget(item, (*(str(c.id) for c in self._step_calls), str(item.id)), False)
                self.post(item)
                if isinstance(item, ToolCall):
                    self._caught_up()
                    denial = self._approve_tool_calls(stream, item)
        except RunStopped:
            if stream.gi_frame is not None and not stream.gi_running:
                self._unwind(stream, None)
            raise

    def _unwind(self, stream: Any, item: Any) -> None:
        """After the Stop: let smolagents' ``finally`` blocks run to the end of the stream.

        ``item`` is the last item the stream yielded. An ``ActionStep`` is the cut step its
        ``finally`` yields once the exception went off inside it: the stream is let run on. Any
        other item (or ``None``) means the exception has not gone off inside the stream (it went
        off here, or is still on its way): it is thrown in where the stream waits, since going on
        would run what the stream just yielded (a ``ToolCall``'s tool, say).
        """
        from smolagents.memory import ActionStep

        self.phase = "stopping"
        cut = None
        try:
            if not isinstance(item, ActionStep):
                item = stream.throw(RunStopped())
            for _ in range(100):  # after the exception smolagents only unwinds: two items at most
                if isinstance(item, ActionStep):
                    cut = item
                item = next(stream)
        except BaseException:
            pass  # the end of the stream: the Stop's exception, or one smolagents raised unwinding
        if cut is not None and cut.error is None and not cut.is_final_answer:
            cut.error = interrupted_step_error()

    # -- budgets and approvals ------------------------------------------------------------------

    def _within_budget(self, call: Any, refs: tuple[str, ...], nested: bool) -> None:
        """Count ``call`` (not posted yet) against ``max_tool_calls`` before it runs. Over the
        budget, the call and ``refs`` (the calls that have not run) are posted as held before the
        limit trips the run's scope, so they reach the loop ahead of the Stop; then the worker
        waits here for the Stop's exception, so none of them runs."""

        def refused(message: str) -> None:
            self.post(Held(call, refs, nested, message))

        if not tool_call_allowed(self.scope, refused):
            self._await_stop()

    def _wants(self, name: str, arguments: Any, ref: str) -> bool:
        tools = getattr(self.agent, "tools", None) or {}
        required = getattr(tools.get(name), "requires_approval", False) is True
        return self.approvals.wants(name, arguments, ref, required=required)

    def _ask(self, ref: str, nested: bool, tool: str, arguments: Any) -> concurrent.futures.Future[Decision]:
        answer: concurrent.futures.Future[Decision] = concurrent.futures.Future()
        self.post(ApprovalAsked(ref, nested, tool, arguments, answer))
        return answer

    def _decision(self, answer: concurrent.futures.Future[Decision]) -> Decision:
        """Wait for the person, in slices, so a Stop's exception lands in this thread at once."""
        while True:
            if self.switch.stopped:
                raise RunStopped()
            try:
                return answer.result(timeout=DECISION_POLL_S)
            except concurrent.futures.TimeoutError:
                continue

    def _approve_tool_calls(self, stream: Any, call: Any) -> BaseException | None:
        """A ``ToolCallingAgent`` yields every ``ToolCall`` of a step before it runs any: ask for the
        approvals of all of them, then wait. A denial is thrown into the stream where it waits,
        before any tool of the step ran: smolagents records it as the step's error, which the
        model sees, and the run goes on."""
        self._step_calls.append(call)
        if len(self._step_calls) < _calls_in_step(stream):
            return None  # more ToolCalls of this step come before any runs
        calls, self._step_calls = self._step_calls, []
        asked = [
            (c, self._ask(str(c.id), False, c.name, c.arguments))
            for c in calls
            if self._wants(c.name, c.arguments, str(c.id))
        ]
        denied = [(c, d) for c, d in ((c, self._decision(a)) for c, a in asked) if not d.approved]
        if not denied:
            return None
        from smolagents.utils import AgentToolExecutionError

        text = "; ".join(f"{c.name}: {denial_observation(d.reason)}" for c, d in denied)
        return AgentToolExecutionError(f"{text}. No tool of this step was run.", self.agent.logger)

    # -- code calling tools -------------------------------------------------------------------

    def _hand_tools_to_code(self, agent: Any) -> None:
        from smolagents.local_python_executor import LocalPythonExecutor

        executor = getattr(agent, "python_executor", None)
        if not isinstance(executor, LocalPythonExecutor) or not executor.static_tools:
            return
        callables = {**agent.tools, **agent.managed_agents}
        agent_ref = weakref.ref(agent)
        executor.static_tools = {
            name: CodeTool(value, agent_ref, "agent" if name in agent.managed_agents else "tool")
            if name != "final_answer" and callables.get(name) is value
            else value
            for name, value in executor.static_tools.items()
        }

    def call_from_code(self, target: Any, what: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run a tool or managed agent that the run's code calls, and report the call."""
        if self.switch.stopped:
            raise RunStopped()
        key = f"{what}-{next(self._keys)}"
        name = getattr(target, "name", what)
        arguments = _arguments(target, args, kwargs)
        started = Nested(key, name, "started", arguments, None)
        self._within_budget(started, (key,), True)
        self.post(started)
        self._caught_up()
        if self._wants(name, arguments, key):
            decision = self._decision(self._ask(key, True, name, arguments))
            if not decision.approved:  # the code sees the denial, as the model will
                raise PermissionError(denial_observation(decision.reason))
        context = contextvars.copy_context()
        context.run(current_scope.set, self.scope)
        context.run(current_switch.set, self.switch)
        try:
            with self.console.quiet_call():
                result = context.run(target, *args, **kwargs)
        except RunStopped:
            raise
        except BaseException as exc:
            self.post(Nested(key, name, "error", None, describe(exc)))
            raise
        self.post(Nested(key, name, "ok", result, None))
        return result


class CodeTool:
    """A tool or managed agent as a ``CodeAgent``'s code sees it; see the module docstring."""

    __slots__ = ("__weakref__", "_agent", "_target", "_what")

    def __init__(self, target: Any, agent: weakref.ref[Any], what: str) -> None:
        self._target = target
        self._agent = agent
        self._what = what

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # isinstance(tool, Tool) holds in code, as without nbagent
        return type(self._target)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)

    def __repr__(self) -> str:
        return repr(self._target)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        agent = self._agent()
        worker = _live_worker(agent) if agent is not None else None
        if worker is None:
            return self._target(*args, **kwargs)
        return worker.call_from_code(self._target, self._what, args, kwargs)


def _arguments(target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments of a call from code, by name where the tool's inputs tell the names."""
    named = {k: v for k, v in kwargs.items() if k != "sanitize_inputs_outputs"}
    if len(args) == 1 and not named and isinstance(args[0], dict):
        return dict(args[0])  # smolagents also accepts the arguments as one dict
    names = list(getattr(target, "inputs", None) or ())
    for index, value in enumerate(args):
        named[names[index] if index < len(names) else f"arg{index}"] = value
    return named


def _calls_in_step(stream: Any) -> int:
    """How many tool calls the reply of the step in progress holds (1 when it cannot be told).

    Read from the ``ActionStep`` smolagents' run loop is filling (a local of its generator
    frame), without touching it."""
    frame = getattr(stream, "gi_frame", None)
    step = frame.f_locals.get("action_step") if frame is not None else None
    message = getattr(step, "model_output_message", None)
    calls = getattr(message, "tool_calls", None)
    return len(calls) if isinstance(calls, list) and calls else 1
