"""Explore runs: show any run again (from history or a store, after a restart), share it as one
HTML file, compare two runs, and page through runs with SQL filters."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import timedelta

import end_states
import pytest
from explore_store import build_store
from support import TESTS, add

import nbagent
from nbagent.analytics import history
from nbagent.analytics.runs import RecordRuns, RunQuery
from nbagent.analytics.store import RunStore
from nbagent.explore import compare, compare_frame, find_record, html_document, show, to_html
from nbagent.models import ScriptedModel, ToolCall
from nbagent.view.html import record_html

WRITER = """
    import os, sys
    import end_states
    import nbagent
    from nbagent.analytics.store import RunStore
    from nbagent.models import ScriptedModel, ToolCall
    from support import TESTS, add

    store = RunStore(sys.argv[1])
    stopped = end_states.interrupted_mid_stream(store=store)
    print(stopped.run_id, flush=True)
    turns = [[ToolCall("add", {"a": i, "b": 1})] for i in range(500)]
    model = ScriptedModel(turns, tokens_per_s=400, first_token_s=0.0)
    agent = nbagent.Agent(model, tools=[add], max_steps=500)
    run = nbagent.start(agent, "count for a long time", store=store, display=False)
    while len([s for s in run.record.steps if s.ended_at is not None]) < 3:
        pass
    store.flush(timeout=30)
    print(run.run_id, flush=True)
    os._exit(0)  # as a dead kernel would: the run never ends
"""

READER = """
    import sys
    import nbagent
    from nbagent.analytics.store import RunStore
    from nbagent.explore import show, to_html, find_record
    store = RunStore(sys.argv[1], readonly=True)
    for run_id in sys.argv[2:]:
        show(run_id, store=store)
        to_html(find_record(run_id, store), sys.argv[1] + "." + run_id + ".html")
