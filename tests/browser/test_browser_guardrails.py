"""Guardrails end to end in a real browser: JupyterLab, headless Debian Chromium.

A notebook starts a run whose step makes two calls of a tool that needs approval: the page shows
both pending, with their arguments; the test clicks **Approve** on one, types a reason and clicks
**Deny** on the other, and checks what the run did. A second cell runs under a token budget and
the page shows the run stopped by it. Screenshots (the pending approvals, the run stopped by a
budget) go to the test's temporary directory and, when ``NBAGENT_SCREENSHOT_DIR`` is set, there too.
"""

from __future__ import annotations

from pathlib import Path

from support import browser_marks
from test_browser_e2e import Lab, _save, open_notebook, write_notebook
from test_browser_e2e import lab as lab  # the JupyterLab server fixture

pytestmark = browser_marks()

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


def test_approve_and_deny_clicks_in_jupyterlab_and_a_run_stopped_by_a_budget(
    lab: Lab, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    write_notebook(lab.root / NOTEBOOK, [APPROVALS, CHECK, BUDGET])
    with open_notebook(lab, NOTEBOOK, 1000, 1100) as (page, cells):
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
