"""Stopping a smolagents run *now*: the threads working for it are stopped, its connections dropped.

smolagents checks its ``interrupt_switch`` only at the top of a step, so a Stop would wait for the
model call, tool or code in flight. nbagent neither patches smolagents nor swaps the user's agent,
model or tools for wrappers. It stops the run the way Ctrl-C stops plain smolagents:

- **An exception in each thread of the run.** ``StopSwitch.stop()`` raises ``RunStopped`` in the
  run's worker thread (``PyThreadState_SetAsyncExc``) and in every other thread that is running
  code of the run's agents at that moment (found by their stacks: a frame of smolagents whose
  ``self`` is one of the run's agents, or whose ``state`` is one of their executors' states; so
  ``LocalPythonExecutor``'s code thread and ``ToolCallingAgent``'s parallel tool threads are
  found). ``RunStopped`` is a ``BaseException``, as ``KeyboardInterrupt`` is: smolagents' and the
  tools' ``except Exception`` let it through, smolagents' own ``finally`` blocks run (the cut step
  goes into memory, step callbacks see it), and nothing else of the run runs once the thread
  executes Python again. Every agent of the run is also ``interrupt()``-ed, so smolagents stops at
  its next step check even if some code swallowed the exception.
- **Its sockets are shut down.** An exception only lands when its thread runs Python; a thread
  blocked in ``recv`` waits for the server. A process-wide audit hook (installed once, on the first
  run; it compares the event name and returns for anything but ``socket.__new__`` and
  ``socket.connect``) files every socket a thread of a run creates or connects under the run's
  agents, weakly. ``stop()`` calls ``shutdown(SHUT_RDWR)`` on each: a blocked ``recv`` returns at
  once and the server sees the client go, streaming or not, whatever the HTTP client. Sockets stay
  filed under their agents after the run, so a keep-alive connection from an earlier run that a
  later run reuses is dropped by the later run's Stop too (httpx and urllib3 test an idle pooled
  connection before reusing it, so a dropped one is replaced). After a Stop the hook refuses every
  new connection of the stopped run (``RunStopped``), so a retry cannot spend again.

A thread belongs to a run when it carries the run in the ``current_switch`` context variable (the
worker, and threads that copy its context: smolagents' parallel tool calls) or, failing that,
when its stack runs the run's agents (the code thread, whose context smolagents does not copy).

Who wins a race. ``stop()`` and the worker's ``enter()``/``seal()`` take one lock: an exception is
raised in the worker only between ``enter`` and ``seal``, and ``seal`` absorbs one that was raised
just before it, so it never lands in nbagent's own bookkeeping after the agent's code ended. A
Stop after ``seal`` does nothing. ``stop()`` is idempotent and may be called from any thread.

Not covered (the run's record is complete at once anyway; ``wait_idle`` tells when the worker is
done): a thread blocked in C without a socket of the run (``time.sleep``, a lock, a subprocess)
stops when that call returns; a connection opened outside any nbagent run and then reused by one
is not known, so it is not dropped; threads a tool starts itself (without copying its context)
are not stopped; code that catches ``BaseException`` can swallow the exception (smolagents'
``interrupt()`` still stops the run at its next step). A socket pool shared with another agent
that runs at the same time loses its connections with this run's Stop. As with Ctrl-C, an
exception raised at an arbitrary point may interrupt library code between two statements; and a
thread that leaves the run's code in the microseconds between being found and being stopped gets
the exception in what it runs next (for a thread of an idle thread pool, that ends the thread).
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import gc
import os
import socket
import sys
import threading
import time
import weakref
from collections.abc import Iterable
from types import FrameType
from typing import Any


class RunStopped(BaseException):
    """Raised in the threads of a smolagents run that nbagent stopped now.

    A ``BaseException``, like ``KeyboardInterrupt``: code that catches ``Exception`` lets it through.
    """

    def __init__(self, *args: object) -> None:
        super().__init__(*(args or ("the run was stopped by nbagent",)))


current_switch: contextvars.ContextVar[StopSwitch | None] = contextvars.ContextVar(
    "nbagent_smolagents_run", default=None
)
"""The stop switch of the smolagents run the current thread works for."""

_live: set[StopSwitch] = set()
_live_lock = threading.Lock()


def agent_tree(agent: Any) -> list[Any]:
    """``agent`` and its managed agents, recursively, each once."""
    found: list[Any] = []
    pending = [agent]
    while pending:
        current = pending.pop()
        if any(current is seen for seen in found):
            continue
        found.append(current)
        pending.extend(getattr(current, "managed_agents", {}).values())
    return found


class StopSwitch:
    """One smolagents run's way to stop now. Created on the loop, entered by the run's worker thread.

    Args:
        agents: the run's agents (the top one and its managed agents).
    """

    def __init__(self, agents: list[Any]) -> None:
        from smolagents.local_python_executor import LocalPythonExecutor

        self.agents = agents
        self._states = [
            executor.state
            for agent in agents
            if isinstance(executor := getattr(agent, "python_executor", None), LocalPythonExecutor)
        ]
        self._lock = threading.Lock()
        self._stopped = False
        self._live = False
        self._sealed = False
        self._ident: int | None = None

    @property
    def stopped(self) -> bool:
        """True once ``stop()`` was accepted."""
        return self._stopped

    def enter(self) -> None:
        """On the worker thread, before any code of the agent: from now on ``stop()`` reaches it."""
        _install_audit_hook()
        current_switch.set(self)
        with self._lock:
            if self._stopped:
                raise RunStopped()
            self._ident = threading.get_ident()
            self._live = True
        with _live_lock:
            _live.add(self)

    def seal(self) -> None:
        """On the worker thread, once the agent's code has ended: no exception is raised in it anymore.

        An exception that ``stop()`` raised just before lands here, and is absorbed.
        """
        while True:
            try:
                with self._lock:
                    self._live = False
                    self._sealed = True
                _let_pending_exception_land()
                break
            except RunStopped:
                continue
        with _live_lock:
            _live.discard(self)
        # A sealed switch stops nothing; forgetting the agents lets them be collected (the worker
        # registry maps an agent to its worker weakly, and the worker holds this switch).
        self.agents, self._states = [], []

    def stop(self) -> bool:
        """Stop the run now; False if it was stopped already or has ended. Idempotent; any thread."""
        with self._lock:
            if self._stopped or self._sealed:
                return False
            self._stopped = True
            if self._live and self._ident is not None:
                for agent in self.agents:
                    agent.interrupt()
                _raise_in(self._ident)
            worker, agents = self._ident, self.agents
        for ident in self._other_threads(worker):
            _raise_in(ident)
        drop_connections(agents)
        return True

    def owns(self, frame: FrameType) -> bool:
        """True if ``frame`` (a smolagents frame) runs one of this run's agents or executors."""
        try:
            names = frame.f_locals
        except Exception:
            return False
        owner = names.get("self")
        if owner is not None and any(owner is agent for agent in self.agents):
            return True
        state = names.get("state")
        return state is not None and any(state is known for known in self._states)

    def _other_threads(self, worker: int | None) -> list[int]:
        me = threading.get_ident()
        return [
            ident
            for ident, frame in current_frames().items()
            if ident not in (me, worker) and _owner(frame, [self]) is self
        ]


