"""The run store: written as runs happen, survives kill -9, shared by processes, migrates old files,
reads without write access, refuses files that are no store, and never fails on a value."""

from __future__ import annotations

import dataclasses
import decimal
import hashlib
import json
import logging
import os
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import pandas as pd
import pytest
from end_states import every_end_state, fast, interrupted_mid_stream, max_steps, success
from old_stores import VERSION_1, VERSION_2_CHANGES
from support import ROOT, wait_until

import nbagent
from nbagent.analytics.frames import runs_frame, steps_frame, tool_calls_frame
from nbagent.analytics.store import (
    SCHEMA_VERSION,
    NotAStoreError,
    PendingWritesWarning,
    ReadOnlyStoreError,
    RunStore,
    StoreError,
    StoreVersionError,
)
from nbagent.models import ToolCall

REPO = ROOT


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
    from nbagent.analytics.store import RunStore

    @nbagent.tool
    async def echo(x: int) -> int:
        "Echo x."
        return x

    def report(event):
        # Runs after the store's sink, which queued the step's commit: once the store's queue is
        # drained, the step is committed, and only then is it reported.
        if type(event).__name__ == "StepFinished" and store.flush(timeout=30):
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
    from nbagent.analytics.store import RunStore

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


def test_reopening_a_version_1_store_migrates_it_in_place(tmp_path):
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(VERSION_1)
    store = RunStore(path)
    assert store.schema_version == SCHEMA_VERSION
    old, crashed = store.records()
    assert (old.run_id, old.status, old.output, old.cost_usd) == ("old1", "success", "The sum is 5.", None)
    assert [(s.number, s.input_tokens, s.retries) for s in old.steps] == [(1, 12, 0), (2, 30, 0)]
    assert old.steps[0].tool_calls[0].arguments == {"a": 2, "b": 3}
    assert old.steps[0].tool_calls[0].result == 5
    assert crashed.status == "unfinished"  # version 1 knew no writers: nobody can still be writing it
    assert (old.tags, old.metadata, old.queued_s, old.stop_reason, old.messages) == ([], {}, 0.0, None, None)
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
    assert stored.tool_calls[0].result == record.tool_calls[0].result == "caf\\udce9.txt"
    assert dataclasses.asdict(stored) == dataclasses.asdict(record)


@pytest.mark.needs("cost")
def test_the_stored_run_keeps_its_cost(tmp_path):
    store = RunStore(tmp_path / "runs.db")
    record = nbagent.run(nbagent.Agent(fast(["answer"], name="gpt-4o")), "t", store=store, display=False)
    assert record.cost_usd is not None
    assert store.record(record.run_id).cost_usd == record.cost_usd


def test_a_store_keeps_why_a_run_stopped_and_where_it_came_from(tmp_path):
    store = RunStore(tmp_path / "runs.db")
    model = fast(["one", "two"])
    model.params = {"temperature": 0, "max_tokens": 50}
    agent = nbagent.Agent(model, instructions="be brief", name="talker")
    first = nbagent.run(agent, "a", store=store, display=False, tags=["eval", "v2"], metadata={"row": 3})
    second = nbagent.run(agent, "b", store=store, display=False, reset=False)
    child_agent = nbagent.Agent(fast(["child answer"]), name="child")

    @nbagent.tool
    async def ask_child(question: str) -> str:
        """Ask the child agent.

        Args:
            question: what to ask.
        """
        return (await nbagent.start(child_agent, question, store=store, display=False)).output

    parent_agent = nbagent.Agent(
        fast([[ToolCall("ask_child", {"question": "hi"})], "done"]), tools=[ask_child]
    )
    parent = nbagent.run(parent_agent, "delegate", store=store, display=False)
    stopped = interrupted_mid_stream(store=store)
    capped = max_steps(store=store)

    back = {r.run_id: r for r in RunStore(tmp_path / "runs.db").records()}
    for record in (first, second, parent, stopped, capped):
        assert dataclasses.asdict(back[record.run_id]) == dataclasses.asdict(record), record.status
    assert (back[first.run_id].tags, back[first.run_id].metadata) == (["eval", "v2"], {"row": 3})
    assert back[first.run_id].model_params == {"temperature": 0, "max_tokens": 50}
    assert [m["role"] for m in back[first.run_id].messages] == ["system", "user", "assistant"]
    assert back[second.run_id].continues_run_id == first.run_id
    [child] = [r for r in back.values() if r.agent == "child"]
    assert child.parent_run_id == parent.run_id and child.output == "child answer"
    assert (back[stopped.run_id].stop_reason, back[stopped.run_id].error) == ("user", None)
    assert back[capped.run_id].stop_reason == "max_steps"
    assert back[parent.run_id].stop_reason is None


