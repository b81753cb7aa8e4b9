"""The live view, a Stop click and an Approve click in Jupyter Notebook 7, in headless Chromium.

The same checks as the JupyterLab tests, in Notebook 7's own notebook page (``/notebooks/...``,
the ``notebook`` package, served by ``jupyter_server`` on 127.0.0.1 with a token and a temporary
root) driven by playwright in Debian's ``/usr/bin/chromium``. One run streams a long reply from a
slow scripted model: the view shows its steps and its text growing, **■ Stop** clicked in the page
interrupts it, and the record says so. A second run calls a tool that needs approval: the view shows
the call pending, **Approve** clicked in the page lets it run, and the run ends ``success`` with the
call approved. Screenshots of the running, the interrupted and the pending view go to the test's
temporary directory and, when ``NBAGENT_SCREENSHOT_DIR`` is set, there too.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support import browser_marks
from test_browser_e2e import Lab, _save, jupyter_server, open_notebook, write_notebook

pytestmark = browser_marks()

NOTEBOOK = "notebook7_e2e.ipynb"

STREAM = '''import nbagent
from nbagent.models import Reply, ScriptedModel, ToolCall

@nbagent.tool
def lookup(topic: str) -> str:
    """Look a topic up.

    Args:
        topic: what to look up.
    """
    return f"{topic}: 299,792,458 m/s"

# Step 1 looks a fact up; step 2 writes a long answer, 20 tokens a second: minutes of streaming.
slow = ScriptedModel(
    [Reply("Looking it up.", [ToolCall("lookup", {"topic": "light"}, id="look-1")]), "word " * 5000],
    tokens_per_s=20,
    first_token_s=0.1,
)
run = nbagent.start(nbagent.Agent(slow, tools=[lookup]), "How fast is light?")'''

STOPPED = """record = await run
print("STOPPED", record.status, record.steps[-1].interrupted)"""

APPROVAL = '''SENT = []

@nbagent.tool(requires_approval=True)
def send_email(to: str, body: str) -> str:
    """Send an email.

    Args:
        to: the address.
        body: the text.
    """
    SENT.append(to)
    return f"sent to {to}"

mail = ToolCall("send_email", {"to": "team@example.com", "body": "The release is out."}, id="mail-team")
mailer = nbagent.Agent(ScriptedModel([[mail], "Told the team."], first_token_s=0.1), tools=[send_email])
run2 = nbagent.start(mailer, "Announce the release")'''

APPROVED = """record2 = await run2
print("APPROVED", record2.status, SENT, [(c.call_id, c.approval, c.status) for c in record2.tool_calls])"""


@pytest.fixture
def notebook7(tmp_path: Path) -> Iterator[Lab]:
    """A Notebook 7 server (``jupyter notebook``) whose root holds the test's notebook."""
    with jupyter_server(tmp_path, "notebook") as server:
        write_notebook(server.root / NOTEBOOK, [STREAM, STOPPED, APPROVAL, APPROVED])
        yield server


def _run_cell(page, cells, index: int) -> None:
    cells.nth(index).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")


def test_live_view_stop_and_approve_clicks_in_notebook_7(notebook7: Lab, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    with open_notebook(notebook7, NOTEBOOK) as (page, cells):
        # Notebook 7's own page, not JupyterLab's: its notebook shell and no JupyterLab status bar.
        expect(page.locator("#main-panel .jp-NotebookPanel")).to_be_visible()
        expect(page.locator(".jp-StatusBar-Item", has_text="| Idle")).to_have_count(0)
        _run_cell(page, cells, 0)

        view = cells.nth(0).locator(".nbagent-run")
        expect(view).to_contain_text("● running", timeout=60_000)
        expect(view.locator(".nbagent-tool")).to_contain_text('lookup(topic="light")', timeout=60_000)
        expect(view.locator(".nbagent-tool")).to_contain_text("299,792,458 m/s")
        # Step 2 streams: its text is there, and then it is longer (the view follows the run).
        text = view.locator(".nbagent-step").nth(1).locator(".nbagent-text")
        expect(text).to_contain_text("word word word", timeout=60_000)
        seen = text.inner_text()
        expect(text).not_to_have_text(seen, timeout=30_000)
        assert len(text.inner_text()) > len(seen)
        expect(view).to_contain_text("● running")
        _save(cells.nth(0), "notebook7-live-view-running.png", tmp_path)

        view.locator("button.nbagent-stop").click()
        expect(view).to_contain_text("■ interrupted", timeout=30_000)
        expect(view).to_contain_text("stopped here")
        # The widget gave way to the static view of the final state in the cell that showed it
        # (the update goes by display id), which has nothing left to click.
        expect(view.locator(".jupyter-widgets")).to_have_count(0, timeout=30_000)
        expect(view.locator("button")).to_have_count(0)
        _save(cells.nth(0), "notebook7-live-view-interrupted.png", tmp_path)

        _run_cell(page, cells, 1)
        expect(cells.nth(1).locator(".jp-OutputArea-output")).to_contain_text(
            "STOPPED interrupted True", timeout=60_000
        )

        _run_cell(page, cells, 2)
        view2 = cells.nth(2).locator(".nbagent-run")
        row = view2.locator(".nbagent-approval")
        expect(row).to_have_count(1, timeout=60_000)
        expect(row).to_contain_text("team@example.com")
        expect(view2).to_contain_text("waiting for approval")
        _save(cells.nth(2), "notebook7-pending-approval.png", tmp_path)

        row.locator("button.nbagent-approve").click()
        expect(view2).to_contain_text("✓ success", timeout=60_000)
        expect(view2.locator(".nbagent-tool")).to_contain_text("sent to team@example.com")
        _run_cell(page, cells, 3)
        expect(cells.nth(3).locator(".jp-OutputArea-output")).to_contain_text(
            "APPROVED success ['team@example.com'] [('mail-team', 'approved', 'ok')]", timeout=60_000
        )
        expect(page.locator('[data-mime-type="application/vnd.jupyter.stderr"]')).to_have_count(0)
        expect(page.locator(".jp-OutputArea-output .jp-RenderedText[data-mime-type*=error]")).to_have_count(0)
