"""Guards that make a smolagents run stoppable *now*, installed for one run and removed after it.

smolagents checks its ``interrupt_switch`` only at the top of a step, so a Stop would wait for the
model call, tool or code in flight. nbagent does not patch smolagents; for the length of a run it
swaps the agent's own attributes (``model``, ``tools``, ``managed_agents``, ``python_executor``,
``logger.console``) for thin guards, and puts the originals back when the run's worker ends.

A guard runs each call on a daemon thread of its own and waits for either its result or the run's
abort. On abort the waiting call raises ``CallAbandoned`` at once, so smolagents unwinds in
milliseconds; the abandoned call goes on in the background and its late result is discarded.
Streams are pumped the same way, one chunk at a time. After an abort no guarded call starts.
A managed agent's call is the one the worker waits for before removing the guards: the managed
agent itself runs on them (and unwinds within milliseconds, its own calls being guarded too).

``CallAbandoned`` is an ordinary ``Exception``: smolagents records it in the step's error (so a
continued run tells the model the step was interrupted) and then stops at its own interrupt check,
because ``abort()`` calls ``agent.interrupt()`` before it releases the waiting calls.
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import itertools
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from ..cancel import current_scope
from ..errors import describe

_ABORT = object()
_END = object()


class CallAbandoned(Exception):
    """The run was interrupted while this call was in flight; the call was abandoned."""

    def __init__(self, what: str = "call") -> None:
        super().__init__(f"interrupted by the user; the {what} was abandoned")


class Abort:
    """One run's abort switch and the calls waiting on it. Thread-safe; ``abort()`` is idempotent."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._aborted = False
        self._scope = current_scope.get()
        """The run's cancel scope, captured where the run starts: smolagents runs code on threads
        of its own, whose context does not carry it, and tools need it for check_interrupt()."""
        self._waiting: set[queue.SimpleQueue[Any]] = set()
        self.agents: list[Any] = []
        """Every agent of the run (the top one and its managed agents), to ``interrupt()`` on abort."""
        self._agent_threads: list[threading.Thread] = []

    @property
    def aborted(self) -> bool:
        return self._aborted

    def abort(self) -> None:
        """Stop the run now: every smolagents agent is told to stop, every waiting call is released."""
        with self._lock:
            if self._aborted:
                return
            self._aborted = True
            waiting = list(self._waiting)
        for agent in self.agents:
            agent.interrupt()
        for waiter in waiting:
            waiter.put(_ABORT)

    def _context(self) -> contextvars.Context:
        """The caller's context, with the run's cancel scope in it, for a guarded call's thread."""
        context = contextvars.copy_context()
        context.run(current_scope.set, self._scope)
        return context

    def _register(self, what: str) -> queue.SimpleQueue[Any]:
        waiter: queue.SimpleQueue[Any] = queue.SimpleQueue()
        with self._lock:
            if self._aborted:
                raise CallAbandoned(what)
            self._waiting.add(waiter)
        return waiter

    def _unregister(self, waiter: queue.SimpleQueue[Any]) -> None:
        with self._lock:
            self._waiting.discard(waiter)

    def call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn`` on its own daemon thread; return its result, or raise ``CallAbandoned`` on abort.

        A managed agent's call (``what="agent"``) is remembered: it runs guarded parts of the run,
        so ``join_agent_calls`` must see it end before the guards are removed.
        """
        waiter = self._register(what)
        context = self._context()

        def work() -> None:
            try:
                waiter.put((True, context.run(fn, *args, **kwargs)))
            except BaseException as exc:  # handed to the caller's thread, not lost on this one
                waiter.put((False, exc))

        thread = threading.Thread(target=work, name=f"nbagent-smolagents-{what}", daemon=True)
        if what == "agent":
            with self._lock:
                self._agent_threads.append(thread)
        thread.start()
        try:
            item = waiter.get()
        finally:
            self._unregister(waiter)
        if item is _ABORT or self._aborted:
            raise CallAbandoned(what)  # a result that arrives after the abort is discarded
        ok, value = item
        if ok:
            return value
        raise value

    def join_agent_calls(self, timeout: float) -> bool:
        """Wait for the managed agents' calls to end (after an abort they unwind within milliseconds)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            threads = list(self._agent_threads)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in threads)

    def stream(self, what: str, make: Callable[[], Iterator[Any]]) -> Iterator[Any]:
        """Iterate ``make()`` on a pump thread and yield its items here, until the end or the abort."""
        waiter = self._register(what)
        stop = threading.Event()
        context = self._context()

        def pump() -> None:
            source = None
            try:
                source = make()
                for item in source:
                    if stop.is_set() or self._aborted:
                        break
                    waiter.put((True, item))
                waiter.put(_END)
            except BaseException as exc:
                waiter.put((False, exc))
            finally:
                close = getattr(source, "close", None)
                if close is not None:
                    with contextlib.suppress(Exception):
                        close()

        threading.Thread(
            target=context.run, args=(pump,), name=f"nbagent-smolagents-{what}", daemon=True
        ).start()
        try:
            while True:
                item = waiter.get()
                if item is _ABORT or self._aborted:
                    raise CallAbandoned(what)
                if item is _END:
                    return
                ok, value = item
                if not ok:
                    raise value
                yield value
        finally:
            stop.set()
            self._unregister(waiter)


