"""How fast an MCP server learns of a Stop: Stop → the server's handler sees its cancel.

A real MCP server on the ``mcp`` SDK (tests/mcp_server.py) runs a tool that waits until it is
cancelled and writes down (wall clock) when its handler saw the cancel. Per transport (stdio, and
streamable HTTP on 127.0.0.1), each trial calls the tool and, once the server has begun it, stops:

- nbagent: a native ``Agent`` with ``MCPServer`` tools; ``run.interrupt()`` → the handler's cancel;
- baseline: the SDK's own client on a plain asyncio loop; ``task.cancel()`` of ``call_tool`` →
  the handler's cancel (what a framework's own cancel can do at best).

Then per framework with an MCP client of its own (the Agents SDK's ``MCPServerStdio`` /
``MCPServerStreamableHttp``, pydantic-ai's ``MCPToolset``; target p95 <= 250 ms):

- nbagent: the framework's agent run by nbagent, its server handed over unconnected (nbagent's
  Agents SDK adapter connects it on nbagent's loop for each run; pydantic-ai enters the toolset
  itself), ``run.interrupt()`` → the handler's cancel;
- baseline: the framework alone on a plain asyncio loop, its server connected once, and
  ``task.cancel()`` of its run.

And per framework whose own MCP client cannot be installed beside ``mcp`` 2 (LangGraph, through
``MCPServer.langchain_tools()``; smolagents, through ``MCPServer.smolagents_tools()``):

- nbagent: the framework's agent with the server's tools in its own tool type, run by nbagent,
  ``run.interrupt()`` → the handler's cancel;
- baseline: LangGraph alone on a plain asyncio loop (``graph.ainvoke``), ``task.cancel()``;
  smolagents has none (it cannot cancel a running tool: ``agent.interrupt()`` waits for the step).

Both keep one session for all their trials (the next call after each Stop must work; it is
counted). Target: nbagent p95 <= 100 ms. p95 is the nearest-rank percentile.

    python benchmarks/mcp_interrupt.py [--quick] [--n N] [--json] [--frameworks a,b]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from pathlib import Path

import nbagent
from nbagent.mcp import MCPServer
from nbagent.models import ScriptedModel, ToolCall

TESTS = Path(__file__).resolve().parent.parent / "tests"
SERVER = TESTS / "mcp_server.py"
sys.path.insert(0, str(TESTS))  # the scripted models of the LangGraph and smolagents agents


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path

    def times(self, event: str) -> list[float]:
        lines = self.path.read_text().splitlines() if self.path.exists() else []
        return [float(line.split(" ", 1)[0]) for line in lines if line.endswith(event)]

    def wait(self, event: str, count: int, timeout: float = 30.0) -> float:
        deadline = time.monotonic() + timeout
        while len(found := self.times(event)) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the server did not note {event!r} #{count}")
            time.sleep(0.001)
        return found[count - 1]


@contextmanager
def http_server(journal: Journal) -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "NBAGENT_MCP_JOURNAL": str(journal.path)}
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=20)


def nbagent_trials(server: MCPServer, journal: Journal, n: int) -> tuple[list[float], int]:
    delays, next_ok = [], 0
    for i in range(n):
        model = ScriptedModel([[ToolCall("slow", {"steps": 1})], "x"], first_token_s=0.0, tokens_per_s=1e9)
        run = nbagent.start(nbagent.Agent(model, tools=[server]), "go", display=False)
        journal.wait("slow started", i + 1)
        stopped = time.time()
        run.interrupt()
        run.wait(timeout=60)
        delays.append((journal.wait("slow cancelled", i + 1) - stopped) * 1000)
        check = ScriptedModel([[ToolCall("add", {"a": 1, "b": 1})], "x"], first_token_s=0.0, tokens_per_s=1e9)
        after = nbagent.run(nbagent.Agent(check, tools=[server]), "add", display=False)
        next_ok += [c.result for s in after.steps for c in s.tool_calls] == ["2"]
    return delays, next_ok


def baseline_trials(open_streams: Callable[[], object], journal: Journal, n: int) -> tuple[list[float], int]:
    from mcp import ClientSession

    async def trials() -> tuple[list[float], int]:
        delays, next_ok = [], 0
        async with open_streams() as streams, ClientSession(streams[0], streams[1]) as session:  # type: ignore[attr-defined]
            await session.initialize()
            for i in range(n):
                call = asyncio.ensure_future(session.call_tool("slow", {"steps": 1}))
                while len(journal.times("slow started")) <= i:
                    await asyncio.sleep(0.001)
                stopped = time.time()
                call.cancel()
                with suppress(asyncio.CancelledError):
                    await call
                delays.append(
                    (await asyncio.to_thread(journal.wait, "slow cancelled", i + 1) - stopped) * 1000
                )
                result = await session.call_tool("add", {"a": 1, "b": 1})
                next_ok += result.content[0].text == "2"
        return delays, next_ok

    return asyncio.run(trials())


# -- frameworks with MCP clients of their own ------------------------------------------------------


def _sdk_server(transport: str, target: str | dict[str, str]) -> object:
    """An Agents SDK MCP server, unconnected: nbagent connects it for each run on its own loop."""
    from agents.mcp import MCPServerStdio, MCPServerStreamableHttp

    if transport == "stdio":
        return MCPServerStdio(
            params={"command": sys.executable, "args": [str(SERVER)], "env": target}, name="bench"
        )
    return MCPServerStreamableHttp(params={"url": target}, name="bench")


def _sdk_agent(server: object, tool: str, arguments: dict[str, int]) -> object:
    from agents import Agent
    from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

    model = ScriptedModel(
        [
            ModelStep(output=[function_call(tool, arguments, call_id="c1")]),
            ModelStep(output=[assistant_message("x")]),
        ]
    )
    return Agent("bench", model=model, mcp_servers=[server])


def _pai_toolset(transport: str, target: str | dict[str, str]) -> object:
    from fastmcp.client.transports import StdioTransport, StreamableHttpTransport
    from pydantic_ai.mcp import MCPToolset

    if transport == "stdio":
        return MCPToolset(StdioTransport(command=sys.executable, args=[str(SERVER)], env=target))
    return MCPToolset(StreamableHttpTransport(target))


def _pai_agent(toolset: object, tool: str, arguments: dict[str, int]) -> object:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    def reply(messages: list[object], info: object) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart(tool, arguments, tool_call_id="c1")])
        return ModelResponse(parts=[TextPart("x")])

    return Agent(FunctionModel(reply), toolsets=[toolset])


def _mcp_server(transport: str, target: str | dict[str, str]) -> MCPServer:
    """nbagent's own ``MCPServer``, whose tools the next two frameworks get in their tool types."""
    if transport == "stdio":
        return MCPServer.stdio(sys.executable, [str(SERVER)], env=dict(target))  # type: ignore[arg-type]
    return MCPServer.http(str(target))


