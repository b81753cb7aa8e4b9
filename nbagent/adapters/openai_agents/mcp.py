"""An Agents SDK agent's MCP servers under nbagent: connected on nbagent's loop, for each run.

Why. An MCP session belongs to the event loop that connected it: its reader task and its streams
live there. A user who ran ``await server.connect()`` (or ``async with server:``) in a notebook cell
connected it on the kernel's loop; nbagent runs the agent on its own loop, where listing the
server's tools waits forever for a reply that the kernel's loop reads (the run hung until Stop).
An unconnected server fails the SDK's run with "Server not initialized".

What nbagent does. ``start`` refuses an agent whose servers (its own and its handoff agents')
are connected already, in one sentence saying to pass them unconnected (``refusal``). A run
connects each unconnected server on nbagent's loop as it starts and cleans it up when it ends
(``connected_for_run``), in the run's own task, so a Stop cancels a call as the SDK cancels it:
the SDK sends the server ``notifications/cancelled``. The server object is left as it was found,
unconnected, for the user's next plain run. Runs of an agent with MCP servers take turns
(``OpenAIAgentsSource.takes_turns``), so one run never cleans up a session another still uses.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import AsyncIterator
from typing import Any

_ours: weakref.WeakSet[Any] = weakref.WeakSet()
"""The servers a run connected and has not cleaned up yet: on nbagent's loop, so no refusal."""


def servers_of(agent: Any) -> list[Any]:
    """The MCP servers of ``agent`` and of the agents it can hand off to (each once)."""
    found: list[Any] = []
    seen_agents: set[int] = set()
    todo = [agent]
    while todo:
        current = todo.pop()
        if id(current) in seen_agents:
            continue
        seen_agents.add(id(current))
        for server in getattr(current, "mcp_servers", None) or ():
            if all(server is not known for known in found):
                found.append(server)
        todo.extend(h for h in getattr(current, "handoffs", None) or () if hasattr(h, "mcp_servers"))
    return found


def _connected(server: Any) -> bool:
    """True for a server whose session is open (the SDK's client-session servers keep it on
    ``session``); a server of another kind is the user's to manage."""
    return getattr(server, "session", None) is not None


def refusal(agent: Any) -> str | None:
    """Why a run of ``agent`` cannot work (a server connected on another loop), or ``None``."""
    for server in servers_of(agent):
        if _connected(server) and server not in _ours:
            name = getattr(server, "name", None) or type(server).__name__
            return (
                f"the MCP server {name!r} is connected on another event loop (await server.connect() "
                "or async with in a cell), which nbagent's loop cannot use: pass it unconnected "
                "(await server.cleanup() first) and nbagent connects it on its own loop for each run"
            )
    return None


@contextlib.asynccontextmanager
async def connected_for_run(agent: Any) -> AsyncIterator[None]:
    """Connect ``agent``'s unconnected MCP servers on the running loop for the block, and clean
    them up after it, in the same task (the SDK's sessions require it)."""
    opened: list[Any] = []
    try:
        for server in servers_of(agent):
            if not _connected(server) and hasattr(server, "session"):
                opened.append(server)
                _ours.add(server)
                await server.connect()
        yield
    finally:
        for server in reversed(opened):
            try:
                with contextlib.suppress(Exception):  # a server that died: nothing left to close
                    await server.cleanup()
            finally:
                _ours.discard(server)
