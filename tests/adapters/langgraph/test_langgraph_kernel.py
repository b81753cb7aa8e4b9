"""LangGraph interrupts in a real kernel: a question answered by typing into the view's text box
and clicking Send, and a reviewed tool call approved by clicking Approve, exactly as a browser
does (a widget ``update``, then a ``comm_msg`` click)."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
from kernel_support import KernelDriver, html_text
from support import TESTS

pytestmark = [pytest.mark.needs("langgraph"), pytest.mark.kernel, pytest.mark.timeout(180)]

SETUP = rf"""
import sys
sys.path.insert(0, {str(TESTS)!r})
import nbagent
from langgraph_scenarios import _ask_graph, _hitl_agent, add
from langgraph_fakes import reply
"""


@pytest.fixture(scope="module")
def kernel(tmp_path_factory) -> Iterator[KernelDriver]:
    with KernelDriver.start(cwd=str(tmp_path_factory.mktemp("kernel"))) as driver:
        driver.execute(SETUP)
        yield driver


def _models(kernel: KernelDriver, view: str, model_name: str, **state: object) -> list[str]:
    return [
        m
        for m in kernel.widgets.under(view)
        if kernel.widgets.states.get(m, {}).get("_model_name") == model_name
        and all(kernel.widgets.states[m].get(k) == v for k, v in state.items())
    ]


def _type_into(kernel: KernelDriver, model_id: str, value: str) -> None:
    content = {
        "comm_id": model_id,
        "data": {"method": "update", "state": {"value": value}, "buffer_paths": []},
    }
    kernel.kc.shell_channel.send(kernel.kc.session.msg("comm_msg", content))


def test_a_question_is_answered_by_typing_and_clicking_send(kernel: KernelDriver) -> None:
    code = (
        "run = nbagent.start(_ask_graph(), {'question': 'your name?'}, "
        "config={'configurable': {'thread_id': 'k1'}})"
    )
    view = kernel.execute(code).widget_view()
    kernel.wait_for(lambda: _models(kernel, view, "ButtonModel", description="Send"), what="a Send button")
    assert "asks for your answer" in html_text(kernel.widgets.text_under(view))
    [box] = _models(kernel, view, "TextModel", placeholder="your answer")
    _type_into(kernel, box, "Ada")
    [send] = _models(kernel, view, "ButtonModel", description="Send")
    kernel.click(send)
    out = kernel.execute("r = await run\nprint(r.status, r.output['log'])").stdout
    assert out.strip() == "success ['asked', 'got Ada']"


def test_a_reviewed_tool_call_is_approved_by_clicking(kernel: KernelDriver) -> None:
    code = (
        "build = _hitl_agent([reply('', [('add', {'a': 1, 'b': 2})]), reply('3')], [add], "
        "['approve', 'reject'])\n"
        "run = nbagent.start(build(), 'add', config={'configurable': {'thread_id': 'k2'}})"
    )
    view = kernel.execute(code).widget_view()
    kernel.wait_for(
        lambda: _models(kernel, view, "ButtonModel", description="Approve"), what="an Approve button"
    )
    assert not _models(kernel, view, "ButtonModel", description="Approve edited")  # edit not allowed
    kernel.click(_models(kernel, view, "ButtonModel", description="Approve")[0])
    out = kernel.execute(
        "r = await run\nprint(r.status, r.output, [(c.tool, c.status, c.approval) for c in r.tool_calls][0])"
    ).stdout
    assert out.strip() == "success 3 ('add', 'ok', 'approved')"


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