def _langgraph_agent(server: MCPServer, tool: str, arguments: dict[str, int]) -> object:
    from langchain.agents import create_agent
    from langgraph_fakes import ScriptedChatModel, reply

    model = ScriptedChatModel(replies=[reply("", [(tool, arguments)]), reply("x")])
    return create_agent(model, tools=server.langchain_tools())


def _smolagents_agent(server: MCPServer, tool: str, arguments: dict[str, int]) -> object:
    from smolagents import ToolCallingAgent
    from smolagents_fakes import ScriptedSmolModel, answer, call

    model = ScriptedSmolModel([call(tool, **arguments), answer("x")])
    return ToolCallingAgent(tools=server.smolagents_tools(), model=model, verbosity_level=-1)


FRAMEWORKS = {
    "openai_agents": (_sdk_server, _sdk_agent),
    "pydantic_ai": (_pai_toolset, _pai_agent),
    "langgraph": (_mcp_server, _langgraph_agent),
    "smolagents": (_mcp_server, _smolagents_agent),
}
NO_BASELINE = {"smolagents"}
"""Frameworks with no way to cancel a running tool of their own: nothing to put beside nbagent."""


def _answered(record: nbagent.RunRecord) -> bool:
    """The run after a Stop called ``add`` and succeeded (smolagents' ``final_answer`` is a call too)."""
    calls = [c.status for c in record.tool_calls if c.tool == "add"]
    return record.status == "success" and calls == ["ok"]


