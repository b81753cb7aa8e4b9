"""Static HTML of a run: the pieces the live view updates, and a whole ``RunRecord`` at once.

One renderer serves two callers. The live widget view (``nbagent.view.live``) puts ``head_html``,
``summary_html`` and one ``step_html`` per step into separate HTML widgets, so a tick re-sends only
the piece that changed; ``record_html`` joins the same pieces into one page fragment for the final
state a saved notebook keeps, and ``record_display_html`` is what a ``RunRecord`` shows as a cell's
result (a one-line summary when the live view of that run is already in the same cell).

Every string that came from a model, a tool or the user goes through ``nbagent.view.format``
(``esc``: escaped, never typeset as math, never raising; long values clipped for the eye while the
record keeps them whole); ``ToolCallCache`` lets the live view format each call once.
Colours come from JupyterLab's CSS variables, with fallbacks that read on light and dark pages.

Each step has a small time bar showing where it sits in the run. Its position is CSS arithmetic
on three custom properties: the step's own ``--nbagent-start`` and ``--nbagent-span`` (seconds),
and the run's ``--nbagent-total`` set once on the container. The live view moves only the total,
so a finished step's HTML never has to be sent again while the run grows.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from nbagent import events as ev
from nbagent.records import NodeRecord, RunRecord, StepRecord, ToolCallRecord
from nbagent.text import shorten
from nbagent.view.format import (
    ARGUMENTS_LIMIT,
    arguments_text,
    attr,
    clipped_text,
    count,
    esc,
    log_tail,
    progress_text,
    seconds,
    tokens,
)

"""A step's model text shows at most its first ``TEXT_HEAD`` and last ``TEXT_TAIL`` characters."""
TASK_LIMIT = 400
RESULT_LIMIT = 300
ERROR_LIMIT = 600
ANSWER_LIMIT = 600

STATUS_LABELS = {
    "queued": "◌ queued",
    "running": "● running",
    "success": "✓ success",
    "interrupted": "■ interrupted",
    "error": "✗ error",
    "max_steps": "■ max steps",
    "limit": "■ limit",
    "unfinished": "? unfinished",
}

