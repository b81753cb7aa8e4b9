"""Frames and store speed: the steps frame of a million steps, and the store's write rate.

1. ``steps_frame`` over 10,000 synthetic runs of 100 steps (1,000,000 steps, half of them with a
   tool call, one in ten with unknown usage), against the naive way to the same frame: one dict per
   row with the same columns, ``pd.DataFrame(rows).astype(STEP_COLUMNS)``, on the same records in
   the same run. The two frames are checked equal, so the ratio compares equal work.
   ``frame_s`` and ``naive_s`` are the best of three builds each.
   Targets: ``frame_s`` < 2, ``ratio`` (naive / frame) >= 2.
   ``asdict_s`` is the older, looser baseline ``pd.DataFrame([asdict(step) ...])``: object columns,
   and every tool call deep-copied into nested dicts, so its ratio (tens) flatters the frames
   (``--no-asdict`` skips it; it takes a while).
2. The store's write rate with per-step durability: a run's events go through ``RunStore.sink()``
   as a live run sends them (a commit when a step starts, when a tool call starts and when the
   step finishes, so every finished step is durable at once).
   ``store_steps_per_s`` is the best of three. Target: ``store_steps_per_s`` >= 5,000.
   ``store_full_steps_per_s`` is the same with ``synchronous="FULL"`` (an fsync per commit;
   depends on the disk).

    python benchmarks/frames.py [--quick] [--no-asdict] [--json]
"""

from __future__ import annotations

import argparse
import gc
import json
import tempfile
import time
from dataclasses import asdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd

from nbagent import events as ev
from nbagent.analytics.frames import STEP_COLUMNS, steps_frame
from nbagent.analytics.store import RunStore
from nbagent.records import RunRecord, StepRecord, ToolCallRecord


def synthetic_records(runs: int, steps: int) -> list[RunRecord]:
    t0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
    records = []
    for r in range(runs):
        started = t0 + timedelta(minutes=r)
        record = RunRecord(f"run{r:06d}", "a task", "bench", "scripted", started, status="success")
        for n in range(1, steps + 1):
            start_s, end_s = (n - 1) * 1.0, (n - 1) * 1.0 + 0.8
            known = n % 10 != 0
            step = StepRecord(
                number=n,
                kind="action" if n < steps else "final",
                started_at=started + timedelta(seconds=start_s),
                start_s=start_s,
                ended_at=started + timedelta(seconds=end_s),
                end_s=end_s,
                input_tokens=100 + 10 * n if known else None,
                output_tokens=20 + n % 7 if known else None,
                usage_source="reported" if known else "unknown",
                model_output="thinking",
            )
            if n % 2:
                step.tool_calls.append(
                    ToolCallRecord(
                        f"call{n}",
                        "calculator",
                        {"expression": "17 * 23"},
                        started + timedelta(seconds=start_s + 0.5),
                        start_s + 0.5,
                        status="ok",
                        result=391,
                        ended_at=started + timedelta(seconds=end_s),
                        end_s=end_s,
                    )
                )
            record.steps.append(step)
        record.ended_at, record.duration_s = started + timedelta(seconds=steps), float(steps)
        records.append(record)
    return records


def naive_steps_frame(records: list[RunRecord]) -> pd.DataFrame:
    """The steps frame as one would write it by hand: a dict per row, then the same dtypes (every
    column of ``STEP_COLUMNS``; the frames are checked equal, so a column added there and not
    here fails loudly)."""
    rows = [
        {
            "run_id": r.run_id,
            "step": s.number,
            "kind": s.kind,
            "started_at": s.started_at,
            "ended_at": s.ended_at,
            "duration_s": s.duration_s,
            "input_tokens": s.input_tokens,
            "output_tokens": s.output_tokens,
            "total_tokens": s.total_tokens,
            "usage_source": s.usage_source,
            "model_ended_at": s.model_ended_at,
            "wait_s": s.wait_s,
            "n_tool_calls": len(s.tool_calls),
            "interrupted": s.interrupted,
            "error": s.error,
            "model_output": s.model_output,
        }
        for r in records
        for s in r.steps
    ]
    return pd.DataFrame(rows, columns=list(STEP_COLUMNS)).astype(STEP_COLUMNS)


def timed(fn):
    gc.collect()
    t0 = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - t0


