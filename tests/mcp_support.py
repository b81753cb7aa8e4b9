"""What the MCP tests share: the test server's script (``mcp_server.py``), its journal of handler
events, a free port, and an ``MCPServer`` of it over stdio. The fixtures built on them are in
``tests/mcp/conftest.py``."""

from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import Any

from support import TESTS

from nbagent.mcp import MCPServer

SERVER = TESTS / "mcp_server.py"
SECRET = "sk-proj-mcpSecretValue0123456789abcdef"
"""A credential the test server gets (env, headers) and quotes in a log line: no record may show it."""


class Journal:
    """The server's notes (``NBAGENT_MCP_JOURNAL``): wall-clock times of its handler's events."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.write_text("")

    def times(self, event: str) -> list[float]:
        lines = self.path.read_text().splitlines()
        return [float(line.split(" ", 1)[0]) for line in lines if line.endswith(event)]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def stdio_server(journal: Journal, **options: Any) -> MCPServer:
    env = {"NBAGENT_MCP_JOURNAL": str(journal.path), "NBAGENT_TEST_TOKEN": SECRET}
    return MCPServer.stdio(sys.executable, [str(SERVER)], env=env, **options)
