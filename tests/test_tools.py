"""``@tool`` schemas, and tool failures that become observations while the run goes on."""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest
from conftest import fast_model

import nbagent
from nbagent.models import ToolCall
from nbagent.tools import parse_docstring


def test_schema_from_type_hints_and_docstring():
    @nbagent.tool
    def search(
        query: str, limit: int = 5, mode: Literal["fast", "deep"] = "fast", tags: list[str] | None = None
    ):
        """Search the notes.

        Longer explanation that is not part of the description.

        Args:
            query: what to look for.
            limit: how many hits
                at most.
            mode: how hard to look.

        Returns:
            the hits.
        """

    spec = search.spec["function"]
    assert spec["name"] == "search"
    assert spec["description"] == "Search the notes."
    props = spec["parameters"]["properties"]
    assert props["query"] == {"type": "string", "description": "what to look for."}
    assert props["limit"] == {"type": "integer", "description": "how many hits at most.", "default": 5}
    assert props["mode"]["enum"] == ["fast", "deep"]
    string_list = {"type": "array", "items": {"type": "string"}}
    assert props["tags"] == {"anyOf": [string_list, {"type": "null"}], "default": None}
    assert spec["parameters"]["required"] == ["query"]


def test_tool_options_and_plain_functions():
    @nbagent.tool(name="mul", timeout_s=2)
    def multiply(a: float, b: float) -> float:
        """Multiply."""
        return a * b

    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    agent = nbagent.Agent(fast_model([]), tools=[multiply, shout])
    assert set(agent.tools) == {"mul", "shout"}
    assert agent.tools["mul"].timeout_s == 2
    assert multiply(2, 3) == 6


def test_tool_without_hints_for_varargs_is_refused():
    with pytest.raises(TypeError, match="args"):

        @nbagent.tool
        def bad(*values: int) -> int:
            """No."""
            return 0


def test_docstring_without_sections():
    assert parse_docstring("Just this.\n\nAnd more.") == ("Just this.", {})
    assert parse_docstring(None) == ("", {})


@nbagent.tool
def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"tool broke: {reason}")


@nbagent.tool(timeout_s=0.05)
async def too_slow() -> str:
    """Takes longer than its timeout."""
    await asyncio.sleep(30)
    return "late"


def observations(agent):
    return [m["content"] for m in agent.memory if m["role"] == "tool"]


@pytest.mark.parametrize(
    ("call", "status", "message"),
    [
        (ToolCall("nope", {}), "error", "unknown tool 'nope'"),
        (ToolCall("explode", '{"reason": '), "error", "not valid JSON"),
        (ToolCall("explode", "[1, 2]"), "error", "must be a JSON object"),
        (ToolCall("explode", {"reason": "boom"}), "error", "tool broke: boom"),
        (ToolCall("explode", {}), "error", "missing reason"),
        (ToolCall("explode", {"reason": "x", "extra": 1}), "error", "unexpected extra"),
        (ToolCall("too_slow", {}), "error", "timed out after 0.05 s"),
    ],
)
def test_tool_failures_become_observations_and_the_run_goes_on(call, status, message):
    agent = nbagent.Agent(fast_model([[call], "recovered"]), tools=[explode, too_slow])
    record = nbagent.run(agent, "task")
    assert record.status == "success" and record.output == "recovered"
    recorded = record.steps[0].tool_calls[0]
    assert recorded.status == status
    assert message in recorded.error
    assert message in observations(agent)[0]


def test_scripted_model_running_out_is_a_clear_error():
    record = nbagent.run(nbagent.Agent(fast_model([])), "task")
    assert record.status == "error"
    assert "ScriptedModel has no turn 1" in record.error
