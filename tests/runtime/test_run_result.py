"""``run.result``: the value the agent's own call returned, once the run succeeded; ``None`` for
any other end."""

from __future__ import annotations

from support import wait_until

import nbagent
from nbagent.models.scripted import ScriptedModel


def test_a_native_agents_result_is_its_answer_and_a_stopped_run_has_none() -> None:
    run = nbagent.start(
        nbagent.Agent(ScriptedModel(["the answer"], tokens_per_s=1e6, first_token_s=0.0)),
        "ask",
        display=False,
    )
    assert run.result is None or run.done()
    assert run.wait(timeout=20).output == "the answer" and run.result == "the answer"
    slow = nbagent.start(
        nbagent.Agent(ScriptedModel(["word " * 400], tokens_per_s=20.0, first_token_s=0.0)),
        "talk",
        display=False,
    )
    wait_until(lambda: slow.live_text(1), timeout=20)
    slow.interrupt("now")
    assert slow.wait(timeout=20).status == "interrupted" and slow.result is None
