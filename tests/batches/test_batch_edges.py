"""Batches at their edges: a slow score off the runner's loop, task columns named like the
batch's, a Stop while factories build agents, the table's Open box and key column, one agent
object returned for two live runs, a second live batch of one name, and a Ray backend asked to
serve two batches."""

from __future__ import annotations

import asyncio
import re
import threading
from types import SimpleNamespace

import pandas as pd
import pytest
from support import add, fast_model, wait_until

import nbagent
from nbagent.analytics.store import RunStore
from nbagent.batches import batch, run_batch
from nbagent.models import ScriptedModel, ToolCall
from nbagent.runtime.loop import runner_loop

pytestmark = pytest.mark.timeout(120)


def quick_agent() -> nbagent.Agent:
    return nbagent.Agent(fast_model([[ToolCall("add", {"a": 2, "b": 3})], "5"]), tools=[add], name="adder")


def slow_agent() -> nbagent.Agent:
    """One reply that streams for about 25 s (far longer than any test waits for it)."""
    return nbagent.Agent(ScriptedModel(["word " * 5000], tokens_per_s=200, first_token_s=0.0))


def test_a_slow_score_runs_off_the_runner_loop_and_its_error_still_marks_the_row():
    entered, release = threading.Event(), threading.Event()

    def score(record, row):
        if row["task"] == "bad":
            raise ValueError("no judge today")
        entered.set()
        release.wait(30)  # a judge model, a test suite...
        return record.status == "success"

    async def ping() -> str:
        return "pong"

    handle = batch(quick_agent, ["good", "bad"], score=score, concurrency=2, display=False)
    try:
        assert entered.wait(30)
        # The loop that carries every run and every Stop answers while the scorer works.
        assert asyncio.run_coroutine_threadsafe(ping(), runner_loop()).result(timeout=10) == "pong"
    finally:
        release.set()
    frame = handle.wait(timeout=30)
    assert frame["score"].tolist()[0] is True and pd.isna(frame["score"].iloc[1])
    assert pd.isna(frame["score_error"].iloc[0])
    assert "no judge today" in frame["score_error"].iloc[1]


def test_task_columns_named_like_the_batchs_own_are_kept_with_a_suffix():
    tasks = pd.DataFrame(
        {
            "task": ["a", "b"],
            "task_key": ["k1", "k2"],
            "score": [0.9, 0.1],
            "score_error": ["x", "y"],
            "attempts": [3, 5],
            "reused": ["no", "yes"],
        }
    )
    frame = run_batch(quick_agent, tasks, score=lambda record, row: row["score"] > 0.5, display=False)
    assert frame.columns.is_unique
    assert frame["task_key"].tolist() == ["a", "b"]
    assert frame["task_key_task"].tolist() == ["k1", "k2"]
    assert frame["score"].tolist() == [True, False] and frame["score_task"].tolist() == [0.9, 0.1]
    assert frame["score_error_task"].tolist() == ["x", "y"] and frame["score_error"].isna().all()
    assert frame["attempts"].tolist() == [1, 1] and frame["attempts_task"].tolist() == [3, 5]
    assert frame["reused"].tolist() == [False, False] and frame["reused_task"].tolist() == ["no", "yes"]
    unscored = run_batch(quick_agent, tasks[["task", "score"]], display=False)
    assert unscored["score"].tolist() == [0.9, 0.1]  # no scorer: the task's own column as it was


@pytest.mark.parametrize("mode", ["now", "after_step"])
def test_a_stop_while_factories_build_agents_skips_their_tasks(mode):
    entered: list[int] = []
    release = threading.Event()

    def factory():
        entered.append(1)
        release.wait(30)  # loads a model, opens a connection...
        return quick_agent()

    handle = batch(factory, [f"t{i}" for i in range(4)], concurrency=2, display=False)
    try:
        wait_until(lambda: len(entered) == 2)
        assert handle.interrupt(mode)
    finally:
        release.set()
    frame = handle.wait(timeout=30)
    assert frame["status"].tolist() == ["skipped"] * 4
    assert frame["run_id"].isna().all()
    assert len(entered) == 2 and handle.status == "stopped"


