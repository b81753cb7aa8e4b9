"""Process-wide defaults, set with ``nbagent.configure()``."""

from __future__ import annotations

import operator
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


def configure(
    *,
    store: Any = UNCHANGED,
    display: bool | None = UNCHANGED,
    quiet_smolagents: bool = UNCHANGED,
    history_limit: int | None = UNCHANGED,
    limits: Any = UNCHANGED,
    approval_timeout_s: float | None = UNCHANGED,
) -> Settings:
    """Set process-wide defaults; returns the settings. Only the options you pass change.

    Args:
        store: a ``RunStore``, or a path to one (``"runs.db"``, a ``Path``, ``"~/runs.db"``),
            every run is persisted to (None: no store); another type is a ``TypeError``.
        display: False to show no view; None/True: widgets in Jupyter, text elsewhere.
        quiet_smolagents: silence smolagents' own console output while nbagent shows the run.
        history_limit: how many finished runs ``nbagent.history`` keeps in memory (default
            1000; None keeps every run). Older runs are dropped from memory, not from a store.
        limits: ``nbagent.Limits`` for every run (None: no limits); ``start(limits=)`` overrides.
        approval_timeout_s: seconds before an undecided approval is denied (None: no end).
    """
    if store is not UNCHANGED and store is not None:  # first: a bad store changes nothing
        from nbagent.analytics.store import open_store  # a path becomes its store, now

        store = open_store(store)
    if limits is not UNCHANGED:
        from nbagent.guardrails.limits import Limits

        if limits is not None and not isinstance(limits, Limits):
            raise TypeError(f"limits must be nbagent.Limits(...) or None, not {type(limits).__name__}")
        settings.limits = limits
    if approval_timeout_s is not UNCHANGED:
        if approval_timeout_s is not None and (
            isinstance(approval_timeout_s, bool)
            or not isinstance(approval_timeout_s, (int, float))
            or not approval_timeout_s > 0
        ):
            raise ValueError(
                f"approval_timeout_s must be a positive number or None, not {approval_timeout_s!r}"
            )
        settings.approval_timeout_s = approval_timeout_s
    if store is not UNCHANGED:
        settings.store = store
    if display is not UNCHANGED:
        settings.display = display
    if quiet_smolagents is not UNCHANGED:
        settings.quiet_smolagents = quiet_smolagents
    if history_limit is not UNCHANGED:
        if history_limit is not None:
            try:
                if isinstance(history_limit, bool):
                    raise TypeError
                history_limit = operator.index(history_limit)
            except TypeError:
                raise ValueError(f"history_limit must be an int or None, not {history_limit!r}") from None
            if history_limit < 1:
                raise ValueError(
                    f"history_limit must be at least 1 (nbagent.history.last() returns the latest run), "
                    f"not {history_limit}"
                )
        settings.history_limit = history_limit
        from nbagent.analytics.history import trim

        trim()
    return settings
