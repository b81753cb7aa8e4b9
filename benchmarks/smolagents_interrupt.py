"""How fast does a Stop end a smolagents run? smolagents' own ``interrupt()`` against nbagent's.

The same offline fake model for both (tests/smolagents_fakes.py): ``generate()`` sleeps 2 s, the
streaming variant sends 4 chunks 0.5 s apart, the tool sleeps 2 s, the code sleeps 2 s. Each run
is interrupted at a random moment inside one phase, and the latency is the time from the
interrupt to the end of the run:

- baseline: ``agent.run(task)`` on a thread, ``agent.interrupt()``, until ``run`` returns or raises
  (smolagents checks its switch only between steps; in the final step it ignores it);
- nbagent: ``run = nbagent.start(agent, task)``, ``run.interrupt()``, until ``run.wait()`` returns.

Phases: planning, generate, stream, tool, code, final_answer. Targets: nbagent p99 <= 100 ms in
every phase, and a p50 ratio (baseline / nbagent) >= 10.

    python benchmarks/smolagents_interrupt.py [--quick] [--json]
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import random
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rich.console import Console
from smolagents import CodeAgent, ToolCallingAgent
from smolagents.monitoring import AgentLogger, LogLevel

import nbagent

_spec = importlib.util.spec_from_file_location(
    "smolagents_fakes", Path(__file__).resolve().parent.parent / "tests" / "smolagents_fakes.py"
)
assert _spec is not None and _spec.loader is not None
fakes = importlib.util.module_from_spec(_spec)
sys.modules["smolagents_fakes"] = fakes
_spec.loader.exec_module(fakes)

PHASE_S = 2.0
PHASES = ["planning", "generate", "stream", "tool", "code", "final_answer"]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    position = q / 100 * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def silent_logger() -> AgentLogger:
    """smolagents prints to the terminal (and draws live panels when streaming); not here."""
    return AgentLogger(level=LogLevel.OFF, console=Console(file=io.StringIO(), force_terminal=False))


def setup(phase: str) -> tuple[Any, Callable[[], bool]]:
    """A fresh agent for ``phase`` and a wait that returns once the phase has begun."""
    slow, fast = fakes.SlowTool(delay_s=PHASE_S), fakes.SlowTool()
    lookup, final = fakes.call("lookup", query="paris"), fakes.answer("42")
    options: dict[str, Any] = {"logger": silent_logger()}
    if phase == "planning":
        model = fakes.ScriptedSmolModel([fakes.plan(), lookup, final], delay_s=PHASE_S)
        agent = ToolCallingAgent(tools=[fast], model=model, planning_interval=1, **options)
        return agent, lambda: model.wait_for_call(1)
    if phase == "generate":
        model = fakes.ScriptedSmolModel([lookup, final], delay_s=PHASE_S)
        return ToolCallingAgent(tools=[fast], model=model, **options), lambda: model.wait_for_call(1)
    if phase == "stream":
        turns = [fakes.code("print(lookup('paris'))"), fakes.code("final_answer(42)")]
        model = fakes.StreamingScriptedSmolModel(turns, delay_s=PHASE_S, chunks=4)
        agent = CodeAgent(tools=[fast], model=model, stream_outputs=True, **options)
        return agent, lambda: model.wait_for_call(1)
    if phase == "tool":
        model = fakes.ScriptedSmolModel([lookup, final])
        return ToolCallingAgent(tools=[slow], model=model, **options), lambda: slow.wait_for_call(1)
    if phase == "code":
        started = threading.Event()
        turns = [
            fakes.code("import time\nstarted()\ntime.sleep(2)\nprint('slept')"),
            fakes.code("final_answer(42)"),
        ]
        model = fakes.ScriptedSmolModel(turns)
        agent = CodeAgent(
            tools=[fast],
            model=model,
            additional_authorized_imports=["time"],
            executor_kwargs={"additional_functions": {"started": started.set}},
            **options,
        )
        return agent, lambda: started.wait(30)
    if phase == "final_answer":
        model = fakes.ScriptedSmolModel([final], delay_s=PHASE_S)
        return ToolCallingAgent(tools=[fast], model=model, **options), lambda: model.wait_for_call(1)
    raise ValueError(phase)


def baseline_trial(phase: str, offset_s: float) -> tuple[float, str]:
    """smolagents alone: run on a thread, ``agent.interrupt()`` mid-phase, wait for the run to end."""
    agent, began = setup(phase)
    ended: dict[str, Any] = {}

    def work() -> None:
        try:
            agent.run("What is the answer?")
            ended["how"] = "returned"
        except Exception as exc:
            ended["how"] = type(exc).__name__
        ended["t"] = time.perf_counter()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    if not began():
        raise TimeoutError(f"{phase}: the phase never began")
    time.sleep(offset_s)
    asked = time.perf_counter()
    agent.interrupt()
    thread.join(60)
    return (ended["t"] - asked) * 1000, ended["how"]


def nbagent_trial(phase: str, offset_s: float) -> tuple[float, str]:
    """nbagent: ``start``, ``run.interrupt()`` mid-phase, wait for the record."""
    agent, began = setup(phase)
    run = nbagent.start(agent, "What is the answer?", display=False)
    if not began():
        raise TimeoutError(f"{phase}: the phase never began")
    time.sleep(offset_s)
    asked = time.perf_counter()
    run.interrupt()
    record = run.wait(60)
    return (time.perf_counter() - asked) * 1000, record.status


def trials(kind: str, n: int, workers: int, seed: int) -> dict[str, list[tuple[float, str]]]:
    trial = baseline_trial if kind == "baseline" else nbagent_trial
    rng = random.Random(seed)
    jobs = [(phase, rng.uniform(0.05, PHASE_S - 0.05)) for phase in PHASES for _ in range(n)]
    rng.shuffle(jobs)
    results: dict[str, list[tuple[float, str]]] = {phase: [] for phase in PHASES}
    with ThreadPoolExecutor(workers) as pool:
        for (phase, _), result in zip(jobs, pool.map(lambda job: trial(*job), jobs), strict=True):
            results[phase].append(result)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quick", action="store_true", help="fewer runs (about 30 s)")
    parser.add_argument("--n", type=int, help="nbagent runs per phase (default 40, quick 10)")
    parser.add_argument("--baseline-n", type=int, help="baseline runs per phase (default 10, quick 4)")
    parser.add_argument("--workers", type=int, default=6, help="nbagent runs at a time (default 6)")
    parser.add_argument("--seed", type=int, default=4)
    args = parser.parse_args(argv)
    n = args.n or (10 if args.quick else 40)
    baseline_n = args.baseline_n or (4 if args.quick else 10)
    nbagent.configure(display=False)

    started = time.perf_counter()
    # Warm-up: the first run of a process pays one-time imports on the runner's thread as it ends
    # (pricing it with the cost extra), which is not what a Stop costs.
    warm = ToolCallingAgent(
        tools=[], model=fakes.ScriptedSmolModel([fakes.answer("42")]), logger=silent_logger()
    )
    nbagent.run(warm, "warm up", display=False)
    # Baseline runs last seconds each and mostly sleep: run them all at once.
    base = trials("baseline", baseline_n, workers=baseline_n * len(PHASES), seed=args.seed)
    ours = trials("nbagent", n, workers=args.workers, seed=args.seed + 1)

    phases: dict[str, dict[str, Any]] = {}
    for phase in PHASES:
        b = [ms for ms, _ in base[phase]]
        o = [ms for ms, _ in ours[phase]]
        phases[phase] = {
            "baseline_p50_ms": round(percentile(b, 50), 1),
            "baseline_max_ms": round(max(b), 1),
            "baseline_ends": sorted({how for _, how in base[phase]}),
            "nbagent_p50_ms": round(percentile(o, 50), 2),
            "nbagent_p99_ms": round(percentile(o, 99), 2),
            "nbagent_max_ms": round(max(o), 2),
            "nbagent_not_interrupted": sum(status != "interrupted" for _, status in ours[phase]),
            "ratio_p50": round(percentile(b, 50) / percentile(o, 50), 1),
            "runs": {"baseline": len(b), "nbagent": len(o)},
        }
    all_base = [ms for phase in PHASES for ms, _ in base[phase]]
    all_ours = [ms for phase in PHASES for ms, _ in ours[phase]]
    summary = {
        "baseline_p50_ms": round(percentile(all_base, 50), 1),
        "nbagent_p50_ms": round(percentile(all_ours, 50), 2),
        "nbagent_p99_ms": round(percentile(all_ours, 99), 2),
        "ratio_p50": round(percentile(all_base, 50) / percentile(all_ours, 50), 1),
        "targets_met": all(p["nbagent_p99_ms"] <= 100 for p in phases.values())
        and all(p["nbagent_not_interrupted"] == 0 for p in phases.values())
        and percentile(all_base, 50) / percentile(all_ours, 50) >= 10,
        "phases": phases,
        "seconds": round(time.perf_counter() - started, 1),
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"Stop latency, interrupt -> end of run ({n} nbagent / {baseline_n} baseline runs per phase)")
    print(f"{'phase':<14}{'smolagents p50':>16}{'nbagent p50':>14}{'nbagent p99':>14}{'ratio':>9}")
    for phase, p in phases.items():
        print(
            f"{phase:<14}{p['baseline_p50_ms']:>13.0f} ms{p['nbagent_p50_ms']:>11.1f} ms"
            f"{p['nbagent_p99_ms']:>11.1f} ms{p['ratio_p50']:>8.0f}x"
        )
    print(
        f"{'all':<14}{summary['baseline_p50_ms']:>13.0f} ms{summary['nbagent_p50_ms']:>11.1f} ms"
        f"{summary['nbagent_p99_ms']:>11.1f} ms{summary['ratio_p50']:>8.0f}x"
    )
    not_interrupted = sum(p["nbagent_not_interrupted"] for p in phases.values())
    if not_interrupted:
        print(f"WARNING: {not_interrupted} nbagent runs did not end 'interrupted'")
    verdict = "met" if summary["targets_met"] else "MISSED"
    print(f"targets (p99 <= 100 ms in every phase, ratio >= 10): {verdict}")
    print(f"({summary['seconds']} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