def run_events(run_id: str, steps: int) -> list[ev.RunEvent]:
    """The events a live run of ``steps`` tool-calling steps sends, with 20 text pieces per step."""
    t = time.perf_counter()
    out: list[ev.RunEvent] = [
        ev.RunStarted(run_id, 0, t, "a task", "bench", "scripted", datetime.now(timezone.utc))
    ]
    for n in range(1, steps + 1):
        t += 1.0
        out.append(ev.StepStarted(run_id, n, t, "action"))
        out.extend(ev.TextDelta(run_id, n, t + 0.01 * i, "word ") for i in range(20))
        out.append(ev.Usage(run_id, n, t + 0.3, 100 + n, 20, "reported"))
        out.append(ev.ToolCallStarted(run_id, n, t + 0.4, f"c{n}", "calculator", {"expression": "1 + 1"}))
        out.append(ev.ToolCallFinished(run_id, n, t + 0.5, f"c{n}", "ok", 2))
        out.append(ev.StepFinished(run_id, n, t + 0.6))
    out.append(ev.RunFinished(run_id, steps, t + 1.0, "success", "done"))
    return out


def store_rate(runs: int, steps: int, synchronous: str) -> float:
    with tempfile.TemporaryDirectory() as folder:
        store = RunStore(Path(folder) / "bench.db", synchronous=synchronous)  # type: ignore[arg-type]
        streams = [run_events(f"{synchronous}{r}", steps) for r in range(runs)]
        t0 = time.perf_counter()
        for events in streams:
            sink = store.sink()
            for event in events:
                sink(event)
        store.flush()  # the writes happen on the store's writer thread: count them all
        elapsed = time.perf_counter() - t0
        stored = len(store.steps())
        store.close()
    assert stored == runs * steps, (stored, runs * steps)
    return runs * steps / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 steps and a short store run")
    parser.add_argument("--no-asdict", action="store_true", help="skip the slow asdict baseline")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    runs, steps = (200, 100) if args.quick else (10_000, 100)
    store_runs = 5 if args.quick else 100

    records = synthetic_records(runs, steps)
    frame_s = float("inf")
    for _ in range(3):  # best of three: the least disturbed by whatever else the machine does
        frame, elapsed = timed(lambda: steps_frame(records))
        frame_s = min(frame_s, elapsed)
    naive_s = float("inf")
    for _ in range(3):  # the same treatment as steps_frame
        naive, elapsed = timed(lambda: naive_steps_frame(records))
        naive_s = min(naive_s, elapsed)
    assert len(frame) == runs * steps
    pd.testing.assert_frame_equal(naive, frame)
    del naive
    asdict_s = None
    if not args.no_asdict:
        loose, asdict_s = timed(lambda: pd.DataFrame([asdict(s) for r in records for s in r.steps]))
        assert len(loose) == runs * steps
        del loose
    records.clear()  # free the memory before the store part
    normal = max(store_rate(store_runs, 100, "NORMAL") for _ in range(3))
    full = store_rate(max(2, store_runs // 10), 100, "FULL")
    result = {
        "steps": len(frame),
        "frame_s": round(frame_s, 3),
        "naive_s": round(naive_s, 3),
        "ratio": round(naive_s / frame_s, 2),
        "asdict_s": None if asdict_s is None else round(asdict_s, 3),
        "store_steps_per_s": round(normal),
        "store_full_steps_per_s": round(full),
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"steps frame of {result['steps']:,} steps ({runs:,} runs x {steps})")
    print(f"  steps_frame            {frame_s:8.3f} s   (best of 3; target < 2)")
    print(f"  naive per-row dicts    {naive_s:8.3f} s   -> {result['ratio']}x faster (target >= 2)")
    if asdict_s is not None:
        ratio = asdict_s / frame_s
        print(f"  asdict baseline        {asdict_s:8.3f} s   -> {ratio:.1f}x (object dtypes, nested calls)")
    print("store write rate, every step committed as it starts and as it finishes")
    print(f"  synchronous=NORMAL     {result['store_steps_per_s']:8,} steps/s   (best of 3; target >= 5,000)")
    print(f"  synchronous=FULL       {result['store_full_steps_per_s']:8,} steps/s   (fsync per commit)")


if __name__ == "__main__":
    main()
