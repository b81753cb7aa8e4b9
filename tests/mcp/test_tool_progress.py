"""A tool call's progress and log lines, from any source: ``RunContext.tool_progress`` and
``tool_log`` for a call id, folded into ``ToolCallRecord.progress`` / ``logs`` (bounded, scrubbed),
shown on the call's row by the HTML and text views, and kept by the store (schema 5; an older
store is migrated in place). A native async tool finds its call with ``current_call()``; an MCP
server's notifications take the same path (``tests/mcp/test_mcp.py``)."""

from __future__ import annotations

import asyncio
import io
import math
import sqlite3
import time
from datetime import datetime, timezone

from kernel_support import html_problems, html_text
from support import fast_model, wait_until

import nbagent
from nbagent import events as ev
from nbagent.analytics.store import RunStore
from nbagent.analytics.store.schema import SCHEMA_VERSION
from nbagent.context import current_call
from nbagent.models import ToolCall
from nbagent.recorder import Recorder
from nbagent.records import LOG_LINES_KEPT, ToolProgress
from nbagent.view.html import step_html
from nbagent.view.terminal import TextView, record_text

SECRET = "sk-proj-progressSecret0123456789abcdef"
LINES = LOG_LINES_KEPT + 7


@nbagent.tool
async def crunch(rows: int) -> str:
    """Crunch ``rows`` rows, telling progress and a log line for each.

    Args:
        rows: how many rows
    """
    where = current_call()
    assert where is not None, "a tool runs inside its call"
    ctx, call_id = where
    for row in range(rows):
        ctx.tool_progress(call_id, row + 1, rows, f"row {row + 1} key {SECRET}")
        ctx.tool_log(call_id, f"row {row + 1} used {SECRET}", "debug")
    return "crunched"


@nbagent.tool
async def crunch_forever() -> str:
    """Report one row of unknown total, then wait until stopped."""
    ctx, call_id = current_call()  # type: ignore[misc]
    ctx.tool_progress(call_id, 7, None, "rows so far")
    ctx.tool_log(call_id, "waiting", "warning")
    await asyncio.sleep(3600)
    return "never"


def crunched(**options) -> nbagent.RunRecord:
    agent = nbagent.Agent(fast_model([[ToolCall("crunch", {"rows": LINES})], "done"]), tools=[crunch])
    return nbagent.run(agent, "crunch", display=False, **options)


def test_the_last_progress_and_the_last_log_lines_are_kept_scrubbed_and_bounded() -> None:
    record = crunched()
    [call] = record.tool_calls
    assert call.status == "ok"
    assert call.progress == ToolProgress(float(LINES), float(LINES), f"row {LINES} key ***")
    assert len(call.logs) == LOG_LINES_KEPT and call.logs_dropped == LINES - LOG_LINES_KEPT
    assert call.logs[-1] == f"debug: row {LINES} used ***" and call.logs[0] == "debug: row 8 used ***"
    assert SECRET not in repr(record) and SECRET not in str(record)


def test_a_stopped_call_keeps_where_it_got_to_and_the_views_show_it() -> None:
    out = io.StringIO()
    agent = nbagent.Agent(fast_model([[ToolCall("crunch_forever", {})], "x"]), tools=[crunch_forever])
    run = nbagent.start(agent, "go", display=False, sinks=[TextView(out)])
    wait_until(lambda: run.record.tool_calls and run.record.tool_calls[0].progress, timeout=30)
    live = run.record.steps[0]
    running = step_html(live)
    assert not html_problems(running)
    assert "… running 7 · rows so far" in html_text(running) and "nbagent-progress" not in running
    assert "│ warning: waiting" in html_text(running)
    run.interrupt()
    record = run.wait(timeout=30)
    [call] = record.tool_calls
    assert call.status == "cancelled" and call.progress == ToolProgress(7.0, None, "rows so far")
    assert "at 7 · rows so far" in html_text(step_html(record.steps[0]))
    assert "      at 7 · rows so far" in record_text(record)
    printed = out.getvalue()
    assert "… 7 · rows so far" in printed and "│ warning: waiting" in printed


