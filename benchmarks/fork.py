"""Forking a run: the time from ``nbagent.fork()`` to the fork's first model request.

A 50-step run of the native ``Agent`` (49 tool-calling steps, then an answer) is forked at step
25 with a hint, again and again; each time the clock runs from the call of ``fork()`` to the
moment the fork's model is asked (its ``stream`` is entered), through everything in between:
finding the run, checking the step and the agent, cutting the history, starting the run on the
runner's loop. Two cases:

1. In memory: the run is in this process (its record and its history's objects).
2. From a store of 10,000 runs (synthetic runs, plus the 50-step run written by its own run), as
   in a new kernel: this process's history and notes of runs are cleared, so the run id is found
   in the store and the fork starts from the record's stored JSON history, with ``agent=``.

Targets: ``in_memory_p50_ms`` <= 50 and ``from_store_p50_ms`` <= 200. Each figure is the median
(and p95) of ``--repeat`` forks (30; 5 with ``--quick``, over a 1,000-run store).

    python benchmarks/fork.py [--quick] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from explore_store import build_store

import nbagent
from nbagent.analytics import history
from nbagent.forks import origins
from nbagent.models import ScriptedModel, ToolCall

STEPS = 50
AT_STEP = 25


class FirstRequest(ScriptedModel):
    """Answers at once and notes when it was first asked."""

    def __init__(self) -> None:
        super().__init__(["done"], first_token_s=0.0, tokens_per_s=1e9)
        self.asked_at: float | None = None

    async def stream(self, messages, tools):
        if self.asked_at is None:
            self.asked_at = time.perf_counter()
        async for part in super().stream(messages, tools):
            yield part


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def long_run(store: Any = None) -> nbagent.RunRecord:
    turns: list[Any] = [[ToolCall("add", {"a": n, "b": n}, f"c{n}")] for n in range(1, STEPS)]
    model = ScriptedModel([*turns, "the end"], first_token_s=0.0, tokens_per_s=1e9)
    agent = nbagent.Agent(model, tools=[add], max_steps=STEPS)
    record = nbagent.run(agent, "add them all", display=False, store=store)
    assert record.status == "success" and len(record.steps) == STEPS, record.summary()
    return record


def time_forks(run: Any, repeat: int, **options: Any) -> list[float]:
    took = []
    for _ in range(repeat):
        model = FirstRequest()
        start = time.perf_counter()
        fork = nbagent.fork(run, AT_STEP, agent=nbagent.Agent(model, tools=[add]), message="Check it.",
                            display=False, **options)  # fmt: skip
        record = fork.wait(timeout=60)
        assert record.status == "success" and model.asked_at is not None, record.summary()
        took.append((model.asked_at - start) * 1000)
    return took


def summary(took: list[float]) -> tuple[float, float]:
    ordered = sorted(took)
    return round(statistics.median(ordered), 2), round(ordered[int(0.95 * (len(ordered) - 1))], 2)


def measure(runs: int, repeat: int) -> dict[str, Any]:
    record = long_run()
    time_forks(record, 2)  # warm: imports, the loop
    in_memory = summary(time_forks(record, repeat))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "runs.db"
        build_store(path, runs).close()
        store = nbagent.RunStore(path)
        stored = long_run(store=store)
        store.flush(30)
        history.clear()  # as in a new kernel: the run is only in the store
        with origins._lock:
            origins._kept.clear()
        from_store = summary(time_forks(stored.run_id, repeat, store=store))
        store.close()
    return {
        "steps": STEPS,
        "at_step": AT_STEP,
        "store_runs": runs + 1,
        "repeat": repeat,
        "in_memory_p50_ms": in_memory[0],
        "in_memory_p95_ms": in_memory[1],
        "from_store_p50_ms": from_store[0],
        "from_store_p95_ms": from_store[1],
        "targets_ms": {"in_memory": 50, "from_store": 200},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 1,000-run store, 5 forks each")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--repeat", type=int, default=None)
    args = parser.parse_args()
    runs = 1_000 if args.quick else 10_000
    repeat = args.repeat or (5 if args.quick else 30)
    figures = measure(runs, repeat)
    if args.json:
        print(json.dumps(figures))
        return
    print(f"fork() to the first model request, a {STEPS}-step run forked at step {AT_STEP}:")
    print(f"  in memory:          p50 {figures['in_memory_p50_ms']} ms, p95 {figures['in_memory_p95_ms']} ms"
          " (target <= 50)")  # fmt: skip
    print(f"  from a store of {figures['store_runs']:,} runs: p50 {figures['from_store_p50_ms']} ms, "
          f"p95 {figures['from_store_p95_ms']} ms (target <= 200)")  # fmt: skip


if __name__ == "__main__":
    main()
