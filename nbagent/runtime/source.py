"""The two interfaces the runtime knows: what it runs (``Source``) and where events go (``Sink``).

A ``Run`` calls these methods and nothing else of a source or a sink: every hook is declared and
defaulted here, so a new source overrides only what differs from the defaults, and the rules for
writing one are in docs/adapters.md. The native ``nbagent.Agent`` is the reference source; each
framework's adapter (``nbagent.adapters``) is a ``Source`` subclass over the user's agent.

The rules a source keeps (each is why a hook exists):

- ``drive`` reports through its ``RunContext`` only, on the runner's loop thread, and returns the
  run's output. It ends a run that did not succeed by raising: ``AgentInterrupted`` (or the
  ``CancelledError`` of a Stop, which it must let through) for a Stop, ``MaxStepsReached`` for
  steps used up, anything else for an error. It never swallows ``CancelledError`` and never
  patches the user's object; state it needs between runs stays beside the agent, not on it.
- The other hooks are called on the caller's thread as the run is built (``turn_key`` on the
  loop, as the run joins its line), once each, and must be cheap: no model call, no I/O.

A ``Sink`` is told each event, in order, on the runner's loop thread. A plain callable is a sink
too: ``as_sink`` wraps it in an ``EventCallback``.
"""

from __future__ import annotations

import concurrent.futures
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

from nbagent import events as ev

if TYPE_CHECKING:
    from nbagent.context import RunContext
    from nbagent.forks.origins import ForkOrigin
    from nbagent.recorder import Recorder


class Source(ABC):
    """What the runner runs: the native ``Agent`` and each framework's adapter are one.

    Hooks (all but ``drive`` have a default that suits a native agent keeping its memory on
    itself and taking ``str`` tasks):

    - ``name``: the agent's name in the record and the views (default: the class name).
    - ``agent``: the user's object the run belongs to. Runs of one ``agent`` take turns and
      continue each other (``reset=False``), also when a new source object wraps it for each run
      (default: the source itself).
    - ``model_name``: the model a run uses (default: ``"unknown"``); ``model_name_for(options)``
      the model a run with these ``drive`` options uses (default: ``model_name``), which names the
      record's model and prices a cost budget.
    - ``model_params()``: the model's request settings kept with the record (default: none).
    - ``task_text(task)``: the task as text for the record; raises ``TypeError`` for a task the
      source cannot take. ``drive`` gets the task as given (default: ``str`` tasks only).
    - ``takes_turns``: True when the agent keeps its memory on itself, so its runs wait for each
      other; False when it keeps nothing between runs (only a continued run waits, and
      ``ctx.kept_history`` / ``ctx.keep_history`` carry the history). See
      ``nbagent.runtime.turns``. Default True.
    - ``memory_of(options)``: whose memory a ``reset=False`` run with these options continues:
      the agent (default), or the part of it the options name (a LangGraph thread).
    - ``turn_key(options, reset)``: the key of state the runs share outside the agent (a
      LangGraph thread), whose runs take turns; ``None`` for none (default).
    - ``supports_approvals``: whether the source holds tool calls for a person (``approve=``,
      ``ctx.approvals``); when False, ``approvals_refusal()`` is the ``TypeError`` text a run with
      ``approve=`` gets, saying what the framework offers instead. Default False.
    - ``check_run(options, reset)``: refuse a run the source cannot do, before anything runs
      (an option that contradicts the agent, nothing to continue for ``reset=False``, an MCP
      session opened on the notebook's loop, on which the run would hang): raise ``ValueError`` /
      ``TypeError`` in one sentence that says what to do. Called on the caller's thread as the run
      is built, after its options were checked; cheap, no I/O (default: accept).
    - ``framework``: the name a run's record keeps of its source's kind (``fork_data``), so a
      fork's ``agent=`` is checked to be of the same framework (default: the class name).
    - ``fork_data(conversation, options)``: the run's history (``ctx.conversation``) as the JSON
      dict a record keeps, for forks from a store (default: none).
    - ``warm_up()``: one-time work the end of a run would otherwise do on the loop (building a
      serializer ``fork_data`` uses, say): the runner calls it once per source class, on a daemon
      thread, as the class's first run starts, so a first Stop does not wait for it (default: none).
    - ``fork_input(origin)``: for ``nbagent.fork``, the framework's input that starts a run at
      step ``origin.at_step`` of ``origin.record``, with its edits; ``drive`` then starts from it
      (``ctx.fork``). Default: refuses, so a source that does not implement it cannot be forked.
    - ``drive(task, ctx, reset, **options)``: run the task (see the module docstring for how it
      ends). The options it takes are its keyword-only parameters: ``start`` refuses others
      before the run begins.
    """

    takes_turns: bool = True
    supports_approvals: bool = False

    @property
    def name(self) -> str:
        return self.__dict__.get("_name", type(self).__name__)

    @name.setter
    def name(self, value: str) -> None:
        self._name = value

    @property
    def agent(self) -> Any:
        return self.__dict__.get("_agent", self)

    @agent.setter
    def agent(self, value: Any) -> None:
        self._agent = value

    @property
    def model_name(self) -> str:
        return "unknown"

    def model_name_for(self, options: dict[str, Any]) -> str:
        return self.model_name

    def model_params(self) -> dict[str, Any]:
        return {}

    def task_text(self, task: Any) -> str:
        if not isinstance(task, str):
            raise TypeError(f"task must be a str, not {type(task).__name__}")
        return task

    def turn_key(self, options: dict[str, Any], reset: bool = True) -> Hashable | None:
        return None

    def memory_of(self, options: dict[str, Any]) -> Any:
        return self.agent

    def check_run(self, options: dict[str, Any], reset: bool = True) -> None:
        return None

    @property
    def framework(self) -> str:
        return type(self).__name__

    def fork_data(self, conversation: Any, options: dict[str, Any]) -> dict[str, Any] | None:
        """The run's history (``ctx.conversation``, as the source set it) as JSON data for the
        record (``RunRecord.fork_data``): ``{"conversation": [...]}`` and any key the source needs
        to fork the run in another process (a LangGraph thread id). ``None``: nothing to keep.
        Called once, on the loop, as the run ends; a failure here never fails the run."""
        return None

    @classmethod
    def warm_up(cls) -> None:
        """Prepare, off the loop, what the class's first ``fork_data`` (or other end-of-run work)
        would otherwise build on the loop as a run ends, where it holds the record and any Stop.
        Called once per class, on a daemon thread, as its first run starts; a failure is ignored."""
        return None

    @property
    def supports_fork(self) -> bool:
        """Whether runs of this source can be forked (it implements ``fork_input``)."""
        return type(self).fork_input is not Source.fork_input

    def fork_input(self, origin: ForkOrigin) -> Any:
        """The framework's input for a run that starts at step ``origin.at_step`` of
        ``origin.record``: the conversation as the model saw it when that step began
        (``origin.prefix()``, ``origin.history()``), with ``origin.tool_results`` in place of
        the results of step ``at_step - 1`` and ``origin.message`` added as a user message.
        ``drive`` finds it as ``ctx.fork.input`` and starts from it, numbering steps from
        ``at_step``, calling no model and no tool of the steps before. Called on the caller's
        thread before the fork runs: raise ``nbagent.errors.ForkError`` when the history cannot
        be rebuilt (nothing has run yet)."""
        from nbagent.errors import ForkError

        raise ForkError(
            f"runs of {self.framework} cannot be forked: its source ({type(self).__name__}) does not "
            "implement fork_input (see docs/adapters.md)"
        )

    def approvals_refusal(self) -> str:
        return (
            f"approve= is not supported for {type(self.agent).__name__} agents: their source "
            "cannot hold a tool call for a person"
        )

    @abstractmethod
    async def drive(self, task: Any, ctx: RunContext, reset: bool = True, **options: Any) -> Any:
        """Run ``task``, reporting through ``ctx``; ``options`` are the extra keywords given to
        ``start`` (a source declares the ones it takes as keyword-only parameters)."""


