"""Adapters: run agents from other frameworks under nbagent (live view, Stop, records).

Each adapter module imports its framework lazily, so nbagent works without it installed.
``source_for`` is the one place that recognises a foreign agent and wraps it.

``Conversations`` is what the adapters of stateless frameworks (pydantic-ai, the OpenAI Agents
SDK) share: their agents keep no memory between runs, so ``reset=False`` continues from the
history nbagent kept of the agent's last run. It is kept beside the agent (a weak mapping), never
on it, so the user's object is left exactly as a plain run leaves it; runs of one agent take
turns on it, so a continued run sees the history its predecessor ended with.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import sys
from collections.abc import AsyncIterator
from typing import Any

from nbagent.runtime.identity_map import IdentityMap


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
    return None


def require(module: str, extra: str, framework: str) -> Any:
    """The framework's module, or an ImportError that names the nbagent extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{framework} is not installed: pip install 'nbagent[{extra}]'") from exc


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


class Conversations:
    """Per agent: the history its last nbagent run ended with, and whose turn it is.

    Used on the runner's loop only. The lock is made on first use in a loop, and made again if the
    runner's loop was replaced (a retired loop's lock would never be released). An agent that
    cannot be weakly referenced has no kept history, and its runs do not take turns.
    """

    def __init__(self) -> None:
        self._history = IdentityMap()
        self._turns = IdentityMap()
        self._holders = IdentityMap()

    def last(self, agent: Any) -> Any:
        """The history the agent's last run ended with (``None`` before any run)."""
        return self._history.get(agent)

    def keep(self, agent: Any, history: Any) -> None:
        with contextlib.suppress(TypeError):
            self._history.set(agent, history)

    @contextlib.asynccontextmanager
    async def turn(self, agent: Any, ctx: Any) -> AsyncIterator[None]:
        """Hold the agent's turn for one run; a run that must wait is reported as queued."""
        loop = asyncio.get_running_loop()
        entry = self._turns.get(agent)
        if entry is None or entry[0] is not loop:
            entry = (loop, asyncio.Lock())
            with contextlib.suppress(TypeError):  # not weakly referenceable: its runs are not ordered
                self._turns.set(agent, entry)
        lock = entry[1]
        queued = lock.locked()
        if queued:
            ctx.queued(self._holders.get(agent))
        async with lock:
            if queued:
                ctx.dequeued()
            self._holders.set(agent, ctx.run_id)
            try:
                yield
            finally:
                self._holders.pop(agent)
