"""Local batches under hostile input: task keys that look generated, factories and scorers that
hang or raise what no ``except Exception`` catches, a batch of 20,000 tasks, the table after Stop
all, and the stop vocabulary a run takes."""

from __future__ import annotations

import asyncio
import threading
import uuid
from datetime import datetime, timezone

import pandas as pd
import pytest
from support import add, fast_model, wait_until

import nbagent
from nbagent.analytics.store import RunStore
from nbagent.batches import batch, run_batch, task_items
from nbagent.batches.table import BatchTable, head_html, progress_line, rows_html
from nbagent.models import ScriptedModel, ToolCall
from nbagent.records import RunRecord
from nbagent.runtime.loop import runner_loop

pytestmark = pytest.mark.timeout(120)


def quick_agent() -> nbagent.Agent:
    return nbagent.Agent(fast_model([[ToolCall("add", {"a": 2, "b": 3})], "5"]), tools=[add], name="adder")


def echo_agent(row: dict) -> nbagent.Agent:
    """Answers with its own task's text, so a row shows whose answer it holds."""
    return nbagent.Agent(fast_model([f"answer to {row['task']}"]), name="echo")


def slow_agent() -> nbagent.Agent:
    """One reply that streams for about 25 s (far longer than any test waits for it)."""
    return nbagent.Agent(ScriptedModel(["word " * 5000], tokens_per_s=200, first_token_s=0.0))


def on_loop(fn):
    """``fn()`` called on the runner's loop (where a batch's views refresh); its result."""

    async def call():
        return fn()

    return asyncio.run_coroutine_threadsafe(call(), runner_loop()).result(timeout=30)


def no_batch_threads_left() -> None:
    wait_until(lambda: not any(t.name.startswith("nbagent-batch") for t in threading.enumerate()))


# -- 1. keys ------------------------------------------------------------------------------------


def test_batch_keys_are_unique_and_a_resume_never_reports_another_tasks_answer(tmp_path):
    tasks = ["a", "a", "a#2", "a", "a#3"]
    keys = [item.key for item in task_items(tasks)]
    assert keys == ["a", "a#4", "a#2", "a#5", "a#3"]  # a generated suffix is never a task's own text
    assert len(set(keys)) == len(keys)

    store = RunStore(tmp_path / "runs.db")
    # A stored run of the task "a" under the key "a#2", as an older release keyed ["a", "a", "a#2"]:
    # the newest attempt of that key, and a success, but not an answer to the task "a#2".
    now = datetime.now(timezone.utc)
    store.add(
        RunRecord(
            run_id=uuid.uuid4().hex[:16],
            task="a",
            agent="echo",
            model="scripted",
            started_at=now,
            status="success",
            output="answer to a",
            ended_at=now,
            duration_s=0.0,
            metadata={"batch": {"name": "keys", "key": "a#2", "index": 1, "row": {}}},
        )
    )
    first = run_batch(echo_agent, tasks, store=store, name="keys", display=False)
    assert first["task_key"].tolist() == keys
    assert first["reused"].tolist() == [False] * 5
    assert first["output"].tolist() == [f"answer to {t}" for t in tasks]
    again = run_batch(echo_agent, tasks, store=store, name="keys", display=False)
    assert again["reused"].tolist() == [True] * 5
    assert again["output"].tolist() == [f"answer to {t}" for t in tasks]  # each its own task's answer
    assert again["attempts"].tolist() == [1] * 5


# -- 11. a factory or a score that hangs ----------------------------------------------------------


def test_stop_all_ends_a_batch_whose_factory_hangs():
    entered: list[str] = []
    release = threading.Event()

    def factory():
        entered.append(threading.current_thread().name)
        release.wait(60)  # a model that never finishes loading
        return quick_agent()

    handle = batch(factory, [f"t{i}" for i in range(4)], concurrency=2, display=False)
    try:
        wait_until(lambda: len(entered) == 2)
        # the user's code runs on the batch's own threads, not the runner loop's default executor
        assert all(name.startswith("nbagent-batch") for name in entered), entered
        assert handle.interrupt("now")
        frame = handle.wait(timeout=30)
    finally:
        release.set()
    assert handle.status == "stopped"
    assert frame["status"].tolist() == ["interrupted", "interrupted", "skipped", "skipped"]
    for error in frame["error"].iloc[:2]:
        assert error.startswith("abandoned: the agent factory had not returned 0.5 s after Stop all")
    assert frame["stop_reason"].iloc[:2].tolist() == ["user", "user"]
    assert frame["run_id"].iloc[2:].isna().all()
    no_batch_threads_left()


