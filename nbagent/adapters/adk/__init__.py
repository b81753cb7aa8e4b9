"""Google ADK (``google-adk``) under nbagent: agents, workflows, apps and runners.

Files: ``source`` (``AdkSource``, the ``Source`` and its detection), ``stream`` (ADK's events
and plugin callbacks as ``ctx`` calls), ``session`` (the session a run works in, left consistent
after a Stop), ``records`` (``records_from_adk``, the reader shared with live runs). This package
itself imports nothing of ADK: ``import nbagent`` stays cheap, and detection
(``is_adk_agent``) looks at the object's classes only once ADK is loaded.
"""

from __future__ import annotations

from typing import Any

from nbagent.adapters import instance_of

__all__ = ["is_adk_agent", "records_from_adk"]


def is_adk_agent(obj: Any) -> bool:
    """True for an ADK agent, ``Workflow`` (any ``BaseNode``), ``App`` or ``Runner``. Never
    imports ADK: an object of it exists only once ADK is imported."""
    return (
        instance_of(obj, "google.adk.workflow._base_node", "BaseNode")
        or instance_of(obj, "google.adk.runners", "Runner")
        or instance_of(obj, "google.adk.apps.app", "App")
    )


def records_from_adk(session: Any, agent: Any = None) -> Any:
    """Records of a session run with ADK alone (``nbagent.adapters.adk.records``)."""
    from nbagent.adapters.adk.records import records_from_adk as read

    return read(session, agent)