"""


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a new interpreter, in the tests folder (so it imports the test helpers)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=TESTS,
    )


def test_show_of_a_stores_interrupted_and_unfinished_runs_after_a_restart(tmp_path):
    path = tmp_path / "runs.db"
    writer = _python(WRITER, str(path))
    assert writer.returncode == 0, writer.stderr
    stopped_id, unfinished_id = writer.stdout.split()

    # A new process that never ran them finds both by id and shows them as they ended.
    reader = _python(READER, str(path), stopped_id, unfinished_id)
    assert reader.returncode == 0, reader.stderr
    assert f"Run {stopped_id}" in reader.stdout and "interrupted" in reader.stdout
    assert f"Run {unfinished_id}" in reader.stdout and "unfinished" in reader.stdout

    stopped = find_record(stopped_id, RunStore(path, readonly=True))
    unfinished = find_record(unfinished_id, RunStore(path, readonly=True))
    assert stopped.status == "interrupted" and unfinished.status == "unfinished"
    assert len([s for s in unfinished.steps if s.ended_at is not None]) >= 3
    page = (tmp_path / f"runs.db.{stopped_id}.html").read_text(encoding="utf-8")
    assert "■ interrupted" in page and "stopped here" in page and "Step 1" in page
    page = (tmp_path / f"runs.db.{unfinished_id}.html").read_text(encoding="utf-8")
    assert "? unfinished" in page and "Step 3" in page and "the process running it ended" in page


def test_show_finds_a_run_in_history_before_the_configured_store(tmp_path, capsys):
    record = end_states.success()
    show(record.run_id)
    assert f"Run {record.run_id}" in capsys.readouterr().out
    assert find_record(record.run_id) is history.last()

    store = RunStore(tmp_path / "runs.db")
    stored = end_states.error(store=store)
    history.clear()
    nbagent.configure(store=store)
    try:
        assert find_record(stored.run_id).status == "error"  # from the store: history forgot it
    finally:
        nbagent.configure(store=None)
    with pytest.raises(KeyError, match="no store given or configured"):
        find_record(stored.run_id)
    with pytest.raises(TypeError, match="run id"):
        show(42)


def test_to_html_writes_one_self_contained_file_with_escaped_content(tmp_path):
    hostile = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    agent = nbagent.Agent(
        ScriptedModel([[ToolCall("add", {"a": 1, "b": 2})], hostile], tokens_per_s=1e9, first_token_s=0),
        tools=[add],
        name="<b>agent</b>",
    )
    record = nbagent.run(agent, hostile, display=False)
    path = to_html(record, tmp_path / "run.html")
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and '<meta charset="utf-8">' in page
    assert "<script" not in page and "<img" not in page and "<b>agent" not in page
    assert "&lt;script&gt;" in page
    assert "http://" not in page and "https://" not in page and "src=" not in page.replace("src=x", "")
    assert record_html(record) in page  # the static view a finished live view turns into
    assert page == html_document(record)


def test_compare_aligns_two_runs_with_different_step_counts():
    short = end_states.success(agent_name="adder", model="small")  # add, then answer: 2 steps
    turns = [[ToolCall("add", {"a": 2, "b": 3})], [ToolCall("add", {"a": 5, "b": 5})], "The sum is 10."]
    agent = nbagent.Agent(end_states.fast(turns, "large"), tools=[add], name="careful-adder")
    long = nbagent.run(agent, "add 2 and 3, then double", display=False)

    comparison = compare(short.run_id, long)
    assert [(p.number, p.a is not None, p.b is not None) for p in comparison.steps] == [
        (1, True, True),
        (2, True, True),
        (3, False, True),
    ]
    assert comparison.steps[0].differences == []  # same text, same call, same result
    assert "step 2: add: only in B" in comparison.differences
    assert "step 3: only in B" in comparison.differences
    assert comparison.delta("n_steps") == 1
    assert comparison.delta("input_tokens") == long.input_tokens - short.input_tokens
    html = comparison._repr_html_()
    assert "no step 3 in A" in html and "careful-adder" in html and "only in B" in html

    frame = compare_frame([short, long])
    run_rows = frame[frame.level == "run"].set_index("run_id")
    assert run_rows.loc[long.run_id, "n_steps_delta"] == 1
    assert run_rows.loc[long.run_id, "output_tokens_delta"] == long.output_tokens - short.output_tokens
    assert run_rows.loc[short.run_id, "input_tokens_delta"] == 0
    steps = frame[(frame.level == "step") & (frame.run_id == long.run_id)].set_index("step")
    assert steps.loc[3, "in_baseline"] == False  # noqa: E712 (a pandas boolean)
    assert steps.loc[3, "input_tokens_delta"] is pd_na()
    assert steps.loc[1, "duration_s_delta"] == pytest.approx(
        long.steps[0].duration_s - short.steps[0].duration_s
    )


def pd_na():
    import pandas as pd

    return pd.NA


def test_compare_marks_an_unknown_delta_unknown_not_zero():
    cut = end_states.interrupted_mid_stream()
    done = end_states.success()
    comparison = compare(done, cut)
    assert cut.steps[0].input_tokens is None
    assert comparison.steps[0].delta("input_tokens") is None
    assert comparison.steps[0].delta("duration_s") is not None
    assert "step 1: cut in B" in comparison.differences


def test_tool_calls_pair_by_name_and_order():
    from nbagent.explore.comparison import pair_calls
    from nbagent.records import ToolCallRecord

    at = end_states.success().started_at

    def call(tool: str, n: int) -> ToolCallRecord:
        return ToolCallRecord(f"{tool}{n}", tool, {"n": n}, at, 0.0, "ok", n)

    pairs = pair_calls(
        [call("search", 1), call("fetch", 1), call("search", 2)], [call("search", 1), call("search", 3)]
    )
    assert [(p.tool, p.a and p.a.arguments, p.b and p.b.arguments) for p in pairs] == [
        ("search", {"n": 1}, {"n": 1}),
        ("search", {"n": 2}, {"n": 3}),
        ("fetch", {"n": 1}, None),
    ]


@pytest.fixture(scope="module")
def small_store(tmp_path_factory):
    return build_store(tmp_path_factory.mktemp("store") / "runs.db", 600, seed=3)


QUERIES = [
    RunQuery(),
    RunQuery(status="error"),
    RunQuery(agent="coder", model="gpt-4.1"),
    RunQuery(text="PARIS"),
    RunQuery(text="run000012"),
    RunQuery(text="100%"),
    RunQuery(sort="duration_s", descending=False, page=2, page_size=10),
    RunQuery(sort="agent", page=5, page_size=7),
    RunQuery(status="interrupted", text="moon", sort="task"),
]


@pytest.mark.parametrize("query", QUERIES, ids=range(len(QUERIES)))
def test_store_pages_in_sql_match_the_same_query_in_pandas(small_store, query):
    records = small_store.records()
    in_sql = small_store.page(query)
    in_pandas = RecordRuns(records).page(query)
    assert in_sql.total == in_pandas.total
    assert in_sql.rows["run_id"].tolist() == in_pandas.rows["run_id"].tolist()
    for column in ("n_steps", "input_tokens", "output_tokens"):
        assert in_sql.rows[column].tolist() == in_pandas.rows[column].tolist()
    expected = [
        r
        for r in records
        if (query.status is None or r.status == query.status) and (query.agent in (None, r.agent))
    ]
    if not query.text and query.model is None:
        assert in_sql.total == len(expected)


def test_store_pages_filter_by_dates_and_count_pages(small_store):
    records = small_store.records()
    since = records[100].started_at
    until = records[200].started_at
    page = small_store.page(RunQuery(since=since, until=until, page_size=30))
    assert page.total == 100 and page.pages == 4
    assert page.rows["run_id"].tolist()[0] == records[199].run_id  # newest first
    assert small_store.page(RunQuery(since=until + timedelta(days=999))).total == 0


def test_bad_queries_are_refused_clearly():
    with pytest.raises(ValueError, match="sort must be one of"):
        RunQuery(sort="1; DROP TABLE runs")
    with pytest.raises(ValueError, match="page"):
        RunQuery(page=-1)


def _two_step_runs() -> tuple[nbagent.RunRecord, nbagent.RunRecord]:
    """The same two-step task finished (A) and stopped while the model streams step 2 (B): B's
    step 1 usage is known, its step 2 usage never arrived."""
    from support import wait_until

    def agent(tokens_per_s: float) -> nbagent.Agent:
        turns = [[ToolCall("add", {"a": 2, "b": 3})], "five " * 300]
        return nbagent.Agent(ScriptedModel(turns, tokens_per_s=tokens_per_s, first_token_s=0.0), tools=[add])

    done = nbagent.run(agent(1e6), "add 2 and 3", display=False)
    run = nbagent.start(agent(300), "add 2 and 3", display=False)
    wait_until(lambda: run.live_text(2) != "")
    run.interrupt()
    return done, run.wait(timeout=20)


def test_compare_shows_no_definite_token_delta_when_a_runs_usage_is_incomplete():
    done, stopped = _two_step_runs()
    assert stopped.status == "interrupted" and not stopped.usage_complete
    assert stopped.input_tokens is not None and stopped.input_tokens < done.input_tokens  # a partial sum

    comparison = compare(done, stopped)
    for measure in ("input_tokens", "output_tokens", "total_tokens", "cost_usd"):
        assert comparison.delta(measure) is None, measure
    assert comparison.delta("duration_s") is not None and comparison.delta("n_steps") == 0
    assert comparison.usage_note == "B's token counts are partial: usage unknown for step 2 (cut by a Stop)"
    assert comparison.steps[1].delta("output_tokens") is None
    assert comparison.steps[0].delta("input_tokens") == 0  # step 1 is known on both sides

    frame = compare_frame([done, stopped])
    run_row = frame[(frame["level"] == "run") & (frame["run_id"] == stopped.run_id)].iloc[0]
    assert run_row["input_tokens_delta"] is pd_na() and run_row["total_tokens_delta"] is pd_na()
    assert not run_row["usage_complete"] and "step 2 (cut by a Stop)" in run_row["usage_note"]
    baseline = frame[(frame["level"] == "run") & (frame["run_id"] == done.run_id)].iloc[0]
    assert baseline["input_tokens_delta"] == 0 and baseline["usage_complete"]
    assert baseline["usage_note"] is pd_na()
    step_2 = frame[(frame["level"] == "step") & (frame["run_id"] == stopped.run_id) & (frame["step"] == 2)]
    assert step_2.iloc[0]["output_tokens_delta"] is pd_na()
    assert step_2.iloc[0]["usage_note"] == "usage of B unknown (cut by a Stop)"

    html = comparison._repr_html_()
    assert f"≥ {stopped.input_tokens}" in html and f"-{done.input_tokens - stopped.input_tokens}" not in html
    assert "their token and cost deltas are unknown" in html


def test_history_a_store_and_a_list_of_records_answer_through_one_run_source(tmp_path) -> None:
    """``nbagent.analytics.runs.RunSource``: the same page, menus, record, records and runs frame
    from this process's history, from a RunStore (SQL) and from RecordRuns (pandas)."""
    history.clear()
    store = RunStore(tmp_path / "runs.db")
    ran = [nbagent.run(nbagent.Agent(ScriptedModel([f"answer {i}"])), f"task {i}", display=False, store=store)
           for i in range(3)]  # fmt: skip
    store.flush(timeout=30)
    query = RunQuery(text="TASK", sort="task", descending=False)
    for source in (history, store, RecordRuns(ran)):
        assert list(source.page(query).rows["task"]) == ["task 0", "task 1", "task 2"], source
        assert source.choices()["status"] == ["success"]
        assert source.record(ran[1].run_id).output == "answer 1"
        assert sorted(r.run_id for r in source.records()) == sorted(r.run_id for r in ran)
        assert len(source.runs()) == 3
        with pytest.raises(KeyError):
            source.record("no such run")
    store.close()
