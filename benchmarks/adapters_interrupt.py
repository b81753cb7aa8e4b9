"""How fast does a Stop end a pydantic-ai or OpenAI Agents SDK run, and what does the record keep?
nbagent against each framework's own cancel, in the same process, against the same server.

Every run talks to the project's local OpenAI-compatible server (tests/openai_server.py) with the
framework's own OpenAI model class: pydantic-ai's ``OpenAIChatModel`` (chat completions), the
Agents SDK's ``OpenAIResponsesModel`` (``/responses``, its default API). Two phases:

- stream: the model streams a long reply at 100 tokens/s; the Stop comes a random 0.05-0.3 s after
  its third token;
- tool: the first turn asks for a tool (the server reports 30 input / 5 output tokens for it) and
  the tool waits until cancelled; the Stop comes a random 0.05-0.3 s after the tool started.

Measured on one ``perf_counter`` clock, per trial:

- nbagent: ``run.interrupt()`` -> ``run.wait()`` returns a complete record; and (stream phase)
  Stop -> the server sees the client go;
- the framework's own cancel, on a plain run driven on its own thread and loop: pydantic-ai's
  ``CancellationToken.cancel()`` -> ``agent.run`` raises ``RunCancelled``; the Agents SDK's
  ``result.cancel()`` (its "immediate" mode, called on the run's loop) -> ``stream_events()`` ends;
  and the same Stop -> disconnect;
- usage kept: the input+output tokens in the framework's own account after its cancel
  (``RunCancelled.usage()``, ``result.context_wrapper.usage``) against nbagent's record total.

    python benchmarks/adapters_interrupt.py [--quick] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import math
import random
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbagent


def _load(name: str) -> Any:
    tests = Path(__file__).resolve().parent.parent / "tests"
    sys.path.insert(0, str(tests))  # openai_server imports local_http beside it
    spec = importlib.util.spec_from_file_location(name, tests / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


server_module = _load("openai_server")
OpenAIServer, Stream, StreamedCall = (
    server_module.OpenAIServer,
    server_module.Stream,
    server_module.StreamedCall,
)

LONG_TEXT = "word " * 5000
HANG_S = 3600.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    index = min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))
    return ordered[index]


# -- the agents ------------------------------------------------------------------------------


def pydantic_agent(server: Any, tool_started: threading.Event) -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("bench", provider=OpenAIProvider(base_url=server.base_url, api_key="k"))
    agent = Agent(model, name="bench")

    @agent.tool_plain
    async def wait() -> str:
        """Waits until cancelled."""
        tool_started.set()
        await asyncio.sleep(HANG_S)
        return "never"

    return agent


def sdk_agent(server: Any, tool_started: threading.Event) -> Any:
    from agents import Agent, OpenAIResponsesModel, function_tool
    from openai import AsyncOpenAI

    @function_tool
    async def wait() -> str:
        """Waits until cancelled."""
        tool_started.set()
        await asyncio.sleep(HANG_S)
        return "never"

    model = OpenAIResponsesModel("bench", AsyncOpenAI(base_url=server.base_url, api_key="k"))
    return Agent(name="bench", model=model, tools=[wait])


def replies(phase: str) -> list[Any]:
    if phase == "stream":
        return [Stream(LONG_TEXT, tokens_per_s=100)]
    return [Stream(tool_calls=[StreamedCall("wait", "{}")], usage=(30, 5))]


# -- plain runs, stopped by the framework's own cancel ------------------------------------------


class PlainLoop:
    """One event loop on its own thread for every plain run: a run's HTTP client may be collected
    after its run, and must find its loop still open (as it would in an application)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True, name="plain-runs").start()

    def submit(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)


plain_loop = PlainLoop()


def plain_pydantic(agent: Any, stop_at: Callable[[], None]) -> tuple[float, int | None]:
    from pydantic_ai import CancellationToken
    from pydantic_ai.exceptions import RunCancelled

    token = CancellationToken()

    async def handler(ctx: Any, events: Any) -> None:
        async for _ in events:
            pass

    async def drive() -> tuple[float, int | None]:
        try:
            await agent.run("go", cancellation_token=token, event_stream_handler=handler)
        except RunCancelled as exc:
            usage = exc.usage
            return time.perf_counter(), usage.input_tokens + usage.output_tokens
        return time.perf_counter(), None

    future = plain_loop.submit(drive())
    stop_at()
    stopped = time.perf_counter()
    token.cancel()
    ended, tokens = future.result(30)
    return (ended - stopped) * 1000, tokens


