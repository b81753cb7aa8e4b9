"""A batch as a DataFrame: its columns, dtypes and rows in every end state, and its cost once a
batch of 100,000 tasks is stopped."""

from __future__ import annotations

import time

import pandas as pd
import pytest
from support import fast_model, wait_until

import nbagent
from nbagent.analytics.store import RunStore
from nbagent.batches import batch
from nbagent.models import ScriptedModel

pytestmark = pytest.mark.timeout(180)

FRAME_DTYPES = {
    "task_key": "string",
    "task": "str",
    "expected": "int64",
    "run_id": "string",
    "agent": "string",
    "model": "string",
    "status": "string",
    "stop_reason": "string",
    "started_at": "datetime64[ns, UTC]",
    "ended_at": "datetime64[ns, UTC]",
    "duration_s": "Float64",
    "queued_s": "Float64",
    "wait_s": "Float64",
    "n_steps": "Int64",
    "input_tokens": "Int64",
    "output_tokens": "Int64",
    "total_tokens": "Int64",
    "usage_complete": "boolean",
    "cost_usd": "Float64",
    "output": "string",
    "error": "string",
    "error_type": "string",
    "parent_run_id": "string",
    "continues_run_id": "string",
    "forked_from_run_id": "string",
    "forked_at_step": "Int64",
    "tags": "object",
    "metadata": "string",
    "model_params": "string",
    "attempts": "Int64",
    "reused": "boolean",
    "score": "boolean",
    "score_error": "string",
}
"""The batch frame's columns and dtypes (a task column ``expected`` among them)."""


def slow_agent() -> nbagent.Agent:
    """One reply that streams for about 25 s (far longer than any test waits for it)."""
    return nbagent.Agent(ScriptedModel(["word " * 5000], tokens_per_s=200, first_token_s=0.0))


def agent_for(row: dict) -> nbagent.Agent:
    if row["task"] == "fails":
        raise RuntimeError("no agent for this one")
    if row["task"] == "streams":
        return slow_agent()
    return nbagent.Agent(fast_model([f"answer {row['expected']}"]), name="answers")


def test_the_batch_frame_has_its_columns_dtypes_and_a_row_per_task_in_every_end_state(tmp_path):
    store = RunStore(tmp_path / "runs.db")
    rows = [{"task": t, "expected": n} for n, t in enumerate(["done before", "fails", "streams", "queued"])]
    batch(agent_for, rows[:1], store=store, name="evals", display=False).wait(timeout=60)
    handle = batch(
        agent_for, rows, store=store, name="evals", concurrency=1, score=lambda r, row: True, display=False
    )
    wait_until(lambda: handle.running() and handle.running()[0].item.task == "streams", timeout=60)
    handle.interrupt()
    frame = handle.wait(timeout=60)

    assert {c: str(t) for c, t in frame.dtypes.items()} == FRAME_DTYPES
    assert frame.task_key.tolist() == ["done before", "fails", "streams", "queued"]
    assert frame.status.tolist() == ["success", "error", "interrupted", "skipped"]
    assert frame.reused.tolist() == [True, False, False, False]
    assert frame.attempts.tolist() == [1, 1, 1, 0]
    assert frame.expected.tolist() == [0, 1, 2, 3]
    assert frame.output.tolist()[0] == "answer 0" and frame.run_id.isna().tolist() == [False] * 3 + [True]
    assert frame.error[1].startswith("the agent factory failed: RuntimeError: no agent for this one")
    assert frame.score.tolist() == [True, True, pd.NA, pd.NA]
    assert frame.index.tolist() == [0, 1, 2, 3]


def test_the_frame_of_a_stopped_batch_of_100000_tasks_is_ready_in_seconds():
    handle = batch(slow_agent, [f"task {i}" for i in range(100_000)], concurrency=1, display=False)
    wait_until(lambda: handle.running(), timeout=60)
    handle.interrupt()
    handle.completion.result(timeout=60)
    start = time.perf_counter()
    frame = handle.wait()
    took = time.perf_counter() - start
    assert frame.status.value_counts().to_dict() == {"skipped": 99_999, "interrupted": 1}
    assert took < 3, f"{took:.1f} s (about 0.2 s on a quiet machine; 11 s with statuses set cell by cell)"
