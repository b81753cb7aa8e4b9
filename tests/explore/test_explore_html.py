"""A shared run file opened in headless Chromium with JavaScript off: it must render by itself.

The page written by ``to_html`` is opened from disk (``file://``), with scripts disabled and the
network unreachable, and must show the same sections as the live view's final state: the head
with the status badge, the summary, one panel per step with its time bar drawn by CSS alone.
Screenshots go to the test's temporary folder and, when ``NBAGENT_SCREENSHOT_DIR`` is set, there.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import end_states
import pytest
from support import CHROMIUM, CHROMIUM_ARGS, browser_marks

from nbagent.explore import compare, to_html

pytestmark = browser_marks(120)


def _save(element, name: str, tmp_path: Path) -> None:
    path = tmp_path / name
    element.screenshot(path=str(path))
    target = os.environ.get("NBAGENT_SCREENSHOT_DIR")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(target) / name)


@pytest.fixture
def page():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(
                java_script_enabled=False, offline=True, viewport={"width": 1000, "height": 800}
            )
            yield context.new_page()
        finally:
            browser.close()


def test_to_html_file_renders_the_run_view_without_script_or_network(page, tmp_path):
    from playwright.sync_api import expect

    record = end_states.interrupted_mid_tool()
    path = to_html(record, tmp_path / "run.html")
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(path.as_uri())

    run = page.locator(".nbagent-run")
    expect(run).to_have_count(1)
    expect(run.locator(".nbagent-head")).to_contain_text("■ interrupted")
    expect(run.locator(".nbagent-head")).to_contain_text(record.agent)
    expect(run.locator(".nbagent-summary")).to_contain_text("Task")
    expect(run.locator(".nbagent-step")).to_have_count(len(record.steps))
    expect(run.locator(".nbagent-step").last).to_contain_text("stopped here")
    expect(run.locator(".nbagent-tool").last).to_contain_text("cancelled")
    # The step bars are CSS arithmetic on custom properties: drawn, with a width, without script.
    bar = run.locator(".nbagent-bar > span").first.bounding_box()
    assert bar is not None and bar["width"] > 0
    badge = run.locator(".nbagent-badge")
    assert badge.evaluate("e => getComputedStyle(e).borderRadius") == "10px"  # the page's own CSS applied
    assert requests == [path.as_uri()]  # nothing else fetched
    _save(run, "explore-shared-run.png", tmp_path)


def test_comparison_renders_side_by_side(page, tmp_path):
    from playwright.sync_api import expect

    a = end_states.success()
    b = end_states.error()
    html = compare(a, b)._repr_html_()
    path = tmp_path / "compare.html"
    path.write_text(
        f'<!DOCTYPE html><meta charset="utf-8"><body style="margin:16px">{html}</body>', encoding="utf-8"
    )
    page.set_viewport_size({"width": 1300, "height": 900})
    page.goto(path.as_uri())
    table = page.locator(".nbagent-compare")
    expect(table).to_be_visible()
    expect(page.locator(".nbagent-totals")).to_contain_text("B − A")
    expect(page.locator(".nbagent-diff").first).to_be_visible()
    left = table.locator(".nbagent-step").first.bounding_box()
    right = table.locator(".nbagent-step").nth(1).bounding_box()
    assert left and right and right["x"] > left["x"] + left["width"] / 2  # side by side, not stacked
    _save(page.locator(".nbagent-comparison"), "explore-compare.png", tmp_path)
