"""How fast does ``interrupt()`` end a native run? Time from the call to the terminal record.

Phases, each interrupted at a random moment after it began: mid-stream (a model streaming
1,000 tokens/s), mid-async-tool (a tool awaiting an hour-long sleep), mid-sync-tool (a blocking
tool that ignores the Stop, so the runner must abandon it after its grace period, included here),
stubborn-async-tool (an async tool whose bare ``except`` swallows its cancel: abandoned after the
same grace), nested-child (the Stop goes to a parent run whose tool awaits a child run that is
streaming: the time until *both* records are complete), and first-stop-in-a-fresh-process (a new
Python process per sample: the first run's first Stop, the price library not yet imported).
Target: every p99 <= 50 ms.

    python benchmarks/interrupt_latency.py [--n 200] [--quick] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import statistics
import subprocess
import sys
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


@nbagent.tool
async def stubborn_async() -> str:
    """Retries forever: a bare except swallows every cancel."""
    while True:
        with contextlib.suppress(BaseException):  # swallows every cancel, as found in the field
            await asyncio.sleep(3600)


def streaming_agent() -> nbagent.Agent:
    return nbagent.Agent(ScriptedModel(["tok " * 100_000], tokens_per_s=1000, first_token_s=0))


@nbagent.tool
async def ask_child() -> str:
    """Awaits a child run that streams for a long time."""
    record = await nbagent.arun(streaming_agent(), "child", display=False)
    return str(record.output)


TOOLS = {"mid_async_tool": slow_async, "mid_sync_tool": stubborn_sync, "stubborn_async_tool": stubborn_async}


def one_interrupt(phase: str, rng: random.Random) -> float:
    if phase == "mid_stream":
        agent = streaming_agent()
    else:
        tool = ask_child if phase == "nested_child" else TOOLS[phase]
        model = ScriptedModel([[ToolCall(tool.name)]], tokens_per_s=1e9, first_token_s=0)
        agent = nbagent.Agent(model, tools=[tool])
    run = nbagent.start(agent, "benchmark", display=False)
    child: list[nbagent.Run] = []
    if phase == "mid_stream":
        wait_for(lambda: run.live_text(1))
    elif phase == "nested_child":

        def child_streams() -> bool:
            child[:] = [r for r in nbagent.runtime.runner.live_runs() if r.parent_run_id == run.run_id]
            return bool(child) and bool(child[0].live_text(1))

        wait_for(child_streams)
    else:
        wait_for(lambda: run.record.tool_calls)
    time.sleep(rng.uniform(0, 0.01))  # a random moment inside the phase
    t0 = time.perf_counter()
    run.interrupt()
    record = run.wait()
    if child:
        assert child[0].wait().status == "interrupted"
    elapsed = (time.perf_counter() - t0) * 1000
    assert record.status == "interrupted", record.status
    return elapsed


FRESH_PROCESS = """
import time, nbagent
from nbagent.models import ScriptedModel
run = nbagent.start(nbagent.Agent(ScriptedModel(["tok " * 100_000], tokens_per_s=1000, first_token_s=0)),
                    "benchmark", display=False)
while not run.live_text(1):
    time.sleep(0.0005)
t0 = time.perf_counter()
run.interrupt()
record = run.wait()
assert record.status == "interrupted"
print((time.perf_counter() - t0) * 1000)
"""


def first_stop_in_a_fresh_process() -> float:
    out = subprocess.run([sys.executable, "-c", FRESH_PROCESS], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


PHASES = ("mid_stream", "mid_async_tool", "mid_sync_tool", "stubborn_async_tool", "nested_child")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="interrupts per phase")
    parser.add_argument("--fresh", type=int, default=20, help="fresh processes for the first-Stop phase")
    parser.add_argument("--quick", action="store_true", help="20 interrupts per phase, 5 fresh processes")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if args.quick:
        args.n, args.fresh = 20, 5
    rng = random.Random(1)
    results: dict[str, float | int] = {"n": args.n, "fresh": args.fresh}
    samples: dict[str, list[float]] = {}
    for phase in PHASES:
        latencies = []
        for _ in range(args.n):
            latencies.append(one_interrupt(phase, rng))
            release.set()  # free the abandoned sync tool's thread
            release.clear()
        samples[phase] = latencies
    samples["first_stop_fresh_process"] = [first_stop_in_a_fresh_process() for _ in range(args.fresh)]
    for phase, latencies in samples.items():
        results[f"{phase}_p50_ms"] = round(statistics.median(latencies), 2)
        results[f"{phase}_p99_ms"] = round(percentile(latencies, 99), 2)
        results[f"{phase}_max_ms"] = round(max(latencies), 2)
    if args.json:
        print(json.dumps(results))
        return
    print(f"interrupt() -> terminal record, {args.n} interrupts per phase (target: p99 <= 50 ms)")
    for phase in samples:
        p50, p99, worst = (results[f"{phase}_{k}_ms"] for k in ("p50", "p99", "max"))
        print(f"  {phase:<25} p50 {p50:7.2f} ms   p99 {p99:7.2f} ms   max {worst:7.2f} ms")


if __name__ == "__main__":
    main()
