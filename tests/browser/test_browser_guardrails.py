"""Guardrails end to end in a real browser: JupyterLab, headless Debian Chromium.

A notebook starts a run whose step makes two calls of a tool that needs approval: the page shows
both pending, with their arguments; the test clicks **Approve** on one, types a reason and clicks
**Deny** on the other, and checks what the run did. A second cell runs under a token budget and
the page shows the run stopped by it. Screenshots (the pending approvals, the run stopped by a
budget) go to the test's temporary directory and, when ``NBAGENT_SCREENSHOT_DIR`` is set, there too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import CHROMIUM, CHROMIUM_ARGS
from test_browser_e2e import Lab, _save
from test_browser_e2e import lab as lab  # the JupyterLab server fixture

pytestmark = [
    pytest.mark.needs("test-all"),
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"),
    pytest.mark.timeout(300),
]

NOTEBOOK = "guardrails_e2e.ipynb"

APPROVALS = '''import nbagent
from nbagent.guardrails import Limits
from nbagent.models import ScriptedModel, ToolCall

SENT = []

@nbagent.tool(requires_approval=True)
def send_email(to: str, body: str) -> str:
    """Send an email.

    Args:
        to: the address.
        body: the text.
    """
    SENT.append(to)
    return f"sent to {to}"

mails = [
    ToolCall("send_email", {"to": "team@example.com", "body": "The release is out."}, id="mail-team"),
    ToolCall("send_email", {"to": "everyone@example.com", "body": "<b>Release!!!</b>"}, id="mail-all"),
]
mailer = nbagent.Agent(ScriptedModel([mails, "Told the team."], first_token_s=0.1), tools=[send_email])
run = nbagent.start(mailer, "Announce the release")'''

CHECK = """record = await run
print("RESULT", record.status, SENT, [(c.call_id, c.status, c.error) for c in record.tool_calls])"""

BUDGET = """chatty = nbagent.Agent(ScriptedModel(["token " * 5000], tokens_per_s=400, first_token_s=0.0))
limits = Limits(max_output_tokens=600, max_seconds=120)
budgeted = nbagent.start(chatty, "Tell me everything.", limits=limits)"""


def _notebook(root: Path) -> None:
    cells = [
        {
            "cell_type": "code",
            "metadata": {},
            "execution_count": None,
            "outputs": [],
            "source": source,
            "id": f"c{i}",
        }
        for i, source in enumerate([APPROVALS, CHECK, BUDGET])
    ]
    metadata = {
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    (root / NOTEBOOK).write_text(
        json.dumps({"cells": cells, "metadata": metadata, "nbformat": 4, "nbformat_minor": 5})
    )


def test_approve_and_deny_clicks_in_jupyterlab_and_a_run_stopped_by_a_budget(
    lab: Lab, tmp_path: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    _notebook(lab.root)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 1100}, device_scale_factor=1)
            page.goto(f"{lab.url}/doc/tree/{NOTEBOOK}?token={lab.token}")
            expect(page.get_by_text("| Idle").first).to_be_visible(timeout=90_000)
            cells = page.locator(".jp-Notebook .jp-Cell")
            cells.nth(0).locator(".jp-InputArea-editor").click()
            page.keyboard.press("Shift+Enter")

            view = cells.nth(0).locator(".nbagent-run")
            rows = view.locator(".nbagent-approval")
            expect(rows).to_have_count(2, timeout=60_000)
            expect(rows.nth(1)).to_contain_text("<b>Release!!!</b>")  # the arguments in full, as text
            expect(view).to_contain_text("waiting for approval")
            _save(cells.nth(0), "guardrails-pending-approval.png", tmp_path)

            team = rows.filter(has_text="team@example.com")
            everyone = rows.filter(has_text="everyone@example.com")
            everyone.locator("input").fill("not to everyone")
            team.locator("button.nbagent-approve").click()
            everyone.locator("button.nbagent-deny").click()
            expect(view).to_contain_text("✓ success", timeout=60_000)
            expect(view).to_contain_text("denied: not to everyone")

            cells.nth(1).locator(".jp-InputArea-editor").click()  # the check cell
            page.keyboard.press("Shift+Enter")
            expect(cells.nth(1).locator(".jp-OutputArea-output")).to_contain_text(
                "RESULT success ['team@example.com']", timeout=60_000
            )
            expect(cells.nth(1).locator(".jp-OutputArea-output")).to_contain_text(
                "('mail-all', 'denied', 'not to everyone')"
            )

            cells.nth(2).locator(".jp-InputArea-editor").click()  # the budget cell
            page.keyboard.press("Shift+Enter")
            budget_view = cells.nth(2).locator(".nbagent-run")
            expect(budget_view.locator(".nbagent-meters")).to_contain_text("output tokens", timeout=60_000)
            expect(budget_view).to_contain_text("■ limit", timeout=60_000)
            expect(budget_view).to_contain_text("limit max_output_tokens reached")
            cells.nth(1).click()
            _save(cells.nth(2), "guardrails-stopped-by-budget.png", tmp_path)
        finally:
            browser.close()
