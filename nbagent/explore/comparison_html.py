"""The HTML of a ``Comparison``: a totals table with deltas, then the two runs' steps side by side.

Each side is drawn with the run view's own pieces (``head_html``, ``step_html`` of
``nbagent.view.html``), so a step looks exactly as it did live; the comparison only adds the
frame around them: a column per run, and under each step pair the list of what differs, or
"same" when nothing does. Every string was escaped by those pieces or is escaped here.

Its selectors outrank JupyterLab's output table rules (``.jp-RenderedHTMLCommon td`` aligns
cells right and stripes rows), so the comparison reads the same in JupyterLab, in a widget and
in a saved page: text left, numbers of the totals right.
"""

from __future__ import annotations

from nbagent.explore.comparison import USAGE_MEASURES, Comparison, StepPair
from nbagent.records import RunRecord
from nbagent.view.format import count, esc, seconds
from nbagent.view.html import STYLE, head_html, step_html, total_style

COMPARE_STYLE = """<style>
.nbagent-compare { max-width: 1400px; margin: 4px 0; border-collapse: collapse; width: 100%;
  table-layout: fixed; font-family: var(--jp-ui-font-family, -apple-system, "Segoe UI", Roboto, sans-serif);
  font-size: var(--jp-ui-font-size1, 13px); color: var(--jp-ui-font-color1, inherit); }
.nbagent-comparison .nbagent-compare > tbody > tr > td,
.nbagent-comparison .nbagent-compare > tbody > tr > th {
  vertical-align: top; padding: 0 4px; text-align: left; }
.nbagent-comparison .nbagent-compare > tbody > tr:nth-child(n),
.nbagent-comparison .nbagent-totals > tbody > tr:nth-child(n) { background: transparent; }
.nbagent-comparison { line-height: 1.4; }
.nbagent-compare .nbagent-run { max-width: none; margin: 0; }
.nbagent-totals { border-collapse: collapse; margin: 4px 0 8px; font-size: 12px; }
.nbagent-comparison .nbagent-totals > tbody > tr > td,
.nbagent-comparison .nbagent-totals > tbody > tr > th { padding: 2px 10px;
  border-bottom: 1px solid var(--jp-border-color3, rgba(128,128,128,.2));
  text-align: right; vertical-align: top; }
.nbagent-comparison .nbagent-totals > tbody > tr > th:first-child,
.nbagent-comparison .nbagent-totals > tbody > tr > td:first-child { text-align: left; }
.nbagent-diff { font-size: 12px; padding: 2px 12px 8px; color: var(--jp-warn-color1, #a65c00); }
.nbagent-same { font-size: 12px; padding: 2px 12px 8px; color: var(--jp-ui-font-color2, #777); }
.nbagent-missing { padding: 8px 12px; font-style: italic; color: var(--jp-ui-font-color2, #777); }
.nbagent-partial { font-size: 12px; margin: 0 0 6px; color: var(--jp-warn-color1, #a65c00); }
.nbagent-changed { background: rgba(255,152,0,.10); }
</style>"""


def _number(value: float | None, measure: str) -> str:
    if value is None:
        return "?"
    if measure == "duration_s":
        return seconds(abs(value)) if value >= 0 else f"-{seconds(-value)}"
    if measure == "cost_usd":
        return esc(f"${value:.4f}")
    return count(int(value))


def _signed(value: float | None, measure: str) -> str:
    if value is None:
        return "?"
    if value == 0:
        return "="
    text = _number(value, measure)
    return text if text.startswith("-") else f"+{text}"


def _total(record: RunRecord, measure: str) -> str:
    """A run's total; a token or cost sum of a run with unknown step usage is a lower bound."""
    value = getattr(record, measure)
    text = _number(value, measure)
    if value is not None and measure in USAGE_MEASURES and not record.usage_complete:
        return f"≥ {text}"
    return text


