"""The run browser's numbers in JupyterLab in headless Chromium: right-aligned, also in a column
where a run's count is unknown ("?"), which DataTables would otherwise take for text.

Reuses the JupyterLab server of the end-to-end test (``lab``) and Debian's Chromium. A notebook
makes two runs in this kernel's history, one stopped mid-reply (its token counts unknown), and
shows ``browse()``; every number cell of the table must read right-aligned.
"""

from __future__ import annotations

from pathlib import Path

from support import browser_marks
from test_browser_e2e import Lab, open_notebook, write_notebook
from test_browser_e2e import lab as lab  # the JupyterLab server fixture

pytestmark = browser_marks()

NOTEBOOK = "browse_numbers.ipynb"

RUNS = """import time

import nbagent
from nbagent.models import ScriptedModel

done = nbagent.run(nbagent.demo_agent(tokens_per_s=1e6, first_token_s=0.0), "What is 2 * 7?", display=False)
talker = nbagent.Agent(ScriptedModel(["word " * 2000], tokens_per_s=200, first_token_s=0.0))
run = nbagent.start(talker, "Talk.", display=False)
while not run.live_text(1):
    time.sleep(0.01)
run.interrupt()
cut = run.wait()
print("TOKENS", done.input_tokens is not None, cut.input_tokens)
nbagent.browse(table="itables")"""

ALIGNMENT = """(table) => {
    const names = [...table.querySelectorAll('thead th')].map(th => th.textContent.trim());
    const numbers = ['steps', 'duration_s', 'tokens in', 'tokens out', 'cost_usd'].map(n => names.indexOf(n));
    return [...table.querySelectorAll('tbody tr')].map(tr => numbers.map(
        i => [tr.children[i].textContent.trim(), getComputedStyle(tr.children[i]).textAlign]));
}"""
"""Per row, each number cell's text and alignment, found by its column's name."""


def test_browse_right_aligns_numbers_even_where_a_count_is_unknown(lab: Lab, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    write_notebook(lab.root / NOTEBOOK, [RUNS])
    with open_notebook(lab, NOTEBOOK, 1300, 900) as (page, cells):
        cells.nth(0).locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        output = cells.nth(0).locator(".jp-OutputArea")
        expect(output).to_contain_text("TOKENS True None", timeout=90_000)
        table = output.locator(".itables_anywidget table.dataTable")
        expect(table.locator("tbody tr")).to_have_count(2, timeout=90_000)
        cells_seen = table.evaluate(ALIGNMENT)
        assert any(text == "?" for row in cells_seen for text, _ in row), cells_seen
        assert all(align == "right" for row in cells_seen for _, align in row), cells_seen