def test_stop_all_ends_a_batch_whose_score_hangs():
    entered, release = threading.Event(), threading.Event()

    def score(record, row):
        entered.set()
        release.wait(60)  # a judge model that never answers
        return True

    handle = batch(quick_agent, ["a", "b", "c"], score=score, concurrency=1, display=False)
    try:
        assert entered.wait(30)
        handle.interrupt()
        frame = handle.wait(timeout=30)
    finally:
        release.set()
    assert frame["status"].tolist() == ["success", "skipped", "skipped"]
    assert pd.isna(frame["score"].iloc[0])
    assert (
        frame["score_error"].iloc[0].startswith("abandoned: the score had not returned 0.5 s after Stop all")
    )
    no_batch_threads_left()


def test_hung_factories_leave_the_runner_loops_default_executor_free():
    release = threading.Event()
    entered: list[int] = []

    def factory():
        entered.append(1)
        release.wait(60)
        return quick_agent()

    # More hung factories than the default executor has threads on a small machine (cpus + 4).
    handle = batch(factory, [f"t{i}" for i in range(40)], concurrency=40, display=False)
    try:
        wait_until(lambda: len(entered) >= 12)
        answer = asyncio.run_coroutine_threadsafe(asyncio.to_thread(lambda: "pong"), runner_loop())
        assert answer.result(timeout=10) == "pong"  # a run's DNS lookup would get its thread
    finally:
        release.set()
    assert (handle.wait(timeout=30)["status"] == "success").all()
    no_batch_threads_left()


# -- 12. BaseExceptions from the user's code ------------------------------------------------------


def test_a_base_exception_from_a_factory_or_score_fails_that_task_only():
    def factory(row):
        if row["task"] == "exit":
            raise SystemExit(3)
        if row["task"] == "skip":
            pytest.skip("a test framework's skip, raised in a factory")
        return quick_agent()

    def score(record, row):
        if row["task"] == "judge exits":
            raise SystemExit("the judge quit")
        return record.status == "success"

    handle = batch(factory, ["exit", "ok", "skip", "judge exits"], score=score, concurrency=1, display=False)
    frame = handle.wait(timeout=30)
    assert handle.status == "done" and handle.error is None
    assert frame["status"].tolist() == ["error", "success", "error", "success"]
    assert frame["error"].iloc[0] == "the agent factory failed: SystemExit: 3"
    assert frame["error_type"].iloc[0] == "SystemExit"
    assert "a test framework's skip" in frame["error"].iloc[2] and frame["error_type"].iloc[2] == "Skipped"
    assert frame["score"].tolist()[1] is True and pd.isna(frame["score"].iloc[3])
    assert frame["score_error"].iloc[3] == "SystemExit: the judge quit"


def test_rows_never_change_after_done_and_the_name_is_held_while_runs_are_live(tmp_path):
    store = RunStore(tmp_path / "runs.db")
    release = threading.Event()

    def factory(row):
        if row["task"] == "exit":
            raise SystemExit("quit while another task runs")
        release.wait(60)  # the other task's agent comes once the first failed
        return quick_agent()

    handle = batch(factory, ["slow", "exit"], store=store, name="held", concurrency=2, display=False)
    try:
        wait_until(lambda: handle.tasks[1].phase == "ended")
        assert handle.status == "running"  # one task failed; the batch goes on
        with pytest.raises(RuntimeError, match="already running"):
            batch(quick_agent, ["x"], store=store, name="held", display=False)
    finally:
        release.set()
    frame = handle.wait(timeout=30)
    assert frame["status"].tolist() == ["success", "error"]
    assert handle.frame().equals(frame)
    assert run_batch(quick_agent, ["x"], store=store, name="held", display=False)["status"].tolist() == [
        "success"
    ]


