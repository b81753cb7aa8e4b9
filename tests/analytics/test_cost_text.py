"""How costs read: in dollars that never read as zero (a batch's progress too), a cost limit's
message in one money format, its install hint only when the cost extra is missing, and the
analysis notebook's cost table."""

from __future__ import annotations

import ast
import json
import re
import sys

import pandas as pd
import pytest
from support import ROOT, fast_model

import nbagent
from nbagent import Limits
from nbagent.analytics import cost
from nbagent.extras import install_hint
from nbagent.models import ScriptedModel

NOTEBOOK = ROOT / "notebooks" / "analysis.ipynb"


@pytest.fixture
def no_prices():
    yield
    cost.clear_prices()


def test_dollars_show_four_decimals_and_never_round_a_cost_to_zero():
    assert [cost.dollars(v) for v in (0.1004, 0.1, 0.0003, 12345.6, 0)] == [
        "$0.1004",
        "$0.1000",
        "$0.0003",
        "$12,345.6000",
        "$0.0000",
    ]
    assert cost.dollars(0.000042) == "$0.000042"
    for exponent in range(5, 13):
        value = 3.14159 * 10**-exponent
        text = cost.dollars(value)
        assert float(text[1:]) == pytest.approx(value, rel=0.02), text


def test_a_batchs_progress_shows_a_cost_of_a_fraction_of_a_cent_as_it_is():
    from nbagent.batches.state import Progress
    from nbagent.batches.table import head_html, progress_line

    progress = Progress("evals", 3, ended={"success": 3}, input_tokens=90, cost_usd=0.000042)
    assert "$0.000042" in progress_line(progress)
    assert "<span>$</span>0.000042" in head_html(progress)  # its $ kept from math typesetting


def test_a_cost_limit_says_what_was_spent_and_the_budget_in_the_same_dollars(no_prices):
    cost.set_price("priced-scripted", input_per_mtok=1_000.0, output_per_mtok=10_000.0)
    model = ScriptedModel(["word " * 2000], tokens_per_s=2000.0, first_token_s=0.0, name="priced-scripted")
    record = nbagent.run(nbagent.Agent(model), "talk", limits=Limits(max_cost_usd=0.1), display=False)
    assert record.stop_reason == "max_cost_usd"
    assert re.fullmatch(r"limit max_cost_usd reached: \$0\.1\d{3} of a \$0\.1000 budget", record.error)


@pytest.mark.needs("cost")
def test_an_unpriced_model_under_a_cost_limit_hints_at_the_cost_extra_only_when_it_is_missing(monkeypatch):
    model = fast_model(["hi"], name="a-model-no-price-library-knows")
    with pytest.raises(ValueError) as installed:
        nbagent.start(nbagent.Agent(model), "task", limits=Limits(max_cost_usd=1.0), display=False)
    assert "set_price('a-model-no-price-library-knows'" in str(installed.value)
    assert "pip install" not in str(installed.value) and "extra" not in str(installed.value)

    monkeypatch.setitem(sys.modules, "genai_prices", None)  # as if the cost extra were not installed
    model = fast_model(["hi"], name="another-model-no-price-library-knows")
    with pytest.raises(ValueError) as missing:
        nbagent.start(nbagent.Agent(model), "task", limits=Limits(max_cost_usd=1.0), display=False)
    hint = f"install the cost extra, whose price library may know it: {install_hint('cost')}"
    assert hint in str(missing.value)


def cell_value(source: str, namespace: dict) -> object:
    """Run a notebook cell's code; the value of its last line, as a notebook shows it."""
    tree = ast.parse(source)
    *body, last = tree.body
    exec(compile(ast.Module(body, []), "<cell>", "exec"), namespace)
    return eval(compile(ast.Expression(last.value), "<cell>", "eval"), namespace)


@pytest.mark.needs("notebook")  # the notebook styles its table: jinja2, which JupyterLab brings
def test_the_analysis_notebooks_cost_table_shows_fractions_of_a_cent_as_they_are(no_prices, capsys):
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    [source] = ["".join(c["source"]) for c in cells if "cost.set_price(" in "".join(c["source"])]
    agent = nbagent.demo_agent(tokens_per_s=1e6, first_token_s=0.0)
    nbagent.run(agent, "What is 12 * 12?", display=False)
    with pd.option_context("display.precision", 3):  # as the notebook sets it
        html = cell_value(source, {"nbagent": nbagent})._repr_html_()
    demo = html[html.index("demo-scripted") :]
    shown = re.search(r"<td [^>]*>([^<]*\$[^<]*)</td>", demo)
    assert shown is not None and re.fullmatch(r"\$0\.0*[1-9]\d*", shown.group(1)), demo[:600]
