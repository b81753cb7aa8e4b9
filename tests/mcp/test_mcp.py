"""MCP servers' tools under the native Agent, against real servers on the ``mcp`` SDK
(``tests/mcp_server.py``) started by the tests over stdio and over streamable HTTP on 127.0.0.1.

A Stop mid-call reaches the server (its handler is cancelled), no late result is recorded, and the
same session (and stdio process) serves the next call; a server that dies or cannot start is a
clear error naming it and quoting its stderr; timeouts, Stop after step, approvals and max tool
calls treat its tools as any tool."""

from __future__ import annotations

import sys
import time
from typing import Any

import pytest
from mcp_support import SECRET, Journal, stdio_server
from support import fast_model, wait_until

import nbagent
from nbagent.guardrails import Limits
from nbagent.mcp import MCPServer
from nbagent.models import ToolCall

pytestmark = pytest.mark.needs("mcp")

TRIALS = 20


def agent_calling(server: MCPServer, *calls: ToolCall, answer: str = "done") -> nbagent.Agent:
    return nbagent.Agent(fast_model([[call] for call in calls] + [answer]), tools=[server])


def results(record: nbagent.RunRecord) -> list[tuple[str, str, Any]]:
    return [
        (c.tool, c.status, c.result if c.status == "ok" else c.error)
        for s in record.steps
        for c in s.tool_calls
    ]


def test_the_servers_tools_are_the_agents_tools_and_their_results_are_recorded(server: MCPServer) -> None:
    record = nbagent.run(agent_calling(server, ToolCall("add", {"a": 2, "b": 3})), "add", display=False)
    assert record.status == "success", record.error
    assert results(record) == [("add", "ok", "5")]
    listed = nbagent.Agent(fast_model(["x"]), tools=[server])
    nbagent.run(listed, "list", display=False)
    assert {"add", "slow", "pid", "die"} <= set(listed.tools)


def test_a_stop_mid_call_cancels_the_servers_handler_and_the_session_serves_the_next_call(
    server: MCPServer, journal: Journal
) -> None:
    for trial in range(TRIALS):
        run = nbagent.start(
            agent_calling(server, ToolCall("slow", {"steps": 1}, id=f"s{trial}")), "go", display=False
        )
        wait_until(lambda trial=trial: len(journal.times("slow started")) > trial, timeout=30)
        stopped = time.time()
        assert run.interrupt() is True
        record = run.wait(timeout=30)
        assert record.status == "interrupted"
        assert results(record) == [("slow", "cancelled", "interrupted")]  # no late result
        wait_until(lambda trial=trial: len(journal.times("slow cancelled")) > trial, timeout=30)
        assert journal.times("slow cancelled")[-1] >= stopped - 0.01  # the handler saw this Stop
    after = nbagent.run(agent_calling(server, ToolCall("add", {"a": 1, "b": 1})), "add", display=False)
    assert results(after) == [("add", "ok", "2")]


def test_the_stdio_server_process_survives_a_stop(journal: Journal) -> None:
    server = stdio_server(journal)
    try:
        first = nbagent.run(agent_calling(server, ToolCall("pid", {})), "pid", display=False)
        run = nbagent.start(agent_calling(server, ToolCall("slow", {"steps": 1})), "go", display=False)
        wait_until(lambda: journal.times("slow started"), timeout=30)
        run.interrupt()
        assert run.wait(timeout=30).status == "interrupted"
        again = nbagent.run(agent_calling(server, ToolCall("pid", {})), "pid", display=False)
        assert results(again) == results(first) and results(first)[0][1] == "ok"
    finally:
        server.close()


def test_stop_after_step_lets_the_call_in_flight_finish(server: MCPServer) -> None:
    run = nbagent.start(agent_calling(server, ToolCall("quick_progress", {"steps": 30})), "go", display=False)
    wait_until(lambda: run.record.steps and run.record.steps[0].tool_calls, timeout=30)
    run.interrupt("after_step")
    record = run.wait(timeout=30)
    assert record.status == "interrupted" and record.stop_reason == "user_after_step"
    assert results(record) == [("quick_progress", "ok", "done 30")]


def test_timeout_s_bounds_a_call_and_the_server_sees_the_cancel(journal: Journal) -> None:
    server = stdio_server(journal, timeout_s=0.5)
    try:
        record = nbagent.run(agent_calling(server, ToolCall("slow", {"steps": 1})), "go", display=False)
        assert record.status == "success"  # a tool error is the model's to read, as for any tool
        [(tool, status, error)] = results(record)
        assert (tool, status) == ("slow", "error") and "timed out after 0.5 s" in error
        wait_until(lambda: journal.times("slow cancelled"), timeout=30)
    finally:
        server.close()


