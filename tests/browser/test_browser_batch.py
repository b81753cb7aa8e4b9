"""A batch's live table end to end in a real browser: JupyterLab, headless Debian Chromium.

A notebook runs the batch of docs/batches.md (plain-string tasks); the page shows the table with
its running and ended rows keyed by position, **Open** on a running task's number shows its run
under the table, and **Stop all** stops the batch: the live runs interrupted, the rest skipped. The
table mid-way (docs/screenshots/batch-table.png) goes to the test's temporary directory and, when
``NBAGENT_SCREENSHOT_DIR`` is set, there too.
"""

from __future__ import annotations

from pathlib import Path

from support import browser_marks
from test_browser_e2e import Lab, _save, open_notebook, write_notebook
from test_browser_e2e import lab as lab  # the JupyterLab server fixture

pytestmark = browser_marks()

NOTEBOOK = "batch_e2e.ipynb"

BATCH = """import nbagent

tasks = [f"What is {i} * 7, and is it prime?" for i in range(1, 41)]
make_agent = lambda: nbagent.demo_agent(tokens_per_s=20, first_token_s=0.05)
batch = nbagent.batch(make_agent, tasks, concurrency=6)"""

CHECK = """frame = await batch
print("RESULT", frame.status.value_counts().to_dict())"""


def test_the_batch_table_in_jupyterlab_opens_a_running_task_and_stops_all(lab: Lab, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    write_notebook(lab.root / NOTEBOOK, [BATCH, CHECK])
    with open_notebook(lab, NOTEBOOK, 1000, 1300) as (page, cells):
        cells.nth(0).locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")

        output = cells.nth(0).locator(".jp-OutputArea-output")
        rows = output.locator(".nbb-row")
        expect(rows.filter(has_text="✓ success")).not_to_have_count(0, timeout=90_000)
        expect(rows.filter(has_text="running")).not_to_have_count(0)
        running = rows.filter(has_text="running").first
        key = running.locator(".nbb-key").inner_text()
        assert key.startswith("#"), key  # plain-string tasks: a position, not the text again
        output.get_by_placeholder("task # or key").fill(key)
        output.get_by_role("button", name="Open").click()
        opened = output.locator(".nbagent-run")
        expect(opened).to_contain_text(f"What is {int(key[1:]) + 1} * 7", timeout=30_000)
        expect(opened.locator(".nbagent-step").first).to_be_visible(timeout=30_000)
        cells.nth(1).click()  # the focus off the table
        _save(output, "batch-table.png", tmp_path)

        output.get_by_role("button", name="Stop all").click()
        expect(output).to_contain_text("stopped", timeout=30_000)
        expect(output).to_contain_text("skipped")
        cells.nth(1).locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        result = cells.nth(1).locator(".jp-OutputArea-output")
        expect(result).to_contain_text("'skipped'", timeout=60_000)
        expect(result).to_contain_text("'interrupted'")
