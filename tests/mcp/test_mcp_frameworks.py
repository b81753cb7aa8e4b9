"""Framework agents with MCP clients of their own (the Agents SDK's ``MCPServerStdio`` /
``MCPServerStreamableHttp``, pydantic-ai's ``MCPToolset``) under nbagent, against the real test
server (``tests/mcp_server.py``) over stdio and streamable HTTP on 127.0.0.1.

A server the user connected (or a toolset entered) on another loop used to hang the run: ``start``
now refuses it in one sentence that says what to do. A server handed over unconnected works: the
Agents SDK adapter connects it on nbagent's loop for the run (and leaves it unconnected after),
pydantic-ai enters the toolset itself. A Stop mid-call reaches the server's handler within
250 ms p95, and the next run works."""

from __future__ import annotations

import asyncio
import math
import os
import sys
import time
from typing import Any

import pytest
from mcp_support import SERVER, Journal

import nbagent

pytestmark = pytest.mark.needs("mcp", "openai-agents", "pydantic-ai")

TRIALS = 10


def sdk_server(transport: str, target: Any) -> Any:
    from agents.mcp import MCPServerStdio, MCPServerStreamableHttp

    if transport == "stdio":
        return MCPServerStdio(
            params={"command": sys.executable, "args": [str(SERVER)], "env": target}, name="t"
        )
    return MCPServerStreamableHttp(params={"url": target}, name="t")


def sdk_agent(server: Any, tool: str, arguments: dict[str, Any]) -> Any:
    from agents import Agent, set_tracing_disabled
    from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

    set_tracing_disabled(True)
    model = ScriptedModel(
        [
            ModelStep(output=[function_call(tool, arguments, call_id="c1")]),
            ModelStep(output=[assistant_message("x")]),
        ]
    )
    return Agent("a", model=model, mcp_servers=[server])


def pai_toolset(transport: str, target: Any) -> Any:
    from fastmcp.client.transports import StdioTransport, StreamableHttpTransport
    from pydantic_ai.mcp import MCPToolset

    if transport == "stdio":
        return MCPToolset(StdioTransport(command=sys.executable, args=[str(SERVER)], env=target))
    return MCPToolset(StreamableHttpTransport(target))


def pai_agent(toolset: Any, tool: str, arguments: dict[str, Any]) -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    def reply(messages: list[Any], info: Any) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart(tool, arguments, tool_call_id="c1")])
        return ModelResponse(parts=[TextPart("x")])

    return Agent(FunctionModel(reply), toolsets=[toolset])


FRAMEWORKS = {"openai_agents": (sdk_server, sdk_agent), "pydantic_ai": (pai_toolset, pai_agent)}


def result_text(result: Any) -> str:
    """A call's result as text, whatever shape the framework records it in."""
    return str(result.get("text") if isinstance(result, dict) else result)


@pytest.fixture(params=["stdio", "http"])
def target(request: pytest.FixtureRequest, journal: Journal) -> Any:
    if request.param == "stdio":
        return "stdio", {**os.environ, "NBAGENT_MCP_JOURNAL": str(journal.path)}
    return "http", request.getfixturevalue("http_server")


@pytest.mark.parametrize("framework", list(FRAMEWORKS))
def test_a_stop_mid_call_reaches_the_server_and_the_next_run_works(
    framework: str,
    target: tuple[str, Any],
    journal: Journal,
) -> None:
    make_server, make_agent = FRAMEWORKS[framework]
    server = make_server(*target)
    delays = []
    for trial in range(TRIALS):
        run = nbagent.start(make_agent(server, "slow", {"steps": 1}), "go", display=False)
        deadline = time.monotonic() + 60
        while len(journal.times("slow started")) <= trial:
            assert time.monotonic() < deadline and not run.done(), run.done() and run.record.error
            time.sleep(0.002)
        stopped = time.time()
        assert run.interrupt() is True
        record = run.wait(timeout=60)
        assert record.status == "interrupted" and [c.status for c in record.tool_calls] == ["cancelled"]
        deadline = time.monotonic() + 30
        while len(journal.times("slow cancelled")) <= trial:
            assert time.monotonic() < deadline, "the server never saw the cancel"
            time.sleep(0.002)
        delays.append(journal.times("slow cancelled")[-1] - stopped)
    p95 = sorted(delays)[math.ceil(0.95 * len(delays)) - 1]
    assert p95 <= 0.25, f"Stop -> the server's cancel, p95 {p95 * 1000:.1f} ms: {delays}"
    after = nbagent.run(make_agent(server, "add", {"a": 2, "b": 3}), "add", display=False)
    assert after.status == "success", after.error
    assert [(c.status, result_text(c.result)) for c in after.tool_calls] == [("ok", "5")]
    assert getattr(server, "session", None) is None  # the SDK's server is left as it was found


def test_an_agents_sdk_server_connected_in_a_cell_is_refused_at_start_not_hung(journal: Journal) -> None:
    server = sdk_server("stdio", {**os.environ, "NBAGENT_MCP_JOURNAL": str(journal.path)})

    async def connected_then_started() -> None:
        await server.connect()  # what a notebook cell does on the kernel's loop
        try:
            with pytest.raises(
                ValueError, match=r"'t' is connected on another event loop.*pass it unconnected"
            ):
                nbagent.start(sdk_agent(server, "add", {"a": 1, "b": 2}), "add", display=False)
        finally:
            await server.cleanup()

    asyncio.run(connected_then_started())
    record = nbagent.run(sdk_agent(server, "add", {"a": 1, "b": 2}), "add", display=False)
    assert record.status == "success" and result_text(record.tool_calls[0].result) == "3"


def test_a_pydantic_ai_toolset_entered_in_a_cell_is_refused_at_start_not_hung(journal: Journal) -> None:
    toolset = pai_toolset("stdio", {**os.environ, "NBAGENT_MCP_JOURNAL": str(journal.path)})

    async def entered_then_started() -> None:
        async with toolset:  # what a notebook cell does on the kernel's loop
            with pytest.raises(ValueError, match=r"is running on another event loop.*without entering it"):
                nbagent.start(pai_agent(toolset, "add", {"a": 1, "b": 2}), "add", display=False)

    asyncio.run(entered_then_started())
    record = nbagent.run(pai_agent(toolset, "add", {"a": 1, "b": 2}), "add", display=False)
    assert record.status == "success" and result_text(record.tool_calls[0].result) == "3"
