"""Adapters: run agents from other frameworks under nbagent (live view, Stop, records).

Each adapter module imports its framework lazily, so nbagent works without it installed.
``source_for`` is the one place that recognises a foreign agent and wraps it.
"""

from __future__ import annotations

from typing import Any


def source_for(agent: Any) -> Any | None:
    """The adapter (a ``Source``) that runs ``agent``, or None if no adapter knows its type.

    Detection never imports a framework: an agent of a framework exists only once that
    framework has been imported by the user.
    """
    from nbagent.adapters import smolagents

    if smolagents.is_smolagents_agent(agent):
        return smolagents.SmolagentsSource(agent)
    return None