def test_a_run_waiting_for_its_agent_is_stored_with_its_real_start(tmp_path):
    path = tmp_path / "runs.db"
    store = RunStore(path)
    gate = threading.Event()

    @nbagent.tool
    def hold() -> str:
        """Wait for the test."""
        gate.wait(60)
        return "released"

    agent = nbagent.Agent(fast([[ToolCall("hold", {})], "done", "second done"]), tools=[hold])
    first = nbagent.start(agent, "first", store=store, display=False)
    try:
        wait_until(lambda: first.record.tool_calls)
        second = nbagent.start(agent, "second", store=store, display=False)
        reader = RunStore(path)  # as another kernel would read it
        wait_until(lambda: [r.queued_after for r in reader.records()] == [None, first.run_id])
        waiting = reader.record(second.run_id)
        assert waiting.status == "running" and waiting.steps == []
    finally:
        gate.set()
    assert first.wait(timeout=30).status == "success"
    record = second.wait(timeout=30)
    assert record.output == "second done" and record.queued_s > 0
    stored = RunStore(path).record(record.run_id)
    assert dataclasses.asdict(stored) == dataclasses.asdict(record)
    assert stored.queued_after is None
    assert stored.started_at > waiting.started_at  # the run's row moved with its clock


def test_reopening_a_version_2_store_migrates_it_in_place(tmp_path):
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(VERSION_1 + VERSION_2_CHANGES)
    store = RunStore(path)
    assert store.schema_version == SCHEMA_VERSION
    old, stopped = store.records()
    assert (old.run_id, old.cost_usd, old.output) == ("old1", 0.25, "The sum is 5.")
    assert (old.tags, old.metadata, old.model_params, old.messages) == ([], {}, {}, None)
    assert (old.stop_reason, old.parent_run_id, old.continues_run_id, old.queued_s) == (None, None, None, 0.0)
    assert (stopped.status, stopped.error) == ("interrupted", "interrupted by the user")  # kept as it was
    new = success(store=store, tags=["after"])
    reopened = RunStore(path).records()
    assert [r.run_id for r in reopened] == ["old1", "old2", new.run_id]
    assert dataclasses.asdict(reopened[2]) == dataclasses.asdict(new) and reopened[2].tags == ["after"]


class Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")


def nested(depth: int, leaf: object) -> object:
    for _ in range(depth):
        leaf = [leaf]
    return leaf