def totals_html(comparison: Comparison) -> str:
    """The totals and their deltas; of the two paths from the fork's step for a fork and its
    original (``Comparison.path``)."""
    a, b = comparison.path("a"), comparison.path("b")
    note = comparison.usage_note
    title = f' title="{esc(note)}"' if note else ""
    steps = _signed(comparison.delta("n_steps"), "n_steps")
    rows = [f"<tr><td>steps</td><td>{len(a.steps)}</td><td>{len(b.steps)}</td><td>{steps}</td></tr>"]
    for label, measure in (
        ("tokens in", "input_tokens"),
        ("tokens out", "output_tokens"),
        ("time", "duration_s"),
        ("cost", "cost_usd"),
    ):
        delta = _signed(comparison.delta(measure), measure)
        cell = f"<td{title}>{delta}</td>" if measure in USAGE_MEASURES else f"<td>{delta}</td>"
        rows.append(
            f"<tr><td>{esc(label)}</td><td>{_total(a, measure)}</td><td>{_total(b, measure)}</td>{cell}</tr>"
        )
    body = "".join(rows)
    status = (
        f"<tr><td>status</td><td>{esc(a.status)}</td><td>{esc(b.status)}</td>"
        f"<td>{'=' if a.status == b.status else '≠'}</td></tr>"
    )
    partial = f'<div class="nbagent-partial">? {esc(note)}: their token and cost deltas are unknown</div>'
    at = comparison.at_step
    paths = f'<div class="nbagent-dim">from step {at} on (the paths after the shared steps)</div>'
    return (
        '<table class="nbagent-totals"><tr><th></th><th>A</th><th>B</th><th>B − A</th></tr>'
        f"{status}{body}</table>{paths if at is not None else ''}{partial if note else ''}"
    )


def _side(step_pair: StepPair, side: str, total: float) -> str:
    step = step_pair.a if side == "a" else step_pair.b
    if step is None:
        inner = f'<div class="nbagent-missing">no step {step_pair.number} in {side.upper()}</div>'
    else:
        inner = step_html(step)
    changed = " nbagent-changed" if step_pair.differences else ""
    return f'<div class="nbagent-run{changed}" style="{total_style(total)}">{inner}</div>'


def _pair_row(pair: StepPair, total_a: float, total_b: float) -> str:
    differences = pair.differences
    if differences:
        note = '<div class="nbagent-diff">≠ ' + esc("; ".join(differences)) + "</div>"
    else:
        note = '<div class="nbagent-same">= same text and tool calls</div>'
    return (
        f"<tr><td>{_side(pair, 'a', total_a)}</td><td>{_side(pair, 'b', total_b)}</td></tr>"
        f'<tr><td colspan="2">{note}</td></tr>'
    )


def _prefix_row(comparison: Comparison, total: float) -> str:
    """A fork's shared prefix, once across both columns, folded: the steps were made once."""
    shared = comparison.prefix
    if not shared:
        return ""
    first, last = shared[0].number, shared[-1].number
    steps = f"steps {first}–{last}" if last > first else f"step {first}"
    panels = "".join(step_html(pair.a) for pair in shared if pair.a is not None)
    return (
        f'<tr><td colspan="2"><details><summary class="nbagent-same">⑂ {esc(steps)}: shared, made once '
        f"(the fork starts at step {comparison.at_step})</summary>"
        f'<div class="nbagent-run" style="{total_style(total)}">{panels}</div></details></td></tr>'
    )


def _head(label: str, comparison: Comparison, side: str) -> str:
    record = comparison.a if side == "a" else comparison.b
    head = head_html(record.agent, record.model, str(record.status), record.duration_s)
    return (
        f'<div class="nbagent-run"><div class="nbagent-head"><b>{label}</b> {head}</div>'
        f'<div class="nbagent-summary"><div><b>Task</b> {esc(record.task[:400])}</div>'
        f'<div class="nbagent-dim">run {esc(record.run_id)}</div></div></div>'
    )


def comparison_html(comparison: Comparison) -> str:
    """The whole comparison as one HTML fragment (styles included)."""
    total_a = comparison.a.duration_s or max((s.end_s or s.start_s for s in comparison.a.steps), default=0.0)
    total_b = comparison.b.duration_s or max((s.end_s or s.start_s for s in comparison.b.steps), default=0.0)
    rows = _prefix_row(comparison, total_a) + "".join(
        _pair_row(pair, total_a, total_b) for pair in comparison.steps if not pair.shared
    )
    differences = comparison.differences
    summary = (
        f"{len(differences)} difference{'' if len(differences) == 1 else 's'}"
        if differences
        else "no differences in text, tool calls or status"
    )
    return (
        f'{STYLE}{COMPARE_STYLE}<div class="nbagent-comparison">{totals_html(comparison)}'
        f'<div class="nbagent-dim">{esc(summary)}</div>'
        '<table class="nbagent-compare"><colgroup><col style="width:50%"><col style="width:50%"></colgroup>'
        f"<tr><td>{_head('A', comparison, 'a')}</td><td>{_head('B', comparison, 'b')}</td></tr>"
        f"{rows}</table></div>"
    )