STYLE = """<style>
.nbagent-run { border: 1px solid var(--jp-border-color2, rgba(128,128,128,.35)); border-radius: 6px;
  max-width: 960px; margin: 4px 0; overflow: hidden; box-sizing: border-box;
  font-family: var(--jp-ui-font-family, -apple-system, "Segoe UI", Roboto, sans-serif);
  font-size: var(--jp-ui-font-size1, 13px); color: var(--jp-ui-font-color1, inherit); line-height: 1.45; }
.nbagent-run .widget-html, .nbagent-run .widget-box { margin: 0; }
.nbagent-run .widget-html-content { line-height: 1.45; font-size: inherit; }
.nbagent-head { display: flex; align-items: center; gap: 8px; padding: 6px 12px; flex-wrap: wrap;
  background: var(--jp-layout-color2, rgba(128,128,128,.08));
  border-bottom: 1px solid var(--jp-border-color2, rgba(128,128,128,.35)); }
.nbagent-head .widget-html { flex: 1 1 auto; }
.nbagent-title { font-weight: 600; }
.nbagent-dim { color: var(--jp-ui-font-color2, inherit); opacity: .85; }
.nbagent-badge { border-radius: 10px; padding: 1px 9px; font-size: 12px; font-weight: 600;
  white-space: nowrap; }
.nbagent-running { color: var(--jp-info-color1, #0b61a4); background: rgba(33,150,243,.14); }
.nbagent-queued { color: var(--jp-ui-font-color2, #555); background: rgba(128,128,128,.16); }
.nbagent-success { color: var(--jp-success-color1, #1b6e20); background: rgba(76,175,80,.15); }
.nbagent-interrupted, .nbagent-max_steps, .nbagent-unfinished, .nbagent-limit {
  color: var(--jp-warn-color1, #a65c00); background: rgba(255,152,0,.16); }
.nbagent-error-badge { color: var(--jp-error-color1, #b71c1c); background: rgba(244,67,54,.14); }
.nbagent-run .jupyter-button { width: auto; height: 26px; margin: 0; padding: 0 10px; font-size: 12px;
  border: 1px solid var(--jp-border-color1, rgba(128,128,128,.6)); border-radius: 3px;
  background: var(--jp-layout-color1, transparent); color: var(--jp-ui-font-color1, inherit);
  box-shadow: none; }
.nbagent-run .nbagent-stop, .nbagent-run .jupyter-button.nbagent-stop {
  border-color: var(--jp-error-color1, #c62828); color: var(--jp-error-color1, #c62828); }
.nbagent-run .jupyter-button:disabled { opacity: .45; }
.nbagent-summary { padding: 6px 12px 8px; }
.nbagent-step { border-top: 1px solid var(--jp-border-color3, rgba(128,128,128,.2)); padding: 6px 12px 8px; }
.nbagent-stephead { display: flex; gap: 10px; align-items: center; flex-wrap: wrap; }
.nbagent-stephead > b { min-width: 3.6em; }
.nbagent-kind { min-width: 6.2em; }
.nbagent-bar { position: relative; display: inline-block; height: 6px; width: 220px; border-radius: 3px;
  flex: none; overflow: hidden; background: var(--jp-border-color2, rgba(128,128,128,.25)); }
.nbagent-bar > span { position: absolute; top: 0; height: 6px; border-radius: 3px; min-width: 2px;
  background: var(--jp-brand-color2, #64b5f6);
  left: min(calc(var(--nbagent-start) / var(--nbagent-total) * 100%), calc(100% - 2px));
  width: min(calc(var(--nbagent-span) / var(--nbagent-total) * 100%),
    calc(100% - var(--nbagent-start) / var(--nbagent-total) * 100%)); }
.nbagent-bar > span.nbagent-live {
  width: max(calc((var(--nbagent-total) - var(--nbagent-start)) / var(--nbagent-total) * 100%), 2px); }
.nbagent-bar > span.nbagent-cut { background: var(--jp-warn-color2, #ffb74d); }
.nbagent-bar > span.nbagent-failed { background: var(--jp-error-color2, #e57373); }
.nbagent-text { white-space: pre-wrap; overflow-wrap: anywhere; margin: 4px 0 2px;
  font-family: var(--jp-code-font-family, Menlo, Consolas, monospace); font-size: 12px; }
.nbagent-tool { font-family: var(--jp-code-font-family, Menlo, Consolas, monospace); font-size: 12px;
  margin: 3px 0 0; overflow-wrap: anywhere; }
.nbagent-ok { color: var(--jp-success-color1, #1b6e20); }
.nbagent-warn { color: var(--jp-warn-color1, #a65c00); }
.nbagent-error { color: var(--jp-error-color1, #b71c1c); overflow-wrap: anywhere; }
.nbagent-note { font-size: 12px; margin: 3px 0 0; }
.nbagent-clipped { color: var(--jp-ui-font-color2, inherit); opacity: .7; font-style: italic; }
.nbagent-foot { color: var(--jp-ui-font-color2, inherit); opacity: .85; font-size: 12px; }
.nbagent-line { display: flex; gap: 8px; align-items: center; flex-wrap: wrap; margin: 2px 0;
  font-family: var(--jp-ui-font-family, -apple-system, "Segoe UI", Roboto, sans-serif);
  font-size: var(--jp-ui-font-size1, 13px); color: var(--jp-ui-font-color1, inherit); }
.nbagent-notice code { font-family: var(--jp-code-font-family, Menlo, Consolas, monospace); font-size: 12px;
  padding: 0 3px; border-radius: 3px; background: rgba(128,128,128,.15); }
.nbagent-progress { position: relative; display: inline-block; height: 6px; width: 90px; border-radius: 3px;
  vertical-align: middle; overflow: hidden; background: var(--jp-border-color2, rgba(128,128,128,.25)); }
.nbagent-progress > span { position: absolute; left: 0; top: 0; height: 6px;
  background: var(--jp-brand-color2, #64b5f6); }
.nbagent-log { white-space: pre-wrap; overflow-wrap: anywhere; margin: 0 0 0 1.6em; font-size: 11px;
  font-family: var(--jp-code-font-family, Menlo, Consolas, monospace); }
.nbagent-cursor { display: inline-block; width: 7px; height: 13px; vertical-align: text-bottom;
  background: var(--jp-info-color1, #0b61a4); }
</style>"""


