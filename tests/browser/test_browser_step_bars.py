"""Step bars stay inside their track in a real browser, however short the run: a run of a few
milliseconds, one of sub-millisecond steps, and one whose last step closed after the run's own
clock, with a cut step whose "cut at" label sits right of the bar (headless Debian Chromium, the
static HTML a saved notebook keeps)."""

from __future__ import annotations

import dataclasses

from support import CHROMIUM, CHROMIUM_ARGS, add, browser_marks, fast_model

import nbagent
from nbagent.models import ToolCall
from nbagent.view.html import record_html

pytestmark = browser_marks(timeout_s=None)

MEASURE = """() => [...document.querySelectorAll('.nbagent-bar')].map(bar => {
  const track = bar.getBoundingClientRect();
  const fill = bar.firstElementChild.getBoundingClientRect();
  const foot = bar.parentElement.querySelector('.nbagent-foot').getBoundingClientRect();
  return {track_left: track.left, track_right: track.right, fill_left: fill.left,
          fill_right: fill.right, foot_left: foot.left};
})"""


def short_runs() -> list[nbagent.RunRecord]:
    agent = nbagent.Agent(fast_model([[ToolCall("add", {"a": 1, "b": 2})], "3"]), tools=[add])
    record = nbagent.run(agent, "add", display=False)
    assert record.status == "success" and record.duration_s < 0.5
    last = record.steps[-1]
    cut = dataclasses.replace(last, interrupted=True, end_s=last.end_s + 0.004)
    late = dataclasses.replace(record, steps=[*record.steps[:-1], cut], duration_s=last.start_s)
    # Sub-millisecond steps: at the HTML's millisecond precision the last step starts where the run
    # ends and spans all of it (a fast machine's real run looks like this).
    first = dataclasses.replace(record.steps[0], start_s=0.0, end_s=0.0005)
    tiny = dataclasses.replace(last, start_s=0.0006, end_s=0.0012)
    instant = dataclasses.replace(record, steps=[first, tiny], duration_s=0.0012)
    return [record, late, instant]


def test_step_bars_of_a_very_short_run_stay_inside_their_track() -> None:
    pages = [record_html(record) for record in short_runs()]
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            for html in pages:
                page.set_content(f"<html><body>{html}</body></html>")
                bars = page.evaluate(MEASURE)
                assert len(bars) == 2
                for bar in bars:
                    assert bar["track_left"] - 0.5 <= bar["fill_left"] <= bar["fill_right"]
                    assert bar["fill_right"] <= bar["track_right"] + 0.5, bar
                    assert bar["track_right"] <= bar["foot_left"], bar  # the label is not covered
        finally:
            browser.close()
