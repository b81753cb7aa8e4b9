"""A store whose writes fail (a database locked by another kernel) never loses a run's rows: they
are written with the run's next commit, or the whole run at the next read, and until then reads
warn. A closed store says so on every use. The SQL texts of multi-row writes stay few."""

from __future__ import annotations

import dataclasses
import logging
import sqlite3
import threading
import warnings

import pytest
from end_states import fast, success
from support import wait_until

import nbagent
from nbagent.analytics.store import PendingWritesWarning, RunStore, StoreError, commits
from nbagent.models import ToolCall

pytestmark = pytest.mark.timeout(180)


@nbagent.tool
async def twice(x: int) -> int:
    """Double x."""
    return 2 * x


def agent() -> nbagent.Agent:
    turns = [[ToolCall("twice", {"x": 1})], [ToolCall("twice", {"x": 2})], "Done: 4."]
    return nbagent.Agent(fast(turns), tools=[twice])


class FlakyWrites:
    """Makes some of the store's writes fail with 'database is locked', as when another kernel holds
    the lock. A failing write first waits until the run has queued its next write (or ended), so
    the run goes on while the failed rows are still unwritten: the case that lost rows."""

    def __init__(self, store: RunStore, sink, fail, *, wait: bool = True) -> None:
        self.store, self.sink, self.fail, self.wait = store, sink, fail, wait
        self.calls = 0
        self.real = store._write
        store._write = self  # type: ignore[method-assign]

    def __call__(self, work, *, clean: bool = True) -> None:
        self.calls += 1
        if self.fail(self.calls):
            if self.wait:
                wait_until(lambda: self.store._queue._jobs or self.sink._ended)
            raise sqlite3.OperationalError("database is locked")
        return self.real(work, clean=clean)

    def restore(self) -> None:
        self.store._write = self.real  # type: ignore[method-assign]


def run_with(store: RunStore, fail) -> tuple[nbagent.RunRecord, FlakyWrites]:
    sink = store.sink()
    flaky = FlakyWrites(store, sink, fail)
    return nbagent.run(agent(), "double twice", sinks=[sink], display=False), flaky


def read_without_warning(store: RunStore, run_id: str):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        record = store.record(run_id)
    return None if caught else record


def test_one_or_two_failed_writes_anywhere_in_a_run_lose_no_row(tmp_path, caplog):
    store = RunStore(tmp_path / "runs.db")
    clean, flaky = run_with(store, lambda n: False)
    flaky.restore()
    writes = flaky.calls
    assert dataclasses.asdict(store.record(clean.run_id)) == dataclasses.asdict(clean)
    for first in range(1, writes + 1):
        for failing in ({first}, {first, first + 1}):  # one failure, two in a row
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="nbagent"):
                record, flaky = run_with(store, failing.__contains__)
            flaky.restore()
            assert record.status == "success"
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # written in full: nothing pending, nothing to warn
                stored = store.record(record.run_id)
            assert dataclasses.asdict(stored) == dataclasses.asdict(record), f"writes {failing} failed"
            # A failed last write retried with success needs no word; any other failure says what follows.
            messages = [r.getMessage() for r in caplog.records if "could not write run" in r.getMessage()]
            assert all("written again" in m for m in messages)


def test_a_run_whose_writes_fail_to_its_end_reads_as_missing_then_complete(tmp_path, caplog):
    store = RunStore(tmp_path / "runs.db")
    failing = threading.Event()
    failing.set()
    with caplog.at_level(logging.WARNING, logger="nbagent"):
        record, flaky = run_with(store, lambda n: n >= 2 and failing.is_set())  # after its start
        store.flush()
    assert any("written again at the store's next read" in r.getMessage() for r in caplog.records)
    with pytest.warns(PendingWritesWarning, match="1 run of this process"):
        partial = store.record(record.run_id)  # still failing: an older state, and a warning says so
    assert partial.status == "unfinished"  # its writer gave up on it: not a live run
    failing.clear()  # the database can be written again
    wait_until(lambda: read_without_warning(store, record.run_id) is not None)
    stored = read_without_warning(store, record.run_id)
    assert dataclasses.asdict(stored) == dataclasses.asdict(record)
    flaky.restore()


def test_a_read_between_a_failed_write_and_the_next_commit_warns(tmp_path):
    store = RunStore(tmp_path / "runs.db")
    gate = threading.Event()

    @nbagent.tool
    def hold() -> str:
        """Wait for the test."""
        gate.wait(60)
        return "released"

    sink = store.sink()
    flaky = FlakyWrites(store, sink, lambda n: n >= 2 and not gate.is_set(), wait=False)
    held = nbagent.Agent(fast([[ToolCall("hold", {})], "done"]), tools=[hold])
    run = nbagent.start(held, "hold on", sinks=[sink], display=False)
    wait_until(lambda: sink._behind and run.record.tool_calls)
    with pytest.warns(PendingWritesWarning, match="1 run of this process"):
        store.records()
    gate.set()
    record = run.wait(timeout=30)
    flaky.restore()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert dataclasses.asdict(store.record(record.run_id)) == dataclasses.asdict(record)


def test_a_closed_store_says_so_on_every_use(tmp_path):
    store = RunStore(tmp_path / "runs.db")
    kept = success(store=store)
    store.close()
    store.close()  # twice is fine
    assert store.closed
    for use in (
        lambda: store.add(kept),
        store.sink,
        lambda: success(store=store),
        store.records,
        lambda: store.record(kept.run_id),
        lambda: store.records_where("a", 1),
        lambda: store.schema_version,
    ):
        with pytest.raises(StoreError, match=r"runs\.db is closed"):
            use()
    assert RunStore(tmp_path / "runs.db").record(kept.run_id).status == "success"


def test_a_run_whose_store_is_closed_while_it_runs_ends_and_says_it_is_not_stored(tmp_path, caplog):
    store = RunStore(tmp_path / "runs.db")
    gate = threading.Event()

    @nbagent.tool
    def hold() -> str:
        """Wait for the test."""
        gate.wait(60)
        return "released"

    held = nbagent.Agent(fast([[ToolCall("hold", {})], "done"]), tools=[hold])
    with caplog.at_level(logging.WARNING, logger="nbagent"):
        run = nbagent.start(held, "hold on", store=store, display=False)
        wait_until(lambda: run.record.tool_calls)
        store.close()
        gate.set()
        record = run.wait(timeout=30)
    assert record.status == "success" and run.sink_errors == []
    messages = [r.getMessage() for r in caplog.records]
    assert any(f"{record.run_id} is not stored" in m and "was closed" in m for m in messages)
    assert not any("ProgrammingError" in m for m in messages)


def test_the_sql_texts_of_multi_row_writes_stay_few():
    """Any number of rows is written with texts of a few fixed sizes (each compiled once), in
    order, and with few statements."""

    class Conn:
        def execute(self, text, params):
            assert text.count("?") == len(params)  # each text fits its rows
            written.extend(params[::2])
            calls.append(len(params) // 2)

    statement = "INSERT OR REPLACE INTO t (a, b) VALUES (?, ?)"
    commits._texts.clear()
    for n in [*range(1, 300), commits.ROWS_PER_STATEMENT * 2 + 5]:
        written: list[int] = []
        calls: list[int] = []
        commits.put_rows(Conn(), statement, [(i, i) for i in range(n)])
        assert written == list(range(n))
        assert len(calls) <= n // commits.ROWS_PER_STATEMENT + 3 * len(commits.CHUNKS)
    assert len(commits._texts) <= len(commits.CHUNKS)
