"""No HTML nbagent produces can be typeset as math: every ``$`` and ``\\`` stands alone.

JupyterLab runs MathJax over HTML outputs, which turns "It costs $5 today and $10 tomorrow." into
a formula (the browser test ``test_browser_dollars`` shows it on the page). Typesetters look for
delimiters within one run of text, and any element ends a run, so HTML is safe when no run of text
holds a ``$`` or a ``\\`` together with anything else. These tests read every producer's HTML the
way a typesetter does and check that, and that the text a reader sees is exactly what was said.
"""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from kernel_support import html_problems, html_text
from support import fast_model
from test_live_view import Watched
from test_live_view import watched as watched  # the fixture that records every widget write

import nbagent
from nbagent.models import Reply, ToolCall
from nbagent.view import format as htmlformat
from nbagent.view import html as htmlview
from nbagent.view.guards import ApprovalRow, meters_html

DOLLARS = "It costs $5 today and $10 tomorrow."
TEX = r"a \(x+y\) b \[z\] c \begin{equation}e\end{equation} d $$m$$ e \ref{f} \$"
SAID = [DOLLARS, TEX, "limit max_cost_usd reached: $0.1004 of a $0.1 budget", r"C:\Users\me"]

_BREAKS_NOTHING = {"br", "wbr"}
"""Tags MathJax reads through (its ``includeHtmlTags``): they do not end a run of text."""


class _Runs(HTMLParser):
    """The runs of text a typesetter searches for delimiters, ``<style>`` and ``<script>`` aside."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.runs: list[str] = []
        self._run: list[str] = []
        self._skip = 0

    def _end_run(self) -> None:
        if self._run:
            self.runs.append("".join(self._run))
            self._run = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag not in _BREAKS_NOTHING:
            self._end_run()
        self._skip += tag in ("style", "script")

    def handle_endtag(self, tag: str) -> None:
        if tag not in _BREAKS_NOTHING:
            self._end_run()
        self._skip -= tag in ("style", "script")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self._run.append(data)


def typesettable(fragment: str) -> list[str]:
    """The runs of text in ``fragment`` in which a typesetter could find a math delimiter."""
    parser = _Runs()
    parser.feed(fragment)
    parser.close()
    parser._end_run()
    return [run for run in parser.runs if ("$" in run or "\\" in run) and run not in ("$", "\\")]


def assert_shown_as_said(fragment: str, *said: str, tags_audited: bool = True) -> None:
    assert typesettable(fragment) == [], fragment
    if tags_audited:  # the run view's tags only (tables are the comparison's own)
        assert html_problems(fragment) == []
    text = html_text(fragment)
    for words in said:
        assert words in text


def test_the_check_sees_the_math_a_typesetter_would_see() -> None:
    assert typesettable(f"<div>{DOLLARS}</div>") == [DOLLARS]
    assert typesettable("<div>a <b>$</b> b $</div>") == [" b $"]
    assert typesettable("<div>$<br>x$</div>") == ["$x$"]  # a <br> does not end the run
    assert typesettable("<style>a{}$</style><p>$</p>") == []


@pytest.mark.parametrize("said", SAID)
def test_escaped_text_has_no_math_and_reads_exactly_as_said(said: str) -> None:
    assert_shown_as_said(htmlformat.esc(said), said)
    assert "<" not in htmlformat.attr(said)  # an attribute takes no markup, and needs none


def test_a_run_with_dollars_everywhere_shows_no_math_in_any_widget_or_static_view(watched: Watched) -> None:
    @nbagent.tool
    def price(item: str) -> str:
        """The price of an item.

        Args:
            item: what to price
        """
        return DOLLARS

    @nbagent.tool
    def fail(item: str) -> str:
        """Fail.

        Args:
            item: the message
        """
        raise ValueError(TEX)

    turns = [Reply(DOLLARS, [ToolCall("price", {"item": TEX}), ToolCall("fail", {"item": DOLLARS})]), TEX]
    agent = nbagent.Agent(fast_model(turns, name="$model$"), tools=[price, fail], name="$agent$")
    record = nbagent.run(agent, DOLLARS, display=True)
    assert record.status == "success"
    (view,) = watched.views
    values = watched.values()
    assert any(DOLLARS in html_text(v) for v in values)
    for value in values:
        assert typesettable(value) == [], value
    assert_shown_as_said(view.summary.value, DOLLARS, TEX)
    assert_shown_as_said(view.steps.children[0].value, DOLLARS, TEX)
    assert_shown_as_said(view.head.value, "$agent$", "$model$")
    assert_shown_as_said(htmlview.record_html(record), DOLLARS, TEX)
    assert_shown_as_said(record._repr_html_(), DOLLARS, TEX)
    assert_shown_as_said(view.mimebundle()["text/html"], DOLLARS)


def test_costs_limits_and_approvals_show_their_dollars_as_text() -> None:
    meters = meters_html({"max_cost_usd": (0.1004, 0.1)}, tripped="max_cost_usd")
    assert_shown_as_said(meters, "$0.1004 / $0.1000")
    summary = htmlview.summary_html(
        DOLLARS, steps=2, input_tokens=10, output_tokens=5, cost_usd=0.1004, error=SAID[2], answer=TEX
    )
    assert_shown_as_said(summary, "cost $0.1004", SAID[2], TEX)
    row = ApprovalRow(None, "call-$1", "pay", {"note": DOLLARS, "path": r"C:\Users\me"})  # type: ignore[arg-type]
    assert_shown_as_said(row.info.value, DOLLARS, "call-$1")


def test_the_batch_table_and_the_comparison_show_their_dollars_as_text() -> None:
    from nbagent.analytics import cost
    from nbagent.batches.state import Progress
    from nbagent.batches.table import head_html as batch_head_html
    from nbagent.explore import compare
    from nbagent.explore.comparison_html import comparison_html

    progress = Progress(
        name="$5 batch", total=2, ended={"success": 1}, reused=0, running=1, queued=0, skipped=0,
        input_tokens=10, output_tokens=5, cost_usd=0.1004, elapsed_s=1.0, eta_s=1.0, state="running",
    )  # fmt: skip
    assert_shown_as_said(batch_head_html(progress), "$5 batch", "$0.1004")

    cost.set_price("priced-$", input_per_mtok=1000.0, output_per_mtok=2000.0)
    try:
        a, b = (nbagent.run(nbagent.Agent(fast_model([said], name="priced-$")), DOLLARS) for said in SAID[:2])
    finally:
        cost.clear_prices()
    assert a.cost_usd is not None and b.cost_usd is not None
    shown = comparison_html(compare(a, b))
    assert_shown_as_said(shown, DOLLARS, TEX, f"${a.cost_usd:.4f}", tags_audited=False)
