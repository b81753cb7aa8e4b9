"""``MCPServer`` tools in the tool types of the frameworks whose own MCP clients cannot be installed
beside ``mcp`` 2: LangGraph agents (``MCPServer.langchain_tools()``) and smolagents agents
(``MCPServer.smolagents_tools()``), against the real test server (``tests/mcp_server.py``) over
stdio and streamable HTTP on 127.0.0.1.

Under nbagent a Stop mid-call reaches the server's handler and the next run works on the same
session; the server's progress and log lines reach the call's record while it runs (the framework
runs the tool, so the call is found as the run's running call of that tool). Plainly, without
nbagent, the same tools work as the framework's own; a server that dies mid-call is an error the
model reads, and the next run starts it again.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from mcp_support import Journal, stdio_server
from support import wait_until

import nbagent
from nbagent.mcp import MCPServer

pytestmark = pytest.mark.needs("mcp")

TRIALS = 5

FRAMEWORKS = [
    pytest.param("langgraph", marks=pytest.mark.needs("langgraph")),
    pytest.param("smolagents", marks=pytest.mark.needs("smolagents")),
]


def agent_calling(framework: str, server: MCPServer, tool: str, arguments: dict[str, Any]) -> Any:
    """The framework's agent with the server's tools in its own tool type, scripted to call
    ``tool`` once and then answer."""
    if framework == "langgraph":
        from langchain.agents import create_agent
        from langgraph_fakes import ScriptedChatModel, reply

        model = ScriptedChatModel(replies=[reply("", [(tool, arguments)]), reply("answered")])
        return create_agent(model, tools=server.langchain_tools())
    from smolagents import ToolCallingAgent
    from smolagents_fakes import ScriptedSmolModel, answer, call

    model = ScriptedSmolModel([call(tool, **arguments), answer("answered")])
    return ToolCallingAgent(tools=server.smolagents_tools(), model=model, verbosity_level=-1)


def calls_of(record: nbagent.RunRecord, tool: str) -> list[Any]:
    return [c for c in record.tool_calls if c.tool == tool]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_stop_mid_call_reaches_the_server_after_its_progress_showed_and_the_next_run_works(
    framework: str, server: MCPServer, journal: Journal
) -> None:
    for trial in range(TRIALS):
        run = nbagent.start(agent_calling(framework, server, "slow", {"steps": 2}), "go", display=False)

        def reported(run: nbagent.Run = run) -> bool:  # each step's progress, then its log line
            slow = calls_of(run.record, "slow")
            return bool(slow) and "info: slow did step 2" in slow[0].logs

        wait_until(reported, timeout=30)  # the live record has them while the call runs
        stopped = time.time()
        assert run.interrupt() is True
        record = run.wait(timeout=30)
        assert record.status == "interrupted", record.error
        (slow,) = calls_of(record, "slow")
        assert slow.status in ("cancelled", "abandoned") and slow.result is None  # no late result
        assert (slow.progress.progress, slow.progress.total) == (2, 2)
        assert "info: slow did step 2" in slow.logs
        wait_until(lambda trial=trial: len(journal.times("slow cancelled")) > trial, timeout=30)
        assert journal.times("slow cancelled")[-1] >= stopped - 0.01  # the handler saw this Stop
        after = nbagent.run(agent_calling(framework, server, "add", {"a": 2, "b": 3}), "add", display=False)
        assert after.status == "success", after.error
        assert [(c.status, str(c.result)) for c in calls_of(after, "add")] == [("ok", "5")]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_without_nbagent_the_tools_work_as_the_frameworks_own(framework: str, server: MCPServer) -> None:
    agent = agent_calling(framework, server, "add", {"a": 4, "b": 3})
    if framework == "langgraph":
        state = asyncio.run(agent.ainvoke({"messages": [("user", "add")]}))  # a plain loop of its own
        assert [m.content for m in state["messages"][-2:]] == ["7", "answered"]
        again = agent_calling(framework, server, "add", {"a": 1, "b": 1})
        assert again.invoke({"messages": [("user", "add")]})["messages"][-2].content == "2"  # sync
    else:
        assert agent.run("add") == "answered"
        assert "7" in str(agent.memory.steps[1].observations)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_server_that_dies_mid_call_is_an_error_the_model_reads_and_the_next_run_starts_it(
    framework: str, journal: Journal
) -> None:
    server = stdio_server(journal)
    try:
        record = nbagent.run(agent_calling(framework, server, "die", {}), "die", display=False)
        (died,) = calls_of(record, "die")
        assert died.status == "error" and "went away" in (died.error or str(died.result)), died
        after = nbagent.run(agent_calling(framework, server, "add", {"a": 2, "b": 2}), "add", display=False)
        assert [(c.status, str(c.result)) for c in calls_of(after, "add")] == [("ok", "4")]
    finally:
        server.close()


@pytest.mark.needs("smolagents")
def test_smolagents_inputs_follow_the_servers_schema(server: MCPServer) -> None:
    slow = {tool.name: tool for tool in server.smolagents_tools()}["slow"]
    assert slow.inputs["steps"]["type"] == "integer" and "nullable" not in slow.inputs["steps"]
    assert slow.inputs["pause_s"] == {"type": "number", "description": "Pause S", "nullable": True}
    assert slow.output_type == "string"