def test_values_that_refuse_to_become_text_never_break_the_store(tmp_path, caplog):
    cycle: list = []
    cycle.append(cycle)
    values = {
        "unprintable": Unprintable(),
        "huge": 2**20000,
        "huge_inside": [2**20000, "kept"],
        "set": {1, 2},
        "tuple_keys": {(1, 2): "a"},
        "cycle": cycle,
        "deep_surrogate": nested(40, "caf\udce9"),  # deeper than the recorder cleans
    }

    @nbagent.tool
    def awkward(kind: str) -> object:
        """Return an awkward value.

        Args:
            kind: which one.
        """
        return values.get(kind, kind)

    calls = [ToolCall("awkward", {"kind": kind}) for kind in values]
    raw = ToolCall("awkward", '{"kind": "lone \\udcff"}')  # JSON text whose escape makes a lone surrogate
    store = RunStore(tmp_path / "runs.db")
    agent = nbagent.Agent(fast([calls, [raw], "done \udcff"]), tools=[awkward])
    with caplog.at_level(logging.WARNING, logger="nbagent"):
        run = nbagent.start(
            agent, "t", store=store, display=False, metadata={"object": Unprintable(), "huge": 2**20000}
        )
        record = run.wait(timeout=30)
    assert record.status == "success", record.error
    assert run.sink_errors == [] and not [r for r in caplog.records if "store" in r.getMessage()]

    stored = store.record(record.run_id)
    results = {call.arguments["kind"]: call.result for call in stored.tool_calls[: len(values)]}
    assert results["unprintable"] == "<unprintable Unprintable: RuntimeError: no repr for you>"
    assert results["huge"].startswith("<unprintable int: ValueError")
    assert results["huge_inside"][0].startswith("<unprintable int") and results["huge_inside"][1] == "kept"
    assert results["set"] == "{1, 2}"
    assert results["tuple_keys"] == {"(1, 2)": "a"}
    innermost = results["cycle"]
    while isinstance(innermost, list):
        innermost = innermost[0]
    assert innermost == "[[...]]"  # the recorder copies the first levels; the cycle itself became text
    assert results["deep_surrogate"] == record.tool_calls[6].result  # JSON values round-trip exactly
    assert stored.tool_calls[-1].arguments == record.tool_calls[-1].arguments == '{"kind": "lone \\udcff"}'
    assert stored.tool_calls[-1].result == record.tool_calls[-1].result
    assert stored.output == record.output == "done \\udcff"
    assert stored.metadata["object"].startswith("<unprintable Unprintable")
    assert stored.metadata["huge"].startswith("<unprintable int")
    assert [len(store.runs()), len(store.steps()), len(store.tool_calls())] == [1, 3, len(values) + 1]

    other = RunStore(tmp_path / "added.db")  # add() takes the same values
    other.add(record)
    assert dataclasses.asdict(other.record(record.run_id)) == dataclasses.asdict(stored)


def test_add_takes_a_hand_made_record_with_fields_sqlite_cannot_bind(tmp_path):
    record = success()
    odd = dataclasses.replace(
        record, run_id="odd", task="t \udcff", cost_usd=decimal.Decimal("0.125"), error=ValueError("boom")
    )
    odd.steps = [dataclasses.replace(s, retries=2**70, tool_calls=[]) for s in record.steps]
    store = RunStore(tmp_path / "runs.db")
    store.add(odd)
    back = store.record("odd")
    assert (back.task, back.cost_usd, back.error) == ("t \\udcff", 0.125, "ValueError('boom')")
    assert [s.retries for s in back.steps] == [float(2**70)] * len(record.steps)  # past 64 bits: a float


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_read_only_store_reads_without_writing(tmp_path):
    path = tmp_path / "runs.db"
    writer = RunStore(path)
    records = {r.run_id: r for r in every_end_state(store=writer).values()}
    writer.close()
    before, mtime = digest(path), path.stat().st_mtime_ns

    store = RunStore(path, readonly=True)
    assert store.readonly and "readonly=True" in repr(store)
    back = store.records()
    assert {r.run_id: dataclasses.asdict(r) for r in back} == {
        k: dataclasses.asdict(r) for k, r in records.items()
    }
    assert len(store.runs()) == 5 and len(store.steps()) == sum(len(r.steps) for r in back)
    assert store.schema_version == SCHEMA_VERSION
    assert (digest(path), path.stat().st_mtime_ns) == (before, mtime)


def test_a_read_only_store_cannot_store_runs(tmp_path):
    path = tmp_path / "runs.db"
    record = success(store=RunStore(path))
    store = RunStore(path, readonly=True)
    for write in (store.sink, lambda: store.add(record)):
        with pytest.raises(ReadOnlyStoreError, match=f"{path}.* read-only"):
            write()
    with pytest.raises(ReadOnlyStoreError):  # refused before the run starts
        nbagent.run(nbagent.Agent(fast(["x"])), "t", store=store, display=False)
    nbagent.configure(store=store)
    try:
        with pytest.raises(ReadOnlyStoreError):
            nbagent.start(nbagent.Agent(fast(["x"])), "t", display=False)
    finally:
        nbagent.configure(store=None)
    assert [r.run_id for r in store.records()] == [record.run_id]


def test_a_read_only_store_that_does_not_exist_is_not_created(tmp_path):
    path = tmp_path / "missing" / "runs.db"
    with pytest.raises(FileNotFoundError, match="no nbagent store"):
        RunStore(path, readonly=True)
    assert not path.parent.exists()