def _bar(step: StepRecord) -> str:
    start = f"--nbagent-start:{step.start_s:.3f}"
    if step.end_s is None:
        return f'<span class="nbagent-bar"><span class="nbagent-live" style="{start}"></span></span>'
    state = "nbagent-cut" if step.interrupted else "nbagent-failed" if step.error else "nbagent-done"
    span = f"--nbagent-span:{max(step.end_s - step.start_s, 0.0):.3f}"
    return f'<span class="nbagent-bar"><span class="{state}" style="{start};{span}"></span></span>'


def _call_head(call: ToolCallRecord) -> str:
    return (
        f"▸ {esc(shorten(call.tool, 100))}({esc(shorten(arguments_text(call.arguments), ARGUMENTS_LIMIT))})"
    )


def _call_line(call: ToolCallRecord, head: str) -> str:
    if call.approval == "pending" and call.status is None:
        outcome = '<span class="nbagent-warn">◆ waiting for approval</span>'
    elif call.status is None:
        outcome = f'<span class="nbagent-dim">… running</span>{_progress_html(call)}'
    elif call.status == "ok":
        outcome = f'<span class="nbagent-ok">→ {esc(shorten(call.result, RESULT_LIMIT))}</span>'
    elif call.status == "denied":
        label = "timed out" if call.approval == "timed_out" else "denied"
        why = f": {shorten(call.error, ERROR_LIMIT)}" if call.error and call.error != label else ""
        outcome = f'<span class="nbagent-warn">■ {label}{esc(why)}</span>'
    elif call.status == "deferred":  # handed back to the run's caller, who runs or approves it
        outcome = '<span class="nbagent-dim">⏸ deferred to the caller</span>'
    elif call.status == "error":
        outcome = f'<span class="nbagent-error">✗ {esc(shorten(call.error or "error", ERROR_LIMIT))}</span>'
    else:  # cancelled by a Stop, or abandoned: a sync tool that did not stop in time
        why = f": {shorten(call.error, ERROR_LIMIT)}" if call.status == "abandoned" and call.error else ""
        outcome = f'<span class="nbagent-warn">■ {esc(call.status)}{esc(why)}</span>'
    took = "" if call.duration_s is None else f' <span class="nbagent-dim">{seconds(call.duration_s)}</span>'
    if call.approval_wait_s is not None:  # a person's time, shown apart from the call's own
        took += f' <span class="nbagent-dim">· waited {seconds(call.approval_wait_s)} for approval</span>'
    if call.progress is not None and call.status not in (None, "ok"):  # where a cut call got to
        took += f' <span class="nbagent-dim">· at {esc(progress_text(call.progress))}</span>'
    return f'<div class="nbagent-tool">{head} {outcome}{took}</div>{_logs_html(call)}'


def _progress_html(call: ToolCallRecord) -> str:
    """A running call's last progress: a bar when its total is known, and the count and message."""
    progress = call.progress
    if progress is None:
        return ""
    bar = ""
    if progress.fraction is not None:
        width = f"{progress.fraction * 100:.1f}%"
        bar = f' <span class="nbagent-progress"><span style="width:{width}"></span></span>'
    return f'{bar} <span class="nbagent-dim nbagent-count">{esc(progress_text(progress))}</span>'


def _logs_html(call: ToolCallRecord) -> str:
    """The call's last log lines under its row, and how many earlier ones are not shown."""
    if not call.logs:
        return ""
    lines, hidden = log_tail(call.logs, call.logs_dropped)
    text = "\n".join(f"│ {esc(line)}" for line in lines)
    if hidden:
        text = f"… {hidden} earlier log line{'' if hidden == 1 else 's'}\n{text}"
    return f'<div class="nbagent-log nbagent-dim">{text}</div>'


