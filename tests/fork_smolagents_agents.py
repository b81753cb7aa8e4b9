"""The smolagents agents of the fork tests, importable by a fresh process too."""

from __future__ import annotations

import json
from typing import Any

from smolagents import ToolCallingAgent, tool
from smolagents_fakes import ScriptedSmolModel, Turn, answer, call


class Recording(ScriptedSmolModel):
    """A scripted model that keeps every request's messages, as JSON (``requests``)."""

    def __init__(self, turns: list[Turn]) -> None:
        super().__init__(turns)
        self.requests: list[list[dict[str, Any]]] = []

    def _take(self, messages: list[Any]) -> Turn:
        self.requests.append(as_json(messages))
        return super()._take(messages)


def as_json(messages: list[Any]) -> list[dict[str, Any]]:
    """Messages as compared: smolagents' own dict of each, through JSON."""
    return json.loads(json.dumps([m.dict() if hasattr(m, "dict") else m for m in messages], default=str))


def five_steps() -> list[Turn]:
    """Steps 1-4 call ``add(n, n)`` (smolagents call ids call_1..call_4), step 5 answers."""
    return [call("add", a=n, b=n) for n in range(1, 5)] + [answer("the sum is 20")]


def make_agent(model: Recording, calls: list[Any]) -> ToolCallingAgent:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers.

        Args:
            a: the first.
            b: the second.
        """
        calls.append((a, b))
        return a + b

    return ToolCallingAgent(tools=[add], model=model, name="adder", max_steps=10, verbosity_level=0)
