"""``MCPServer``: an MCP server's tools as native ``Tool`` objects, one session kept across runs.

Who owns the session: one task on nbagent's runner loop (started with an empty context, so it
belongs to no run and no Stop reaches it) opens the transport and the SDK's ``ClientSession`` on
first use and holds them until ``close()`` or the end of the process. A tool call is a request on
that session from the run's own task, so a Stop cancels the call the way any await is cancelled:
the SDK (version 2 and later) sends the server ``notifications/cancelled`` for that request id on
stdio, and closes the request's stream on streamable HTTP; the session and the stdio process stay
up for the next call, and the call ends ``cancelled`` with no late result.

Failures: a server that cannot start fails the run as it starts (``MCPServerError`` naming the
command and the last lines of its stderr); a server that dies mid-call fails that call with the
same, and the next call starts it again; ``timeout_s`` bounds each call (and a Stop always does).
A call's ``isError`` result is a tool error the model sees, as for any tool.

Progress and logs: a call made inside a run's tool call (``nbagent.context.current_call``, or,
inside a framework's own tool, the run's running call of that tool) asks the server for progress,
and each ``notifications/progress`` becomes ``RunContext.tool_progress`` for that call; the
server's ``notifications/message`` lines while calls are in flight become ``RunContext.tool_log``
for them. MCP's log messages name no request, so when several calls are in flight on one session
at once, each of them shows the line.

The server's ``env`` and ``headers`` stay in this object: no record, view, store or span gets them.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from nbagent.context import RunContext, current_call, current_run
from nbagent.errors import ToolError
from nbagent.mcp.transports import Stdio, StreamableHTTP, Transport
from nbagent.tools import Tool

logger = logging.getLogger("nbagent")

ApprovalSetting = bool | Collection[str]


class MCPServerError(ToolError):
    """An MCP server could not be started or reached, or went away during a call."""


class _Session:
    """One open session, and the owner task that holds its transport open until ``closing``."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.client: Any = None
        self.listed: list[Any] = []
        self.closing = asyncio.Event()
        self.owner: asyncio.Task[None] | None = None
        self.broken = False
        self.calls: list[_Caller] = []
        """The run tool calls in flight on this session (a server's log lines go to them)."""

    async def log(self, params: Any) -> None:
        """The SDK's ``logging_callback``: a server's log line, for the calls in flight."""
        data = params.data
        text = data if isinstance(data, str) else _json_text(data)
        if params.logger:
            text = f"[{params.logger}] {text}"
        for caller in list(self.calls):
            call_id = caller.call_id()
            if call_id is not None:
                caller.ctx.tool_log(call_id, text, str(params.level))


class _Caller:
    """The run's tool call an MCP request serves, where its progress and log lines go: the call
    nbagent marked (a native tool: ``current_call``), or, inside a framework's own tool, the
    run's running call of that tool, looked up at each report (``RunContext.running_call``)."""

    def __init__(self, ctx: RunContext, tool: str, arguments: Any, call_id: str | None = None) -> None:
        self.ctx, self.tool, self.arguments, self._call_id = ctx, tool, arguments, call_id

    @classmethod
    def here(cls, tool: str, arguments: Any) -> _Caller | None:
        marked = current_call()
        if marked is not None:
            return cls(marked[0], tool, arguments, marked[1])
        run = current_run()
        return None if run is None else cls(run, tool, arguments)

    def call_id(self) -> str | None:
        if self._call_id is None:
            self._call_id = self.ctx.running_call(self.tool, self.arguments)
        return self._call_id

    async def progress(self, done: float, total: float | None, message: str | None) -> None:
        call_id = self.call_id()
        if call_id is not None:
            self.ctx.tool_progress(call_id, done, total, message)


