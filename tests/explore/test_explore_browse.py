"""The run browser over 50,000 stored runs: filter, sort and page in SQL; pick runs in a real kernel.

Selections and filter changes reach the kernel exactly as a browser sends them: a ``comm_msg``
``update`` of the widget's synced state (the ITable's ``selected_rows``, a Dropdown's ``index``).
Counts are checked against SQL of the test's own, so a browser that showed the wrong page fails.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from typing import Any

import pytest
from explore_store import build_store
from kernel_support import KernelDriver, html_text

from nbagent.explore import browse

RUNS = 50_000


@pytest.fixture(scope="module")
def big_store(tmp_path_factory):
    return build_store(tmp_path_factory.mktemp("big") / "runs.db", RUNS)


def _count(store, where: str = "", params: tuple[Any, ...] = ()) -> int:
    with closing(sqlite3.connect(store.path)) as conn:
        return conn.execute(f"SELECT count(*) FROM runs {where}", params).fetchone()[0]


@pytest.mark.parametrize("table", [pytest.param("itables", marks=pytest.mark.needs("explore")), "select"])
def test_browse_filters_sorts_and_pages_fifty_thousand_stored_runs(big_store, table):
    browser = browse(big_store, table=table, page_size=20)
    assert browser.table_kind == table
    assert browser.page.total == RUNS and len(browser.page.rows) == 20
    assert browser.info.value == f"runs 1–20 of {RUNS:,} · page 1 of {RUNS // 20:,}"
    assert browser.previous.disabled and not browser.next.disabled

    page = browser.filter(status="error", agent="coder")
    assert page.total == _count(big_store, "WHERE status = 'error' AND agent = 'coder'")
    assert set(page.rows["status"]) == {"error"} and set(page.rows["agent"]) == {"coder"}
    browser.go(10**9)  # past the end: the last page
    assert browser.query.page == page.pages - 1 and browser.next.disabled

    page = browser.filter(status=None, agent=None, text="paris", sort="duration_s", descending=True)
    assert page.total == _count(big_store, "WHERE task LIKE '%paris%'")
    durations = page.rows["duration_s"].tolist()
    assert durations == sorted(durations, reverse=True)
    longest = _longest_with(big_store, "paris")
    assert page.rows["run_id"].iloc[0] == longest


def _longest_with(store, word: str) -> str:
    with closing(sqlite3.connect(store.path)) as conn:
        return conn.execute(
            "SELECT run_id FROM runs WHERE task LIKE ? ORDER BY duration_s DESC LIMIT 1", (f"%{word}%",)
        ).fetchone()[0]


def test_picking_one_run_opens_it_and_two_compare_them(big_store):
    browser = browse(big_store, table="select")
    first, second = browser.page.rows["run_id"].tolist()[:2]
    browser.table.index = (0,)  # what a click on the first line sets
    assert browser.selected == [first]
    assert f"run {first}" not in browser.shown_html  # the run view, not a comparison
    assert "nbagent-run" in browser.shown_html and "Task" in browser.shown_html
    browser.table.index = (0, 1)
    assert browser.selected == [first, second]
    assert "B − A" in browser.shown_html and f"run {second}" in browser.shown_html


@pytest.mark.needs("explore")
def test_run_text_in_the_table_is_escaped(tmp_path):
    import end_states

    from nbagent.analytics.store import RunStore

    hostile = '<img src=x onerror="alert(1)">'
    store = RunStore(tmp_path / "runs.db")
    end_states.success(store=store)
    record = end_states.success(store=store, agent_name=hostile)
    browser = browse(store, table="itables")
    data = browser.table._dt_args["data_json"]
    assert "<img" not in data and "&lt;img" in data
    browser.pick([record.run_id])
    assert "<img" not in browser.shown_html and "&lt;img" in browser.shown_html


def test_running_and_unfinished_filters_list_and_count_live_and_dead_runs_apart(tmp_path):
    import dataclasses
    import threading

    import end_states
    from support import wait_until

    import nbagent
    from nbagent.analytics.runs import RunQuery
    from nbagent.analytics.store import RunStore
    from nbagent.analytics.store.schema import put_whole_run
    from nbagent.models import ToolCall

    gate = threading.Event()

    @nbagent.tool
    def hold() -> str:
        """Wait for the test."""
        gate.wait(60)
        return "released"

    store = RunStore(tmp_path / "runs.db")
    end_states.success(store=store)
    agent = nbagent.Agent(end_states.fast([[ToolCall("hold", {})], "done"]), tools=[hold])
    live = nbagent.start(agent, "alive", store=store, display=False)
    try:
        wait_until(lambda: live.record.tool_calls)
        store.flush()
        dead = [dataclasses.replace(live.record, run_id=f"dead{i}", task=f"died {i}") for i in range(3)]
        for record in dead:  # stored as running, by no writer: their writer is gone
            store._write(lambda conn, record=record: put_whole_run(conn, record, writer=None))
        source = store
        unfinished = [source.page(RunQuery(status="unfinished", page_size=2, page=p)) for p in (0, 1)]
        assert [page.total for page in unfinished] == [3, 3]
        assert [len(page.rows) for page in unfinished] == [2, 1] and unfinished[0].pages == 2
        listed = [r for page in unfinished for r in page.rows["run_id"].tolist()]
        assert sorted(listed) == ["dead0", "dead1", "dead2"]
        assert {s for page in unfinished for s in page.rows["status"]} == {"unfinished"}
        running = source.page(RunQuery(status="running", page_size=2))
        assert running.total == 1 and running.rows["run_id"].tolist() == [live.run_id]
        assert running.rows["status"].tolist() == ["running"]
        assert source.page(RunQuery(status="success")).total == 1
    finally:
        gate.set()
        live.wait(timeout=30)


def _update(kernel: KernelDriver, model_id: str, state: dict[str, Any]) -> None:
    """Change a widget's state as the browser does (a ``comm_msg`` ``update``)."""
    content = {"comm_id": model_id, "data": {"method": "update", "state": state, "buffer_paths": []}}
    kernel.kc.shell_channel.send(kernel.kc.session.msg("comm_msg", content))


