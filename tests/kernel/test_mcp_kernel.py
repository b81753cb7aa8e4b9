"""An MCP server's progress and log lines in a real kernel's live view, and its Stop button
reaching the server: a stdio server (``tests/mcp_server.py``) started by the kernel, its ``slow``
tool reporting progress a step at a time, read from the widget updates the kernel publishes."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kernel_support import KernelDriver, html_problems, html_text
from support import TESTS

pytestmark = [pytest.mark.kernel, pytest.mark.needs("mcp"), pytest.mark.timeout(180)]

SERVER = TESTS / "mcp_server.py"


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[KernelDriver]:
    with KernelDriver.start(cwd=str(tmp_path)) as driver:
        yield driver


def test_progress_rows_and_log_lines_show_in_the_view_and_stop_reaches_the_server(
    kernel: KernelDriver, tmp_path: Path
) -> None:
    journal = tmp_path / "journal.txt"
    journal.write_text("")
    kernel.execute(
        f"""
import sys
import nbagent
from nbagent.mcp import MCPServer
from nbagent.models import ScriptedModel, ToolCall
env = {{"NBAGENT_MCP_JOURNAL": {str(journal)!r}}}
server = MCPServer.stdio({sys.executable!r}, [{str(SERVER)!r}], env=env)
model = ScriptedModel([[ToolCall("slow", {{"steps": 4, "pause_s": 0.4}})], "done"], first_token_s=0.0)
agent = nbagent.Agent(model, tools=[server])
"""
    )
    view = kernel.execute('run = nbagent.start(agent, "go")').widget_view()
    kernel.wait_for(
        lambda: "4/4 · step 4 of 4" in kernel.shown(view), timeout=60, what="the last progress in the view"
    )
    values = [v for v in kernel.widgets.values_ever(view) if "nbagent-progress" in v]
    seen = [n for n in range(1, 5) if any(f"{n}/4 · step {n} of 4" in html_text(v) for v in values)]
    assert len(seen) >= 3, f"progress rows seen in the view's updates: {seen}"  # 10 updates a second
    assert any('style="width:50.0%"' in v for v in values) and any("width:100.0%" in v for v in values)
    assert all(not html_problems(v) for v in values)
    kernel.wait_for(lambda: "│ info: slow did step 4" in kernel.shown(view), timeout=30, what="log lines")

    stop = kernel.widgets.find_under(view, "ButtonModel", description="Stop")
    kernel.click(stop)
    kernel.wait_for(lambda: "■ interrupted" in kernel.shown(view), timeout=30, what="the interrupted view")
    kernel.wait_for(lambda: "slow cancelled" in journal.read_text(), timeout=30, what="the server's cancel")
    out = kernel.execute(
        "record = await run\n"
        "call = record.tool_calls[0]\n"
        "print(record.status, call.status, call.progress.progress, call.progress.total, len(call.logs))\n"
        "server.close()"
    ).stdout
    assert out.split() == ["interrupted", "cancelled", "4.0", "4.0", "4"]
