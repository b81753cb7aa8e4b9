"""The run store: written as runs happen, survives kill -9, shared by processes, migrates old files."""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pandas as pd
import pytest
from conftest import wait_until
from end_states import every_end_state, fast, success

import nbagent
from nbagent.frames import runs_frame, steps_frame, tool_calls_frame
from nbagent.models import ToolCall
from nbagent.store import SCHEMA_VERSION, RunStore, StoreVersionError

REPO = Path(__file__).resolve().parents[1]


def holding_agent(gate: threading.Event) -> nbagent.Agent:
    """An agent whose one tool call waits until the test sets ``gate``."""

    @nbagent.tool
    def hold() -> str:
        """Wait for the test."""
        gate.wait(60)
        return "released"

    return nbagent.Agent(fast([[ToolCall("hold", {})], "done"]), tools=[hold])


def finished_steps(path: Path) -> int:
    """Steps the store has committed as finished, read with a plain SQLite connection."""
    try:
        with sqlite3.connect(path, timeout=5) as conn:
            return conn.execute("SELECT count(*) FROM steps WHERE end_s IS NOT NULL").fetchone()[0]
    except sqlite3.OperationalError:  # the writer has not created the tables yet
        return 0


def child(code: str, *args: str, **options) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **options,
    )


def test_store_reads_back_every_end_state_as_recorded(tmp_path):
    store = RunStore(tmp_path / "runs.db")
    records = every_end_state(store=store)
    back = {r.run_id: r for r in store.records()}
    assert set(back) == {r.run_id for r in records.values()}
    for record in records.values():
        assert dataclasses.asdict(back[record.run_id]) == dataclasses.asdict(record), record.status
    assert store.record(records["error"].run_id).status == "error"
    assert [r.status for r in store.records([records["max_steps"].run_id])] == ["max_steps"]
    with pytest.raises(KeyError):
        store.record("no-such-run")


def test_store_frames_match_frames_of_the_records(tmp_path):
    store = RunStore(tmp_path / "runs.db")
    records = list(every_end_state(store=store).values())
    for method, builder in (
        (store.runs, runs_frame),
        (store.steps, steps_frame),
        (store.tool_calls, tool_calls_frame),
    ):
        mine = method().sort_values(["run_id"], kind="stable").reset_index(drop=True)
        theirs = builder(records).sort_values(["run_id"], kind="stable").reset_index(drop=True)
        pd.testing.assert_frame_equal(mine, theirs)


def test_default_store_from_configure_gets_every_run(tmp_path):
    store = RunStore(tmp_path / "runs.db")
    nbagent.configure(store=store)
    try:
        record = success()
    finally:
        nbagent.configure(store=None)
    assert store.record(record.run_id).steps[0].tool_calls[0].result == 5


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")
def test_store_files_are_readable_by_their_owner_only(tmp_path):
    path = tmp_path / "private" / "runs.db"
    store = RunStore(path)
    success(store=store)
    files = [path, Path(f"{path}-wal"), Path(f"{path}-shm")]
    for file in files:
        assert file.exists(), file
        assert stat.S_IMODE(file.stat().st_mode) == 0o600, file


def test_a_live_run_reads_back_as_running_then_final(tmp_path):
    path = tmp_path / "runs.db"
    store = RunStore(path)
    gate = threading.Event()
    agent = holding_agent(gate)
    run = nbagent.start(agent, "hold on", store=store, display=False)
    try:
        reader = RunStore(path)  # a second store object, as another kernel would open
        wait_until(lambda: [c.tool for r in reader.records() for c in r.tool_calls] == ["hold"])
        live = reader.records()[0]
        assert live.status == "running"
        assert live.steps[0].ended_at is None
        assert live.steps[0].tool_calls[0].status is None  # in flight, written when it started
    finally:
        gate.set()
    record = run.wait(timeout=20)
    assert RunStore(path).record(record.run_id).status == "success"


