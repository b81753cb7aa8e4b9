"""Adapters: run agents from other frameworks under nbagent (live view, Stop, records).

Each adapter module imports its framework lazily, so nbagent works without it installed, and
declares its ``Source`` subclass on the contract of ``nbagent.runtime.source`` (docs/adapters.md).
``registry`` is the one place that recognises a foreign agent and names its source
(``as_source``, ``source_for``; ``register`` adds a framework).

Which runs of one agent may work at once, and the history a continued run picks up, is decided
in one place for every framework: ``nbagent.runtime.turns`` (a source's ``takes_turns``).
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from nbagent.adapters.registry import Adapter, adapter_for, as_source, register, source_for
from nbagent.extras import install_hint
from nbagent.lazy import lazy_attributes


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
    "records_from_smolagents": "smolagents.records",
    "records_from_pydantic_ai": "pydantic_ai.records",
    "records_from_openai_agents": "openai_agents.records",
    "records_from_langgraph": "langgraph.records",
}


__getattr__, __dir__ = lazy_attributes(__name__, _RECORDS_FROM)
"""``records_from_<framework>``: read runs made without nbagent (imports that adapter only)."""

__all__ = ["Adapter", "adapter_for", "as_source", "register", "source_for", *_RECORDS_FROM]