def current_frames() -> dict[int, FrameType]:
    """``sys._current_frames()`` with the garbage collector held off: on CPython < 3.12 a
    collection inside it can run a finalizer that needs the interpreter's thread-list lock the
    call already holds, and the thread hangs for good (CPython gh-106883; seen here as a Stop
    that never returned under load)."""
    if not gc.isenabled():
        return sys._current_frames()
    gc.disable()
    try:
        return sys._current_frames()
    finally:
        gc.enable()


def _let_pending_exception_land() -> None:
    """A few bytecodes in a Python frame of our own: an exception set for this thread lands here."""
    for _ in range(3):
        pass


BIRTH_WAIT_S = 0.5
"""How long a Stop waits for threads being started to take their own ids (``_raise_in``)."""


def _raise_in(ident: int) -> None:
    """Raise ``RunStopped`` in the thread ``ident``.

    A thread being started carries its starter's id until its OS thread begins, and
    ``PyThreadState_SetAsyncExc`` raises in the first thread state with the id, the newest: a Stop
    while the worker starts a thread (smolagents starts rich's refresh thread at every step) would
    kill the newborn thread before it set ``_started``, and its starter would wait for it forever.
    So the Stop first waits, briefly, until no thread of ``threading`` is between ``start()`` and
    its own id (``threading._limbo``)."""
    deadline = time.monotonic() + BIRTH_WAIT_S
    while threading._limbo and time.monotonic() < deadline:  # type: ignore[attr-defined]
        time.sleep(0.0005)
    set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
    if set_async_exc(ctypes.c_ulong(ident), ctypes.py_object(RunStopped)) > 1:  # never: ids are unique
        set_async_exc(ctypes.c_ulong(ident), None)


