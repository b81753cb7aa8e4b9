"""Runner overhead: events per second through the runner with a zero-latency model and no UI.

The baseline is the same model stream consumed directly (no runner, no recorder, no events), in
the same process; ``us_per_event`` is the extra time per event the runner adds on top of it.
Target: >= 100,000 events/s.

    python benchmarks/overhead.py [--tokens 200000] [--quick] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import nbagent
from nbagent.models import ScriptedModel


def model(tokens: int) -> ScriptedModel:
    return ScriptedModel(["t " * tokens], tokens_per_s=float("inf"), first_token_s=0)


async def consume(tokens: int) -> int:
    count = 0
    async for _ in model(tokens).stream([{"role": "user", "content": "go"}], []):
        count += 1
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="20,000 tokens, best of 3")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.tokens, args.repeat = 20_000, 3

    best_run = best_base = float("inf")
    events = 0
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        asyncio.run(consume(args.tokens))
        best_base = min(best_base, time.perf_counter() - t0)

        counted = [0]

        def count(event, counted=counted):
            counted[0] += 1

        t0 = time.perf_counter()
        record = nbagent.run(nbagent.Agent(model(args.tokens)), "go", sinks=[count], display=False)
        best_run = min(best_run, time.perf_counter() - t0)
        assert record.status == "success"
        events = counted[0]
    result = {
        "events": events,
        "events_per_s": round(events / best_run),
        "us_per_event": round((best_run - best_base) / events * 1e6, 3),
        "baseline_model_only_s": round(best_base, 4),
        "runner_s": round(best_run, 4),
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"{events} events through the runner in {best_run:.3f} s (best of {args.repeat})")
    print(f"  events/s            {result['events_per_s']:>12,}   (target >= 100,000)")
    print(f"  overhead per event  {result['us_per_event']:>12} us  (bare model stream: {best_base:.3f} s)")


if __name__ == "__main__":
    main()
