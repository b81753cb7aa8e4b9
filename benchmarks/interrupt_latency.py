"""How fast does ``interrupt()`` end a native run? Time from the call to the terminal record.

Three phases, each interrupted at a random moment after it began: mid-stream (a model streaming
1,000 tokens/s), mid-async-tool (a tool awaiting an hour-long sleep) and mid-sync-tool (a blocking
tool that ignores the Stop, so the runner must abandon it after its grace period, included here).
Target: every p99 <= 50 ms.

    python benchmarks/interrupt_latency.py [--n 200] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import threading
import time

import nbagent
from nbagent.models import ScriptedModel, ToolCall


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def wait_for(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the phase under test never began")
        time.sleep(0.0005)


release = threading.Event()


@nbagent.tool
async def slow_async() -> str:
    """Awaits for an hour."""
    await asyncio.sleep(3600)
    return "late"


@nbagent.tool
def stubborn_sync() -> str:
    """Blocks and never checks for a Stop."""
    release.wait(3600)
    return "late"


def one_interrupt(phase: str, rng: random.Random) -> float:
    if phase == "mid_stream":
        agent = nbagent.Agent(ScriptedModel(["tok " * 100_000], tokens_per_s=1000, first_token_s=0))
    else:
        tool = slow_async if phase == "mid_async_tool" else stubborn_sync
        model = ScriptedModel([[ToolCall(tool.name)]], tokens_per_s=1e9, first_token_s=0)
        agent = nbagent.Agent(model, tools=[tool])
    run = nbagent.start(agent, "benchmark", display=False)
    if phase == "mid_stream":
        wait_for(lambda: run.live_text(1))
    else:
        wait_for(lambda: run.record.tool_calls)
    time.sleep(rng.uniform(0, 0.01))  # a random moment inside the phase
    t0 = time.perf_counter()
    run.interrupt()
    record = run.wait()
    elapsed = (time.perf_counter() - t0) * 1000
    assert record.status == "interrupted", record.status
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="interrupts per phase")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    rng = random.Random(1)
    results: dict[str, float | int] = {"n": args.n}
    for phase in ("mid_stream", "mid_async_tool", "mid_sync_tool"):
        latencies = []
        for _ in range(args.n):
            latencies.append(one_interrupt(phase, rng))
            release.set()  # free the abandoned sync tool's thread
            release.clear()
        results[f"{phase}_p50_ms"] = round(statistics.median(latencies), 2)
        results[f"{phase}_p99_ms"] = round(percentile(latencies, 99), 2)
        results[f"{phase}_max_ms"] = round(max(latencies), 2)
    if args.json:
        print(json.dumps(results))
        return
    print(f"interrupt() -> terminal record, {args.n} interrupts per phase (target: p99 <= 50 ms)")
    for phase in ("mid_stream", "mid_async_tool", "mid_sync_tool"):
        p50, p99, worst = (results[f"{phase}_{k}_ms"] for k in ("p50", "p99", "max"))
        print(f"  {phase:<15} p50 {p50:7.2f} ms   p99 {p99:7.2f} ms   max {worst:7.2f} ms")


if __name__ == "__main__":
    main()