def test_the_html_row_has_a_bar_when_the_total_is_known_and_a_count_of_hidden_log_lines() -> None:
    run = nbagent.start(
        nbagent.Agent(fast_model([[ToolCall("crunch", {"rows": LINES})], "done"]), tools=[crunch]),
        "crunch",
        display=False,
    )
    record = run.wait(timeout=30)
    step = record.steps[0]
    call = step.tool_calls[0]
    call.status, call.end_s = None, None  # drawn as if still running, at its last progress
    html = step_html(step)
    assert not html_problems(html)
    assert 'style="width:100.0%"' in html
    shown = html_text(html)
    assert f"{LINES}/{LINES} · row {LINES} key ***" in shown
    assert f"… {LINES - 5} earlier log lines" in shown and shown.count("│ debug:") == 5


def test_late_and_broken_reports_change_nothing() -> None:
    recorder = Recorder()
    t0 = time.perf_counter()
    recorder.apply(ev.RunStarted("r", 0, t0, "task", "agent", "model", datetime.now(timezone.utc)))
    recorder.apply(ev.StepStarted("r", 1, t0, "action"))
    recorder.apply(ev.ToolCallStarted("r", 1, t0, "c1", "tool", {}))
    recorder.apply(ev.ToolCallProgress("r", 1, t0, "c1", 2, 0, "zero total"))
    assert recorder.snapshot().tool_calls[0].progress == ToolProgress(2.0, None, "zero total")
    for broken in (math.nan, math.inf, "3", True, None):
        recorder.apply(ev.ToolCallProgress("r", 1, t0, "c1", broken, 10))  # type: ignore[arg-type]
    recorder.apply(ev.ToolCallProgress("r", 1, t0, "c1", 3, math.nan, None))
    assert recorder.snapshot().tool_calls[0].progress == ToolProgress(3.0, None, None)
    recorder.apply(ev.ToolCallFinished("r", 1, t0, "c1", "ok", "fine"))
    recorder.apply(ev.ToolCallProgress("r", 1, t0, "c1", 9, 10, "late"))
    recorder.apply(ev.ToolCallLog("r", 1, t0, "c1", "late"))
    recorder.apply(ev.ToolCallProgress("r", 1, t0, "nobody", 1, 1))
    [call] = recorder.snapshot().tool_calls
    assert call.progress == ToolProgress(3.0, None, None) and call.logs == []


FORK_COLUMNS = [
    ("runs", "forked_from_run_id"), ("runs", "forked_at_step"), ("runs", "fork_data"),
    ("steps", "fork_point"), ("steps", "nodes"),
]  # fmt: skip
"""What versions 5 and 6 added (``MIGRATIONS[5]``, ``MIGRATIONS[6]``)."""


def test_the_store_keeps_progress_and_logs_and_migrates_a_version_4_store(tmp_path) -> None:
    path = tmp_path / "runs.db"
    store = RunStore(path)
    first = crunched(store=store)
    stored = store.record(first.run_id).tool_calls[0]
    assert (stored.progress, stored.logs, stored.logs_dropped) == (
        first.tool_calls[0].progress,
        first.tool_calls[0].logs,
        first.tool_calls[0].logs_dropped,
    )
    store.close()
    with sqlite3.connect(path) as conn:  # the file as version 4 wrote it (before progress and forks)
        conn.execute("ALTER TABLE tool_calls DROP COLUMN progress")
        conn.execute("ALTER TABLE tool_calls DROP COLUMN logs")
        for table, column in FORK_COLUMNS:
            conn.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        conn.execute("PRAGMA user_version = 4")
    old = RunStore(path, readonly=True).record(first.run_id).tool_calls[0]
    assert (old.progress, old.logs, old.logs_dropped) == (None, [], 0)
    migrated = RunStore(path)
    assert migrated.schema_version == SCHEMA_VERSION == 7
    second = crunched(store=migrated)
    assert migrated.record(second.run_id).tool_calls[0].progress == second.tool_calls[0].progress
    assert SECRET not in path.read_bytes().decode("utf-8", "replace")
