"""The Agents SDK agents of the fork tests, importable by a fresh process too."""

from __future__ import annotations

from typing import Any

from agents import Agent, function_tool
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call


def five_steps() -> list[ModelStep]:
    """Steps 1-4 call ``add`` (call ids c1..c4), step 5 answers."""
    steps = [ModelStep(output=[function_call("add", {"a": n, "b": n}, call_id=f"c{n}")]) for n in range(1, 5)]
    return [*steps, ModelStep(output=[assistant_message("the sum is 20")])]


def answer(text: str) -> list[ModelStep]:
    return [ModelStep(output=[assistant_message(text)])]


def make_agent(model: ScriptedModel, tool_calls: list[Any]) -> Agent:
    @function_tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        tool_calls.append((a, b))
        return a + b

    return Agent(name="adder", instructions="Add carefully.", model=model, tools=[add])
