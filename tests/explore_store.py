"""A store of many runs, built fast, for the run browser's tests and benchmark.

The runs are ``RunRecord``s written through the store schema's own row functions
(``run_row``/``step_row``/``call_row``) in a few ``executemany`` batches, so the rows are exactly
what the store writes for a run, without running tens of thousands of agents.
"""

from __future__ import annotations

import random
import sqlite3
from contextlib import closing
from datetime import datetime, timedelta, timezone
from pathlib import Path

from nbagent.analytics.store import RunStore
from nbagent.analytics.store.schema import PUT_CALL, PUT_RUN, PUT_STEP, call_row, run_row, step_row
from nbagent.records import RunRecord, StepRecord, ToolCallRecord

AGENTS = ("researcher", "coder", "planner", "critic", "adder")
MODELS = ("gpt-4o-mini", "gpt-4.1", "claude-sonnet", "demo-scripted")
STATUSES = ("success",) * 7 + ("interrupted", "error", "max_steps")
WORDS = ("prime", "weather", "invoice", "summary", "python", "paris", "tokens", "refund", "graph", "moon")
START = datetime(2026, 9, 1, tzinfo=timezone.utc)


def synthetic_record(i: int, rng: random.Random) -> RunRecord:
    started = START + timedelta(seconds=i * 97 + rng.randint(0, 60))
    status = rng.choice(STATUSES)
    record = RunRecord(
        run_id=f"run{i:07d}",
        task=f"task {i}: {rng.choice(WORDS)} {rng.choice(WORDS)}",
        agent=rng.choice(AGENTS),
        model=rng.choice(MODELS),
        started_at=started,
        status=status,
        output=f"answer {i}" if status == "success" else None,
        error="model failed" if status == "error" else None,
        stop_reason="user" if status == "interrupted" else None,
    )
    offset = 0.0
    for number in range(1, rng.randint(1, 4) + 1):
        took = rng.uniform(0.2, 3.0)
        step = StepRecord(
            number=number,
            kind="action",
            started_at=started + timedelta(seconds=offset),
            start_s=offset,
            ended_at=started + timedelta(seconds=offset + took),
            end_s=offset + took,
            input_tokens=rng.randint(50, 2000),
            output_tokens=rng.randint(5, 300),
            usage_source="reported",
            model_output=f"step {number} of run {i}",
        )
        step.tool_calls.append(
            ToolCallRecord(
                call_id=f"c{i}-{number}",
                tool="search",
                arguments={"q": rng.choice(WORDS)},
                started_at=step.started_at + timedelta(seconds=took / 2),
                start_s=offset + took / 2,
                status="ok",
                result="found",
                ended_at=step.ended_at,
                end_s=offset + took,
            )
        )
        record.steps.append(step)
        offset += took
    record.ended_at = started + timedelta(seconds=offset)
    record.duration_s = offset
    return record


def build_store(path: Path, runs: int, seed: int = 12) -> RunStore:
    """A store at ``path`` holding ``runs`` synthetic runs (one transaction per 10,000)."""
    RunStore(path).close()  # creates the file and its schema
    rng = random.Random(seed)
    with closing(sqlite3.connect(path)) as conn:
        for first in range(0, runs, 10_000):
            records = [synthetic_record(i, rng) for i in range(first, min(runs, first + 10_000))]
            with conn:
                conn.executemany(PUT_RUN, [run_row(r, None) for r in records])
                conn.executemany(PUT_STEP, [step_row(r.run_id, s) for r in records for s in r.steps])
                conn.executemany(
                    PUT_CALL,
                    [
                        call_row(r.run_id, s.number, seq, c)
                        for r in records
                        for s in r.steps
                        for seq, c in enumerate(s.tool_calls)
                    ],
                )
    return RunStore(path, readonly=True)
