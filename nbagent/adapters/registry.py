"""Which framework an agent comes from, and the ``Source`` that runs it: one list, walked in order.

Each entry (an ``Adapter``) names the framework, the nbagent extra that installs it, the packages
its agents' classes come from, the adapter's exact test and its ``Source`` subclass, the last two
as ``"module:name"`` so that nothing is imported until an agent needs it. Detection looks at the
object's classes first: an object none of whose classes comes from the framework's packages is not
its agent, and neither the framework nor its adapter is imported to say so (``import nbagent`` and
running a native agent load no framework). ``register`` adds a framework from outside nbagent.
"""

from __future__ import annotations

import importlib
import inspect
import threading
from dataclasses import dataclass
from typing import Any

from nbagent.runtime.source import Source


@dataclass(frozen=True)
class Adapter:
    """One framework whose agents nbagent runs."""

    framework: str
    """Its name in messages: ``"the OpenAI Agents SDK"``."""
    extra: str
    """The nbagent extra that installs it (named by ``nbagent.extras.install_hint``)."""
    packages: tuple[str, ...]
    """The top-level packages its agents' classes come from (``"agents"`` for the SDK)."""
    detects: str
    """``"module:function"``: the exact test, ``function(obj) -> bool``; it must not import the
    framework (an agent of it exists only once the user imported it)."""
    source: str
    """``"module:Class"``: the ``Source`` subclass that runs a detected agent, ``Class(agent)``."""

    def claims(self, obj: Any) -> bool:
        """True when ``obj`` is an agent of this framework. Cheap: the adapter is imported only
        for an object one of whose classes comes from the framework's packages."""
        modules = (getattr(cls, "__module__", None) or "" for cls in type(obj).__mro__)
        if not any(module.partition(".")[0] in self.packages for module in modules):
            return False
        return bool(_load(self.detects)(obj))

    def source_of(self, agent: Any) -> Source:
        """The adapter's source over ``agent``."""
        return _load(self.source)(agent)


def _load(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


ADAPTERS: list[Adapter] = [
    Adapter(
        "smolagents",
        extra="smolagents",
        packages=("smolagents",),
        detects="nbagent.adapters.smolagents.source:is_smolagents_agent",
        source="nbagent.adapters.smolagents.source:SmolagentsSource",
    ),
    Adapter(
        "pydantic-ai",
        extra="pydantic-ai",
        packages=("pydantic_ai",),
        detects="nbagent.adapters.pydantic_ai.source:is_pydantic_ai_agent",
        source="nbagent.adapters.pydantic_ai.source:PydanticAISource",
    ),
    Adapter(
        "the OpenAI Agents SDK",
        extra="openai-agents",
        packages=("agents",),
        detects="nbagent.adapters.openai_agents.source:is_openai_agents_agent",
        source="nbagent.adapters.openai_agents.source:OpenAIAgentsSource",
    ),
    Adapter(
        "LangGraph",
        extra="langgraph",
        packages=("langgraph",),
        detects="nbagent.adapters.langgraph.source:is_langgraph_graph",
        source="nbagent.adapters.langgraph.source:LangGraphSource",
    ),
]
"""The frameworks nbagent runs, in the order detection tries them."""
_lock = threading.Lock()


def register(adapter: Adapter) -> None:
    """Add a framework (tried after those already known); replaces one of the same name."""
    if not isinstance(adapter, Adapter):
        raise TypeError(f"register takes an nbagent.adapters.Adapter, not {type(adapter).__name__}")
    with _lock:
        ADAPTERS[:] = [a for a in ADAPTERS if a.framework != adapter.framework] + [adapter]


def adapter_for(agent: Any) -> Adapter | None:
    """The registered framework ``agent`` comes from, or None."""
    for adapter in list(ADAPTERS):
        if adapter.claims(agent):
            return adapter
    return None


def source_for(agent: Any) -> Source | None:
    """The adapter (a ``Source``) that runs ``agent``, or None if no adapter knows its type."""
    adapter = adapter_for(agent)
    return adapter.source_of(agent) if adapter is not None else None


def as_source(agent: Any) -> Source:
    """The runnable form of ``agent``: itself if it is a ``Source`` (the native ``Agent``), else
    its framework's adapter; a ``TypeError`` that says what can run otherwise."""
    if isinstance(agent, type):  # a class has its instances' methods, ``drive`` among them
        raise TypeError(
            f"nbagent runs an agent, not the class {agent.__name__}: pass an instance, "
            f"such as {agent.__name__}(...)"
        )
    if isinstance(agent, Source):
        return agent
    source = source_for(agent)
    if source is None:
        names = [adapter.framework for adapter in ADAPTERS]
        known = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else "".join(names)
        built = f" ({agent.__name__} is a function: call it)" if inspect.isfunction(agent) else ""
        if callable(getattr(agent, "drive", None)):
            built = " (it has a drive method: subclass nbagent.runtime.source.Source, see docs/adapters.md)"
        raise TypeError(
            f"nbagent cannot run {type(agent).__name__}{built}: pass an nbagent.Agent, or an agent of {known}"
        )
    return source