def test_a_server_that_dies_mid_call_fails_that_call_with_its_stderr_and_the_next_run_starts_it_again(
    journal: Journal,
) -> None:
    server = stdio_server(journal)
    try:
        died = nbagent.run(agent_calling(server, ToolCall("die", {})), "die", display=False)
        [(tool, status, error)] = results(died)
        assert (tool, status) == ("die", "error")
        assert "went away during die" in error and "the test server is going down" in error
        again = nbagent.run(agent_calling(server, ToolCall("add", {"a": 4, "b": 4})), "add", display=False)
        assert results(again) == [("add", "ok", "8")]
    finally:
        server.close()


def test_a_server_that_cannot_start_fails_the_run_naming_the_command_and_its_stderr() -> None:
    code = "import sys; print('cannot open the database', file=sys.stderr); sys.exit(2)"
    server = MCPServer.stdio(sys.executable, ["-c", code], env={"DB_PASSWORD": SECRET})
    record = nbagent.run(nbagent.Agent(fast_model(["x"]), tools=[server]), "go", display=False)
    assert record.status == "error" and record.error_type == "ToolError"
    assert "could not start" in record.error and sys.executable in record.error
    assert "cannot open the database" in record.error and SECRET not in record.error


def test_approvals_and_max_tool_calls_treat_the_servers_tools_as_any_tool(journal: Journal) -> None:
    server = stdio_server(journal, requires_approval={"add"})
    try:
        agent = agent_calling(server, ToolCall("add", {"a": 1, "b": 2}, id="add-1"), ToolCall("pid", {}))
        run = nbagent.start(agent, "add", display=False)
        wait_until(lambda: run.pending_approvals, timeout=30)
        assert [p.tool for p in run.pending_approvals] == ["add"]
        assert run.approve("add-1")
        record = run.wait(timeout=30)
        assert [(tool, status) for tool, status, _ in results(record)] == [("add", "ok"), ("pid", "ok")]
        capped = agent_calling(server, ToolCall("pid", {}), ToolCall("pid", {}))
        limited = nbagent.run(capped, "go", display=False, limits=Limits(max_tool_calls=1))
        assert limited.status == "limit" and limited.stop_reason == "max_tool_calls"
    finally:
        server.close()


def test_the_servers_env_and_headers_reach_the_server_but_no_record(server: MCPServer) -> None:
    record = nbagent.run(
        agent_calling(server, ToolCall("echo_env", {"name": "NBAGENT_TEST_TOKEN"})), "env", display=False
    )
    assert SECRET not in repr(record) and SECRET not in repr(server)
    if server.transport.describe().startswith("http"):
        return  # the HTTP server's environment is its own; the header went with each request
    assert results(record) == [("echo_env", "ok", "set")]


def test_the_servers_progress_and_log_lines_reach_the_calls_record_bounded_and_scrubbed(
    server: MCPServer,
) -> None:
    from nbagent.records import LOG_LINES_KEPT, ToolProgress

    steps = LOG_LINES_KEPT + 5
    record = nbagent.run(
        agent_calling(server, ToolCall("quick_progress", {"steps": steps})), "go", display=False
    )
    [call] = record.tool_calls
    assert (call.status, call.result) == ("ok", f"done {steps}")
    assert call.progress == ToolProgress(float(steps), float(steps), f"step {steps} of {steps}")
    assert len(call.logs) == LOG_LINES_KEPT and call.logs_dropped == 5
    assert call.logs[-1].startswith(f"info: did step {steps} with token")
    assert SECRET not in repr(record)
    counted = nbagent.run(agent_calling(server, ToolCall("count_up", {"steps": 4})), "go", display=False)
    assert counted.tool_calls[0].progress == ToolProgress(4.0, None, "item 4")


def test_a_stopped_call_keeps_its_last_progress_and_log_lines(server: MCPServer, journal: Journal) -> None:
    from nbagent.records import ToolProgress

    run = nbagent.start(agent_calling(server, ToolCall("slow", {"steps": 3})), "go", display=False)
    wait_until(lambda: run.record.tool_calls and len(run.record.tool_calls[0].logs) == 3, timeout=30)
    run.interrupt()
    [call] = run.wait(timeout=30).tool_calls
    assert call.status == "cancelled"
    assert call.progress == ToolProgress(3.0, 3.0, "step 3 of 3")
    assert call.logs == [f"info: slow did step {n}" for n in (1, 2, 3)]
