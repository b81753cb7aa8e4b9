"""Resume: a named batch in a store skips the tasks an earlier attempt finished, even when the
process running it was killed (``kill -9``) half way, and ``attempts()`` keeps every attempt."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import ROOT, fast_model, wait_until

import nbagent
from nbagent.analytics.store import RunStore
from nbagent.batches import run_batch

pytestmark = pytest.mark.timeout(120)
REPO = ROOT

KILLED_BATCH = """
    import sys
    import nbagent
    from nbagent.analytics.store import RunStore
    from nbagent.batches import run_batch
    from nbagent.models import ScriptedModel

    def make(row):
        # Each task streams for a while, so the batch is mid-way when it is killed.
        return nbagent.Agent(ScriptedModel([f"answer {row['id']} " + "word " * 20], tokens_per_s=100,
                                           first_token_s=0.0))

    tasks = [{"id": f"q{i}", "task": f"question {i}"} for i in range(30)]
    run_batch(make, tasks, concurrency=3, store=RunStore(sys.argv[1]), name="qa", display=False)
"""


def mid_way(path: Path) -> bool:
    """At least 6 tasks done and some run in flight, as the store shows it."""
    try:
        with sqlite3.connect(path, timeout=5) as conn:
            done, live = conn.execute(
                "SELECT sum(status = 'success'), sum(status = 'running') FROM runs"
            ).fetchone()
    except sqlite3.OperationalError:  # the tables are not there yet
        return False
    return (done or 0) >= 6 and (live or 0) > 0


@pytest.mark.skipif(sys.platform == "win32", reason="kill -9")
def test_a_batch_killed_half_way_resumes_where_it_was(tmp_path):
    path = tmp_path / "evals.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(KILLED_BATCH), str(path)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: mid_way(path) or proc.poll() is not None, timeout=60, interval=0.01)
        assert proc.poll() is None, proc.stderr.read()
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
        proc.stderr.close()

    store = RunStore(path)
    before = {r.metadata["batch"]["key"]: r.status for r in store.records()}
    done_before = {key for key, status in before.items() if status == "success"}
    assert len(done_before) >= 6 and "unfinished" in before.values()  # killed with runs in flight

    built = []

    def make(row):
        built.append(row["id"])
        return nbagent.Agent(fast_model([f"answer {row['id']}"]))

    tasks = [{"id": f"q{i}", "task": f"question {i}"} for i in range(30)]
    frame = run_batch(make, tasks, concurrency=4, store=store, name="qa")
    assert len(frame) == 30 and (frame["status"] == "success").all()
    assert set(built) == {f"q{i}" for i in range(30)} - done_before  # finished tasks were skipped
    assert set(frame.loc[frame.reused, "task_key"]) == done_before
    for key, output in frame.loc[frame.reused, ["task_key", "output"]].itertuples(index=False):
        assert output.startswith(f"answer {key} word")  # the stored answer of the earlier attempt

    again = run_batch(make, tasks, store=store, name="qa")  # a third time: nothing left to do
    assert again["reused"].all() and len(built) == 30 - len(done_before)


def test_attempts_lists_every_attempt_and_skip_can_include_errors(tmp_path):
    store = RunStore(tmp_path / "runs.db")
    calls = {"n": 0}

    def flaky():
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("no model today")
        return nbagent.Agent(fast_model(["ok"]))

    first = run_batch(flaky, ["a", "b"], concurrency=1, store=store, name="flaky")
    assert first["status"].tolist() == ["error", "success"]
    second = run_batch(lambda: nbagent.Agent(fast_model(["ok"])), ["a", "b"], store=store, name="flaky")
    assert second["status"].tolist() == ["success", "success"]
    assert second["reused"].tolist() == [False, True]
    assert second["attempts"].tolist() == [2, 1]

    from nbagent.batches import batch

    handle = batch(lambda: nbagent.Agent(fast_model(["ok"])), ["a", "b"], store=store, name="flaky")
    handle.wait(timeout=30)
    attempts = handle.attempts()
    assert attempts.groupby("task_key")["attempt"].max().to_dict() == {"a": 2, "b": 1}
    assert attempts.loc[attempts.task_key == "a", "status"].tolist() == ["error", "success"]

    kept = run_batch(lambda: 1 / 0, ["a", "b"], store=store, name="flaky", skip=["success", "error"])
    assert kept["reused"].all()
