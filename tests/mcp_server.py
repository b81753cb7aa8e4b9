"""A small MCP server for the tests, on the ``mcp`` SDK's own server: started over stdio
(``python mcp_server.py``) or streamable HTTP (``python mcp_server.py --http PORT``).

``slow`` sends progress, then waits until it is cancelled, and notes the moment its handler saw
the cancel in the file named by ``NBAGENT_MCP_JOURNAL`` (one line per event, with a wall-clock
time), so a test can tell when the server learnt of a Stop. ``quick_progress`` sends progress
and a log line per step (the line quotes ``NBAGENT_TEST_TOKEN``: it must reach no record
unscrubbed) and answers; ``count_up`` sends progress with no total; ``add`` answers at once; ``die`` ends
the server's process mid-call; ``echo_env`` says whether a variable reached the server.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import warnings

from mcp.server import MCPServer
from mcp.server.mcpserver import Context

warnings.simplefilter("ignore")  # ctx.info: MCP 2026 deprecates logging, the 2025 wire has it
server = MCPServer("nbagent-test")
JOURNAL = os.environ.get("NBAGENT_MCP_JOURNAL")


def note(event: str) -> None:
    if JOURNAL:
        with open(JOURNAL, "a", encoding="utf-8") as journal:
            journal.write(f"{time.time():.6f} {event}\n")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
async def slow(steps: int, ctx: Context, pause_s: float = 0.0) -> str:
    """Report progress and a log line for ``steps`` steps (``pause_s`` apart), then wait for a
    very long time."""
    note("slow started")
    try:
        for step in range(steps):
            if step:
                await asyncio.sleep(pause_s)
            await ctx.report_progress(step + 1, steps, f"step {step + 1} of {steps}")
            await ctx.info(f"slow did step {step + 1}")
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        note("slow cancelled")
        raise
    return "finished"


@server.tool()
async def quick_progress(steps: int, ctx: Context) -> str:
    """Report progress and a log line for ``steps`` steps, then answer."""
    for step in range(steps):
        await ctx.report_progress(step + 1, steps, f"step {step + 1} of {steps}")
        await ctx.info(f"did step {step + 1} with token {os.environ.get('NBAGENT_TEST_TOKEN', '')}")
        await asyncio.sleep(0.01)
    return f"done {steps}"


@server.tool()
async def count_up(steps: int, ctx: Context) -> str:
    """Report progress without a total for ``steps`` steps, then answer."""
    for step in range(steps):
        await ctx.report_progress(step + 1, None, f"item {step + 1}")
    return f"counted {steps}"


@server.tool()
def pid() -> int:
    """The server process's id."""
    return os.getpid()


@server.tool()
def die() -> str:
    """End the server's process in the middle of the call."""
    print("the test server is going down", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool()
def echo_env(name: str) -> str:
    """Whether the variable ``name`` is set in the server's environment."""
    return "set" if os.environ.get(name) else "unset"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
