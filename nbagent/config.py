"""Process-wide defaults, set with ``nbagent.configure()``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Settings:
    store: Any = None
    """A ``RunStore`` every run is persisted to unless ``start(store=...)`` names another."""
    display: bool | None = None
    """Show the live view on ``start``: None means "when running in a Jupyter kernel"."""
    quiet_smolagents: bool = True
    """Silence smolagents' own console output while nbagent shows the run."""


settings = Settings()

_UNSET: Any = object()


def configure(*, store: Any = _UNSET, display: Any = _UNSET, quiet_smolagents: Any = _UNSET) -> Settings:
    """Set process-wide defaults; returns the settings. Only the options you pass change."""
    if store is not _UNSET:
        settings.store = store
    if display is not _UNSET:
        settings.display = display
    if quiet_smolagents is not _UNSET:
        settings.quiet_smolagents = quiet_smolagents
    return settings
