"""``@tool`` schemas, and tool failures that become observations while the run goes on."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Literal

import pytest
from support import fast_model, wait_until

import nbagent
from nbagent.models import ToolCall
from nbagent.runtime.cancel import current_scope
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


def test_an_approved_sync_tool_that_returns_within_the_stop_grace_is_recorded_ok_with_its_result():
    """The email went out as the run was stopped: the record and the memory must say it did."""
    sent: list[str] = []
    entered = threading.Event()

    @nbagent.tool(requires_approval=True)
    def send_email(to: str) -> str:
        """Send an email."""
        entered.set()
        current_scope.get().wait(30)  # the Stop arrives while the email is being sent...
        time.sleep(0.01)  # ...and the sending ends a moment later, well inside the grace
        sent.append(to)
        return f"sent to {to}"

    send_email.grace_s = 5.0  # a generous grace, so a busy machine cannot turn it into "abandoned"
    model = fast_model([[ToolCall("send_email", {"to": "boss"}, id="mail-1")], "unused"])
    agent = nbagent.Agent(model, tools=[send_email])
    run = nbagent.start(agent, "mail the boss")
    wait_until(lambda: run.pending_approvals)
    assert run.approve("mail-1")
    assert entered.wait(20)
    run.interrupt()
    record = run.wait()
    assert record.status == "interrupted" and sent == ["boss"]
    (call,) = record.tool_calls
    assert (call.status, call.result, call.error, call.approval) == ("ok", "sent to boss", None, "approved")
    assert observations(agent) == ["sent to boss"]  # a continued run knows the email was sent
    assert model.calls == 1  # the run stopped after the tool: no further model turn


@nbagent.tool
async def finishes_anyway() -> str:
    """Swallows its cancel and returns its result."""
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        return "done all the same"
    return "late"


def test_an_async_tool_that_returns_after_its_cancel_is_recorded_ok_with_its_result():
    agent = nbagent.Agent(
        fast_model([[ToolCall("finishes_anyway", id="t-1")], "unused"]), tools=[finishes_anyway]
    )
    run = nbagent.start(agent, "task")
    wait_until(lambda: run.record.tool_calls)
    run.interrupt()
    record = run.wait()
    (call,) = record.tool_calls
    assert record.status == "interrupted"
    assert (call.status, call.result) == ("ok", "done all the same")
    assert observations(agent) == ["done all the same"]


def test_a_sync_tool_still_running_when_the_grace_ends_is_abandoned():
    release = threading.Event()

    @nbagent.tool
    def stubborn() -> str:
        """Ignores the Stop."""
        release.wait(30)
        return "late"

    agent = nbagent.Agent(fast_model([[ToolCall("stubborn", id="s-1")], "unused"]), tools=[stubborn])
    run = nbagent.start(agent, "task")
    wait_until(lambda: run.record.tool_calls)
    run.interrupt()
    record = run.wait()
    release.set()
    (call,) = record.tool_calls
    assert record.status == "interrupted"
    assert (call.status, call.result) == ("abandoned", None)
    assert observations(agent) == [nbagent.agent.INTERRUPTED_TOOL_RESULT]
