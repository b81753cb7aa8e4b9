"""A batch on screen: the live widget table in Jupyter, one progress line in a terminal.

Both are thin views over ``Batch.progress()`` and its running and latest tasks, refreshed by the
batch's one ticker on the runner's loop (about ten times a second): that thread is their only
writer. The table stays cheap at any size because what it shows is bounded: the counts, at most
``RUNNING_SHOWN`` running rows and ``ENDED_SHOWN`` latest ended ones, and a widget value is sent
only when its text changed, so a batch of 100,000 tasks costs the front end what one of ten does
(at most three values per refresh). Every text from a task, a model or a tool is escaped.

"done" counts the tasks with a result (ended, or reused from an earlier attempt); the skipped
ones are counted apart and leave their share of the bar empty, so a batch stopped with most of
its tasks skipped never looks complete. The bar's green is successes only.

Buttons do one thread-safe thing each: ``batch.interrupt("now")``, ``batch.interrupt(
"after_step")``, or naming the task to open; the next refresh shows that task's run in the
run view's static form (``nbagent.view.html.record_html``), live while it runs.
"""

from __future__ import annotations

import contextvars
import sys
import time
import uuid
from typing import TYPE_CHECKING, Any, TextIO

from nbagent.analytics.cost import dollars
from nbagent.errors import describe
from nbagent.text import shorten
from nbagent.view.format import count, esc
from nbagent.view.html import record_html

if TYPE_CHECKING:
    from nbagent.batches.handle import Batch
    from nbagent.batches.state import Progress, TaskState
    from nbagent.batches.tasks import TaskItem

RUNNING_SHOWN = 8
ENDED_SHOWN = 5
TEXT_INTERVAL_S = 0.5
"""Seconds between two redraws of the terminal line (a non-terminal stream gets one a minute)."""

MARKS = {
    "success": "✓",
    "interrupted": "■",
    "error": "✗",
    "max_steps": "⟳",
    "limit": "⊘",
    "skipped": "–",
    "unfinished": "?",
}

SKIP_MARK = MARKS["skipped"]

STYLE = """<style>
.nbb {font-family: var(--jp-ui-font-family, sans-serif); font-size: 13px}
.nbb-bar {height: 6px; background: #e5e7eb; border-radius: 3px; margin: 4px 0; overflow: hidden}
.nbb-bar {display: flex}
.nbb-fill {height: 100%; background: #16a34a} .nbb-fill-reused {background: #86efac}
.nbb-fill-other {background: #f59e0b}
.nbb-row {display: grid; grid-template-columns: 9em 1fr 9em 5em 6em 7em; gap: 6px;
  border-bottom: 1px solid #eee; padding: 1px 0}
.nbb-scored {grid-template-columns: 9em 1fr 9em 5em 6em 7em 6em}
.nbb-key {font-family: var(--jp-code-font-family, monospace); overflow: hidden}
.nbb-task {overflow: hidden; white-space: nowrap; text-overflow: ellipsis}
.nbb-s-success {color: #15803d} .nbb-s-error {color: #b91c1c} .nbb-s-interrupted {color: #b45309}
.nbb-s-max_steps {color: #7c3aed} .nbb-s-running {color: #2563eb}
.nbb-h {font-weight: bold; color: #555}
</style>"""


def _seconds(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value:.1f} s" if value < 120 else f"{value / 60:.1f} min"


def progress_line(p: Progress) -> str:
    """The batch in one line of text (the terminal view, and the table's plain-text fallback)."""
    ended = ", ".join(f"{n} {status}" for status, n in sorted(p.ended.items()))
    parts = [f"{p.ran}/{p.total} done" + (f" ({ended})" if ended else "")]
    if p.reused:
        parts.append(f"{p.reused} reused")
    if p.skipped:
        parts.append(f"{p.skipped} skipped")
    parts.append(f"{p.running} running")
    if p.queued:
        parts.append(f"{p.queued} queued")
    parts.append(f"tokens {count(_total(p))}")
    if p.cost_usd is not None:
        parts.append(dollars(p.cost_usd))
    parts.append(_seconds(p.elapsed_s))
    if p.eta_s is not None:
        parts.append(f"ETA {_seconds(p.eta_s)}")
    name = f"{p.name}: " if p.name else "batch: "
    state = "" if p.state == "running" else f" [{p.state}]"
    return name + " · ".join(parts) + state