def test_an_empty_file_opened_read_only_is_an_empty_store(tmp_path):
    path = tmp_path / "runs.db"
    path.touch()  # what RunStore creates first, before its tables
    store = RunStore(path, readonly=True)
    assert store.records() == [] and store.runs().empty and store.tool_calls().empty
    assert path.stat().st_size == 0


def test_an_older_store_opened_read_only_is_read_without_migrating(tmp_path):
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(VERSION_1)
    before = digest(path)
    store = RunStore(path, readonly=True)
    old, crashed = store.records()
    assert (old.run_id, old.output, old.cost_usd, old.tags, old.queued_s) == (
        "old1",
        "The sum is 5.",
        None,
        [],
        0.0,
    )
    assert [s.retries for s in old.steps] == [0, 0] and old.steps[0].tool_calls[0].result == 5
    assert crashed.status == "unfinished"
    assert store.runs()["status"].tolist() == ["success", "unfinished"]
    assert store.schema_version == 1 and digest(path) == before
    future = tmp_path / "future.db"
    with sqlite3.connect(future) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(StoreVersionError, match="upgrade nbagent"):
        RunStore(future, readonly=True)


def test_a_foreign_file_is_not_an_nbagent_store(tmp_path):
    store_path = tmp_path / "store.db"
    store = RunStore(store_path)
    record = success()
    for n in range(300):  # enough rows for many pages, so a cut loses some
        store.add(dataclasses.replace(record, run_id=f"run{n:03}"))
    store.close()
    whole = store_path.read_bytes()
    files = {
        "random bytes": bytes(range(256)) * 64,
        "a store cut in half": whole[: len(whole) // 2],
        "a store cut in its header": whole[:50],
    }
    for name, content in files.items():
        (tmp_path / f"{name}.db").write_bytes(content)
    with sqlite3.connect(tmp_path / "notes.db") as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    with sqlite3.connect(tmp_path / "versioned notes.db") as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    names = [*files, "notes", "versioned notes"]
    for name in names:
        path = tmp_path / f"{name}.db"
        before = digest(path)
        for readonly in (False, True):
            with pytest.raises(NotAStoreError, match="is not an nbagent store") as caught:
                RunStore(path, readonly=readonly)
            assert str(path) in str(caught.value) and isinstance(caught.value, ValueError), name
            assert isinstance(caught.value, StoreError)
        assert digest(path) == before, name  # refused without a write


def test_a_store_path_with_a_tilde_is_in_the_home_folder(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    store = RunStore("~/runs/runs.db")
    assert store.path == home / "runs" / "runs.db"
    nbagent.configure(store=store)
    try:
        record = success()
    finally:
        nbagent.configure(store=None)
    assert not (tmp_path / "~").exists()
    assert RunStore("~/runs/runs.db", readonly=True).record(record.run_id).status == "success"


def test_reading_while_writes_are_pending_warns_how_many_runs_are_missing(tmp_path):
    path = tmp_path / "runs.db"
    store = RunStore(path, busy_timeout_s=0.05)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another kernel holds the write lock
    gate = threading.Event()
    run = nbagent.start(holding_agent(gate), "hold on", store=store, display=False)
    try:
        wait_until(lambda: run.record.tool_calls)  # its start was given to the store, which cannot write it
        with pytest.warns(PendingWritesWarning, match="1 run of this process not fully written") as caught:
            missing = store.records()
        assert missing == []  # what the issue saw: no runs, now with a reason
        assert caught[0].filename == __file__  # the warning points at the caller's line
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
        gate.set()
    record = run.wait(timeout=60)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [r.run_id for r in store.records()] == [record.run_id]


# -- stores this process may not write: tests run as root, who writes any file, so the reading
# happens in a child that obeys file permissions.

PERMISSIONED_READER = """
    import json, sys
    from pathlib import Path
    from nbagent.analytics.store import RunStore, StoreError

    path, cannot = Path(sys.argv[1]), sys.argv[2]
    probe = path if cannot == "file" else path.parent / "probe"
    try:
        open(probe, "ab").close()
    except PermissionError:
        pass
    else:
        sys.exit(f"this child can write {probe}: the test would prove nothing")
    try:
        store = RunStore(path)  # not told it is read-only: it must find out
        records = store.records()
    except StoreError as exc:
        print(json.dumps({"error": str(exc)}))
        sys.exit(0)
    runs = [[r.run_id, r.status, [c.status for c in r.tool_calls]] for r in records]
    print(json.dumps({"readonly": store.readonly, "runs": runs, "steps": len(store.steps())}))
"""


def read_without_permission(path: Path, cannot: str) -> dict:
    """Read the store at ``path`` in a child that may not write the file (or its folder)."""
    command = [sys.executable, "-c", textwrap.dedent(PERMISSIONED_READER), str(path), cannot]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("as root this test needs setpriv (util-linux) to drop root's permission bypass")
        command = [setpriv, "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search", *command]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def permissions_restored(tmp_path):
    yield
    for path in [tmp_path, *tmp_path.rglob("*")]:
        path.chmod(0o700 if path.is_dir() else 0o600)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_a_store_its_reader_cannot_write_opens_read_only(tmp_path, permissions_restored):
    path = tmp_path / "runs.db"
    writer = RunStore(path)
    record = success(store=writer)
    writer.close()
    path.chmod(0o400)
    before = digest(path)
    seen = read_without_permission(path, "file")
    assert seen == {"readonly": True, "runs": [[record.run_id, "success", ["ok"]]], "steps": 2}
    assert digest(path) == before


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_a_store_in_a_read_only_folder_is_read(tmp_path, permissions_restored):
    folder = tmp_path / "shared"
    writer = RunStore(folder / "runs.db")
    record = success(store=writer)
    writer.close()  # the last connection folds the log into the file and removes it
    assert sorted(p.name for p in folder.iterdir()) == ["runs.db"]
    before = digest(folder / "runs.db")
    folder.chmod(0o500)
    seen = read_without_permission(folder / "runs.db", "folder")
    assert seen == {"readonly": True, "runs": [[record.run_id, "success", ["ok"]]], "steps": 2}
    assert sorted(p.name for p in folder.iterdir()) == ["runs.db"]
    assert digest(folder / "runs.db") == before


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_a_read_only_reader_sees_a_live_writers_latest_commits(tmp_path, permissions_restored):
    folder = tmp_path / "shared"
    store = RunStore(folder / "runs.db")
    gate = threading.Event()
    run = nbagent.start(holding_agent(gate), "hold on", store=store, display=False)
    try:
        wait_until(lambda: any(r.tool_calls for r in RunStore(folder / "runs.db").records()))
        for file in folder.iterdir():
            file.chmod(0o400)  # the live writer keeps its open files; the reader may only read
        folder.chmod(0o500)
        seen = read_without_permission(folder / "runs.db", "folder")
    finally:
        folder.chmod(0o700)
        gate.set()
    assert seen == {"readonly": True, "runs": [[run.run_id, "running", [None]]], "steps": 1}
    assert run.wait(timeout=30).status == "success"


UNCHECKPOINTED_WRITER = """
    import os, sys
    import nbagent
    from nbagent.models import ScriptedModel
    from nbagent.analytics.store import RunStore

    store = RunStore(sys.argv[1])
    agent = nbagent.Agent(ScriptedModel(["done"], tokens_per_s=1e9, first_token_s=0.0))
    record = nbagent.run(agent, "t", store=store, display=False)
    print(record.run_id, flush=True)
    os._exit(0)  # as a dead kernel would: its log is never folded into the file
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_a_read_only_folder_with_a_log_nobody_can_read_says_what_to_do(tmp_path, permissions_restored):
    folder = tmp_path / "shared"
    folder.mkdir()
    proc = child(UNCHECKPOINTED_WRITER, str(folder / "runs.db"))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    wal = folder / "runs.db-wal"
    assert wal.stat().st_size > 0
    (folder / "runs.db-shm").unlink()  # without it, and unable to make it, SQLite cannot read the log
    folder.chmod(0o500)
    seen = read_without_permission(folder / "runs.db", "folder")
    assert "write-ahead log runs.db-wal" in seen["error"] and "writable" in seen["error"]
    folder.chmod(0o700)
    assert RunStore(folder / "runs.db").record(out.strip()).status == "success"  # nothing was lost


def test_a_run_whose_last_write_failed_is_written_at_the_next_read(tmp_path, caplog):
    path = tmp_path / "runs.db"
    store = RunStore(path, busy_timeout_s=0.01)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # held through the whole run, its last write included
    try:
        with caplog.at_level(logging.WARNING, logger="nbagent"):
            record = success(store=store)
            store.flush()  # until the sink has given up on the last write
        assert any("written again at the store's next read" in r.getMessage() for r in caplog.records)
        with pytest.warns(PendingWritesWarning, match="1 run of this process"):
            assert store.records() == []
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()

    def read_without_warning() -> list:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            records = store.records()
        return [] if caught else records

    wait_until(read_without_warning)  # the first reads may still find the last failed try under way
    [stored] = read_without_warning()
    assert dataclasses.asdict(stored) == dataclasses.asdict(record)


@pytest.mark.skipif(not Path("/proc/sys/kernel/random/boot_id").exists(), reason="boot ids are Linux's")
def test_a_run_written_on_another_machine_with_the_same_host_name_reads_as_running(tmp_path):
    """A pid not running here says nothing about a writer whose boot id is another machine's."""
    from datetime import datetime, timezone

    from nbagent.analytics.runs import RunQuery
    from nbagent.analytics.store.identity import this_writer
    from nbagent.analytics.store.schema import put_whole_run
    from nbagent.records import RunRecord

    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    store = RunStore(tmp_path / "runs.db")
    host, _, start = this_writer()
    own_boot = start.partition(":")[0]
    for run_id, boot in (("elsewhere", "a-boot-id-of-another-machine"), ("here", own_boot)):
        record = RunRecord(run_id, "task", "agent", "model", datetime.now(timezone.utc))
        store._write(
            lambda conn, record=record, boot=boot: put_whole_run(conn, record, (host, ended.pid, f"{boot}:1"))
        )
    assert {r.run_id: r.status for r in store.records()} == {"elsewhere": "running", "here": "unfinished"}
    page = store.page(RunQuery(sort="task"))
    assert dict(zip(page.rows["run_id"], page.rows["status"], strict=True)) == {
        "elsewhere": "running",
        "here": "unfinished",
    }


def test_the_store_keeps_up_with_the_runner_each_event_is_folded_once(tmp_path, monkeypatch):
    """Issue 26, item 13: the store's sink reads the run's own record instead of folding a copy
    of every event on the runner's loop; what it stores is unchanged."""
    from nbagent.recorder import Recorder

    folded: list[type] = []
    apply = Recorder.apply

    def counting(self, event):
        folded.append(type(event))
        apply(self, event)

    monkeypatch.setattr(Recorder, "apply", counting)
    events: list[nbagent.events.RunEvent] = []
    with RunStore(tmp_path / "runs.db") as store:
        record = success(store=store, sinks=[events.append])
        assert len(folded) == len(events)  # one fold per event: the run's
        assert dataclasses.asdict(store.record(record.run_id)) == dataclasses.asdict(record)


def test_a_run_row_ended_before_its_sink_was_told_waits_for_the_end_commit(tmp_path, monkeypatch):
    """A row built while the end is being fanned out shows the run ended only once the sink has
    marked the steps the end closed, so a kill -9 then never leaves an ended run with open steps."""
    from datetime import datetime, timezone

    from nbagent import events as ev
    from nbagent.recorder import Recorder

    with RunStore(tmp_path / "runs.db") as store:
        monkeypatch.setattr(store._queue, "put", lambda job: None)  # this test takes the rows itself
        recorder, sink = Recorder(), store.sink()
        sink.follow(recorder)
        for event in (
            ev.RunStarted("r1", 0, 0.0, "task", "agent", "model", datetime.now(timezone.utc)),
            ev.StepStarted("r1", 1, 0.1, "action"),
        ):
            recorder.apply(event)
            sink(event)
        sink._take_rows()  # written: nothing is marked changed now
        sink._dirty.add(())  # as if the run row changed again (a dequeue, say)
        recorder.apply(ev.RunFinished("r1", 1, 0.2, "interrupted", None, None, None, None))
        keys, rows = sink._take_rows()  # the writer, between the fold and the sink's turn
        assert rows == [] and sink._dirty == {()}
        sink(ev.RunFinished("r1", 1, 0.2, "interrupted", None, None, None, None))
        keys, rows = sink._take_rows()
        assert keys == {(), (1,)} and len(rows) == 2
        monkeypatch.undo()