def _node_line(node: NodeRecord) -> str:
    """A node's line: who worked, and what came of it (a node is no tool: no arguments)."""
    if node.status is None:
        outcome = '<span class="nbagent-dim">… working</span>'
    elif node.status == "ok":
        outcome = f'<span class="nbagent-dim">→ {esc(shorten(node.output, RESULT_LIMIT))}</span>'
    elif node.status == "error":
        outcome = f'<span class="nbagent-error">✗ {esc(shorten(node.error or "error", ERROR_LIMIT))}</span>'
    else:
        outcome = f'<span class="nbagent-warn">■ {esc(node.status)}</span>'
    took = "" if node.duration_s is None else f' <span class="nbagent-dim">{seconds(node.duration_s)}</span>'
    return f'<div class="nbagent-tool nbagent-node">◇ {esc(shorten(node.name, 100))} {outcome}{took}</div>'


class ToolCallCache:
    """The rendered lines of the tool calls of steps a live view still redraws.

    A call's name and arguments are fixed once it starts, and its outcome once it ends, so each is
    formatted once however often its step is redrawn: formatting a huge argument or result (a
    list of a million items) on every tick would cost the runner's thread, and with it every other
    run's Stop, that much ten times a second. Used on one thread (the runner's loop)."""

    def __init__(self) -> None:
        self._lines: dict[int, tuple[ToolCallRecord, str, str | None]] = {}

    def line(self, call: ToolCallRecord) -> str:
        cached = self._lines.get(id(call))
        if cached is None or cached[0] is not call:  # holding the call keeps its id unique
            cached = (call, _call_head(call), None)
            self._lines[id(call)] = cached
        if cached[2] is not None:
            return cached[2]
        line = _call_line(call, cached[1])
        if call.status is not None:
            self._lines[id(call)] = (call, cached[1], line)
        return line

    def forget(self, step: StepRecord) -> None:
        """Drop the lines of ``step``'s calls (it is frozen: never drawn again)."""
        for call in step.tool_calls:
            self._lines.pop(id(call), None)


def step_html(
    step: StepRecord,
    *,
    text: str | None = None,
    retry: ev.Retrying | None = None,
    calls: ToolCallCache | None = None,
) -> str:
    """One step's panel. ``text`` is the model text so far (default: ``step.model_output``);
    ``retry`` is the latest retry notice of a step still running; ``calls`` keeps the rendered
    tool calls across redraws. A step without ``end_s`` is drawn as running."""
    running = step.end_s is None
    text = step.model_output if text is None else text
    kind = "final answer" if step.kind == "final" else step.kind
    if running:
        foot = "running…"
        if step.input_tokens is not None or step.output_tokens is not None:
            foot += f" · {tokens(step.input_tokens, step.output_tokens)}"
    else:
        cut = "cut at " if step.interrupted else ""
        foot = f"{cut}{seconds(step.duration_s)} · {tokens(step.input_tokens, step.output_tokens)}"
        if step.retries:
            foot += f" · retried {step.retries}×"
    parts = [
        f'<div class="nbagent-step"><div class="nbagent-stephead"><b>Step {step.number}</b> '
        f'<span class="nbagent-dim nbagent-kind">{esc(kind)}</span> {_bar(step)} '
        f'<span class="nbagent-foot">{esc(foot)}</span></div>'
    ]
    if text:
        cursor = '<span class="nbagent-cursor"></span>' if running and not step.tool_calls else ""
        parts.append(f'<div class="nbagent-text">{clipped_text(text)}{cursor}</div>')
    lines = [(node.start_s, _node_line(node)) for node in step.nodes]
    for call in step.tool_calls:
        lines.append(
            (call.start_s, calls.line(call) if calls is not None else _call_line(call, _call_head(call)))
        )
    parts.extend(line for _start, line in sorted(lines, key=lambda pair: pair[0]))
    if running and retry is not None:
        parts.append(
            f'<div class="nbagent-note nbagent-warn">↻ retrying in {retry.delay_s:.1f} s '
            f"(attempt {esc(retry.attempt)}): {esc(shorten(retry.reason, ERROR_LIMIT))}</div>"
        )
    if step.error:
        parts.append(
            f'<div class="nbagent-note nbagent-error">✗ {esc(shorten(step.error, ERROR_LIMIT))}</div>'
        )
    if step.interrupted:
        parts.append('<div class="nbagent-note nbagent-warn">■ stopped here</div>')
    parts.append("</div>")
    return "".join(parts)


