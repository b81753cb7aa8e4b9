"""Guardrails in a real kernel: Approve / Deny clicked exactly as a browser clicks them (a
``comm_msg``), a reason typed into the field (a widget ``update``), and the budget meters."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kernel_support import KernelDriver, html_problems

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(180)]

SETUP = r'''
import nbagent
from nbagent.guardrails import Limits
from nbagent.models import ScriptedModel, ToolCall

SENT = []

@nbagent.tool(requires_approval=True)
def send_email(to: str, body: str) -> str:
    """Send an email.

    Args:
        to: the address
        body: the text
    """
    SENT.append(to)
    return f"sent to {to}"

def mailer(*calls):
    body = "<script>alert(1)</script>"
    turns = [[ToolCall("send_email", {"to": to, "body": body}, id=i) for i, to in calls], "done"]
    return nbagent.Agent(ScriptedModel(turns, tokens_per_s=1e6, first_token_s=0.0), tools=[send_email])
'''


@pytest.fixture(scope="module")
def kernel(tmp_path_factory) -> Iterator[KernelDriver]:
    with KernelDriver.start(cwd=str(tmp_path_factory.mktemp("kernel"))) as driver:
        driver.execute(SETUP)
        yield driver


def type_into(kernel: KernelDriver, model_id: str, value: str) -> None:
    """Type into a Text widget as a browser does: an ``update`` of its ``value``."""
    content = {
        "comm_id": model_id,
        "data": {"method": "update", "state": {"value": value}, "buffer_paths": []},
    }
    kernel.kc.shell_channel.send(kernel.kc.session.msg("comm_msg", content))


def buttons(kernel: KernelDriver, view: str, description: str) -> list[str]:
    return [
        m
        for m in kernel.widgets.under(view)
        if kernel.widgets.states.get(m, {}).get("_model_name") == "ButtonModel"
        and kernel.widgets.states[m].get("description") == description
    ]


def test_approve_and_deny_clicks_decide_the_pending_calls(kernel: KernelDriver) -> None:
    kernel.execute("SENT.clear()")
    view = kernel.execute(
        "run = nbagent.start(mailer(('m1', 'a@example.com'), ('m2', 'b@example.com')), 'mail')"
    ).widget_view()
    kernel.wait_for(lambda: len(buttons(kernel, view, "Approve")) == 2, what="two Approve buttons")
    text = kernel.shown(view)
    assert "waits for your approval" in text and "<script>alert(1)</script>" in text  # in full, as text
    assert not html_problems(kernel.widgets.text_under(view))
    approve_first = buttons(kernel, view, "Approve")[0]
    deny_second = buttons(kernel, view, "Deny")[1]
    reason = [
        m
        for m in kernel.widgets.under(view)
        if kernel.widgets.states.get(m, {}).get("_model_name") == "TextModel"
    ][1]
    kernel.click(approve_first)
    type_into(kernel, reason, "not to b")
    kernel.click(deny_second)
    out = kernel.execute(
        "r = await run\n"
        "print(r.status, SENT, [(c.call_id, c.status, c.approval, c.error) for c in r.tool_calls])"
    ).stdout
    assert out.startswith("success ['a@example.com']")
    assert "('m1', 'ok', 'approved', None)" in out and "('m2', 'denied', 'denied', 'not to b')" in out
    kernel.wait_for(lambda: not buttons(kernel, view, "Approve"), what="the decided rows to go")


def test_stop_click_while_a_call_waits_ends_interrupted_and_nothing_runs(kernel: KernelDriver) -> None:
    kernel.execute("SENT.clear()")
    view = kernel.execute("run = nbagent.start(mailer(('m1', 'a@example.com')), 'mail')").widget_view()
    kernel.wait_for(lambda: buttons(kernel, view, "Approve"), what="an Approve button")
    kernel.click(kernel.widgets.find_under(view, "ButtonModel", description="Stop"))
    out = kernel.execute("r = await run\nprint(r.status, SENT, r.tool_calls[0].status)").stdout
    assert out.split() == ["interrupted", "[]", "cancelled"]


def test_the_header_shows_each_limit_as_a_meter_and_the_end_names_the_tripped_one(
    kernel: KernelDriver,
) -> None:
    code = (
        "agent = nbagent.Agent(ScriptedModel(['word ' * 3000], tokens_per_s=200, first_token_s=0.0))\n"
        "run = nbagent.start(agent, 'talk', limits=Limits(max_output_tokens=400, max_seconds=600))"
    )
    view = kernel.execute(code).widget_view()
    kernel.wait_for(
        lambda: "output tokens" in kernel.shown(view) and "/ 400" in kernel.shown(view), what="meters"
    )
    assert "time" in kernel.shown(view) and "/ 10 min 00 s" in kernel.shown(view)
    assert not html_problems(kernel.widgets.text_under(view))
    out = kernel.execute("r = await run\nprint(r.status, r.stop_reason)").stdout
    assert out.split() == ["limit", "max_output_tokens"]
    kernel.wait_for(lambda: "■ limit" in kernel.shown(view), what="the limit badge")
    assert "limit max_output_tokens reached" in kernel.shown(view)
