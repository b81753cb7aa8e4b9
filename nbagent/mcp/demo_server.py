"""A small offline MCP server for the docs and notebooks: ``python -m nbagent.mcp.demo_server``.

It speaks MCP on stdio (the ``mcp`` SDK's own server) and offers two tools: ``word_count``, which
answers at once, and ``long_report``, which reports progress and a log line once a second for
``seconds`` seconds before it answers, so the view has a bar to fill and there is time to press
Stop (its handler notes the cancel on stderr).
"""

from __future__ import annotations

import asyncio
import sys
import warnings

from mcp.server import MCPServer
from mcp.server.mcpserver import Context


def main() -> None:
    warnings.simplefilter("ignore")  # ctx.info: MCP's 2026 wire deprecates logging; 2025's has it
    server = MCPServer("nbagent-demo")

    @server.tool()
    def word_count(text: str) -> int:
        """Count the words of ``text``."""
        return len(text.split())

    @server.tool()
    async def long_report(seconds: int, ctx: Context) -> str:
        """Write a report, reporting progress once a second for ``seconds`` seconds."""
        try:
            for second in range(seconds):
                await ctx.report_progress(second + 1, seconds, f"section {second + 1} of {seconds}")
                await ctx.info(f"wrote section {second + 1}")
                await asyncio.sleep(1)
        except asyncio.CancelledError:
            print("long_report: cancelled by the client", file=sys.stderr, flush=True)
            raise
        return f"a report of {seconds} sections"

    server.run("stdio")


if __name__ == "__main__":
    main()
