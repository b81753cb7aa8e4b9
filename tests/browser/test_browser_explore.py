"""The run browser in JupyterLab in headless Chromium: the explore notebook, rows picked by clicks.

Reuses the JupyterLab server of the end-to-end test (``lab``: 127.0.0.1, a token, a temporary
root) and Debian's Chromium. The notebook fills a store with demo runs and shows ``browse``; the
test then clicks rows of the itables table as a user does, and checks that one picked row opens
the run below the table and a second one turns that into a comparison; choosing a status in the
filter menu must page the table down to those runs. Then, at 1280 px with the file browser open,
the notebook's own ``browser.filter(...)`` and ``browser.pick(...)`` must show in the controls
(the menus name the filter and the sort, the picked rows are highlighted), every column of the
page must be in view, and a comparison shown as a cell's output (where JupyterLab's CSS aligns
table cells right) must read left-aligned. Screenshots of the browser and of the comparison go to
the test's temporary folder and, when ``NBAGENT_SCREENSHOT_DIR`` is set, there.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from support import ROOT, browser_marks
from test_browser_e2e import Lab, _save, lab, open_notebook  # noqa: F401 (lab is a fixture)

EXPLORE = ROOT / "notebooks" / "explore.ipynb"
BROWSE_CELL = 5
"""The notebook's ``browse(store)`` cell (cells before it: imports, runs, and their notes)."""
FILTER_CELL = 7
"""``browser.filter(status="success", sort="duration_s")`` and ``browser.pick(...)`` of two rows."""
COMPARE_CELL = 11
"""``compare(records[0], records[1])`` as the cell's result."""

ALIGNMENT = """(root) => [...root.querySelectorAll(
    '.nbagent-compare .nbagent-text, .nbagent-compare .nbagent-tool, .nbagent-diff, .nbagent-summary')
].map(e => getComputedStyle(e).textAlign)"""
"""The text alignment of the comparison's step text, tool calls, difference notes and task."""

pytestmark = browser_marks()


def test_browse_in_jupyterlab_opens_a_clicked_run_and_compares_two(lab: Lab, tmp_path: Path) -> None:  # noqa: F811
    from playwright.sync_api import expect

    shutil.copy(EXPLORE, lab.root / EXPLORE.name)
    with open_notebook(lab, EXPLORE.name, 1300, 1100) as (page, cells):
        cells.nth(1).locator(".jp-InputArea-editor").click()
        for _ in range(BROWSE_CELL):  # imports, a note, the runs, a note, browse(store)
            page.keyboard.press("Shift+Enter")

        output = cells.nth(BROWSE_CELL).locator(".jp-OutputArea-output")
        rows = output.locator(".itables_anywidget table tbody tr")
        expect(rows).to_have_count(5, timeout=90_000)  # itables' table rendered, one row per run
        expect(output).to_contain_text("runs 1–5 of 5")

        rows.nth(0).click()
        expect(output.locator(".nbagent-run .nbagent-head")).to_be_visible(timeout=30_000)
        expect(output.locator(".nbagent-run .nbagent-summary")).to_contain_text("Task")
        rows.nth(1).click()  # multi-select: a second click adds the row
        expect(output.locator(".nbagent-comparison")).to_be_visible(timeout=30_000)
        expect(output.locator(".nbagent-totals")).to_contain_text("B − A")
        _save(output.locator(".nbagent-comparison"), "explore-browser-compare.png", tmp_path)

        output.locator(".widget-dropdown select").first.select_option("interrupted")
        expect(rows).to_have_count(1, timeout=30_000)
        expect(output).to_contain_text("runs 1–1 of 1")
        expect(rows.first).to_contain_text("interrupted")
        expect(page.locator('[data-mime-type="application/vnd.jupyter.stderr"]')).to_have_count(0)


def test_browse_shows_a_filter_and_picks_made_from_code_and_fits_the_output(lab: Lab, tmp_path: Path) -> None:  # noqa: F811
    from playwright.sync_api import expect

    shutil.copy(EXPLORE, lab.root / EXPLORE.name)
    with open_notebook(lab, EXPLORE.name, 1280, 1400, prefix="lab/tree") as (page, cells):
        expect(page.locator(".jp-FileBrowser").first).to_be_visible()
        cells.nth(1).locator(".jp-InputArea-editor").click()
        for _ in range(COMPARE_CELL):  # up to the comparison, through browse() and filter()/pick()
            page.keyboard.press("Shift+Enter")
        expect(cells.nth(COMPARE_CELL).locator(".nbagent-comparison")).to_be_visible(timeout=90_000)

        output = cells.nth(BROWSE_CELL).locator(".jp-OutputArea-output")
        rows = output.locator(".itables_anywidget table tbody tr")
        expect(rows).to_have_count(4, timeout=30_000)  # the success runs
        menus = output.locator(".widget-dropdown select")
        expect(menus.nth(0)).to_have_value("success")  # status, not "(any)"
        expect(menus.nth(3)).to_have_value("duration_s")  # sort, not "started_at"
        expect(output.locator(".itables_anywidget table tbody tr.selected")).to_have_count(2)
        expect(output.locator(".nbagent-comparison")).to_be_visible()

        # Every column of the page is in view: the table is no wider than the output.
        widths = output.evaluate(
            "(o) => [o.querySelector('.itables_anywidget table').getBoundingClientRect().right,"
            " o.getBoundingClientRect().right]"
        )
        assert widths[0] <= widths[1] + 1, widths
        expect(output.locator(".itables_anywidget thead")).to_contain_text("cost_usd")

        compared = cells.nth(COMPARE_CELL).locator(".jp-OutputArea-output")
        aligned = compared.evaluate(ALIGNMENT)
        assert aligned and set(aligned) <= {"left", "start"}, aligned
        assert set(output.evaluate(ALIGNMENT)) <= {"left", "start"}
        view = output.locator(".nbagent-browser")
        view.evaluate("(e) => e.scrollIntoView({block: 'center'})")  # clear of the toolbar
        _save(view, "explore-browser.png", tmp_path)
        compared.evaluate("(e) => e.scrollIntoView({block: 'center'})")
        compared.screenshot(path=str(tmp_path / "explore-compare-lab.png"))
        expect(page.locator('[data-mime-type="application/vnd.jupyter.stderr"]')).to_have_count(0)
