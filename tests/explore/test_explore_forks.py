"""The run browser's fork column: which run a fork forks, at which step; empty in an older store."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import pandas as pd
import pytest
from fork_support import Counter, Spy, five_steps

import nbagent
from nbagent.analytics.runs import RecordRuns, RunQuery
from nbagent.analytics.store import RunStore
from nbagent.explore import browse


def original_and_fork(store):
    counter = Counter()
    agent = nbagent.Agent(Spy(five_steps()), tools=[counter.add])
    record = nbagent.run(agent, "Add them.", display=False, store=store)
    agent.model = Spy(["forty"])
    fork = nbagent.fork(record, 3, display=False, store=store).wait(20)
    store.flush(timeout=30)
    return record, fork


def rows_by_id(page):
    return {row["run_id"]: row for row in page.rows.to_dict("records")}


@pytest.mark.parametrize("table", [pytest.param("itables", marks=pytest.mark.needs("explore")), "select"])
def test_a_fork_shows_its_original_and_step_in_the_runs_table(tmp_path, table):
    store = RunStore(tmp_path / "runs.db")
    record, fork = original_and_fork(store)
    for source in (store, RecordRuns([record, fork])):  # a store's SQL, history's pandas
        rows = rows_by_id(source.page(RunQuery()))
        assert (rows[fork.run_id]["forked_from_run_id"], rows[fork.run_id]["forked_at_step"]) == (
            record.run_id,
            3,
        )
        assert pd.isna(rows[record.run_id]["forked_at_step"]) and pd.isna(
            rows[record.run_id]["forked_from_run_id"]
        )
    browser = browse(store, table=table)
    if table == "itables":
        data = browser.table._dt_args["data_json"]
        assert f"{record.run_id[:8]} @ 3" in data and "fork" in str(browser.table._dt_args)
    else:
        labels = [label for label, _ in browser.table.options]
        (line,) = [text for text in labels if "fork of" in text]
        assert line.endswith(f"(fork of {record.run_id[:8]} @ 3)") and len(labels) == 2


def test_a_read_only_store_of_the_schema_before_forks_lists_its_runs_with_no_fork(tmp_path):
    path = tmp_path / "v5.db"
    store = RunStore(path)
    record, fork = original_and_fork(store)
    store.close()
    with closing(sqlite3.connect(path)) as conn, conn:  # the store as version 5 left it
        conn.execute("ALTER TABLE runs DROP COLUMN forked_from_run_id")
        conn.execute("ALTER TABLE runs DROP COLUMN forked_at_step")
        conn.execute("PRAGMA user_version = 5")
    before = path.read_bytes()
    old = RunStore(path, readonly=True)
    assert old.schema_version == 5
    page = old.page(RunQuery())
    assert page.total == 2 and set(page.rows["run_id"]) == {record.run_id, fork.run_id}
    assert page.rows["forked_from_run_id"].isna().all() and page.rows["forked_at_step"].isna().all()
    browser = browse(old, table="select")
    assert (
        not any("fork of" in label for label, _ in browser.table.options) and len(browser.table.options) == 2
    )
    assert path.read_bytes() == before  # read, never migrated
