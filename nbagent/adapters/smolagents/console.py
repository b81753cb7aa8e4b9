"""smolagents' console output during an nbagent run: silenced while nbagent shows the run, or
handed to a ``console.capture()`` around the run.

smolagents prints through each agent's ``logger.console``, a rich ``Console``, from the thread that
runs the agent: under nbagent, the run's worker thread. rich buffers output per thread
(``begin_capture``), which gives both behaviours without replacing anything of the user's:

- Quiet (``configure(quiet_smolagents=True)``, the default, and a view shows the run): the worker
  captures on every console of the run's agents and throws the capture away at the end; a tool or
  managed agent that a ``CodeAgent``'s code calls is captured the same way on the code's thread,
  for the length of the call. smolagents streams through rich ``Live`` displays, which draw from a
  refresh thread of their own (and in Jupyter put an output widget on the page): for the run, a
  placeholder ``Live`` is set on each console (rich's own ``set_live``), so smolagents' ``Live`` is
  nested under it, draws nothing and prints its last state, into the capture, when it stops.
  While a quiet run is live, other ``Live`` displays on those consoles are nested the same way.
- Not quiet, with the caller capturing (``with agent.logger.console.capture() as capture:
  nbagent.run(agent, ...)``): the worker captures on the top agent's console and adds what it
  captured to the caller's capture as the run ends, before the run's record is handed out.

A capture is ended with ``_take_capture``, not rich's ``end_capture``: in Jupyter, rich displays
its (now empty) buffer each time the last capture of a thread ends, an empty ``<pre>`` that leaves
a blank gap under the view, once per step and per call from code.

The consoles, loggers and log levels stay as they are; the user's own threads print as usual.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


def consoles_of(agents: list[Any]) -> list[Any]:
    """The distinct rich consoles the agents log to."""
    found: list[Any] = []
    for agent in agents:
        console = getattr(getattr(agent, "logger", None), "console", None)
        if console is not None and hasattr(console, "begin_capture") and not any(console is c for c in found):
            found.append(console)
    return found


def caller_capture(agent: Any) -> list[Any] | None:
    """The capture buffer of the calling thread on the agent's console, if it is capturing now.

    rich keeps it per thread, so it is read here, on the thread that starts the run.
    """
    console = getattr(getattr(agent, "logger", None), "console", None)
    try:
        if console is not None and console._buffer_index > 0:
            buffer = console._buffer
            return buffer if isinstance(buffer, list) else None
    except AttributeError:
        pass
    return None


class _Placeholder:
    """A console's first ``Live`` in a quiet run: ``Live`` displays nested under it draw nothing."""

    def refresh(self) -> None:
        pass

    def get_renderable(self) -> str:
        return ""


class RunConsole:
    """The console side of one run: ``open()`` and ``close()`` on the worker thread.

    Args:
        agents: the run's agents (the top one first).
        quiet: silence their output.
        caller_buffer: the caller's capture buffer (``caller_capture``), to hand the output to.
    """

    def __init__(self, agents: list[Any], quiet: bool, caller_buffer: list[Any] | None) -> None:
        self.quiet = quiet
        self._consoles = consoles_of(agents)
        top = consoles_of(agents[:1])
        self._forward_to = caller_buffer if not quiet and top else None
        self._captured: list[Any] = []
        self._placeholders: list[tuple[Any, _Placeholder]] = []

    def open(self) -> None:
        if self.quiet:
            for console in self._consoles:
                console.begin_capture()
                self._captured.append(console)
                placeholder = _Placeholder()
                console.set_live(placeholder)
                self._placeholders.append((console, placeholder))
        elif self._forward_to is not None:
            console = self._consoles[0]
            console.begin_capture()
            self._captured.append(console)

    def close(self) -> None:
        for console, placeholder in self._placeholders:
            _remove_live(console, placeholder)
        self._placeholders.clear()
        for console in self._captured:
            with contextlib.suppress(Exception):
                text = _take_capture(console)
                if self._forward_to is not None and text:
                    from rich.segment import Segment

                    self._forward_to.append(Segment(text))
        self._captured.clear()

    def drop_captured(self) -> None:
        """Quiet: throw away what was captured so far (on the worker thread, between steps), so a
        long run does not hold all its output until the end."""
        if self.quiet:
            for console in self._captured:
                with contextlib.suppress(Exception):
                    _take_capture(console)
                console.begin_capture()

    @contextlib.contextmanager
    def quiet_call(self) -> Iterator[None]:
        """Around a call on another thread of the run (code calling a tool or a managed agent)."""
        if not self.quiet:
            yield
            return
        for console in self._consoles:
            console.begin_capture()
        try:
            yield
        finally:
            for console in self._consoles:
                with contextlib.suppress(Exception):
                    _take_capture(console)


def _take_capture(console: Any) -> str:
    """End this thread's innermost capture on ``console`` and return its text, writing nothing.

    rich's ``end_capture`` hands the emptied buffer to ``_check_buffer`` once the last capture of
    the thread ends, which in Jupyter displays an empty ``<pre>``. Here the buffer (rich keeps it
    per thread) is rendered, emptied and the capture closed without that write."""
    try:
        with console._lock:
            text = console._render_buffer(console._buffer)
            del console._buffer[:]
            console._buffer_index = max(0, console._buffer_index - 1)
        return str(text)
    except AttributeError:  # a console without rich's internals: its own end_capture will do
        return str(console.end_capture())


def _remove_live(console: Any, placeholder: _Placeholder) -> None:
    """Take the placeholder off the console's ``Live`` stack, wherever it is (rich only pops the top)."""
    with contextlib.suppress(Exception), console._lock:
        stack = console._live_stack
        for index in range(len(stack) - 1, -1, -1):
            if stack[index] is placeholder:
                del stack[index]
                break
