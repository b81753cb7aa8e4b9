"""Fixtures of the MCP tests: a journal, the test server over streamable HTTP on 127.0.0.1, and an
``MCPServer`` of it over each transport (helpers in ``tests/mcp_support.py``)."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_support import SECRET, SERVER, Journal, free_port, stdio_server
from support import wait_until


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    return Journal(tmp_path / "journal.txt")


@pytest.fixture
def http_server(journal: Journal) -> Iterator[str]:
    port = free_port()
    env = {"NBAGENT_MCP_JOURNAL": str(journal.path), "PATH": "/usr/bin:/bin"}
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def accepting() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            return False

    try:
        wait_until(accepting, timeout=60, interval=0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=20)


@pytest.fixture(params=["stdio", "http"])
def server(request: pytest.FixtureRequest, journal: Journal) -> Iterator[object]:
    from nbagent.mcp import MCPServer

    if request.param == "stdio":
        made = stdio_server(journal)
    else:
        made = MCPServer.http(
            request.getfixturevalue("http_server"), headers={"Authorization": f"Bearer {SECRET}"}
        )
    yield made
    made.close()