def badge_html(status: str, *, queued_after: str | None = None) -> str:
    """The status badge: ``● running``, ``◌ queued · after run 1a2b…``, ``■ interrupted``..."""
    badge = "nbagent-error-badge" if status == "error" else f"nbagent-{attr(status)}"
    label = STATUS_LABELS.get(status, status)
    if status == "queued" and queued_after:
        label += f" · after run {shorten(queued_after, 40)}"
    return f'<span class="nbagent-badge {badge}">{esc(label)}</span>'


def head_html(
    agent: str,
    model: str,
    status: str,
    elapsed_s: float | None,
    *,
    stopping: str | None = None,
    queued_after: str | None = None,
    notice_html: str | None = None,
    why: str | None = None,
) -> str:
    """The title line: agent, model, status badge, elapsed time, then a pending stop and a notice
    (such as why the Stop buttons are disabled), if any; ``why`` a stopped run stopped
    (``nbagent.events.why_stopped``). A ``"queued"`` run has no clock yet.
    ``notice_html`` is HTML nbagent wrote (any text in it passed through ``esc``)."""
    if elapsed_s is None or status == "queued":
        clock = ""
    elif status == "running":
        clock = seconds(elapsed_s)
    else:
        clock = f"{'in' if status == 'success' else 'after'} {seconds(elapsed_s)}"
    parts = [
        f'<span class="nbagent-title">{esc(shorten(agent, 100))}</span> '
        f'<span class="nbagent-dim">· {esc(shorten(model, 100))}</span> '
        f'{badge_html(status, queued_after=queued_after)} <span class="nbagent-dim">{clock}</span>'
    ]
    if stopping:
        parts.append(f' <span class="nbagent-warn">· {esc(stopping)}</span>')
    if why:
        parts.append(f' <span class="nbagent-dim">· {esc(why)}</span>')
    if notice_html:
        parts.append(f' <span class="nbagent-warn nbagent-notice">· {notice_html}</span>')
    return "".join(parts)


def summary_html(
    task: str,
    *,
    steps: int,
    cut: int = 0,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    unknown_usage: int = 0,
    cost_usd: float | None = None,
    error: str | None = None,
    answer: Any = None,
    fork: tuple[str, int] | None = None,
) -> str:
    """The task, the totals so far, and the run's error or answer once there is one; for a fork
    (``fork``: the run it forks and the step), that line, and its prefix as one collapsed line."""
    stats = f"{steps} step{'' if steps == 1 else 's'}" + (f" ({cut} cut)" if cut else "")
    if input_tokens is None and output_tokens is None:
        if steps:
            stats += " · tokens unknown"
    else:
        stats += f" · {count(input_tokens)} tokens in · {count(output_tokens)} out"
        if unknown_usage:
            stats += f" ({unknown_usage} step{'' if unknown_usage == 1 else 's'} unknown)"
    if cost_usd is not None:
        stats += f" · cost ${cost_usd:.4f}" + ("+" if unknown_usage else "")
    parts = [
        f'<div class="nbagent-summary"><div><b>Task</b> {esc(shorten(task, TASK_LIMIT))}</div>'
        f'<div class="nbagent-dim">{esc(stats)}</div>'
    ]
    if fork is not None:
        parts.append(fork_html(*fork))
    if error:
        parts.append(f'<div class="nbagent-error">✗ {esc(shorten(error, ERROR_LIMIT))}</div>')
    if answer is not None:
        parts.append(f"<div><b>Answer</b> {esc(shorten(answer, ANSWER_LIMIT))}</div>")
    parts.append("</div>")
    return "".join(parts)


