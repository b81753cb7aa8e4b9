"""Dollar signs stay dollar signs in JupyterLab: headless Debian Chromium, real MathJax.

JupyterLab typesets ``$…$`` in HTML outputs, so "It costs $5 today and $10 tomorrow." would show
"5 today and 10" as a formula. A notebook runs an agent that says it (as the task, the model's
text, a tool's argument and result, and the answer) under a cost budget, with the tool waiting for
approval: the page shows the live widget view, its approval row and cost meter; then the run ends
and the view gives way to static HTML, and the record is shown in a later cell. Each time, a
control output with real math (``$x^2$``) is rendered after nbagent's and waited for until MathJax
has typeset it, so the typesetter has had its turn at everything above; then the page must show
the literal sentence and no typeset math in nbagent's outputs.
"""

from __future__ import annotations

from support import browser_marks
from test_browser_e2e import Lab, open_notebook, write_notebook
from test_browser_e2e import lab as lab  # the JupyterLab server fixture

pytestmark = browser_marks()

NOTEBOOK = "dollars_e2e.ipynb"
SAID = "It costs $5 today and $10 tomorrow."
MATH = "mjx-container, .MathJax"
"""What typeset math looks like on the page (MathJax 3's element, MathJax 2's class)."""

START = f'''import nbagent
from nbagent.analytics import cost
from nbagent.guardrails import Limits
from nbagent.models import Reply, ScriptedModel, ToolCall
from IPython.display import HTML, display

SAID = {SAID!r}
cost.set_price("priced", input_per_mtok=1.0, output_per_mtok=2.0)

@nbagent.tool(requires_approval=True)
def pay(note: str) -> str:
    """Pay.

    Args:
        note: what for
    """
    return SAID

model = ScriptedModel([Reply(SAID, [ToolCall("pay", {{"note": SAID}}, id="pay-1")]), SAID],
                      first_token_s=0.0, name="priced")
run = nbagent.start(nbagent.Agent(model, tools=[pay]), SAID, limits=Limits(max_cost_usd=5))'''

CONTROL = """display(HTML('<div class="math-control">$x^2$</div>'))"""

FINISH = """run.approve("pay-1")
record = await run
display(record)
print("STATUS", record.status)"""


def test_dollars_show_as_written_in_the_live_and_the_static_view(lab: Lab) -> None:
    from playwright.sync_api import expect

    write_notebook(lab.root / NOTEBOOK, [START, CONTROL, FINISH, CONTROL])
    with open_notebook(lab, NOTEBOOK, 1000, 1100) as (page, cells):
        cells.nth(0).locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")  # start the run; it waits for the approval

        view = cells.nth(0).locator(".nbagent-run")
        expect(view.locator(".nbagent-approval")).to_contain_text(SAID, timeout=60_000)
        expect(view.locator("button.nbagent-stop")).to_be_enabled()  # the live widget view
        page.keyboard.press("Shift+Enter")  # the control
        expect(cells.nth(1).locator(f".math-control :is({MATH})").first).to_be_attached(timeout=60_000)
        expect(view.locator(".nbagent-summary")).to_contain_text(f"Task {SAID}")
        expect(view.locator(".nbagent-text")).to_contain_text(SAID)
        expect(view.locator(".nbagent-tool")).to_contain_text(f'pay(note="{SAID}")')
        expect(view.locator(".nbagent-meters")).to_contain_text("cost $0.0000 / $5.0000")
        expect(view.locator(MATH)).to_have_count(0)

        page.keyboard.press("Shift+Enter")  # approve, await the run, show the record
        finish = cells.nth(2).locator(".jp-OutputArea")
        expect(finish).to_contain_text("STATUS success", timeout=60_000)
        page.keyboard.press("Shift+Enter")  # the control again, below everything
        expect(cells.nth(3).locator(f".math-control :is({MATH})").first).to_be_attached(timeout=60_000)

        expect(view).to_contain_text("✓ success")
        expect(view.locator(".jupyter-widgets")).to_have_count(0)  # the static view now
        expect(view.locator(".nbagent-tool")).to_contain_text(f"→ {SAID}")
        expect(view.locator(".nbagent-summary")).to_contain_text(f"Answer {SAID}")
        expect(finish.locator(".nbagent-run .nbagent-summary")).to_contain_text(f"Answer {SAID}")
        for output in (cells.nth(0), cells.nth(2)):
            expect(output.locator(MATH)).to_have_count(0)