def test_add_stores_a_finished_record_and_refuses_a_live_one(tmp_path):
    record = success()
    store = RunStore(tmp_path / "runs.db")
    store.add(record)
    store.add(record)  # adding again replaces, never duplicates
    assert [dataclasses.asdict(r) for r in store.records()] == [dataclasses.asdict(record)]
    live = nbagent.RunRecord("live", "t", "a", "m", record.started_at)
    with pytest.raises(ValueError):
        store.add(live)


def test_a_locked_database_never_breaks_the_run_and_the_store_catches_up(tmp_path, caplog):
    path = tmp_path / "runs.db"
    store = RunStore(path, busy_timeout_s=0.01)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another writer holds the write lock
    gate = threading.Event()
    agent = holding_agent(gate)
    with caplog.at_level(logging.WARNING, logger="nbagent"):
        run = nbagent.start(agent, "hold on", store=store, display=False)
        try:
            wait_until(lambda: any("could not write run" in r.getMessage() for r in caplog.records))
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
            gate.set()
        record = run.wait(timeout=30)
    assert record.status == "success"
    assert run.sink_errors == []  # the sink logged and went on; it never raised into the run
    assert dataclasses.asdict(store.record(record.run_id)) == dataclasses.asdict(record)


KILLED_WRITER = """
    import sys
    import nbagent
    from nbagent.models import ScriptedModel, ToolCall
    from nbagent.store import RunStore

    @nbagent.tool
    async def echo(x: int) -> int:
        "Echo x."
        return x

    def report(event):
        # Runs after the store's sink, so a printed step is one the store has committed.
        if type(event).__name__ == "StepFinished":
            print(event.step, flush=True)

    store = RunStore(sys.argv[1])
    turns = [[ToolCall("echo", {"x": i})] for i in range(2000)]
    model = ScriptedModel(turns, tokens_per_s=200, first_token_s=0.0)
    agent = nbagent.Agent(model, tools=[echo], max_steps=2000)
    nbagent.run(agent, "count for a long time", sinks=[store.sink(), report], display=False)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="kill -9")
def test_store_survives_kill_9_mid_run_and_keeps_every_finished_step(tmp_path):
    path = tmp_path / "runs.db"
    proc = child(KILLED_WRITER, str(path))
    try:
        wait_until(lambda: finished_steps(path) >= 5 or proc.poll() is not None, timeout=60, interval=0.01)
        assert proc.poll() is None, proc.stderr.read()
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    reported = {int(line) for line in proc.stdout.read().split()}
    proc.stdout.close()
    proc.stderr.close()

    [record] = RunStore(path).records()
    assert record.status == "unfinished"
    assert record.ended_at is None and record.duration_s is None
    finished = [s for s in record.steps if s.ended_at is not None]
    assert len(finished) >= 5
    assert reported <= {s.number for s in finished}  # every step the writer saw committed is there
    assert [s.number for s in record.steps] == list(range(1, len(record.steps) + 1))
    for step in finished:
        assert step.input_tokens is not None and step.usage_source == "reported"
        assert [c.status for c in step.tool_calls] == ["ok"]
        assert step.tool_calls[0].result == step.number - 1
    frame = RunStore(path).runs()
    assert frame["status"].tolist() == ["unfinished"]


CONCURRENT_WRITER = """
    import sys, time
    from pathlib import Path
    import nbagent
    from nbagent.models import ScriptedModel, ToolCall
    from nbagent.store import RunStore

    @nbagent.tool
    async def echo(x: int) -> int:
        "Echo x."
        return x

    path, tag, runs, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    store = RunStore(path)
    Path(path + "." + tag + ".ready").touch()
    while not Path(path + ".go").exists():
        time.sleep(0.005)
    for r in range(runs):
        turns = [[ToolCall("echo", {"x": i})] for i in range(steps - 1)] + ["done"]
        agent = nbagent.Agent(ScriptedModel(turns, tokens_per_s=1e9, first_token_s=0.0), tools=[echo],
                              max_steps=steps, name=tag)
        record = nbagent.run(agent, f"{tag} {r}", store=store, display=False)
        assert record.status == "success", record.summary()