def fork_html(run_id: str, at_step: int) -> str:
    """A fork's line: which run it forks at which step, and the steps before, the original's,
    folded into one line (they were not made again; the original's view shows them)."""
    origin = esc(shorten(run_id, 40))
    prefix = f"steps 1–{at_step - 1}" if at_step > 2 else "step 1" if at_step == 2 else "no step before"
    return (
        f'<div class="nbagent-fork"><b>⑂ fork of run {origin} at step {at_step}</b>'
        f'<details class="nbagent-dim"><summary>▸ {esc(prefix)}: run {origin}\'s, not made again '
        "(its totals are not counted here)</summary>"
        f"nbagent.show({origin!r}) shows them; nbagent.compare(original, fork) both paths."
        "</details></div>"
    )


def total_style(total_s: float | None) -> str:
    """The run's length for the step bars (never zero: it divides)."""
    return f"--nbagent-total:{max(total_s or 0.0, 0.001):.3f}"


def record_summary(record: RunRecord) -> str:
    """``summary_html`` of a whole record."""
    usage_unknown = sum(not s.usage_known for s in record.steps)
    return summary_html(
        record.task,
        steps=len(record.steps),
        cut=sum(1 for s in record.steps if s.interrupted),
        input_tokens=record.input_tokens,
        output_tokens=record.output_tokens,
        unknown_usage=usage_unknown,
        cost_usd=record.cost_usd,
        error=record.error if record.status in ("error", "max_steps", "unfinished", "limit") else None,
        answer=record.output if record.status == "success" else None,
        fork=fork_of(record),
    )


def fork_of(record: RunRecord) -> tuple[str, int] | None:
    """The run and step ``record`` forks (``None``: it is no fork)."""
    if record.forked_from_run_id is None or record.forked_at_step is None:
        return None
    return record.forked_from_run_id, record.forked_at_step


def _status(record: RunRecord) -> str:
    return "queued" if record.status == "running" and record.queued_after else str(record.status)


def record_html(record: RunRecord, *, style: bool = True) -> str:
    """A whole run as one static HTML fragment, without buttons: it is what a saved notebook keeps
    of a live view, and nothing in it can be clicked any more."""
    # A step's bar may not end past the run's: the last step can close a hair after the run's clock.
    total = max([record.duration_s or 0.0, *(s.end_s or s.start_s for s in record.steps)])
    head = head_html(
        record.agent,
        record.model,
        _status(record),
        record.duration_s,
        queued_after=record.queued_after,
        why=ev.why_stopped(record.status, record.stop_reason),
    )
    body: Iterable[str] = (step_html(step) for step in record.steps)
    return (
        f"{STYLE if style else ''}"
        f'<div class="nbagent-run" style="{total_style(total)}">'
        f'<div class="nbagent-head">{head}</div>{record_summary(record)}{"".join(body)}</div>'
    )


def record_line_html(record: RunRecord, *, style: bool = True) -> str:
    """A record in one line (badge, id, steps, time, tokens), for where its view is shown already."""
    stats = [f"{len(record.steps)} step{'' if len(record.steps) == 1 else 's'}"]
    if record.duration_s is not None:
        stats.append(seconds(record.duration_s))
    stats.append(tokens(record.input_tokens, record.output_tokens))
    stats.append("the view above shows the run")
    return (
        f"{STYLE if style else ''}"
        f'<div class="nbagent-line">{badge_html(_status(record), queued_after=record.queued_after)} '
        f'<span class="nbagent-title">RunRecord {esc(shorten(record.run_id, 40))}</span> '
        f'<span class="nbagent-dim">{esc(" · ".join(stats))}</span></div>'
    )


def record_display_html(record: RunRecord) -> str:
    """What a ``RunRecord`` shows as a cell's rich result (``RunRecord._repr_html_``).

    The whole static view, except in the cell that displayed the run's live view: there
    (``record = await run`` or ``nbagent.run(...)`` as the last line) the view above already shows
    the run, so the record is one line instead of the same run twice. Never raises."""
    from nbagent.view.display import shown_in_this_cell

    if shown_in_this_cell(record.run_id):
        return record_line_html(record)
    return record_html(record)
