"""Process-wide defaults, set with ``nbagent.configure()`` (``nbagent.api``, which checks them).

A leaf: it imports nothing of nbagent, so any layer may read ``settings``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class _Unchanged:
    """The default of every ``configure`` option: leave the setting as it is."""

    def __repr__(self) -> str:
        return "unchanged"


UNCHANGED: Any = _Unchanged()


@dataclass
class Settings:
    store: Any = None
    """A ``RunStore`` every run is persisted to unless ``start(store=...)`` names another
    (``configure(store=)`` takes a path too, and opens its store)."""
    display: bool | None = None
    """Show runs on ``start``: None (the default) and True mean "yes": the live widget view in a
    Jupyter kernel, the text view elsewhere; False shows nothing."""
    quiet_smolagents: bool = True
    """Silence smolagents' own console output while nbagent shows the run."""
    history_limit: int | None = 1000
    """How many finished runs ``nbagent.history`` keeps in memory (the oldest go first; None
    keeps all). A ``RunStore`` is where every run is kept."""
    limits: Any = None
    """``nbagent.Limits`` every run gets unless ``start(limits=...)`` gives others."""
    approval_timeout_s: float | None = None
    """Seconds a tool call waits for approval before it is denied ("timed out"); None: no end."""


settings = Settings()