class MCPServer:
    """An MCP server whose tools a native ``Agent`` can call: pass it in ``tools=[...]``.

    Build one with ``MCPServer.stdio(...)`` or ``MCPServer.http(...)``. ``requires_approval``:
    True (every tool of the server) or the names of the tools whose calls wait for a person.
    ``timeout_s`` bounds each call. ``name`` (default: the command or URL) names it in errors.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        name: str | None = None,
        requires_approval: ApprovalSetting = False,
        timeout_s: float | None = None,
    ) -> None:
        if not isinstance(requires_approval, bool) and (
            isinstance(requires_approval, str) or not all(isinstance(n, str) for n in requires_approval)
        ):
            raise TypeError(
                f"requires_approval must be True, False or a set of tool names, not {requires_approval!r}"
            )
        if timeout_s is not None and not (isinstance(timeout_s, (int, float)) and timeout_s > 0):
            raise ValueError(f"timeout_s must be a positive number of seconds, not {timeout_s!r}")
        self.transport = transport
        self.name = name or transport.describe()
        self.requires_approval = requires_approval
        self.timeout_s = timeout_s
        self._session: _Session | None = None
        self._opening: asyncio.Lock | None = None
        self._opening_loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        name: str | None = None,
        requires_approval: ApprovalSetting = False,
        timeout_s: float | None = None,
    ) -> MCPServer:
        """A server nbagent starts as a subprocess (``command args...``), speaking MCP on stdio.
        ``env`` is added to a minimal environment (as the SDK does), ``cwd`` is its directory."""
        if isinstance(args, str):
            raise TypeError(f"args must be a list of strings, e.g. [{args!r}], not a string")
        transport = Stdio(command, tuple(args), env, cwd)
        return cls(transport, name=name, requires_approval=requires_approval, timeout_s=timeout_s)

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
        requires_approval: ApprovalSetting = False,
        timeout_s: float | None = None,
    ) -> MCPServer:
        """A server reached over streamable HTTP at ``url`` (e.g. ``http://127.0.0.1:8000/mcp``)."""
        transport = StreamableHTTP(url, headers)
        return cls(transport, name=name, requires_approval=requires_approval, timeout_s=timeout_s)

    def __repr__(self) -> str:
        return f"MCPServer({self.name!r})"  # never the env or headers: they hold secrets

    # -- the tools ------------------------------------------------------------------------------

    async def tools(self) -> list[Tool]:
        """The server's tools as native tools (starting the session on first use)."""
        return [self._tool(listed) for listed in await self.listed()]

    async def listed(self) -> list[Any]:
        """The tools the server lists (the SDK's ``Tool`` objects), starting the session on first use."""
        session = await self._open()
        return list(session.listed)

    def langchain_tools(self) -> list[Any]:
        """The server's tools as LangChain tools, for a LangGraph agent (``create_agent(model,
        tools=files.langchain_tools())``): ``langchain-mcp-adapters`` cannot be installed beside
        ``mcp`` 2. Calls share this object's session; see ``nbagent.mcp.framework_tools``."""
        from nbagent.mcp.framework_tools import langchain_tools

        return langchain_tools(self)

    def smolagents_tools(self) -> list[Any]:
        """The server's tools as smolagents tools (``ToolCallingAgent(tools=files.smolagents_tools(),
        ...)``): smolagents' own MCP client does not import beside ``mcp`` 2. Calls share this
        object's session; see ``nbagent.mcp.framework_tools``."""
        from nbagent.mcp.framework_tools import smolagents_tools

        return smolagents_tools(self)

    def _tool(self, listed: Any) -> Tool:
        name = listed.name

        async def call(**arguments: Any) -> str:
            return await self.call(name, arguments)

        wanted = self.requires_approval
        return Tool(
            fn=call,
            name=name,
            description=listed.description or "",
            parameters=dict(listed.input_schema or {"type": "object", "properties": {}}),
            timeout_s=self.timeout_s,
            requires_approval=wanted if isinstance(wanted, bool) else name in wanted,
        )

    async def call(self, tool: str, arguments: dict[str, Any]) -> str:
        """Call ``tool`` on the server; its text content, or ``ToolError`` for an error result."""
        session = await self._open()
        if tool not in {listed.name for listed in session.listed}:
            raise ToolError(f"{self.name} no longer lists a tool named {tool!r}", tool=tool)
        caller = _Caller.here(tool, arguments)
        if caller is not None:
            session.calls.append(caller)
        progress = caller.progress if caller is not None else None
        try:
            result = await session.client.call_tool(tool, arguments, progress_callback=progress)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if _connection_lost(exc):
                self._retire(session)
                message = self._failure(f"{self.name} went away during {tool}", exc)
                raise MCPServerError(message, tool=tool) from exc
            raise ToolError(f"{tool} on {self.name}: {exc}", tool=tool) from exc
        finally:
            if caller is not None:
                session.calls.remove(caller)
        text = _text_of(result)
        if getattr(result, "is_error", False):
            raise ToolError(text or f"{tool} on {self.name} failed", tool=tool)
        return text

    # -- the session ----------------------------------------------------------------------------

    async def _open(self) -> _Session:
        loop = asyncio.get_running_loop()
        if self._opening is None or self._opening_loop is not loop:
            self._opening, self._opening_loop = asyncio.Lock(), loop
        async with self._opening:
            session = self._session
            if session is not None and session.loop is loop and not session.broken:
                return session
            if session is not None:
                self._retire(session)
            session = _Session(loop)
            ready: asyncio.Future[None] = loop.create_future()
            # An empty context: the session belongs to no run, so no run's Stop reaches it.
            session.owner = loop.create_task(self._own(session, ready), context=contextvars.Context())
            try:
                await asyncio.shield(ready)
            except asyncio.CancelledError:
                self._retire(session)
                raise
            except Exception as exc:
                self._retire(session)
                message = self._failure(f"the MCP server {self.name} could not start", exc)
                raise MCPServerError(message) from exc
            self._session = session
            return session

    async def _own(self, session: _Session, ready: asyncio.Future[None]) -> None:
        from mcp import ClientSession

        try:
            async with (
                self.transport.open() as (read, write),
                ClientSession(read, write, logging_callback=session.log, log_level="debug") as client,
            ):
                await client.initialize()
                listed = await client.list_tools()
                session.client, session.listed = client, list(listed.tools)
                ready.set_result(None)
                await session.closing.wait()
        except BaseException as exc:  # the owner reports; it never takes the loop down
            session.broken = True
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))
            elif not session.closing.is_set():
                logger.info("nbagent: the MCP session with %s ended: %r", self.name, exc)
            if isinstance(exc, asyncio.CancelledError):
                raise

    def _retire(self, session: _Session) -> None:
        session.broken = True
        session.closing.set()
        if self._session is session:
            self._session = None

    def close(self) -> None:
        """End the session (and a stdio server's process). Safe from any thread, and again."""
        session = self._session
        if session is None:
            return
        self._session = None
        with contextlib.suppress(RuntimeError):  # the loop is closed: its tasks are gone already
            session.loop.call_soon_threadsafe(session.closing.set)

    def _failure(self, what: str, exc: BaseException) -> str:
        detail = _describe(exc)
        stderr = self.transport.stderr_tail()
        message = f"{what}: {detail}" if detail else what
        return f"{message}\nits stderr ends:\n{stderr}" if stderr else message


def _text_of(result: Any) -> str:
    """A call result as the model reads it: its text parts, else its structured content."""
    texts = [part.text for part in getattr(result, "content", None) or [] if getattr(part, "text", None)]
    if texts:
        return "\n".join(texts)
    structured = getattr(result, "structured_content", None)
    return "" if structured is None else str(structured)


def _json_text(data: Any) -> str:
    """A log message's structured data as one line of JSON (its text when JSON cannot hold it)."""
    import json

    try:
        return json.dumps(data, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(data)


def _connection_lost(exc: BaseException) -> bool:
    """True for the ways the SDK reports a session whose other end went away: its error code for a
    closed connection, or the closed streams underneath."""
    import anyio
    from mcp.shared.exceptions import MCPError
    from mcp.types import CONNECTION_CLOSED

    if isinstance(exc, MCPError):
        return exc.code == CONNECTION_CLOSED
    return isinstance(exc, (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError))


def _describe(exc: BaseException) -> str:
    """One line for an exception, unwrapping the SDK's exception groups."""
    while getattr(exc, "exceptions", None):  # an exception group (the SDK's anyio task groups)
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
