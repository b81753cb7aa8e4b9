"""The ADK agents of the fork tests, importable by a fresh process too."""

from __future__ import annotations

from typing import Any

from adk_fakes import Turn, scripted
from google.adk import Agent


def five_steps() -> list[Turn]:
    """Steps 1-4 call ``add(n, n)``, step 5 answers."""
    return [Turn(f"Adding {n}.", [("add", {"a": n, "b": n})]) for n in range(1, 5)] + [Turn("the sum is 20")]


def make_agent(turns: list[Turn], calls: list[Any]) -> Agent:
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        calls.append((a, b))
        return a + b

    return Agent(name="adder", model=scripted(turns), tools=[add], instruction="Add carefully.")


def sent(agent: Agent) -> list[list[dict[str, Any]]]:
    """Each request's contents as JSON (ADK sends no call ids: it strips its own)."""
    return [
        [c.model_dump(mode="json", exclude_none=True) for c in r.contents]
        for r in agent.model.script.requests
    ]
