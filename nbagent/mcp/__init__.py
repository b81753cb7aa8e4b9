"""MCP servers' tools for the native ``Agent``, with a Stop that reaches the server.

    from nbagent.mcp import MCPServer
    files = MCPServer.stdio("python", ["files_server.py"])
    agent = nbagent.Agent(model, tools=[files, my_tool])  # every tool the server lists

Modules:

- ``server``: ``MCPServer`` (one session per server on nbagent's loop, kept across runs) and its
  tools as ``nbagent.Tool`` objects; ``MCPServerError``.
- ``transports``: how a session is opened: a stdio subprocess (its stderr kept for errors) or
  streamable HTTP.
- ``demo_server``: a small offline server for the docs and notebooks
  (``python -m nbagent.mcp.demo_server``).

Built on the official ``mcp`` SDK (version 2 or later, installed with the ``mcp`` extra); nothing
of it is imported until a server is first used.
"""

from __future__ import annotations

from nbagent.mcp.server import MCPServer, MCPServerError

__all__ = ["MCPServer", "MCPServerError"]
