"""Adapters: run agents from other frameworks under nbagent (live view, Stop, records).

Each adapter module imports its framework lazily, so nbagent works without it installed.
``source_for`` is the one place that recognises a foreign agent and wraps it.

Which runs of one agent may work at once, and the history a continued run picks up, is decided
in one place for every framework: ``nbagent.runtime.turns`` (a source's ``takes_turns``).
"""

from __future__ import annotations

import importlib
import inspect
import sys
from typing import Any

from nbagent.extras import install_hint
from nbagent.lazy import lazy_attributes


def source_for(agent: Any) -> Any | None:
    """The adapter (a ``Source``) that runs ``agent``, or None if no adapter knows its type.

    Detection never imports a framework: an agent of a framework exists only once that
    framework has been imported by the user.
    """
    from nbagent.adapters import smolagents

    if smolagents.is_smolagents_agent(agent):
        return smolagents.SmolagentsSource(agent)
    from nbagent.adapters import openai_agents, pydantic_ai

    if pydantic_ai.is_pydantic_ai_agent(agent):
        return pydantic_ai.PydanticAISource(agent)
    if openai_agents.is_openai_agents_agent(agent):
        return openai_agents.OpenAIAgentsSource(agent)
    from nbagent.adapters import langgraph

    if langgraph.is_langgraph_graph(agent):
        return langgraph.LangGraphSource(agent)
    return None


def as_source(agent: Any) -> Any:
    """The runnable form of ``agent`` (a ``nbagent.runtime.source.Source``): itself if native,
    else its framework's adapter; a ``TypeError`` that says what can run otherwise."""
    if isinstance(agent, type):  # a class has its instances' methods, ``drive`` among them
        raise TypeError(
            f"nbagent runs an agent, not the class {agent.__name__}: pass an instance, "
            f"such as {agent.__name__}(...)"
        )
    if hasattr(agent, "drive"):
        return agent
    source = source_for(agent)
    if source is None:
        built = f" ({agent.__name__} is a function: call it)" if inspect.isfunction(agent) else ""
        raise TypeError(
            f"nbagent cannot run {type(agent).__name__}{built}: pass an nbagent.Agent, or an agent of "
            "smolagents, pydantic-ai, the OpenAI Agents SDK or LangGraph"
        )
    return source


def require(module: str, extra: str, framework: str) -> Any:
    """The framework's module, or an ImportError that names the nbagent extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{framework} is not installed: {install_hint(extra)}") from exc


def reported_usage(usage: Any) -> tuple[int | None, int | None]:
    """(input, output) tokens of a framework's usage object; ``(None, None)`` when it reported
    nothing (frameworks say 0 and 0 for "no usage", which nbagent keeps unknown, never 0)."""
    tokens_in = getattr(usage, "input_tokens", None)
    tokens_out = getattr(usage, "output_tokens", None)
    if not tokens_in and not tokens_out:
        return None, None
    return tokens_in, tokens_out


def instance_of(obj: Any, module_name: str, class_name: str) -> bool:
    """True when ``obj`` is an instance of ``module_name.class_name``, if that module is loaded."""
    cls = getattr(sys.modules.get(module_name), class_name, None)
    return isinstance(cls, type) and isinstance(obj, cls)


_RECORDS_FROM = {
    "records_from_smolagents": "smolagents_memory",
    "records_from_pydantic_ai": "pydantic_ai_records",
    "records_from_openai_agents": "openai_agents_records",
    "records_from_langgraph": "langgraph_records",
}


__getattr__, __dir__ = lazy_attributes(__name__, _RECORDS_FROM)
"""``records_from_<framework>``: read runs made without nbagent (imports that adapter only)."""
