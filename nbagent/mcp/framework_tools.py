"""An ``MCPServer``'s tools in the tool types of frameworks whose own MCP clients cannot be
installed beside ``mcp`` 2: LangChain's (for LangGraph agents) and smolagents'.

Why through ``MCPServer``: its one session lives on nbagent's runner loop, the loop nbagent runs
every agent on, so these tools behave as the native ``Agent``'s MCP tools do. A Stop (or the
framework's own cancel) cancels the request, the server sees ``notifications/cancelled`` (the
request's stream closed on HTTP) and the session and stdio process stay up for the next call; a
server's progress and log lines reach the call's row and record when the tool runs inside an
nbagent run (``RunContext.running_call`` finds the call the framework reported).

Where a call runs: on the runner loop itself (a LangGraph run under nbagent) it is awaited where it
is; from any other loop or thread (a plain ``graph.ainvoke`` in a cell, smolagents' tool thread) it
is handed to the runner loop, with the caller's run and call but nothing else of its context (the
session's sockets are shared by every run: a smolagents Stop must not take them for its run's),
and cancelled there when the caller is.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import TYPE_CHECKING, Any

from nbagent.context import run_only_context
from nbagent.errors import ToolError
from nbagent.runtime.loop import runner_loop

if TYPE_CHECKING:
    from nbagent.mcp.server import MCPServer

WAIT_SLICE_S = 0.01
"""How often a thread waiting for a call looks up: a Stop's exception lands in it between slices."""

SMOLAGENTS_TYPES = {"string", "boolean", "integer", "number", "array", "object", "null", "any"}
"""JSON Schema types smolagents' ``Tool.inputs`` takes as they are; any other is ``"any"``."""


def submit(server: MCPServer, tool: str, arguments: dict[str, Any]) -> concurrent.futures.Future[str]:
    """``server.call`` started on the runner loop, in a context that holds only the caller's run
    and call (``run_only_context``), so its progress finds the call and nothing else of the
    caller's context follows it there."""
    call = server.call(tool, arguments)
    return run_only_context().run(asyncio.run_coroutine_threadsafe, call, runner_loop())


async def call_on_runner_loop(server: MCPServer, tool: str, arguments: dict[str, Any]) -> str:
    """``server.call`` on the runner loop, awaited from any loop; cancelling the caller cancels it."""
    if asyncio.get_running_loop() is runner_loop():
        return await server.call(tool, arguments)
    return await asyncio.wrap_future(submit(server, tool, arguments))


def call_from_thread(server: MCPServer, tool: str, arguments: dict[str, Any]) -> str:
    """``server.call`` on the runner loop, waited for on a thread that is not the runner loop's."""
    return waited(submit(server, tool, arguments))


def waited(future: concurrent.futures.Future[Any]) -> Any:
    """The result of work on the runner loop, waited for in slices on another thread. Any
    exception that reaches the wait (a Stop's, a Ctrl-C) cancels the work first."""
    try:
        while True:
            try:
                return future.result(timeout=WAIT_SLICE_S)
            except concurrent.futures.TimeoutError:
                continue
    except BaseException:
        future.cancel()
        raise


def listed_tools(server: MCPServer) -> list[Any]:
    """What the server lists, its session opened on the runner loop (from any thread but that
    loop's: building an agent's tools is done in a cell or a script, not inside a run)."""
    loop = runner_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        raise RuntimeError(
            f"{server.name}: build its framework tools outside a run (in a cell or a script), not on "
            "nbagent's loop"
        )
    return waited(asyncio.run_coroutine_threadsafe(server.listed(), loop))


def langchain_tools(server: MCPServer) -> list[Any]:
    """The server's tools as LangChain ``StructuredTool``s, each with the server's JSON schema. A
    failed call (an ``isError`` result, a server that went away) is a ``ToolException`` the model
    reads, as nbagent's native tools answer it."""
    from langchain_core.tools import StructuredTool, ToolException

    def make(listed: Any) -> Any:
        name = listed.name

        async def acall(**arguments: Any) -> str:
            try:
                return await call_on_runner_loop(server, name, arguments)
            except ToolError as exc:
                raise ToolException(str(exc)) from exc

        def call(**arguments: Any) -> str:
            try:
                return call_from_thread(server, name, arguments)
            except ToolError as exc:
                raise ToolException(str(exc)) from exc

        schema = dict(listed.input_schema or {"type": "object", "properties": {}})
        schema.setdefault("title", name)
        return StructuredTool(
            name=name,
            description=listed.description or name,
            args_schema=schema,
            func=call,
            coroutine=acall,
            handle_tool_error=True,
        )

    return [make(listed) for listed in listed_tools(server)]


def smolagents_tools(server: MCPServer) -> list[Any]:
    """The server's tools as smolagents ``Tool``s (for ``ToolCallingAgent`` and ``CodeAgent``).
    smolagents runs a tool on its own thread: the call is handed to the runner loop and waited for
    in short slices, so a Stop's exception lands at once and cancels the request."""
    from smolagents import Tool

    def make(listed: Any) -> Any:
        name = listed.name
        schema = listed.input_schema or {}
        required = set(schema.get("required") or ())
        inputs = {
            key: smolagents_input(key, spec, key in required)
            for key, spec in (schema.get("properties") or {}).items()
        }

        def forward(self: Any, **arguments: Any) -> str:
            given = {key: value for key, value in arguments.items() if value is not None or key in required}
            return call_from_thread(server, name, given)

        kind = type(
            f"MCPTool_{name}",
            (Tool,),
            {
                "name": name,
                "description": listed.description or name,
                "inputs": inputs,
                "output_type": "string",
                "skip_forward_signature_validation": True,
                "forward": forward,
            },
        )
        return kind()

    return [make(listed) for listed in listed_tools(server)]


def smolagents_input(key: str, spec: dict[str, Any], required: bool) -> dict[str, Any]:
    """One JSON Schema property as a smolagents input: its type (the first non-null one of a list;
    ``"any"`` for a type smolagents does not know), its description, nullable when optional."""
    kind = spec.get("type", "any")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "any")
    entry: dict[str, Any] = {
        "type": kind if kind in SMOLAGENTS_TYPES else "any",
        "description": spec.get("description") or spec.get("title") or key,
    }
    if not required:
        entry["nullable"] = True
    return entry