"""


def test_two_processes_writing_one_store_at_once_lose_nothing(tmp_path):
    path = tmp_path / "shared.db"
    runs, steps = 12, 25
    writers = [child(CONCURRENT_WRITER, str(path), tag, str(runs), str(steps)) for tag in ("left", "right")]
    try:
        wait_until(lambda: all(Path(f"{path}.{t}.ready").exists() for t in ("left", "right")), timeout=60)
        Path(f"{path}.go").touch()
        for proc in writers:
            proc.wait(timeout=120)
    finally:
        for proc in writers:
            if proc.poll() is None:
                proc.kill()
    for proc in writers:
        assert proc.returncode == 0, proc.stderr.read()
        proc.stdout.close()
        proc.stderr.close()

    records = RunStore(path).records()
    assert len(records) == 2 * runs
    for record in records:
        assert record.status == "success"
        assert [s.number for s in record.steps] == list(range(1, steps + 1))
        assert all(c.status == "ok" for c in record.tool_calls)
        assert len(record.tool_calls) == steps - 1
    # The two writers really were writing at the same time.
    spans = {
        tag: (
            min(r.started_at for r in records if r.agent == tag),
            max(r.ended_at for r in records if r.agent == tag),
        )
        for tag in ("left", "right")
    }
    assert spans["left"][0] < spans["right"][1] and spans["right"][0] < spans["left"][1]


VERSION_1 = """
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY, task TEXT NOT NULL, agent TEXT NOT NULL, model TEXT NOT NULL,
    status TEXT NOT NULL, started_at TEXT NOT NULL, ended_at TEXT, duration_s REAL, output TEXT,
    error TEXT, error_type TEXT
);
CREATE INDEX runs_by_start ON runs (started_at);
CREATE TABLE steps (
    run_id TEXT NOT NULL, step INTEGER NOT NULL, kind TEXT NOT NULL, started_at TEXT NOT NULL,
    start_s REAL NOT NULL, ended_at TEXT, end_s REAL, input_tokens INTEGER, output_tokens INTEGER,
    usage_source TEXT NOT NULL, model_output TEXT NOT NULL, error TEXT, interrupted INTEGER NOT NULL,
    PRIMARY KEY (run_id, step)
) WITHOUT ROWID;
CREATE TABLE tool_calls (
    run_id TEXT NOT NULL, step INTEGER NOT NULL, seq INTEGER NOT NULL, call_id TEXT NOT NULL,
    tool TEXT NOT NULL, arguments TEXT, started_at TEXT NOT NULL, start_s REAL NOT NULL, ended_at TEXT,
    end_s REAL, status TEXT, result TEXT, error TEXT,
    PRIMARY KEY (run_id, step, seq)
) WITHOUT ROWID;
INSERT INTO runs VALUES ('old1', 'add', 'adder', 'scripted', 'success', '2024-05-01T10:00:00.000000+00:00',
    '2024-05-01T10:00:02.500000+00:00', 2.5, '"The sum is 5."', NULL, NULL);
INSERT INTO steps VALUES ('old1', 1, 'action', '2024-05-01T10:00:00.100000+00:00', 0.1,
    '2024-05-01T10:00:01.000000+00:00', 1.0, 12, 8, 'reported', 'adding', NULL, 0);
INSERT INTO steps VALUES ('old1', 2, 'final', '2024-05-01T10:00:01.000000+00:00', 1.0,
    '2024-05-01T10:00:02.500000+00:00', 2.5, 30, 5, 'reported', 'The sum is 5.', NULL, 0);