def head_html(p: Progress) -> str:
    counts = " · ".join(
        f'<span class="nbb-s-{esc(status)}">{MARKS.get(status, "")} {n} {esc(status)}</span>'
        for status, n in sorted(p.ended.items())
    )
    return (
        f'<div class="nbb"><b>{esc(p.name or "batch")}</b> · {esc(p.state)} · '
        f"<b>{p.ran} / {p.total}</b> done{' · ' + counts if counts else ''}"
        f"{f' · {p.reused} reused' if p.reused else ''}"
        f"{f' · {SKIP_MARK} {p.skipped} skipped' if p.skipped else ''}"
        f" · {p.running} running · {p.queued} queued<div>tokens {esc(count(_total(p)))}"
        f"{' · ' + esc(dollars(p.cost_usd)) if p.cost_usd is not None else ''}"
        f" · {esc(_seconds(p.elapsed_s))}"
        f"{' · ETA ' + esc(_seconds(p.eta_s)) if p.eta_s is not None else ''}</div>"
        f'<div class="nbb-bar">{_bar(p)}</div></div>'
    )


def _bar(p: Progress) -> str:
    """Successes green, reused light green, other ends amber; skipped and queued tasks empty."""
    if not p.total:
        return ""
    success = p.ended.get("success", 0)
    other = sum(p.ended.values()) - success
    parts = [
        ("nbb-fill", success),
        ("nbb-fill nbb-fill-reused", p.reused),
        ("nbb-fill nbb-fill-other", other),
    ]
    return "".join(
        f'<div class="{css}" style="width: {100.0 * n / p.total:.1f}%"></div>' for css, n in parts if n
    )


def _total(p: Progress) -> int | None:
    return None if p.input_tokens is None else p.input_tokens + (p.output_tokens or 0)


def key_text(item: TaskItem) -> str:
    """The key cell of a task: its key, or ``#position`` when the key is only the task's text
    (plain-string tasks), which the next cell shows already; the Open box takes either."""
    if item.key == item.task or item.key.startswith(item.task + "#"):
        return f"#{item.index}"
    return item.key


def _row(
    key: str, task: str, status: str, steps: str, seconds: str, tokens: str, score: str | None, css: str = ""
) -> str:
    """One row of cells; ``score`` is ``None`` when the batch has no score (no such column)."""
    css = f"nbb-row{' nbb-scored' if score is not None else ''}{' ' + css if css else ''}"
    return (
        f'<div class="{css}"><span class="nbb-key">{esc(shorten(key, 14))}</span>'
        f'<span class="nbb-task">{esc(shorten(task, 90))}</span>'
        f'<span class="nbb-s-{esc(status)}">{MARKS.get(status, "")} {esc(status)}</span>'
        f"<span>{esc(steps)}</span><span>{esc(seconds)}</span><span>{esc(tokens)}</span>"
        f"{'' if score is None else f'<span>{esc(score)}</span>'}</div>"
    )


def _score_text(state: TaskState) -> str:
    """A task's score as its cell shows it: NA when there is none (a run cut short, a failed
    scorer: ``score_error`` says which)."""
    if state.score is None:
        return "NA" if state.score_error is None else "NA (error)"
    return shorten(repr(state.score), 20)


def rows_html(batch: Batch, now: float) -> str:
    """The running rows and the latest ended ones (bounded, whatever the batch's size)."""
    running = batch.running()
    scored = batch.score is not None
    lines = [
        '<div class="nbb">',
        _row("key", "task", "status", "steps", "time", "tokens", "score" if scored else None, "nbb-h"),
    ]
    for state in running[:RUNNING_SHOWN]:
        lines.append(_live_row(state, now, scored))
    if len(running) > RUNNING_SHOWN:
        lines.append(f"<div>… and {len(running) - RUNNING_SHOWN} more running</div>")
    for state in batch.latest()[:ENDED_SHOWN]:
        record = state.record
        if record is None:
            continue
        lines.append(
            _row(
                key_text(state.item),
                state.item.task,
                str(record.status),
                str(len(record.steps)),
                _seconds(record.duration_s),
                count(record.total_tokens),
                _score_text(state) if scored else None,
            )
        )
    lines.append("</div>")
    return "".join(lines)


def _live_row(state: TaskState, now: float, scored: bool) -> str:
    run = state.run
    steps, tokens = "?", "?"
    try:
        record = run.live_record() if run is not None else None  # on the loop: between events
    except RuntimeError:
        record = None
    if record is not None:
        steps, tokens = str(len(record.steps)), count(record.total_tokens)
    elapsed = None if state.started is None else now - state.started
    score = "" if scored else None
    return _row(key_text(state.item), state.item.task, "running", steps, _seconds(elapsed), tokens, score)