def native_source(agent: Any) -> Source:
    """``agent`` itself when it is a source; a ``TypeError`` saying how to run it otherwise."""
    if not isinstance(agent, Source):
        raise TypeError(
            f"{type(agent).__name__} is not an nbagent source: use nbagent.start(agent, task), which "
            "finds the adapter of a framework's agent, or subclass nbagent.runtime.source.Source"
        )
    return agent


class Sink:
    """Where a run's events go: the live view, the terminal view, a store's writer, an exporter.

    ``__call__(event)`` takes each event, in order, on the runner's loop thread; it must not block
    (hand slow work to a thread of its own) and never calls back into the source. A sink that
    raises is logged once and skipped; the run goes on. The other hooks have defaults:

    - ``follow(recorder)``: the run's ``Recorder``, which has folded each event before the sink is
      told it: a sink that needs the record (a store's writer) reads it there rather than fold a
      copy of its own. Called once, before the first event, on the caller's thread.
    - ``drained()``: a future that completes once what the sink wrote elsewhere is written (a
      store's rows), so a returned record is also a stored one; ``None`` when it writes nowhere.
      Called once, after the last event; the run waits for it at most a few seconds.
    - ``block()`` / ``unblock()``: a blocking wait (``run.wait()``) starts and ends on a kernel's
      main thread, so no click can reach the kernel: a sink with controls disables them. ``block``
      returns True when it held anything (then ``unblock`` follows). Any thread.
    """

    def __call__(self, event: ev.RunEvent) -> None:
        raise NotImplementedError

    def follow(self, recorder: Recorder) -> None:
        return None

    def drained(self) -> concurrent.futures.Future[None] | None:
        return None

    def block(self) -> bool:
        return False

    def unblock(self) -> None:
        return None


class EventCallback(Sink):
    """A plain callable (``events.append``, a function) as a sink: it only takes events."""

    def __init__(self, receive: Callable[[ev.RunEvent], Any]) -> None:
        self.receive = receive

    def __call__(self, event: ev.RunEvent) -> None:
        self.receive(event)

    def __repr__(self) -> str:
        return repr(self.receive)


def as_sink(sink: Sink | Callable[[ev.RunEvent], Any]) -> Sink:
    """``sink`` itself when it is a ``Sink``, else the callable wrapped as one."""
    if isinstance(sink, Sink):
        return sink
    if not callable(sink):
        raise TypeError(f"a sink is a callable taking each event, not {type(sink).__name__}")
    return EventCallback(sink)