INSERT INTO tool_calls VALUES ('old1', 1, 0, 'call_1', 'add', '{"a": 2, "b": 3}',
    '2024-05-01T10:00:00.500000+00:00', 0.5, '2024-05-01T10:00:00.600000+00:00', 0.6, 'ok', '5', NULL);
INSERT INTO runs VALUES ('old2', 'crash', 'adder', 'scripted', 'running', '2024-05-02T10:00:00.000000+00:00',
    NULL, NULL, NULL, NULL, NULL);
PRAGMA user_version = 1;
"""


def test_reopening_a_version_1_store_migrates_it_in_place(tmp_path):
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(VERSION_1)
    store = RunStore(path)
    assert store.schema_version == SCHEMA_VERSION == 2
    old, crashed = store.records()
    assert (old.run_id, old.status, old.output, old.cost_usd) == ("old1", "success", "The sum is 5.", None)
    assert [(s.number, s.input_tokens, s.retries) for s in old.steps] == [(1, 12, 0), (2, 30, 0)]
    assert old.steps[0].tool_calls[0].arguments == {"a": 2, "b": 3}
    assert old.steps[0].tool_calls[0].result == 5
    assert crashed.status == "unfinished"  # version 1 knew no writers: nobody can still be writing it
    new = success(store=store)
    reopened = RunStore(path)
    assert [r.run_id for r in reopened.records()] == ["old1", "old2", new.run_id]
    assert reopened.runs()["status"].tolist() == ["success", "unfinished", "success"]


def test_a_store_from_a_newer_nbagent_is_refused(tmp_path):
    path = tmp_path / "future.db"
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(StoreVersionError, match="upgrade nbagent"):
        RunStore(path)


def test_a_sqlite_file_that_is_not_a_store_is_refused(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    with pytest.raises(StoreVersionError, match="not an nbagent run store"):
        RunStore(path)


def test_a_locked_database_never_holds_up_other_runs_or_a_stop(tmp_path):
    path = tmp_path / "runs.db"
    store = RunStore(path, busy_timeout_s=30)  # a write would wait long for the lock
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another kernel holds the write lock
    gate = threading.Event()
    try:
        stored = nbagent.start(holding_agent(gate), "stored", store=store)
        wait_until(lambda: stored.record.tool_calls)
        other = nbagent.start(nbagent.Agent(fast(["free"])), "not stored", display=False)
        # The runner's loop is not waiting on the database: an unrelated run finishes, and a Stop
        # of the stored run ends it, while the lock is still held.
        wait_until(other.done, timeout=10)
        stored.interrupt()
        wait_until(lambda: stored.status == "interrupted", timeout=10)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
        gate.set()
    record = stored.wait(timeout=60)
    assert RunStore(path).record(record.run_id).status == "interrupted"  # caught up once unlocked


def test_text_that_is_not_valid_utf8_is_stored_escaped_and_nothing_is_lost(tmp_path):
    @nbagent.tool
    def filename() -> str:
        """A file name decoded with surrogateescape."""
        return os.fsdecode(b"caf\xe9.txt")

    store = RunStore(tmp_path / "runs.db")
    agent = nbagent.Agent(fast([[ToolCall("filename", {})], "done \udcff"]), tools=[filename])
    record = nbagent.run(agent, "list \udcff files", store=store, display=False)
    stored = store.record(record.run_id)
    assert stored.status == "success" and len(stored.steps) == 2
    assert all(s.end_s is not None for s in stored.steps)
    assert stored.task == "list \\udcff files"  # plain text columns keep an escaped form
    assert stored.tool_calls[0].result == os.fsdecode(b"caf\xe9.txt")  # JSON values round-trip exactly


def test_the_stored_run_keeps_its_cost(tmp_path):
    store = RunStore(tmp_path / "runs.db")
    record = nbagent.run(nbagent.Agent(fast(["answer"], name="gpt-4o")), "t", store=store, display=False)
    assert record.cost_usd is not None
    assert store.record(record.run_id).cost_usd == record.cost_usd
