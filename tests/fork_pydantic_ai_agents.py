"""The pydantic-ai agents of the fork tests, importable by a fresh process too."""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel


class Scripted:
    """A ``FunctionModel`` reply: steps 1-4 call ``add`` (ids c1..c4), then ``answer``; every
    request's messages are kept."""

    def __init__(self, answer: str = "the sum is 20", calls: int = 4) -> None:
        self.answer, self.calls = answer, calls
        self.requests: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(list(messages))
        n = len(self.requests)
        if n <= self.calls:
            return ModelResponse(parts=[ToolCallPart("add", {"a": n, "b": n}, tool_call_id=f"c{n}")])
        return ModelResponse(parts=[TextPart(self.answer)])


def make_agent(script: Scripted, tool_calls: list[Any]) -> Agent:
    agent = Agent(FunctionModel(script), instructions="Add carefully.", name="adder")

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        tool_calls.append((a, b))
        return a + b

    return agent


def same(messages: list[ModelMessage]) -> list[Any]:
    """Messages as compared: a request's ``timestamp`` is when pydantic-ai sent it (it stamps a
    history's last request again when it sends it), so it is left out."""
    return [dataclasses.replace(m, timestamp=None) if m.kind == "request" else m for m in messages]
