"""One stop vocabulary (``nbagent.events.StopReason``) and one table of its words, for every view."""

from __future__ import annotations

import re
from typing import get_args

from support import wait_until

import nbagent
from nbagent import events as ev
from nbagent.models import ScriptedModel
from nbagent.view.html import record_html
from nbagent.view.terminal import summary_line


def test_every_stop_reason_has_its_words_in_the_one_table():
    assert set(get_args(ev.StopReason)) == set(ev.STOP_REASONS)
    assert set(get_args(ev.Stopper)) <= set(ev.STOP_REASONS)
    assert {ev.after_step(who) for who in get_args(ev.Stopper)} <= set(ev.STOP_REASONS)
    assert ev.stop_text("total_tokens_limit") == "budget total_tokens_limit reached"  # a framework's own


def test_the_text_and_html_views_say_why_a_run_stopped_in_the_same_words():
    run = nbagent.start(
        nbagent.Agent(ScriptedModel(["word " * 4000], tokens_per_s=400)), "talk", display=False
    )
    wait_until(lambda: run.live_text(1))
    run.interrupt(reason="keyboard")
    record = run.wait(timeout=30)
    words = ev.STOP_REASONS["keyboard"]
    assert summary_line(record).endswith(f"· {words}")
    assert words in re.sub(r"<[^>]+>", "", record_html(record))
