"""How a session with an MCP server is opened: a stdio subprocess, or streamable HTTP.

A transport is an async context manager of the SDK's ``(read, write)`` streams, entered and left
by one task (the session's owner: ``nbagent.mcp.server``), as the SDK's anyio task groups require.
The stdio transport keeps the server's stderr in a file of its own, so an error can quote its last
lines; nothing else of a server's output is kept. A transport's ``describe()`` names the server for
errors and views without its environment or headers (they hold secrets).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

STDERR_LINES = 8
"""How many of a server's last stderr lines an error quotes."""


def _sdk() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise ImportError("MCP servers need the mcp SDK: pip install 'nbagent-jupyter[mcp]'") from exc


@dataclass
class Stdio:
    """A server started as a subprocess that speaks MCP on its stdin and stdout."""

    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    cwd: str | os.PathLike[str] | None = None
    _stderr: Any = field(default=None, init=False, repr=False)

    def describe(self) -> str:
        return " ".join([self.command, *self.args])

    @contextlib.asynccontextmanager
    async def open(self) -> AsyncIterator[tuple[Any, Any]]:
        _sdk()
        from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client

        env = {**get_default_environment(), **self.env} if self.env is not None else None
        cwd = None if self.cwd is None else str(self.cwd)
        params = StdioServerParameters(command=self.command, args=list(self.args), env=env, cwd=cwd)
        if self._stderr is not None:
            self._stderr.close()
        # Kept open after the session ends, for ``stderr_tail``; the next ``open`` closes it.
        self._stderr = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        async with stdio_client(params, errlog=self._stderr) as (read, write):
            yield read, write

    def stderr_tail(self) -> str:
        """The server's last stderr lines (empty if it wrote none)."""
        if self._stderr is None or self._stderr.closed:
            return ""
        with contextlib.suppress(OSError, ValueError):
            self._stderr.flush()
            self._stderr.seek(0)
            lines = self._stderr.read().splitlines()
            return "\n".join(lines[-STDERR_LINES:])
        return ""


@dataclass
class StreamableHTTP:
    """A server reached over MCP's streamable HTTP transport."""

    url: str
    headers: Mapping[str, str] | None = None

    def describe(self) -> str:
        return self.url

    @contextlib.asynccontextmanager
    async def open(self) -> AsyncIterator[tuple[Any, Any]]:
        _sdk()
        from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

        client = create_mcp_http_client(headers=dict(self.headers or {}))
        async with client, streamable_http_client(self.url, http_client=client) as streams:
            yield streams[0], streams[1]

    def stderr_tail(self) -> str:
        return ""


Transport = Stdio | StreamableHTTP