def test_the_open_box_takes_a_task_key_first_then_a_position_and_never_raises():
    from nbagent.batches.table import BatchTable

    rows = [{"id": 100 + i, "task": f"question {word}"} for i, word in enumerate(["alpha", "beta", "gamma"])]
    handle = batch(quick_agent, rows, display=False)
    handle.wait(timeout=30)
    table = BatchTable(handle)

    def opened(text: str) -> str:
        table.open(text)
        table.refresh()
        return table.opened.value

    assert "question beta" in opened("101")  # a numeric key of this batch
    assert "question gamma" in opened("2")  # no such key: a position
    for nothing in ("²", "7", "-1", "nope"):
        assert "no task" in opened(nothing)


def test_a_table_of_plain_string_tasks_shows_positions_as_keys_not_the_task_text_twice():
    pytest.importorskip("ipywidgets")
    from nbagent.batches.table import BatchTable, rows_html

    handle = batch(quick_agent, ["what is 2 + 3?", "what is 2 + 3?", "and 4 + 4?"], display=False)
    handle.wait(timeout=30)
    rows = rows_html(handle, 0.0)
    keys = re.findall(r'<span class="nbb-key">([^<]*)</span>', rows)[1:]  # the header first
    assert sorted(keys) == ["#0", "#1", "#2"]
    assert rows.count("what is 2 + 3?") == 2 and rows.count("and 4 + 4?") == 1
    table = BatchTable(handle)
    table.open("#2")
    table.refresh()
    assert "and 4 + 4?" in table.opened.value

    keyed = batch(quick_agent, [{"id": "q-7", "task": "what is 2 + 3?"}], display=False)
    keyed.wait(timeout=30)
    assert '<span class="nbb-key">q-7</span>' in rows_html(keyed, 0.0)


def test_a_factory_returning_one_agent_for_two_live_runs_is_an_error_for_that_task():
    agent = slow_agent()
    handle = batch(lambda: agent, ["a", "b"], concurrency=2, display=False)
    wait_until(lambda: any(s.phase == "ended" for s in handle.tasks))
    handle.interrupt("now")
    frame = handle.wait(timeout=30)
    assert sorted(frame["status"]) == ["error", "interrupted"]
    error = frame.loc[frame["status"] == "error", "error"].iloc[0]
    other = frame.loc[frame["status"] == "interrupted", "task_key"].iloc[0]
    assert f"make_agent returned the same agent object as task {other!r}" in error
    assert "it must build a fresh agent per task" in error


def test_a_second_live_batch_of_one_name_and_store_is_refused_until_the_first_ends(tmp_path):
    store = RunStore(tmp_path / "runs.db")
    release = threading.Event()

    def held():
        release.wait(30)
        return quick_agent()

    first = batch(held, ["a", "b"], store=store, name="qa", display=False)
    try:
        with pytest.raises(RuntimeError) as refused:
            batch(quick_agent, ["a", "b"], store=RunStore(tmp_path / "runs.db"), name="qa", display=False)
        assert (
            str(refused.value)
            == "batch 'qa' is already running in this process: interrupt it or await it first"
        )
        other = run_batch(quick_agent, ["a"], store=store, name="other", display=False)
        assert other["status"].tolist() == ["success"]
    finally:
        release.set()
    assert first.wait(timeout=30)["status"].tolist() == ["success", "success"]
    again = run_batch(quick_agent, ["a", "b"], store=store, name="qa", display=False)
    assert again["reused"].tolist() == [True, True]


@pytest.mark.needs("ray")
def test_a_ray_backend_open_for_one_batch_refuses_another_without_touching_it():
    import ray

    from nbagent.batches.ray import RayBackend

    backend = RayBackend(workers=1)
    first, second = SimpleNamespace(name="first"), SimpleNamespace(name="second")
    backend._claim(first)  # as open() does first; no cluster is started here
    with pytest.raises(RuntimeError, match="already running batch 'first'"):
        asyncio.run(backend.open(second))
    assert not ray.is_initialized()
    asyncio.run(backend.close(second))  # the refused batch's close leaves the first one's backend
    with pytest.raises(RuntimeError, match="one batch at a time"):
        backend._claim(second)
    asyncio.run(backend.close(first))
    backend._claim(second)
