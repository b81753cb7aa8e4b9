"""How fast a Stop ends a run on a real HTTP model, and how fast the server sees the client go.

An ``OpenAIChatModel`` streams from the test server (tests/openai_server.py) on 127.0.0.1 at 50
tokens/s, first token after 0.2 s. Each trial starts a run, waits a random 0-1.5 s from the
request (so some Stops land before the first token, most mid-stream), then calls
``run.interrupt()`` and measures, on the same ``perf_counter`` clock:

- to_record: ``interrupt()`` until ``run.wait()`` returns the terminal (interrupted) record;
- to_disconnect: ``interrupt()`` until the server notices the closed connection (it waits on the
  socket with ``select`` between tokens, so it sees the close when it happens, not at its next write).

For scale, ``would_have_waited_ms_mean`` is how long the rest of the reply would have taken:
what a Stop that waits for the in-flight call (smolagents' interrupt) costs.

    python benchmarks/http_interrupt.py [--quick] [--n N] [--json]

Target: both p99 <= 100 ms. p99 is the nearest-rank percentile (with n < 100, the maximum).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from openai_server import OpenAIServer, Stream

import nbagent
from nbagent.models import OpenAIChatModel

TOKENS_PER_S = 50.0
FIRST_TOKEN_S = 0.2
WORDS = 500


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def measure(n: int, seed: int = 1) -> dict[str, float | int]:
    rng = random.Random(seed)
    text = " ".join(f"w{i}" for i in range(WORDS))
    to_record: list[float] = []
    to_disconnect: list[float] = []
    remaining: list[float] = []
    kept_text = 0
    with OpenAIServer() as server:
        agent = nbagent.Agent(OpenAIChatModel("bench-model", base_url=server.base_url))
        for i in range(n):
            server.push(Stream(text, tokens_per_s=TOKENS_PER_S, first_token_s=FIRST_TOKEN_S))
            run = nbagent.start(agent, "stream please", display=False)
            server.wait_until(lambda i=i: len(server.requests) > i)
            request = server.requests[i]
            pause = request.started + rng.uniform(0.0, 1.5) - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            t0 = time.perf_counter()
            run.interrupt()
            record = run.wait(30)
            t_record = time.perf_counter()
            server.wait_until(lambda r=request: r.disconnected is not None, timeout=30)
            if record.status != "interrupted":
                raise RuntimeError(f"trial {i}: run ended {record.status!r}: {record.error}")
            assert request.disconnected is not None
            to_record.append((t_record - t0) * 1000)
            to_disconnect.append((request.disconnected - t0) * 1000)
            remaining.append((WORDS - request.tokens_sent) / TOKENS_PER_S * 1000)
            kept_text += bool(record.steps and record.steps[0].model_output)
        server.wait_until(lambda: server.open_connections == 0, timeout=30)
    return {
        "n": n,
        "to_record_p50_ms": round(statistics.median(to_record), 3),
        "to_record_p99_ms": round(percentile(to_record, 0.99), 3),
        "to_record_max_ms": round(max(to_record), 3),
        "to_disconnect_p50_ms": round(statistics.median(to_disconnect), 3),
        "to_disconnect_p99_ms": round(percentile(to_disconnect, 0.99), 3),
        "to_disconnect_max_ms": round(max(to_disconnect), 3),
        "stops_with_text_kept": kept_text,
        "would_have_waited_ms_mean": round(statistics.mean(remaining), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quick", action="store_true", help="15 stops instead of 60")
    parser.add_argument("--n", type=int, default=None, help="number of stops")
    args = parser.parse_args(argv)
    n = args.n or (15 if args.quick else 60)
    result = measure(n)
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"Stop over HTTP: {n} stops of a {TOKENS_PER_S:g} tokens/s stream (test server on 127.0.0.1)")
    print(
        f"  interrupt() -> terminal record:   p50 {result['to_record_p50_ms']:.2f} ms, "
        f"p99 {result['to_record_p99_ms']:.2f} ms, max {result['to_record_max_ms']:.2f} ms"
    )
    print(
        f"  interrupt() -> server sees close: p50 {result['to_disconnect_p50_ms']:.2f} ms, "
        f"p99 {result['to_disconnect_p99_ms']:.2f} ms, max {result['to_disconnect_max_ms']:.2f} ms"
    )
    print(f"  stops that kept the text so far: {result['stops_with_text_kept']} of {n}")
    waited = result["would_have_waited_ms_mean"]
    print(f"  waiting for the reply instead would have cost {waited:.0f} ms on average")
    ok = result["to_record_p99_ms"] <= 100 and result["to_disconnect_p99_ms"] <= 100
    print(f"  target p99 <= 100 ms: {'met' if ok else 'MISSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
