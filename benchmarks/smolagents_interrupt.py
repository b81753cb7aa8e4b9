"""How fast does a Stop end a smolagents run, and free the model server? smolagents alone against nbagent.

Part "phases" (offline): the same fake model for both (tests/smolagents_fakes.py): ``generate()``
sleeps 2 s, the streaming variant sends 4 chunks 0.5 s apart, the tool sleeps 2 s, the code sleeps
2 s. Each run is interrupted at a random moment inside one phase, and the latency is the time from
the interrupt to the end of the run:

- baseline: ``agent.run(task)`` on a thread, ``agent.interrupt()``, until ``run`` returns or raises
  (smolagents checks its switch only between steps; in the final step it ignores it);
- nbagent: ``run = nbagent.start(agent, task)``, ``run.interrupt()``, until ``run.wait()`` returns.

Phases: planning, generate, stream, tool, code, final_answer. Targets: nbagent p99 <= 100 ms in
every phase, and a p50 ratio (baseline / nbagent) >= 10.

Part "disconnect" (a real local HTTP server, tests/smolagents_server.py, OpenAI's chat completions
with keep-alive): a ``CodeAgent`` on smolagents' ``OpenAIServerModel``, streaming and not, asks for
a reply that takes 30 s to generate. A random 0.05-0.5 s into it, the run is stopped; measured on
one ``perf_counter`` clock: Stop -> the record is complete, and Stop -> the server sees the client
go (it waits on the socket with ``select``, so it sees the close when it happens). For scale, the
baseline is smolagents' own ``agent.interrupt()``: the server generates on to the end of the reply
(a shorter 2 s one here), which is what a paid API bills. Target: Stop -> disconnect p99 <= 100 ms.

    python benchmarks/smolagents_interrupt.py [--part phases|disconnect|all] [--quick] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import math
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


def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(
        name, Path(__file__).resolve().parent.parent / "tests" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


fakes = _load("smolagents_fakes")
_load("local_http")  # what the server module imports
server_kit = _load("smolagents_server")

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


LONG_REPLY_S = 30.0
BASELINE_REPLY_S = 2.0


def disconnect_trial(stream: bool, offset_s: float) -> tuple[float, float, str]:
    """nbagent on OpenAIServerModel: Stop -> record and Stop -> the server sees the client go, in ms."""
    from smolagents import OpenAIServerModel

    with server_kit.ChatServer(
        [server_kit.Reply(text="word " * 300, seconds=LONG_REPLY_S, chunks=300)]
    ) as server:
        model = OpenAIServerModel("bench-model", api_base=server.base_url, api_key="bench-key")
        agent = CodeAgent(tools=[], model=model, stream_outputs=stream, logger=silent_logger())
        run = nbagent.start(agent, "Write a long essay.", display=False)
        server.wait_until(lambda: len(server.requests) == 1, timeout=30)
        request = server.requests[0]
        time.sleep(offset_s)
        asked = time.perf_counter()
        run.interrupt()
        record = run.wait(60)
        to_record = time.perf_counter() - asked
        server.wait_until(
            lambda: request.disconnected is not None or request.finished is not None, timeout=60
        )
        to_disconnect = (request.disconnected or math.inf) - asked
    return to_record * 1000, to_disconnect * 1000, record.status


def baseline_disconnect_trial(stream: bool, offset_s: float) -> float:
    """smolagents alone: ``agent.interrupt()`` mid-reply; ms until the server is done with the request."""
    from smolagents import OpenAIServerModel

    with server_kit.ChatServer(
        [server_kit.Reply(text="word " * 40, seconds=BASELINE_REPLY_S, chunks=40)]
    ) as server:
        model = OpenAIServerModel("bench-model", api_base=server.base_url, api_key="bench-key")
        agent = CodeAgent(tools=[], model=model, stream_outputs=stream, logger=silent_logger())
        thread = threading.Thread(target=_swallow, args=(agent.run, "Write a long essay."), daemon=True)
        thread.start()
        server.wait_until(lambda: len(server.requests) == 1, timeout=30)
        request = server.requests[0]
        time.sleep(offset_s)
        asked = time.perf_counter()
        agent.interrupt()
        server.wait_until(
            lambda: request.disconnected is not None or request.finished is not None, timeout=60
        )
        done = request.disconnected or request.finished
        thread.join(60)
    return (done - asked) * 1000


def _swallow(fn: Callable[..., Any], *args: Any) -> None:
    with contextlib.suppress(Exception):  # smolagents raises "Agent interrupted."
        fn(*args)


def disconnect_part(n: int, baseline_n: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    modes: dict[str, Any] = {}
    for stream in (False, True):
        trials = [disconnect_trial(stream, rng.uniform(0.05, 0.5)) for _ in range(n)]
        baseline = [baseline_disconnect_trial(stream, rng.uniform(0.05, 0.5)) for _ in range(baseline_n)]
        to_record = [r for r, _, _ in trials]
        to_disconnect = [d for _, d, _ in trials]
        modes["streaming" if stream else "non_streaming"] = {
            "to_disconnect_p50_ms": round(percentile(to_disconnect, 50), 2),
            "to_disconnect_p99_ms": round(percentile(to_disconnect, 99), 2),
            "to_disconnect_max_ms": round(max(to_disconnect), 2),
            "to_record_p50_ms": round(percentile(to_record, 50), 2),
            "to_record_p99_ms": round(percentile(to_record, 99), 2),
            "not_interrupted": sum(status != "interrupted" for _, _, status in trials),
            "baseline_server_busy_p50_ms": round(percentile(baseline, 50), 1),
            "runs": {"nbagent": n, "baseline": baseline_n},
        }
    return {
        "modes": modes,
        "targets_met": all(
            m["to_disconnect_p99_ms"] <= 100 and m["to_record_p99_ms"] <= 100 and m["not_interrupted"] == 0
            for m in modes.values()
        ),
    }


def phases_part(n: int, baseline_n: int, workers: int, seed: int) -> dict[str, Any]:
    base = trials("baseline", baseline_n, workers=baseline_n * len(PHASES), seed=seed)
    ours = trials("nbagent", n, workers=workers, seed=seed + 1)
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
    return {
        "baseline_p50_ms": round(percentile(all_base, 50), 1),
        "nbagent_p50_ms": round(percentile(all_ours, 50), 2),
        "nbagent_p99_ms": round(percentile(all_ours, 99), 2),
        "ratio_p50": round(percentile(all_base, 50) / percentile(all_ours, 50), 1),
        "targets_met": all(p["nbagent_p99_ms"] <= 100 for p in phases.values())
        and all(p["nbagent_not_interrupted"] == 0 for p in phases.values())
        and percentile(all_base, 50) / percentile(all_ours, 50) >= 10,
        "phases": phases,
    }


def print_phases(summary: dict[str, Any], n: int, baseline_n: int) -> None:
    phases = summary["phases"]
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


def print_disconnect(summary: dict[str, Any]) -> None:
    print("Stop on OpenAIServerModel, a real local server: Stop -> server sees the client go / -> record")
    header = ("mode", "disc. p50", "disc. p99", "record p50", "record p99", "smolagents")
    print(f"{header[0]:<15}{header[1]:>11}{header[2]:>11}{header[3]:>12}{header[4]:>12}{header[5]:>13}")
    for mode, m in summary["modes"].items():
        print(
            f"{mode:<15}{m['to_disconnect_p50_ms']:>8.1f} ms{m['to_disconnect_p99_ms']:>8.1f} ms"
            f"{m['to_record_p50_ms']:>9.1f} ms{m['to_record_p99_ms']:>9.1f} ms"
            f"{m['baseline_server_busy_p50_ms']:>10.0f} ms"
        )
    print("(smolagents: agent.interrupt() -> the server is done with a 2 s reply: it generates to the end)")
    bad = sum(m["not_interrupted"] for m in summary["modes"].values())
    if bad:
        print(f"WARNING: {bad} nbagent runs did not end 'interrupted'")
    print(f"target (p99 <= 100 ms, disconnect and record): {'met' if summary['targets_met'] else 'MISSED'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quick", action="store_true", help="fewer runs (under a minute)")
    parser.add_argument("--part", choices=["phases", "disconnect", "all"], default="all")
    parser.add_argument("--n", type=int, help="nbagent runs per phase or mode (default 40, quick 10)")
    parser.add_argument(
        "--baseline-n", type=int, help="baseline runs per phase or mode (default 10, quick 3)"
    )
    parser.add_argument("--workers", type=int, default=6, help="nbagent runs at a time in phases (default 6)")
    parser.add_argument("--seed", type=int, default=4)
    args = parser.parse_args(argv)
    n = args.n or (10 if args.quick else 40)
    baseline_n = args.baseline_n or (3 if args.quick else 10)
    nbagent.configure(display=False)

    started = time.perf_counter()
    # Warm-up: the first run of a process pays one-time imports on the runner's thread as it ends
    # (pricing it with the cost extra), which is not what a Stop costs.
    warm = ToolCallingAgent(
        tools=[], model=fakes.ScriptedSmolModel([fakes.answer("42")]), logger=silent_logger()
    )
    nbagent.run(warm, "warm up", display=False)
    summary: dict[str, Any] = {}
    if args.part in ("phases", "all"):
        summary["phases"] = phases_part(n, baseline_n, args.workers, args.seed)
    if args.part in ("disconnect", "all"):
        summary["disconnect"] = disconnect_part(n, baseline_n, args.seed + 2)
    summary["targets_met"] = all(part["targets_met"] for part in summary.values())
    summary["seconds"] = round(time.perf_counter() - started, 1)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    if "phases" in summary:
        print_phases(summary["phases"], n, baseline_n)
    if "disconnect" in summary:
        if "phases" in summary:
            print()
        print_disconnect(summary["disconnect"])
    print(f"({summary['seconds']} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