def framework_nbagent_trials(
    framework: str, transport: str, target: str | dict[str, str], journal: Journal, n: int
) -> tuple[list[float], int]:
    """The framework's agent run by nbagent with its own MCP client, the server handed over
    unconnected (what nbagent asks for); Stop with ``run.interrupt()``."""
    make_server, make_agent = FRAMEWORKS[framework]
    server = make_server(transport, target)
    delays, next_ok = [], 0
    for i in range(n):
        run = nbagent.start(make_agent(server, "slow", {"steps": 1}), "go", display=False)
        journal.wait("slow started", i + 1)
        stopped = time.time()
        run.interrupt()
        run.wait(timeout=60)
        delays.append((journal.wait("slow cancelled", i + 1) - stopped) * 1000)
        after = nbagent.run(make_agent(server, "add", {"a": 1, "b": 1}), "add", display=False)
        next_ok += _answered(after)
    if isinstance(server, MCPServer):
        server.close()
    return delays, next_ok


def framework_baseline_trials(
    framework: str, transport: str, target: str | dict[str, str], journal: Journal, n: int
) -> tuple[list[float], int]:
    """The framework alone on a plain asyncio loop, its server connected once (``async with``);
    Stop with ``task.cancel()`` of its run."""
    make_server, make_agent = FRAMEWORKS[framework]

    async def run_once(agent: object) -> object:
        if framework == "openai_agents":
            from agents import Runner

            return await Runner.run(agent, "go")
        if framework == "langgraph":
            return await agent.ainvoke({"messages": [("user", "go")]})  # type: ignore[attr-defined]
        return await agent.run("go")  # type: ignore[attr-defined]

    @asynccontextmanager
    async def opened() -> AsyncIterator[object]:
        made = make_server(transport, target)
        if isinstance(made, MCPServer):  # its session opens on first use and closes with it
            yield made
            made.close()
            return
        async with made as server:  # type: ignore[attr-defined]
            yield server

    async def trials() -> tuple[list[float], int]:
        delays, next_ok = [], 0
        async with opened() as server:
            for i in range(n):
                task = asyncio.ensure_future(run_once(make_agent(server, "slow", {"steps": 1})))
                while len(journal.times("slow started")) <= i:
                    await asyncio.sleep(0.001)
                stopped = time.time()
                task.cancel()
                with suppress(asyncio.CancelledError):
                    await task
                delays.append(
                    (await asyncio.to_thread(journal.wait, "slow cancelled", i + 1) - stopped) * 1000
                )
                with suppress(Exception):
                    await run_once(make_agent(server, "add", {"a": 1, "b": 1}))
                    next_ok += 1
        return delays, next_ok

    return asyncio.run(trials())


