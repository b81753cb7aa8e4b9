"""The live batch table in a real Jupyter kernel: it shows progress and running rows as the batch
goes, its "Stop all" button (clicked as a browser clicks: a ``comm_msg``) stops every live run and
skips the rest, and "Open" shows one task's run under the table."""

from __future__ import annotations

import pytest
from kernel_support import KernelDriver, html_problems, html_text

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(180)]

SETUP = """
import nbagent
from nbagent.batches import batch
from nbagent.models import ScriptedModel

def make(row):
    # a reply that streams for about 20 s: the batch is mid-way when the test clicks
    return nbagent.Agent(ScriptedModel([f"<b>{row['id']}</b> " + "word " * 2000], tokens_per_s=100,
                                       first_token_s=0.0), name="talker")

tasks = [{"id": f"q{i}", "task": f"question <{i}>"} for i in range(12)]
b = batch(make, tasks, concurrency=3, name="kernel-test")
"""


def test_stop_all_click_stops_the_batch_and_the_table_shows_it(tmp_path) -> None:
    with KernelDriver.start(cwd=str(tmp_path)) as kernel:
        table = kernel.execute(SETUP).widget_view()
        widgets = kernel.widgets
        stop = widgets.find_under(table, "ButtonModel", description="Stop all")
        kernel.wait_for(
            lambda: (
                html_text(widgets.text_under(table)).count("running") >= 4
                and "word" not in html_text(widgets.text_under(table))
            ),
            what="the table to show three running rows",
        )
        open_button = widgets.find_under(table, "ButtonModel", description="Open")
        kernel.execute("b.table.open_text.value = 'q1'")  # typed into the box (as the browser syncs it)
        kernel.click(open_button)
        kernel.wait_for(lambda: "word word" in widgets.text_under(table), what="the opened run to show")
        kernel.click(stop)
        kernel.wait_for(
            lambda: "stopped" in html_text(widgets.text_under(table)), what="the table to say stopped"
        )
        out = kernel.execute(
            "frame = await b\nprint(frame.status.value_counts().to_dict(), b.status)"
        ).stdout.strip()
        assert out == "{'skipped': 9, 'interrupted': 3} stopped"
        text = html_text(widgets.text_under(table))
        assert "3 interrupted" in text and "9 skipped" in text and "12 / 12" in text
        assert widgets.states[stop]["disabled"] is True
        for value in widgets.values_ever(table):
            assert html_problems(value) == [], value  # task and model text are escaped
        assert "question &lt;" in widgets.text_under(table)  # the task's text, escaped