@pytest.mark.needs("explore")
@pytest.mark.kernel
@pytest.mark.timeout(180)
def test_browse_in_a_real_kernel_filters_and_opens_the_picked_runs(big_store):
    with KernelDriver.start() as kernel:
        shown = kernel.execute(
            "from nbagent.explore import browse\nfrom nbagent.analytics.store import RunStore\n"
            f"browser = browse(RunStore({str(big_store.path)!r}, readonly=True))\n"
            "browser"
        )
        view = shown.widget_view()
        controls_a, _, controls_c, table, detail = kernel.widgets.children(view)
        assert kernel.widgets.states[table]["_model_name"] == "AnyModel"  # itables' ITable
        info = kernel.widgets.find_under(controls_c, "HTMLModel")
        assert f"of {RUNS:,}" in kernel.widgets.states[info]["value"]

        status = kernel.widgets.find_under(controls_a, "DropdownModel", description="status")
        labels = kernel.widgets.states[status]["_options_labels"]
        _update(kernel, status, {"index": labels.index("interrupted")})
        expected = _count(big_store, "WHERE status = 'interrupted'")
        kernel.wait_for(
            lambda: f"of {expected:,}" in kernel.widgets.states[info]["value"], 30, "the filtered count"
        )

        _update(kernel, table, {"selected_rows": [0]})
        kernel.wait_for(
            lambda: "■ interrupted" in html_text(kernel.widgets.states[detail]["value"]), 30, "the run"
        )
        first_row = "browser.selected == browser.page.rows['run_id'][:1].tolist()"
        assert kernel.execute(f"print({first_row})").stdout.strip() == "True"

        _update(kernel, table, {"selected_rows": [0, 1]})
        kernel.wait_for(
            lambda: "B − A" in html_text(kernel.widgets.states[detail]["value"]), 30, "the comparison"
        )
        assert kernel.execute("print(len(browser.selected))").stdout.strip() == "2"

        # show() of a stored run in a kernel: the static run view, as HTML, nothing to click.
        shown = kernel.execute(
            "from nbagent.explore import show\nshow(browser.selected[0], store=browser.source)"
        )
        [data] = [r.content["data"] for r in shown.outputs if r.type == "display_data"]
        assert "nbagent-run" in data["text/html"] and "■ interrupted" in data["text/html"]
        assert "<button" not in data["text/html"] and "Run run" in data["text/plain"]
