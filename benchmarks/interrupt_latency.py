"""How fast does ``interrupt()`` end a native run? Time from the call to the terminal record.

Phases, each interrupted at a random moment after it began: mid-stream (a model streaming
1,000 tokens/s), mid-async-tool (a tool awaiting an hour-long sleep), mid-sync-tool (a blocking
tool that ignores the Stop, so the runner must abandon it after its grace period, included here),
stubborn-async-tool (an async tool whose bare ``except`` swallows its cancel: abandoned after the
same grace), nested-child (the Stop goes to a parent run whose tool awaits a child run that is
streaming: the time until *both* records are complete), and first-stop-in-a-fresh-process (a new
Python process per sample: the first run's first Stop, the price library not yet imported).
Target: every p99 <= 50 ms.

``--compare PATH`` measures this checkout and another one (a git worktree of an earlier release,
say) side by side: each runs in a worker process of its own, importing its own ``nbagent``, and
the two take turns in small batches (the order swapped every round) so a busy machine slows both
alike. The figures to read are the two columns of one such run, not numbers from separate runs.

    python benchmarks/interrupt_latency.py [--n 200] [--quick] [--json] [--phases mid_stream]
    git worktree add /tmp/nbagent-before <commit>
    python benchmarks/interrupt_latency.py --compare /tmp/nbagent-before --phases mid_stream --n 1000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

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
    record = await nbagent.start(streaming_agent(), "child", display=False)
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
            child[:] = [r for r in nbagent.runtime.handle.live_runs() if r.parent_run_id == run.run_id]
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


def first_stop_in_a_fresh_process(checkout: str | None = None) -> float:
    env = dict(os.environ, PYTHONPATH=checkout) if checkout else None
    command = [sys.executable, "-c", FRESH_PROCESS]
    out = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
    return float(out.stdout.strip().splitlines()[-1])


PHASES = ("mid_stream", "mid_async_tool", "mid_sync_tool", "stubborn_async_tool", "nested_child")
FRESH = "first_stop_fresh_process"


def measure(phase: str, n: int, rng: random.Random) -> list[float]:
    """``n`` interrupts of ``phase`` in this process, in ms."""
    if phase == FRESH:
        return [first_stop_in_a_fresh_process() for _ in range(n)]
    latencies = []
    for _ in range(n):
        latencies.append(one_interrupt(phase, rng))
        release.set()  # free the abandoned sync tool's thread
        release.clear()
    return latencies


def figures(samples: dict[str, list[float]], prefix: str = "") -> dict[str, float]:
    results: dict[str, float] = {}
    for phase, latencies in samples.items():
        results[f"{prefix}{phase}_p50_ms"] = round(statistics.median(latencies), 2)
        results[f"{prefix}{phase}_p99_ms"] = round(percentile(latencies, 99), 2)
        results[f"{prefix}{phase}_max_ms"] = round(max(latencies), 2)
    return results


# -- side by side ------------------------------------------------------------------------------

WORKER_MARK = "@latencies "


def serve() -> None:
    """Worker mode: read ``phase n`` lines, answer each with the latencies measured here."""
    rng = random.Random(os.getpid())
    for line in sys.stdin:
        phase, n = line.split()
        print(WORKER_MARK + json.dumps(measure(phase, int(n), rng)), flush=True)


class Checkout:
    """A worker process measuring the ``nbagent`` of one checkout."""

    def __init__(self, label: str, root: Path) -> None:
        if not (root / "nbagent" / "__init__.py").is_file():
            raise SystemExit(f"--compare: {root} is not an nbagent checkout (no nbagent/__init__.py)")
        self.label, self.root = label, str(root)
        env = dict(os.environ, PYTHONPATH=self.root)
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def measure(self, phase: str, n: int) -> list[float]:
        if phase == FRESH:  # a fresh process per sample: no worker needed
            return [first_stop_in_a_fresh_process(self.root) for _ in range(n)]
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{phase} {n}\n")
        self.process.stdin.flush()
        for line in self.process.stdout:
            if line.startswith(WORKER_MARK):
                return json.loads(line[len(WORKER_MARK) :])
        raise RuntimeError(f"the worker for {self.label} ({self.root}) died")

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


def compare(other: Path, phases: list[str], n: int, fresh: int, batch: int) -> dict[str, Any]:
    """Both checkouts, taking turns ``batch`` samples at a time, the order swapped each round."""
    this = Checkout("this", Path(__file__).resolve().parent.parent)
    that = Checkout("other", other.resolve())
    samples: dict[str, dict[str, list[float]]] = {"this": {}, "other": {}}
    try:
        for phase in phases:
            total = fresh if phase == FRESH else n
            done, turn = 0, 0
            while done < total:
                k = min(batch, total - done)
                pair = (this, that) if turn % 2 == 0 else (that, this)
                for checkout in pair:
                    samples[checkout.label].setdefault(phase, []).extend(checkout.measure(phase, k))
                done, turn = done + k, turn + 1
    finally:
        this.close()
        that.close()
    return {
        "this": this.root,
        "other": that.root,
        **figures(samples["this"], "this_"),
        **figures(samples["other"], "other_"),
    }


def print_side_by_side(results: dict[str, Any], phases: list[str], batch: int) -> None:
    print(f"interrupt() -> terminal record, side by side: {results['n']} per phase, in turns of {batch}")
    print(f"  this:  {results['this']}\n  other: {results['other']}")
    for phase in phases:
        this, other = (
            f"p50 {results[f'{who}_{phase}_p50_ms']:6.2f} ms  p99 {results[f'{who}_{phase}_p99_ms']:6.2f} ms"
            for who in ("this", "other")
        )
        print(f"  {phase:<25} this {this}  |  other {other}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="interrupts per phase")
    parser.add_argument("--fresh", type=int, default=20, help="fresh processes for the first-Stop phase")
    parser.add_argument("--quick", action="store_true", help="20 interrupts per phase, 5 fresh processes")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--phases", nargs="+", choices=[*PHASES, FRESH], help="only these phases")
    parser.add_argument(
        "--compare", type=Path, metavar="PATH", help="another checkout, measured side by side"
    )
    parser.add_argument("--batch", type=int, default=10, help="samples per turn with --compare")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        serve()
        return
    if args.quick:
        args.n, args.fresh = 20, 5
    phases = args.phases or [*PHASES, FRESH]
    if args.compare is not None:
        results = {
            "n": args.n,
            "fresh": args.fresh,
            **compare(args.compare, phases, args.n, args.fresh, args.batch),
        }
        if args.json:
            print(json.dumps(results))
            return
        print_side_by_side(results, phases, args.batch)
        return
    rng = random.Random(1)
    samples = {phase: measure(phase, args.fresh if phase == FRESH else args.n, rng) for phase in phases}
    results = {"n": args.n, "fresh": args.fresh, **figures(samples)}
    if args.json:
        print(json.dumps(results))
        return
    print(f"interrupt() -> terminal record, {args.n} interrupts per phase (target: p99 <= 50 ms)")
    for phase in samples:
        p50, p99, worst = (results[f"{phase}_{k}_ms"] for k in ("p50", "p99", "max"))
        print(f"  {phase:<25} p50 {p50:7.2f} ms   p99 {p99:7.2f} ms   max {worst:7.2f} ms")


if __name__ == "__main__":
    main()