def measure_frameworks(n: int, frameworks: list[str]) -> dict[str, dict[str, float | int]]:
    from agents import set_tracing_disabled

    set_tracing_disabled(True)
    logging.getLogger("fastmcp").setLevel(logging.WARNING)  # its client prints each server log line
    out: dict[str, dict[str, float | int]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for framework in frameworks:
            for transport in ("stdio", "http"):
                for side in ("nbagent", "baseline"):
                    if side == "baseline" and framework in NO_BASELINE:
                        continue
                    journal = Journal(Path(folder) / f"{framework}-{transport}-{side}.txt")
                    journal.path.write_text("")
                    env = {**os.environ, "NBAGENT_MCP_JOURNAL": str(journal.path)}
                    trials = framework_nbagent_trials if side == "nbagent" else framework_baseline_trials
                    if transport == "stdio":
                        result = trials(framework, transport, env, journal, n)
                    else:
                        with http_server(journal) as url:
                            result = trials(framework, transport, url, journal, n)
                    out[f"{framework}_{transport}_{side}"] = figures(*result)
    return out


def figures(delays: list[float], next_ok: int) -> dict[str, float | int]:
    return {
        "p50_ms": round(percentile(delays, 0.5), 2),
        "p95_ms": round(percentile(delays, 0.95), 2),
        "max_ms": round(max(delays), 2),
        "next_call_ok": next_ok,
        "n": len(delays),
    }


def measure(n: int) -> dict[str, dict[str, float | int]]:
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client

    out: dict[str, dict[str, float | int]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for transport in ("stdio", "http"):
            for side in ("nbagent", "baseline"):
                journal = Journal(Path(folder) / f"{transport}-{side}.txt")
                journal.path.write_text("")
                env = {"NBAGENT_MCP_JOURNAL": str(journal.path)}
                if transport == "stdio":
                    if side == "nbagent":
                        server = MCPServer.stdio(sys.executable, [str(SERVER)], env=env)
                        result = nbagent_trials(server, journal, n)
                        server.close()
                    else:
                        params = StdioServerParameters(
                            command=sys.executable, args=[str(SERVER)], env={**os.environ, **env}
                        )
                        result = baseline_trials(lambda params=params: stdio_client(params), journal, n)
                else:
                    with http_server(journal) as url:
                        if side == "nbagent":
                            server = MCPServer.http(url)
                            result = nbagent_trials(server, journal, n)
                            server.close()
                        else:
                            result = baseline_trials(lambda url=url: streamable_http_client(url), journal, n)
                out[f"{transport}_{side}"] = figures(*result)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quick", action="store_true", help="5 stops per transport and side instead of 20")
    parser.add_argument("--n", type=int, default=None, help="stops per transport and side")
    parser.add_argument(
        "--frameworks",
        default="openai_agents,pydantic_ai,langgraph,smolagents",
        help="frameworks whose own MCP clients to measure too (comma-separated; '' for none)",
    )
    args = parser.parse_args(argv)
    n = args.n or (5 if args.quick else 20)
    result = measure(n)
    frameworks = [f for f in args.frameworks.split(",") if f]
    if frameworks:
        result.update(measure_frameworks(n, frameworks))
    if args.json:
        print(json.dumps(result))
        return 0
    print("Stop -> the MCP server's handler sees the cancel (ms), nbagent beside the SDK's own cancel")
    for transport in ("stdio", "http"):
        ours, base = result[f"{transport}_nbagent"], result[f"{transport}_baseline"]
        print(
            f"  {transport:6} nbagent p50 {ours['p50_ms']:7.2f}  p95 {ours['p95_ms']:7.2f}  "
            f"next call ok {ours['next_call_ok']}/{ours['n']}  |  baseline p50 {base['p50_ms']:7.2f}  "
            f"p95 {base['p95_ms']:7.2f}  next call ok {base['next_call_ok']}/{base['n']}"
        )
    for framework in frameworks:
        for transport in ("stdio", "http"):
            ours = result[f"{framework}_{transport}_nbagent"]
            base = result.get(f"{framework}_{transport}_baseline")
            own = (
                "its own cancel: none (it cannot cancel a running tool)"
                if base is None
                else f"its own cancel p50 {base['p50_ms']:7.2f}  p95 {base['p95_ms']:7.2f}  next run ok "
                f"{base['next_call_ok']}/{base['n']}"
            )
            print(
                f"  {framework} {transport:6} nbagent p50 {ours['p50_ms']:7.2f}  p95 {ours['p95_ms']:7.2f}  "
                f"next run ok {ours['next_call_ok']}/{ours['n']}  |  {own}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