def plain_sdk(agent: Any, stop_at: Callable[[], None]) -> tuple[float, int | None]:
    from agents import RunConfig, Runner

    started: Any = plain_loop.submit(_start_sdk(agent, RunConfig(tracing_disabled=True), Runner))
    result = started.result(30)
    done = plain_loop.submit(_consume(result))
    stop_at()
    stopped = time.perf_counter()
    plain_loop.loop.call_soon_threadsafe(result.cancel)
    ended = done.result(30)
    usage = result.context_wrapper.usage
    return (ended - stopped) * 1000, usage.input_tokens + usage.output_tokens


async def _start_sdk(agent: Any, config: Any, runner: Any) -> Any:
    return runner.run_streamed(agent, "go", run_config=config)


async def _consume(result: Any) -> float:
    async for _ in result.stream_events():
        pass
    return time.perf_counter()


# -- one trial -------------------------------------------------------------------------------


def trial(framework: str, phase: str, mode: str, rng: random.Random) -> dict[str, Any]:
    tool_started = threading.Event()
    with OpenAIServer(replies(phase)) as server:
        make = pydantic_agent if framework == "pydantic-ai" else sdk_agent
        agent = make(server, tool_started)

        def reached() -> None:
            if phase == "stream":
                server.wait_until(lambda: server.requests and server.requests[0].tokens_sent >= 3)
            else:
                tool_started.wait(30)
            time.sleep(rng.uniform(0.05, 0.3))  # a random moment inside the phase

        stopped = 0.0
        if mode == "nbagent":
            options: dict[str, Any] = {}
            if framework == "openai-agents":
                from agents import RunConfig

                options["run_config"] = RunConfig(tracing_disabled=True)
            run = nbagent.start(agent, "go", display=False, **options)
            reached()
            stopped = time.perf_counter()
            run.interrupt()
            record = run.wait(timeout=30)
            latency = (time.perf_counter() - stopped) * 1000
            assert record.status == "interrupted", record.status
            tokens = record.total_tokens
        else:
            plain = plain_pydantic if framework == "pydantic-ai" else plain_sdk

            def stop_point() -> None:
                nonlocal stopped
                reached()
                stopped = time.perf_counter()

            latency, tokens = plain(agent, stop_point)
        disconnect = None
        if phase == "stream":
            server.wait_until(lambda: server.requests[0].disconnected is not None)
            disconnect = (server.requests[0].disconnected - stopped) * 1000
    return {"latency_ms": latency, "disconnect_ms": disconnect, "tokens": tokens}


def measure(n: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    summary: dict[str, Any] = {}
    for framework in ("pydantic-ai", "openai-agents"):
        for phase in ("stream", "tool"):
            row: dict[str, Any] = {}
            for mode in ("own_cancel", "nbagent"):
                trials = [trial(framework, phase, mode, rng) for _ in range(n)]
                latencies = [t["latency_ms"] for t in trials]
                row[f"{mode}_p50_ms"] = round(percentile(latencies, 50), 2)
                row[f"{mode}_p99_ms"] = round(percentile(latencies, 99), 2)
                disconnects = [t["disconnect_ms"] for t in trials if t["disconnect_ms"] is not None]
                if disconnects:
                    row[f"{mode}_disconnect_p99_ms"] = round(percentile(disconnects, 99), 2)
                row[f"{mode}_tokens_kept"] = sorted(
                    {t["tokens"] for t in trials}, key=lambda v: (v is None, v)
                )
            row["ratio_p50"] = round(row["own_cancel_p50_ms"] / row["nbagent_p50_ms"], 2)
            summary[f"{framework}/{phase}"] = row
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 trials per case instead of 30")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()
    n = 5 if args.quick else 30
    summary = measure(n, args.seed)
    if args.json:
        print(json.dumps({"trials_per_case": n, "cases": summary}))
        return
    print(f"Stop -> record, {n} trials per case (ms); own cancel = the framework's own, same server")
    header = f"{'case':<26}{'own p50':>9}{'own p99':>9}{'nb p50':>9}{'nb p99':>9}{'ratio':>7}"
    print(header + f"{'own disc p99':>14}{'nb disc p99':>13}   tokens kept (own / nbagent)")
    for case, row in summary.items():
        print(
            f"{case:<26}{row['own_cancel_p50_ms']:>9}{row['own_cancel_p99_ms']:>9}"
            f"{row['nbagent_p50_ms']:>9}{row['nbagent_p99_ms']:>9}{row['ratio_p50']:>7}"
            f"{row.get('own_cancel_disconnect_p99_ms', '-')!s:>14}"
            f"{row.get('nbagent_disconnect_p99_ms', '-')!s:>13}"
            f"   {row['own_cancel_tokens_kept']} / {row['nbagent_tokens_kept']}"
        )


if __name__ == "__main__":
    main()