_SMOLAGENTS_DIR: str | None = None


def _smolagents_dir() -> str:
    global _SMOLAGENTS_DIR
    if _SMOLAGENTS_DIR is None:
        import smolagents

        _SMOLAGENTS_DIR = os.path.dirname(smolagents.__file__) + os.sep
    return _SMOLAGENTS_DIR


def _owner(frame: FrameType | None, switches: Iterable[StopSwitch]) -> StopSwitch | None:
    """The run whose agents the stack ending at ``frame`` runs: judged by its outermost smolagents frame."""
    root = _smolagents_dir()
    outermost = None
    while frame is not None:
        if frame.f_code.co_filename.startswith(root):
            outermost = frame
        frame = frame.f_back
    if outermost is None:
        return None
    for switch in switches:
        if switch.owns(outermost):
            return switch
    return None


def switch_of_this_thread() -> StopSwitch | None:
    """The run the current thread works for, if any."""
    switch = current_switch.get()
    if switch is not None:
        return switch
    with _live_lock:
        live = list(_live)
    if not live:
        return None
    return _owner(sys._getframe(1), live)


# -- sockets ------------------------------------------------------------------------------------

_sockets: weakref.WeakKeyDictionary[Any, weakref.WeakSet[socket.socket]] = weakref.WeakKeyDictionary()
_sockets_lock = threading.Lock()
_hook_installed = False
_hook_lock = threading.Lock()


def _install_audit_hook() -> None:
    global _hook_installed
    with _hook_lock:
        if not _hook_installed:
            sys.addaudithook(_audit)
            _hook_installed = True


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event != "socket.connect" and event != "socket.__new__":
        return
    try:
        switch = switch_of_this_thread()
        if switch is None:
            return
        if switch.stopped:
            stopped = True
        else:
            stopped = False
            _file(switch.agents, args[0])
    except Exception:
        return  # the hook must never break a socket that is none of our business
    if stopped:
        raise RunStopped("the run was stopped by nbagent: no new connection")


def _file(agents: list[Any], sock: Any) -> None:
    with _sockets_lock:
        for agent in agents:
            with contextlib.suppress(TypeError):  # an agent that cannot be weakly referenced
                known = _sockets.get(agent)
                if known is None:
                    known = _sockets[agent] = weakref.WeakSet()
                known.add(sock)


def connections_of(agents: Iterable[Any]) -> list[socket.socket]:
    """The open sockets filed under ``agents`` (created or connected by threads of their runs)."""
    found: dict[int, socket.socket] = {}
    with _sockets_lock:
        for agent in agents:
            with contextlib.suppress(TypeError):
                for sock in list(_sockets.get(agent, ())):
                    found[id(sock)] = sock
    return [sock for sock in found.values() if sock.fileno() != -1]


def drop_connections(agents: Iterable[Any]) -> int:
    """Shut down (both ways) every open socket filed under ``agents``; returns how many.

    ``shutdown``, not ``close``: it wakes a thread blocked in ``recv`` on it, and the peer sees the
    connection end. The socket object stays for its owner to close. The base class's method is
    used so an ``SSLSocket`` keeps its TLS object for the thread still reading from it.
    """
    dropped = 0
    for sock in connections_of(agents):
        with contextlib.suppress(OSError):
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
            dropped += 1
    return dropped
