"""How fast does a Stop end a LangGraph run under nbagent, and does it drop the model's connection?

Phases, each a LangChain ``create_agent`` graph with an ``InMemorySaver``:

- fake_stream: a fake chat model streams a long reply, a chunk every 20 ms; the Stop comes a
  random 0.05-0.2 s after its first chunk;
- fake_tool: the model asks for an async tool that sleeps until cancelled; the Stop comes a random
  0.05-0.2 s after the tool started;
- http_100/s, http_2000/s: ``langchain-openai``'s ``ChatOpenAI`` against the project's local
  OpenAI-compatible server (tests/openai_server.py), a 10 s reply at 100 and at 2000 tokens/s; the
  Stop comes 0.05-0.2 s after the tenth character;
- plain_100/s, plain_2000/s, the baseline: the same graph and server without nbagent, the
  ``astream`` task cancelled with ``task.cancel()``. At 2000 tokens/s ChatOpenAI's per-chunk
  ``asyncio.wait_for`` loses many cancels on CPython 3.11 (the chunk had already arrived), and the
  plain run goes on to the end of the reply; nbagent cancels again what swallowed a cancel.

Measured on one ``perf_counter`` clock, per trial: ``run.interrupt()`` -> ``run.wait()`` returns
the complete record (p50 / p99), and (http, plain) Stop -> the server sees the client go (p50 /
max; a disconnect not seen within 5 s is counted, not timed). After each nbagent trial, a
``reset=False`` run on the same thread must succeed (the checkpoint stayed valid); the count of
those that did is printed.

    python benchmarks/langgraph_interrupt.py [--quick] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import nbagent

TESTS = Path(__file__).resolve().parent.parent / "tests"


def _load(name: str) -> Any:
    sys.path.insert(0, str(TESTS))
    spec = importlib.util.spec_from_file_location(name, TESTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _wait(condition: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        time.sleep(0.001)


def _percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def _fake_graph(phase: str) -> tuple[Any, list[float], Any]:
    from langchain.agents import create_agent
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver

    fakes = _load("langgraph_fakes")
    started: list[float] = []

    @tool
    async def wait_forever() -> str:
        """Wait until cancelled."""
        started.append(time.perf_counter())
        await asyncio.sleep(3600)
        return "never"

    if phase == "fake_stream":
        replies = [fakes.reply("word " * 400, usage=(10, 400))]
        model = fakes.ScriptedChatModel(replies=replies, delay_s=0.02, chunk_size=5, cycle=True)
    else:
        replies = [fakes.reply("", [("wait_forever", {})]), fakes.reply("ok")]
        model = fakes.ScriptedChatModel(replies=replies, cycle=True)
    graph = create_agent(model, tools=[wait_forever], checkpointer=InMemorySaver())
    return graph, started, model


DISCONNECT_WAIT_S = 5.0
"""How long a trial waits for the server to see the client go before counting it as not seen."""


def _trial(graph: Any, thread: str, ready: Any, server: Any = None) -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread}}
    run = nbagent.start(graph, "go", display=False, config=config)
    _wait(lambda: ready(run))
    time.sleep(random.uniform(0.05, 0.2))
    stopped = time.perf_counter()
    run.interrupt("now")
    record = run.wait(timeout=30)
    latency = (time.perf_counter() - stopped) * 1000
    assert record.status == "interrupted", record.status
    disconnect = None
    if server is not None:
        request = server.requests[-1]
        try:
            server.wait_until(lambda: request.disconnected is not None, timeout=DISCONNECT_WAIT_S)
        except AssertionError:  # a figure, not a crash: reported as "disconnect_not_seen"
            return {"latency_ms": latency, "disconnect_ms": None, "config": config}
        disconnect = (request.disconnected - stopped) * 1000
    return {"latency_ms": latency, "disconnect_ms": disconnect, "config": config}


def _continues(graph: Any, config: dict[str, Any], fast: Any = None) -> bool:
    if fast is not None:
        fast()
    record = nbagent.run(graph, "go on", display=False, reset=False, config=config)
    return record.status == "success"


def _fake_phase(phase: str, trials: int) -> dict[str, Any]:
    latencies, continued = [], 0
    for index in range(trials):
        graph, started, model = _fake_graph(phase)
        if phase == "fake_stream":
            result = _trial(graph, f"t{index}", lambda run: run.record.steps)
            ok = _continues(graph, result["config"], lambda m=model: setattr(m, "delay_s", 0.0))
        else:
            result = _trial(graph, f"t{index}", lambda run, s=started: s)
            ok = True  # going on would run the cut tool again, which waits forever here
        latencies.append(result["latency_ms"])
        continued += ok
    return _summary(phase, latencies, [], continued, trials)


def _ten_seconds(tokens_per_s: float) -> str:
    """A reply that streams for about 10 s: a lost Stop lets it run that long."""
    return "word " * int(tokens_per_s * 10)


def _http_graph(server: Any) -> Any:
    import httpx
    from langchain.agents import create_agent
    from langchain_openai import ChatOpenAI
    from langgraph.checkpoint.memory import InMemorySaver

    model = ChatOpenAI(
        model="gpt-test", base_url=server.base_url, api_key="sk-test", stream_usage=True,
        http_async_client=httpx.AsyncClient(),  # LangChain's shared one stays on its first loop
    )  # fmt: skip
    return create_agent(model, tools=[], checkpointer=InMemorySaver())


def _http_phase(trials: int, tokens_per_s: float) -> dict[str, Any]:
    server_module = _load("openai_server")
    latencies, disconnects, continued = [], [], 0
    with server_module.OpenAIServer() as server:
        for index in range(trials):
            server.push(server_module.Stream(_ten_seconds(tokens_per_s), tokens_per_s=tokens_per_s))
            graph = _http_graph(server)
            result = _trial(
                graph,
                f"h{index}",
                lambda run: len(run.live_text(1)) > 10 if run.record.steps else False,
                server,
            )
            latencies.append(result["latency_ms"])
            disconnects.append(result["disconnect_ms"])
            server.push(server_module.Stream("done", tokens_per_s=1000.0))
            continued += _continues(graph, result["config"])
    return _summary(f"http_{tokens_per_s:g}/s", latencies, disconnects, continued, trials)


def _plain_http_phase(trials: int, tokens_per_s: float) -> dict[str, Any]:
    """The baseline: LangGraph alone, its ``astream`` task cancelled as a user would stop it."""
    server_module = _load("openai_server")
    latencies: list[float] = []
    disconnects: list[float | None] = []

    async def one(server: Any, index: int) -> None:
        graph = _http_graph(server)
        chunks = 0

        async def consume() -> None:
            nonlocal chunks
            config = {"configurable": {"thread_id": f"p{index}"}}
            async for _ in graph.astream({"messages": [("user", "go")]}, config, stream_mode="messages"):
                chunks += 1

        task = asyncio.ensure_future(consume())
        while chunks < 10:
            await asyncio.sleep(0.001)
        await asyncio.sleep(random.uniform(0.05, 0.2))
        stopped = time.perf_counter()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        latencies.append((time.perf_counter() - stopped) * 1000)
        request = server.requests[-1]
        try:
            server.wait_until(lambda: request.disconnected is not None, timeout=DISCONNECT_WAIT_S)
            disconnects.append((request.disconnected - stopped) * 1000)
        except AssertionError:
            disconnects.append(None)

    with server_module.OpenAIServer() as server:
        for index in range(trials):
            server.push(server_module.Stream(_ten_seconds(tokens_per_s), tokens_per_s=tokens_per_s))
            asyncio.run(one(server, index))
    return _summary(f"plain_{tokens_per_s:g}/s", latencies, disconnects, 0, trials)


def _summary(
    phase: str, latencies: list[float], disconnects: list[float | None], continued: int, trials: int
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "phase": phase,
        "trials": trials,
        "stop_to_record_p50_ms": round(statistics.median(latencies), 2),
        "stop_to_record_p99_ms": round(_percentile(latencies, 99), 2),
        "continued": continued,
    }
    seen = [d for d in disconnects if d is not None]
    if disconnects:
        row["disconnect_not_seen"] = len(disconnects) - len(seen)
    if seen:
        row["disconnect_p50_ms"] = round(statistics.median(seen), 2)
        row["disconnect_max_ms"] = round(max(seen), 2)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few trials per phase (a smoke test)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    trials = 3 if args.quick else 20
    random.seed(7)
    rows = [_fake_phase("fake_stream", trials), _fake_phase("fake_tool", trials)]
    for rate in (100.0, 2000.0):
        rows += [_http_phase(trials, rate), _plain_http_phase(trials, rate)]
    if args.json:
        print(json.dumps({"phases": rows}, indent=2))
        return
    heads = ("trials", "p50 ms", "p99 ms", "disc p50", "disc max", "continued")
    print(f"{'phase':<12} " + " ".join(f"{head:>9}" for head in heads))
    for row in rows:
        print(
            f"{row['phase']:<12} {row['trials']:>9} {row['stop_to_record_p50_ms']:>9} "
            f"{row['stop_to_record_p99_ms']:>9} {row.get('disconnect_p50_ms', '-')!s:>9} "
            f"{row.get('disconnect_max_ms', '-')!s:>9} {row['continued']:>6}/{row['trials']}"
        )
        if row.get("disconnect_not_seen"):
            print(
                f"  {row['phase']}: the server did not see the client go within 5 s in "
                f"{row['disconnect_not_seen']} of {row['trials']} trials"
            )


if __name__ == "__main__":
    main()