class ModelGuard:
    """Stands in for a smolagents ``Model``: every call is abandonable; ``on_call`` hears each start."""

    def __init__(self, model: Any, abort: Abort, on_call: Callable[[], None] | None = None) -> None:
        self._model = model
        self._abort = abort
        self._on_call = on_call

    def __getattr__(self, name: str) -> Any:
        if name == "generate_stream":
            getattr(self._model, name)  # no stream on the model: AttributeError, as smolagents expects
            return self._generate_stream
        return getattr(self._model, name)

    def generate(self, *args: Any, **kwargs: Any) -> Any:
        if self._on_call is not None:
            self._on_call()
        return self._abort.call("model", self._model.generate, *args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.generate(*args, **kwargs)

    def _generate_stream(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        if self._on_call is not None:
            self._on_call()
        return self._abort.stream("stream", lambda: self._model.generate_stream(*args, **kwargs))


Announce = Callable[[str, Any, str, Any, "str | None"], None]
"""``announce(key, tool, status, value, error)``: status "started" (value: arguments), then "ok" /
"error" / "abandoned" (value: result)."""


class CallableGuard:
    """Stands in for a tool or a managed agent: its calls are abandonable, and optionally announced.

    A ``CodeAgent`` calls its tools from inside the code it runs, where smolagents reports nothing;
    ``announce`` makes those calls (and managed agents, which are called the same way) show up as
    tool calls of the step.
    """

    _keys = itertools.count(1)

    def __init__(self, target: Any, abort: Abort, what: str, announce: Announce | None = None) -> None:
        self._target = target
        self._abort = abort
        self._what = what
        self._announce = announce

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        announce = self._announce
        if announce is None:
            return self._abort.call(self._what, self._target, *args, **kwargs)
        key = f"{self._what}-{next(self._keys)}"
        name = getattr(self._target, "name", self._what)
        announce(key, name, "started", _arguments(self._target, args, kwargs), None)
        try:
            result = self._abort.call(self._what, self._target, *args, **kwargs)
        except CallAbandoned:
            announce(key, name, "abandoned", None, "interrupted; the call was abandoned")
            raise
        except BaseException as exc:
            announce(key, name, "error", None, describe(exc))
            raise
        announce(key, name, "ok", result, None)
        return result


def _arguments(target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments of a call from code, by name where the tool's inputs tell the names."""
    named = {k: v for k, v in kwargs.items() if k != "sanitize_inputs_outputs"}
    if len(args) == 1 and not named and isinstance(args[0], dict):
        return dict(args[0])  # smolagents also accepts the arguments as one dict
    names = list(getattr(target, "inputs", None) or ())
    for index, value in enumerate(args):
        named[names[index] if index < len(names) else f"arg{index}"] = value
    return named


class ExecutorGuard:
    """Stands in for a ``CodeAgent``'s python executor: running a code action is abandonable."""

    def __init__(self, executor: Any, abort: Abort) -> None:
        self._executor = executor
        self._abort = abort

    def __getattr__(self, name: str) -> Any:
        return getattr(self._executor, name)

    def __call__(self, code_action: str) -> Any:
        return self._abort.call("code", self._executor, code_action)


def _silent_console() -> Any:
    from rich.console import Console

    # Not a terminal and not Jupyter: rich's Live (used while smolagents streams) then neither
    # draws nor displays a widget from the worker thread; quiet drops everything else.
    return Console(file=io.StringIO(), quiet=True, force_terminal=False, force_jupyter=False)


class Guarded:
    """Installs the guards on an agent (and, recursively, its managed agents); ``restore()`` undoes it.

    Args:
        agent: the smolagents agent of the run.
        abort: the run's abort switch.
        on_model_call: called (on the worker thread) as each model call of the *top* agent starts.
        announce: reports the calls a top-level ``CodeAgent`` makes from its code.
        quiet: silence smolagents' console output (its logger and rich live displays).
    """

    def __init__(
        self,
        agent: Any,
        abort: Abort,
        on_model_call: Callable[[], None],
        announce: Announce,
        quiet: bool,
    ) -> None:
        self._undo: list[Callable[[], None]] = []
        self._seen: set[int] = set()
        try:
            self._install(agent, abort, on_model_call, announce, quiet)
        except BaseException:
            self.restore()
            raise

    def _swap(self, obj: Any, attribute: str, value: Any) -> None:
        original = getattr(obj, attribute)
        setattr(obj, attribute, value)
        self._undo.append(lambda: setattr(obj, attribute, original))

    def _install(
        self,
        agent: Any,
        abort: Abort,
        on_model_call: Callable[[], None] | None,
        announce: Announce | None,
        quiet: bool,
    ) -> None:
        from smolagents.local_python_executor import LocalPythonExecutor

        if id(agent) in self._seen:
            return
        self._seen.add(id(agent))
        abort.agents.append(agent)
        if quiet:
            logger = getattr(agent, "logger", None)
            if hasattr(logger, "console") and hasattr(logger, "level") and id(logger) not in self._seen:
                from smolagents.monitoring import LogLevel

                self._seen.add(id(logger))
                self._swap(logger, "console", _silent_console())
                self._swap(logger, "level", LogLevel.OFF)
        for managed in agent.managed_agents.values():
            self._install(managed, abort, None, None, quiet)

        executor = getattr(agent, "python_executor", None)
        is_code = executor is not None
        local_code = isinstance(executor, LocalPythonExecutor)
        tools, managed_agents = agent.tools, agent.managed_agents
        # Tools run inside a remote executor cannot be guarded here: the executor call is.
        guard_tools = not is_code or local_code
        tool_announce = announce if is_code else None
        if guard_tools:
            self._swap(
                agent,
                "tools",
                {
                    name: CallableGuard(t, abort, "tool", tool_announce if name != "final_answer" else None)
                    for name, t in tools.items()
                },
            )
            self._swap(
                agent,
                "managed_agents",
                {name: CallableGuard(a, abort, "agent", tool_announce) for name, a in managed_agents.items()},
            )
        self._swap(agent, "model", ModelGuard(agent.model, abort, on_model_call))
        if is_code:
            self._swap(agent, "python_executor", ExecutorGuard(executor, abort))
            if local_code:
                # run() hands the guarded tools to the executor; hand it the originals back afterwards.
                self._undo.append(lambda: executor.send_tools({**tools, **managed_agents}))

    def restore(self) -> None:
        """Put every original back, newest first. Idempotent."""
        while self._undo:
            self._undo.pop()()
