"""The live batch table in a real Jupyter kernel: it shows progress and running rows as the batch
goes, its "Stop all" button (clicked as a browser clicks: a ``comm_msg``) stops every live run and
skips the rest, and "Open" shows one task's run under the table. Jupyter's ■ Interrupt during
``await batch`` stops the batch at once, as it stops ``await run``."""

from __future__ import annotations

import time

import pytest
from kernel_support import KernelDriver, html_problems, html_text

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(180)]

AGENTS = """
import nbagent
from nbagent.batches import batch
from nbagent.models import ScriptedModel

def make(row):
    # a reply that streams for about 20 s: the batch is mid-way when the test clicks
    return nbagent.Agent(ScriptedModel([f"<b>{row['id']}</b> " + "word " * 2000], tokens_per_s=100,
                                       first_token_s=0.0), name="talker")

tasks = [{"id": f"q{i}", "task": f"question <{i}>"} for i in range(12)]
"""
SETUP = (
    AGENTS
    + """b = batch(make, tasks, concurrency=3, name="kernel-test")
"""
)


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
        assert "3 interrupted" in text and "9 skipped" in text and "3 / 12 done" in text
        assert widgets.states[stop]["disabled"] is True
        for value in widgets.values_ever(table):
            assert html_problems(value) == [], value  # task and model text are escaped
        assert "question &lt;" in widgets.text_under(table)  # the task's text, escaped


def test_jupyter_interrupt_during_await_batch_stops_the_batch_at_once(tmp_path) -> None:
    with KernelDriver.start(cwd=str(tmp_path)) as kernel:
        kernel.execute(AGENTS)
        # 12 tasks of about 20 s at concurrency 3: the batch alone would take over a minute
        msg_id = kernel.submit("b = batch(make, tasks, concurrency=3)\nframe = await b")
        queued = kernel.submit("print('the queued cell ran')")
        table = kernel.wait_for(lambda: _widget_of(kernel, msg_id), what="the batch table")
        kernel.wait_for(
            lambda: "3 running" in html_text(kernel.widgets.text_under(table)), what="three running rows"
        )
        sent = time.monotonic()
        kernel.interrupt()
        execution = kernel.result(msg_id, timeout=60)
        took = time.monotonic() - sent
        assert (execution.reply["status"], execution.reply["ename"]) == ("error", "BatchStoppedByKeyboard")
        assert took < 15, took  # not the minute the batch would take: a correctness bound, not a speed one
        assert kernel.result(queued).reply["status"] == "aborted"  # "Run All" stops here
        out = kernel.execute(
            "import sys\nf = sys.last_value.batch.frame()\n"
            "print(f.status.value_counts().to_dict(), b.status, sys.last_value.batch is b,"
            " sorted(set(f.stop_reason.dropna())))"
        ).stdout.strip()
        assert out == "{'skipped': 9, 'interrupted': 3} stopped True ['keyboard']"
        kernel.wait_for(
            lambda: "stopped" in html_text(kernel.widgets.text_under(table)), what="the table to say stopped"
        )


def _widget_of(kernel: KernelDriver, msg_id: str) -> str | None:
    """The widget a running cell displayed, once it did."""
    for received in kernel.outputs_of(msg_id):
        data = received.content.get("data", {}) if received.type == "display_data" else {}
        view = data.get("application/vnd.jupyter.widget-view+json")
        if view is not None:
            return view["model_id"]
    return None
