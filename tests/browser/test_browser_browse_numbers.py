"""The run browser's numbers in JupyterLab in headless Chromium: right-aligned, also in a column
where a run's count is unknown ("?"), which DataTables would otherwise take for text.

Reuses the JupyterLab server of the end-to-end test (``lab``) and Debian's Chromium. A notebook
makes two runs in this kernel's history, one stopped mid-reply (its token counts unknown), and
shows ``browse()``; every number cell of the table must read right-aligned.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import CHROMIUM, CHROMIUM_ARGS
from test_browser_e2e import Lab
from test_browser_e2e import lab as lab  # the JupyterLab server fixture

pytestmark = [
    pytest.mark.needs("test-all"),
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"),
    pytest.mark.timeout(300),
]

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
    from playwright.sync_api import expect, sync_playwright

    cell = {
        "cell_type": "code",
        "metadata": {},
        "execution_count": None,
        "outputs": [],
        "source": RUNS,
        "id": "c0",
    }
    metadata = {
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    (lab.root / NOTEBOOK).write_text(
        json.dumps({"cells": [cell], "metadata": metadata, "nbformat": 4, "nbformat_minor": 5})
    )
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 900}, device_scale_factor=1)
            page.goto(f"{lab.url}/doc/tree/{NOTEBOOK}?token={lab.token}")
            expect(page.get_by_text("| Idle").first).to_be_visible(timeout=90_000)
            cells = page.locator(".jp-Notebook .jp-Cell")
            cells.nth(0).locator(".jp-InputArea-editor").click()
            page.keyboard.press("Shift+Enter")
            output = cells.nth(0).locator(".jp-OutputArea")
            expect(output).to_contain_text("TOKENS True None", timeout=90_000)
            table = output.locator(".itables_anywidget table.dataTable")
            expect(table.locator("tbody tr")).to_have_count(2, timeout=90_000)
            cells_seen = table.evaluate(ALIGNMENT)
            assert any(text == "?" for row in cells_seen for text, _ in row), cells_seen
            assert all(align == "right" for row in cells_seen for _, align in row), cells_seen
        finally:
            browser.close()
