"""The LangGraph graphs of the fork tests, importable by a fresh process too."""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph_fakes import ScriptedChatModel


def five_steps() -> list[AIMessage]:
    """Steps 1-4 call ``add`` (ids c1..c4), step 5 answers."""
    calls = [
        AIMessage("", tool_calls=[{"name": "add", "args": {"a": n, "b": n}, "id": f"c{n}"}])
        for n in range(1, 5)
    ]
    return [*calls, AIMessage("the sum is 20")]


def make_graph(model: ScriptedChatModel, tool_calls: list[Any], checkpointer: Any = None) -> Any:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        tool_calls.append((a, b))
        return a + b

    return create_agent(model, tools=[add], system_prompt="Add carefully.", checkpointer=checkpointer)


def texts(messages: list[Any]) -> list[tuple[str, Any, Any]]:
    """Messages as compared: their kind, content and tool call id (LangChain gives each an id)."""
    return [(m.type, m.content, getattr(m, "tool_call_id", None)) for m in messages]