class BatchTable:
    """The widget table of a batch: ``widget`` is the whole of it; ``head``, ``rows``, ``opened``,
    ``stop_button``, ``after_button``, ``open_text`` and ``open_button`` its parts (to read)."""

    def __init__(self, batch: Batch) -> None:
        import ipywidgets as widgets

        self.batch = batch
        self._opened: str | None = None
        self.head = widgets.HTML(STYLE + head_html(batch.progress()))
        self.stop_button = widgets.Button(
            description="Stop all", button_style="danger", tooltip="Interrupt every live run; skip the rest"
        )
        self.after_button = widgets.Button(
            description="Stop after current", tooltip="Let the live runs finish; start no more"
        )
        self.open_text = widgets.Text(placeholder="task # or key", layout=widgets.Layout(width="12em"))
        self.open_button = widgets.Button(description="Open", tooltip="Show that task's run below")
        self.rows = widgets.HTML("")
        self.opened = widgets.HTML("")
        self.stop_button.on_click(lambda _: batch.interrupt("now"))
        self.after_button.on_click(lambda _: batch.interrupt("after_step"))
        self.open_button.on_click(lambda _: self.open(self.open_text.value))
        controls = widgets.HBox([self.stop_button, self.after_button, self.open_text, self.open_button])
        self.widget = widgets.VBox([self.head, controls, self.rows, self.opened])
        self._sent: dict[str, str] = {}
        self.display_id = f"nbagent-batch-{uuid.uuid4().hex[:12]}"
        self._displayed = False

    def static_html(self) -> str:
        """The table as plain HTML, without buttons: what a saved notebook keeps of it."""
        return STYLE + head_html(self.batch.progress()) + rows_html(self.batch, time.perf_counter())

    def display(self) -> None:
        """Show the table in the current output, with static HTML and a text line as fallbacks
        for front ends without widgets."""
        from IPython.display import display

        bundle = dict(self.widget._repr_mimebundle_())
        bundle["text/plain"] = progress_line(self.batch.progress())
        bundle["text/html"] = self.static_html()
        display(bundle, raw=True, display_id=self.display_id)
        self._displayed = True

    def _replace_display(self) -> None:
        # As the run view does: once the batch is over, static HTML that looks the same takes the
        # widget's place, published from an empty context so the kernel names the cell it is
        # running now (nbclient routes the update only then; JupyterLab by display id).
        from IPython.display import update_display

        bundle = {"text/html": self.static_html(), "text/plain": progress_line(self.batch.progress())}
        contextvars.Context().run(update_display, bundle, raw=True, display_id=self.display_id)

    def open(self, task: str | int) -> None:
        """Show a task's run (by position or key) under the table from the next refresh. Any thread."""
        self._opened = str(task).strip()

    def _state(self) -> TaskState | None:
        name = self._opened
        if not name:
            return None
        try:  # a task key first (keys may be numbers), then a position ("3" or "#3")
            return self.batch.task_state(name)
        except KeyError:
            pass
        try:
            position = int(name.removeprefix("#"))
        except ValueError:
            return None
        if 0 <= position < len(self.batch.tasks):
            return self.batch.tasks[position]
        return None

    def _set(self, part: str, widget: Any, value: str) -> None:
        if self._sent.get(part) != value:
            self._sent[part] = value
            widget.value = value

    def _opened_html(self) -> str | None:
        """The opened task's record (or phase), a line for a name that is no task, or ``None``."""
        state = self._state()
        if state is None:
            return f"<div>no task {esc(self._opened)!s} in this batch</div>" if self._opened else None
        record = state.record
        if record is None and state.run is not None:
            try:
                record = state.run.record  # a snapshot, with the text streamed so far
            except RuntimeError:
                record = None
        if record is None:
            return f"<div>{esc(state.item.key)}: {state.phase}</div>"
        return record_html(record)

    def refresh(self, *, final: bool = False) -> None:
        """On the runner's loop: send what changed."""
        batch = self.batch
        self._set("head", self.head, STYLE + head_html(batch.progress()))
        self._set("rows", self.rows, rows_html(batch, time.perf_counter()))
        try:
            text = self._opened_html()
        except Exception as exc:  # whatever was typed in the Open box, the table keeps refreshing
            text = f"<div>cannot open {esc(self._opened)!s}: {esc(describe(exc))}</div>"
        if text is not None:
            self._set("opened", self.opened, text)
        if final:
            self.stop_button.disabled = self.after_button.disabled = True
            if self._displayed:
                self._replace_display()

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)


class TextProgress:
    """One progress line on a terminal (redrawn in place), or a line a minute on other streams."""

    def __init__(self, batch: Batch, stream: TextIO | None = None) -> None:
        self.batch = batch
        self.stream = stream if stream is not None else sys.stderr
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last = 0.0
        self._width = 0

    def refresh(self, *, final: bool = False) -> None:
        now = time.monotonic()
        if not final and now - self._last < (TEXT_INTERVAL_S if self._tty else 60.0):
            return
        self._last = now
        line = progress_line(self.batch.progress())
        if self._tty:
            pad = max(0, self._width - len(line))
            self._width = len(line)
            self.stream.write("\r" + line + " " * pad + ("\n" if final else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def show_batch(batch: Batch) -> None:
    """Attach the view that fits the front end and show it (before the batch starts)."""
    from nbagent.view.display import front_end

    if front_end() == "widgets":
        table = BatchTable(batch)
        batch.add_view(table)
        batch.table = table
        table.display()
    else:
        batch.add_view(TextProgress(batch))
