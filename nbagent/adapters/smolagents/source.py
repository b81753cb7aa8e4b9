"""Run smolagents agents (``CodeAgent``, ``ToolCallingAgent``, any ``MultiStepAgent``) under nbagent.

``nbagent.start(agent, task)`` on a smolagents agent gets the same live view, Stop button and
records as a native agent, and the agent behaves exactly as under ``agent.run``: a worker thread
(``smolagents.worker``) runs the real ``agent.run(task, stream=True, ...)`` on the user's own
agent, model and tools, none of them wrapped or swapped (the only stand-ins are the tools a
``LocalPythonExecutor`` holds, which smolagents itself rebuilds every run), and this module
translates what the stream yields (``PlanningStep``, ``ActionStep``, ``FinalAnswerStep``,
``ToolCall``, ``ToolOutput``, ``ChatMessageStreamDelta``) into nbagent events on the runner's
loop. smolagents' ``run()`` options (``images``, ``additional_args``, ``max_steps``) pass through.
smolagents' console output is silenced while a view shows the run (``smolagents.console``).

How a Stop lands. ``interrupt("now")`` cancels ``drive``, which stops the run's ``StopSwitch``
(``smolagents.stop``: an exception in the threads working for the run, its sockets shut down, so the
model server sees the client go) and returns at once, without waiting for the worker: the record is
complete when the Stop returns. The worker unwinds within milliseconds, or, if it is blocked in C
without a socket of the run, as soon as that call returns; ``wait_idle(agent)`` tells when.
``interrupt("after_step")`` is smolagents' own ``interrupt()``, set by the worker at the step's end
(``smolagents.worker``, ``Boundary``): the step in progress finishes, and smolagents' bare
``AgentError`` that follows is recognised by its exact type and the agent's ``interrupt_switch``,
never by its message.

Who wins a race. The run's ``CancelScope`` decides the end state: a Stop accepted before the run
ended makes it ``"interrupted"``, even if smolagents had just produced its answer. The worker's
side of the same race is decided by the ``StopSwitch`` lock: once the worker has left the agent's
code (``seal``), a Stop raises nothing in it and drops no connection.

Runs of one agent take turns: a run started while another is live (or still unwinding from a
Stop) waits, reported as queued; a worker that does not unwind within ``join_timeout_s`` makes the
waiting run fail with a message that says what it is doing.

Steps. A step opens when smolagents starts it (so a slow model call shows as a running step) and
closes with the memory step smolagents yields: its timing, its token usage (planning steps
included, which smolagents' Monitor leaves out; once per step, never also per stream delta) and
its error. The ``ActionStep`` smolagents yields twice at max steps (#1816) closes the final-answer
step instead; the run ends ``"max_steps"`` and keeps the answer smolagents forced. A
``CodeAgent``'s code runs as one ``python_interpreter`` tool call; the tools and managed agents it
calls show as tool calls too. The translator is ``smolagents.stream``.

Approvals. ``start(agent, task, approve=...)`` (names or a predicate; a smolagents tool with
``requires_approval = True`` too) makes calls wait for a person, in the worker thread, before they
run. A ``ToolCallingAgent`` yields every ``ToolCall`` of a step before it runs any, so all of them
are pending together; a denial is thrown into the stream where it waits, and smolagents records it
as the step's error, which the model sees (no tool of that step runs). A tool a ``CodeAgent``'s code
calls waits inside the call; a denial raises ``PermissionError`` in the code. Step timing marks when
each step's model call ended (``model_ended_at``): the step's first tool call, else its last stream
delta, else its end.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from typing import TYPE_CHECKING, Any

from nbagent.adapters import instance_of
from nbagent.adapters.smolagents.console import RunConsole, caller_capture
from nbagent.adapters.smolagents.fork import ForkMemory, Memory, fork_memory, memory_json
from nbagent.adapters.smolagents.records import (
    agent_name,
    model_name,
    records_from_smolagents,
    require_smolagents,
)
from nbagent.adapters.smolagents.stop import RunStopped, agent_tree
from nbagent.adapters.smolagents.stream import Translator
from nbagent.adapters.smolagents.worker import (
    Boundary,
    Done,
    Entry,
    Worker,
    latest_worker,
)
from nbagent.config import settings
from nbagent.context import RunContext
from nbagent.errors import AgentError
from nbagent.runtime.source import Source

if TYPE_CHECKING:
    from nbagent.forks.origins import ForkOrigin

__all__ = ["RunStopped", "SmolagentsSource", "is_smolagents_agent", "records_from_smolagents", "wait_idle"]


def is_smolagents_agent(obj: Any) -> bool:
    """True for a smolagents ``MultiStepAgent``. Never imports smolagents itself."""
    return instance_of(obj, "smolagents.agents", "MultiStepAgent")


def wait_idle(agent: Any, timeout: float | None = None) -> bool:
    """Block until no nbagent run works on ``agent``; False if ``timeout`` passed first.

    After an ``interrupt("now")`` the run ends at once, and its worker finishes unwinding in the
    background, normally within milliseconds. A new run on the agent waits for it by itself; this
    is for code that inspects the agent (``agent.memory``) right after a Stop.
    """
    worker = latest_worker(agent)
    if worker is None:
        return True
    try:
        worker.finished.result(timeout)
    except concurrent.futures.TimeoutError:
        return False
    return True


class SmolagentsSource(Source):
    """An nbagent source for a smolagents agent; ``nbagent.start`` makes one for you.

    Args:
        agent: a smolagents ``MultiStepAgent``.
        join_timeout_s: how long a run waits for the previous, interrupted run of the same agent
            to finish unwinding before it gives up with an error.
    """

    join_timeout_s: float = 10.0
    supports_approvals = True
    """Calls of its tools can wait for a person (``approve=``, a tool's ``requires_approval``)."""
    framework = "smolagents"

    def __init__(self, agent: Any, join_timeout_s: float | None = None) -> None:
        require_smolagents()
        if not is_smolagents_agent(agent):
            raise TypeError(f"not a smolagents agent: {type(agent).__name__}")
        self.agent = agent
        self.name = agent_name(agent)
        if join_timeout_s is not None:
            self.join_timeout_s = join_timeout_s
        # rich captures per thread: whether the caller is inside `console.capture()` is known only here.
        self._caller_capture = caller_capture(agent)

    @property
    def model_name(self) -> str:
        return model_name(self.agent.model)

    def __repr__(self) -> str:
        return f"SmolagentsSource({self.name}, model={self.model_name!r})"

    def fork_data(self, conversation: Any, options: dict[str, Any]) -> dict[str, Any] | None:
        """The memory steps as JSON: what smolagents makes its requests of (``smolagents.fork``)."""
        return memory_json(conversation) if isinstance(conversation, Memory) else None

    def fork_input(self, origin: ForkOrigin) -> ForkMemory:
        """The memory steps there were when step ``at_step`` started (its request is made of
        them), the results of ``tool_results`` in step ``at_step - 1``'s observations; the
        worker hands them to smolagents as the agent's memory, ``message`` as a new task after
        them (``smolagents.fork``)."""
        return fork_memory(origin)

    async def _join_previous(self, ctx: RunContext) -> None:
        """Wait until the agent's previous run, interrupted, has finished unwinding in its worker
        (reported as queued). Runs of the agent already take turns (``nbagent.runtime.turns``);
        this covers the worker a Stop left behind, which still owns the agent for a moment."""
        previous = latest_worker(self.agent)
        if previous is None or previous.finished.done():
            return
        ctx.queued(previous.run_id)
        try:
            await asyncio.wait_for(
                asyncio.shield(asyncio.wrap_future(previous.finished)), self.join_timeout_s
            )
        except asyncio.TimeoutError:
            raise AgentError(
                f"the interrupted run of {self.name} is still {previous.phase} in the background "
                f"after {self.join_timeout_s:g} s; wait for it "
                "(nbagent.adapters.smolagents.source.wait_idle(agent)) or use a new agent"
            ) from None
        ctx.dequeued()

    async def drive(
        self,
        task: str,
        ctx: RunContext,
        reset: bool = True,
        *,
        images: list[Any] | None = None,
        additional_args: dict[str, Any] | None = None,
        max_steps: int | None = None,
    ) -> Any:
        """Run ``task`` on the smolagents agent, reporting through ``ctx``; returns the final answer.

        ``images``, ``additional_args`` and ``max_steps`` are smolagents' own ``run()`` options.
        """
        given = {"images": images, "additional_args": additional_args, "max_steps": max_steps}
        run_options = {name: value for name, value in given.items() if value is not None}
        await self._join_previous(ctx)
        return await self._drive(task, ctx, reset, run_options)

    async def _drive(self, task: str, ctx: RunContext, reset: bool, run_options: dict[str, Any]) -> Any:
        loop = asyncio.get_running_loop()
        entries: asyncio.Queue[Entry] = asyncio.Queue()

        def post(entry: Entry) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits for this run
                loop.call_soon_threadsafe(entries.put_nowait, entry)

        quiet = settings.quiet_smolagents and getattr(ctx, "shown", True)
        console = RunConsole(agent_tree(self.agent), quiet, self._caller_capture)
        memory = Memory(observations=dict(ctx.fork.input.observations) if ctx.fork is not None else {})
        ctx.conversation = memory
        fork = ctx.fork.input if ctx.fork is not None else None
        worker = Worker(
            self.agent, task, reset, run_options, post, console, ctx.run_id, ctx.scope, ctx.approvals,
            memory, fork,
        )  # fmt: skip
        max_steps = run_options.get("max_steps") or self.agent.max_steps
        translator = Translator(ctx, self.agent, max_steps, memory)
        worker.start()
        try:
            while True:
                t, wall, item = await entries.get()
                if isinstance(item, Done):
                    output = translator.finish(item.error)
                    ctx.set_result(output)  # what ``agent.run(task)`` returns
                    return output
                if isinstance(item, Boundary):  # the step's end is read: its budgets are counted
                    item.read.set()
                    continue
                translator.apply(t, wall, item)
        except BaseException:
            if not worker.finished.done():
                worker.stop_now()  # the worker unwinds on its own, unwaited for
            # What the worker posted before the Stop happened before it: record it, then close.
            while not entries.empty():
                t, wall, item = entries.get_nowait()
                if not isinstance(item, (Done, Boundary)):
                    translator.apply(t, wall, item)
            translator.abandon()
            raise