# -- 13. a big batch ------------------------------------------------------------------------------


class _NoWalk(list):
    """A batch's task list that fails a walk over every task (what a view must not need)."""

    def __iter__(self):
        raise AssertionError("a walk over every task")


def test_a_big_batch_costs_what_its_live_rows_cost():
    tasks = [f"task {i}" for i in range(20_000)]
    handle = batch(slow_agent, tasks, concurrency=10, display=False)
    try:
        wait_until(lambda: len(handle.running()) == 10, timeout=60)
        # no coroutine per queued task: the loop holds about as many tasks as there are live runs
        loop_tasks = on_loop(lambda: len(asyncio.all_tasks()))
        assert loop_tasks < 200, loop_tasks
        # the progress, the table and the Open box read counts and an index, never every task
        table = BatchTable(handle)
        table.open("task 19999")
        saved, handle.tasks = handle.tasks, _NoWalk(handle.tasks)
        try:
            on_loop(table.refresh)
            progress = handle.progress()
        finally:
            handle.tasks = saved
        assert (progress.running, progress.queued, progress.total) == (10, 19_990, 20_000)
        assert "task 19999: queued" in table.opened.value
    finally:
        handle.interrupt()
    frame = handle.wait(timeout=60)
    assert frame["status"].value_counts().to_dict() == {"skipped": 19_990, "interrupted": 10}
    assert handle.progress().skipped == 19_990


# -- 7. the table after Stop all ------------------------------------------------------------------


def test_the_batch_table_after_stop_all_says_what_was_skipped_and_scores_na():
    handle = batch(
        slow_agent, [f"<q{i}>" for i in range(6)], concurrency=2, score=lambda r, row: True, display=False
    )
    wait_until(lambda: len(handle.running()) == 2)
    handle.interrupt()
    handle.wait(timeout=30)
    p = handle.progress()
    head = head_html(p)
    assert "<b>2 / 6</b> done" in head and "4 skipped" in head and "2 interrupted" in head
    assert 'class="nbb-fill"' not in head  # no success: no green, and no full bar
    assert "2/6 done (2 interrupted)" in progress_line(p) and "4 skipped" in progress_line(p)
    rows = rows_html(handle, 0.0)
    header = rows.split("</div>")[0]
    assert '<span class="nbb-key">key</span><span class="nbb-task">task</span>' in header
    assert "<span>score</span>" in header
    assert "<span>NA</span>" in rows and "False" not in rows
    assert '<span class="nbb-task">&lt;q0&gt;</span>' in rows  # the task's text, without its score
    assert handle.frame()["score"].isna().all()
    assert repr(handle) == "<nbagent.Batch stopped: 2/6 done, 4 skipped>"


def test_a_named_batch_repr_has_single_spaces():
    handle = batch(quick_agent, ["a", "b"], name="qa", display=False)
    handle.wait(timeout=30)
    assert repr(handle) == "<nbagent.Batch 'qa' done: 2/2 done>"
    assert "  " not in repr(handle)


# -- a run's stop vocabulary ----------------------------------------------------------------------


def test_a_batch_takes_after_step_as_a_run_does_and_after_current_still_works_with_a_warning():
    for mode in ("after_step", "after_current"):
        handle = batch(
            lambda: nbagent.Agent(ScriptedModel(["word " * 400], tokens_per_s=200, first_token_s=0.0)),
            [f"t{i}" for i in range(4)],
            concurrency=2,
            display=False,
        )
        wait_until(lambda h=handle: len(h.running()) == 2)
        if mode == "after_current":
            with pytest.warns(DeprecationWarning, match='interrupt\\("after_step"\\)'):
                assert handle.interrupt(mode)
        else:
            assert handle.interrupt(mode)
        assert handle.status == "stopping" and handle.stop_mode == "after_step"
        frame = handle.wait(timeout=30)
        assert frame["status"].tolist() == ["success", "success", "skipped", "skipped"], mode
    with pytest.raises(ValueError, match="'now' or 'after_step'"):
        handle.interrupt("later")
