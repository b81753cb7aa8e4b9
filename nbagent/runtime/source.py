"""What the runner runs (``Source``) and where a run's events go (``Sink``).

The native ``Agent`` is a ``Source``; each framework's adapter (``nbagent.adapters``) makes one of
a foreign agent. A ``Sink`` is any callable taking each ``nbagent.events`` event: the live view,
the store's writer, an OpenTelemetry exporter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from nbagent import events as ev

if TYPE_CHECKING:
    from nbagent.context import RunContext

Sink = Callable[[ev.RunEvent], Any]


class Source(Protocol):
    """What the runner can run: the native ``Agent`` and each framework's adapter are one.

    ``task_text(task) -> str`` (optional) lets a source take more than a ``str`` task (a list of
    content parts, say): it returns the task's readable text for the record, or raises
    ``TypeError`` for a task it cannot take; ``drive`` gets the task as given. Without it, a task
    must be a ``str``.

    ``takes_turns`` (optional, default True) says how runs of one agent are ordered
    (``nbagent.runtime.turns``): True when the agent keeps its memory on itself, False when it
    keeps nothing between runs (then only a continued run waits, and ``ctx.kept_history`` /
    ``ctx.keep_history`` carry the history from one run to the next).
    """

    name: str

    @property
    def model_name(self) -> str: ...

    async def drive(self, task: str, ctx: RunContext, reset: bool = True, **options: Any) -> Any:
        """Run ``task``, reporting through ``ctx``; ``options`` are the extra keywords given to
        ``start`` (a source declares the ones it takes as keyword-only parameters)."""
        ...


def native_source(agent: Any) -> Source:
    if not hasattr(agent, "drive"):
        raise TypeError(
            f"{type(agent).__name__} is not an nbagent source: use nbagent.start(agent, task), which "
            "finds the adapter of a framework's agent, or pass source="
        )
    return agent
