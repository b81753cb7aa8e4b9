"""The store keeps a step in progress (its text so far, a second behind at most), so a process
killed mid-step keeps what the model had said; and it groups the commits of concurrent runs."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import ROOT, add, fast_model, wait_until

import nbagent
from nbagent.analytics.store import RunStore
from nbagent.models import ToolCall

pytestmark = pytest.mark.timeout(120)
REPO = ROOT

TALKER = """
    import sys
    import nbagent
    from nbagent.analytics.store import RunStore
    from nbagent.models import ScriptedModel

    text = " ".join(f"w{i}" for i in range(5000))
    model = ScriptedModel([text], tokens_per_s=200, first_token_s=0.0)
    nbagent.run(nbagent.Agent(model), "talk for a long time", store=RunStore(sys.argv[1]), display=False)
"""


def stored_text(path: Path) -> str:
    try:
        with sqlite3.connect(path, timeout=5) as conn:
            row = conn.execute("SELECT model_output FROM steps WHERE step = 1").fetchone()
    except sqlite3.OperationalError:
        return ""
    return row[0] if row else ""


@pytest.mark.skipif(sys.platform == "win32", reason="kill -9")
def test_a_process_killed_mid_step_keeps_what_the_model_had_said(tmp_path):
    path = tmp_path / "runs.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(TALKER), str(path)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # The step is written while it streams, not only when it ends: its text grows in the file.
        wait_until(lambda: len(stored_text(path).split()) >= 50 or proc.poll() is not None, timeout=60)
        assert proc.poll() is None, proc.stderr.read()
        first = stored_text(path)
        wait_until(lambda: len(stored_text(path)) > len(first), timeout=30)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
        proc.stderr.close()

    [record] = RunStore(path).records()  # a new reader, after the writer's death
    assert record.status == "unfinished"
    [step] = record.steps
    assert step.ended_at is None
    words = step.model_output.split()
    assert len(words) >= 50 and words == [f"w{i}" for i in range(len(words))]  # a true prefix


def test_a_finished_step_replaces_its_text_in_progress(tmp_path):
    store = RunStore(tmp_path / "runs.db")
    model = nbagent.models.ScriptedModel(["one two three " * 40, "done"], tokens_per_s=400, first_token_s=0.0)
    record = nbagent.run(nbagent.Agent(model), "talk", store=store, display=False)
    stored = store.record(record.run_id)
    assert stored.steps[0].model_output == record.steps[0].model_output
    assert stored.steps[0].ended_at is not None


def test_concurrent_runs_share_commits_and_lose_nothing(tmp_path):
    store = RunStore(tmp_path / "runs.db")
    turns = [[ToolCall("add", {"a": i, "b": 1})] for i in range(9)] + ["done"]
    runs = [
        nbagent.start(nbagent.Agent(fast_model(list(turns)), tools=[add], max_steps=10), f"run {n}",
                      store=store, display=False)
        for n in range(40)
    ]  # fmt: skip
    records = [run.wait(timeout=60) for run in runs]
    queue = store._queue
    assert queue.jobs > queue.commits  # several runs' rows went in one transaction
    stored = {r.run_id: r for r in store.records()}
    for record in records:
        assert record.status == "success"
        assert [s.number for s in stored[record.run_id].steps] == list(range(1, 11))
        assert [c.result for c in stored[record.run_id].tool_calls] == list(range(1, 10))


def test_the_commit_points_of_a_runs_quick_steps_share_jobs_and_lose_nothing(tmp_path):
    """A commit point joins the run's job still waiting for the writer, and the writer takes jobs
    at most every GROUP_WINDOW_S while they keep coming: quick steps share jobs, rather than
    costing a job per commit point (each with its rows built and written)."""
    store = RunStore(tmp_path / "runs.db")
    steps = 30
    turns = [[ToolCall("add", {"a": i, "b": 1})] for i in range(steps - 1)] + ["done"]
    runs = [
        nbagent.start(nbagent.Agent(fast_model(list(turns)), tools=[add], max_steps=steps), f"run {n}",
                      store=store, display=False)
        for n in range(40)
    ]  # fmt: skip
    records = [run.wait(timeout=60) for run in runs]
    store.flush()
    commit_points = len(runs) * (1 + steps + (steps - 1) + steps + 1)  # run start, steps, calls, run end
    assert store._queue.jobs <= commit_points / 2
    stored = {r.run_id: r for r in store.records()}
    for record in records:
        assert [c.result for c in stored[record.run_id].tool_calls] == list(range(1, steps))
