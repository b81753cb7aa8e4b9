"""Plain-text front end: a sink that prints a run as it happens, and a text account of a record.

Used by ``python -m nbagent`` and, by default, for every run outside Jupyter (a script, an IPython
terminal), so what it prints is meant to be read once, top to bottom, in a terminal or a log:

- The transcript is printed live and only once: a header per step, the model's text as it
  streams, each tool call (code as an indented block) and its result, and a footer when the step
  ends. The footer carries the step's kind, time and tokens because only then are they known: an
  action step whose reply has no tool call turns out to be the final answer, and usage arrives
  last. Unknown tokens print as ``?``, never 0.
- The run ends with one summary line (status, steps, time, tokens) and, if any, the error.
- Every string a model, a tool or the user wrote goes through ``nbagent.text``: it never raises
  (a result whose ``repr`` fails prints a placeholder) and ``terminal_safe`` neutralises control
  characters, because model text may carry escape sequences (OSC 52 writes the user's clipboard,
  CSI sequences clear the screen). The view's own colours are the only escapes it writes, and only
  to a terminal without ``NO_COLOR``.

The view folds the events with its own ``Recorder`` (as the store does), so the times and tokens
it prints are exactly the record's. It is thread-safe: events arrive on the runner's thread, and
``break_line()`` may come from a signal handler on the main thread.
"""

from __future__ import annotations

import os
import sys
import textwrap
import threading
from typing import Any, TextIO

from nbagent import events as ev
from nbagent.recorder import Recorder
from nbagent.records import RunRecord, StepRecord
from nbagent.runtime.source import Sink
from nbagent.secrets import StreamScrub, scrub
from nbagent.text import safe_text, shorten, terminal_safe
from nbagent.view.format import LOG_LINES_SHOWN, log_tail, progress_text

__all__ = ["TextView", "plural", "record_text", "shorten", "summary_line"]

CODE_LINES = 40
"""A code block shows at most this many lines (the record keeps the whole code)."""
CODE_WIDTH = 240
TEXT_GUTTER = "  │ "
PROGRESS_EVERY_S = 1.0
"""A running call's progress prints at most once a second (its first report at once)."""

KIND_LABELS = {"planning": "planning", "final": "final answer"}
_COLORS = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33"}
_STATUS_COLORS = {"success": "green", "interrupted": "yellow", "max_steps": "yellow", "limit": "yellow"}


def plural(count: int, word: str) -> str:
    """``"1 step"``, ``"2 steps"``."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _safe(value: Any) -> str:
    """Untrusted text as it may reach a terminal: any value, CRLF as a newline, controls escaped."""
    return terminal_safe(safe_text(value).replace("\r\n", "\n"))


def _one_line(value: Any, limit: int = 200) -> str:
    """A value on one line, scrubbed of credentials (a record made outside a run never was)."""
    return terminal_safe(scrub(shorten(value, limit)))


def _seconds(value: float | None) -> str:
    return "?" if value is None else f"{value:.2f} s"


def _counts(tokens_in: int | None, tokens_out: int | None, partial: bool = False, unit: str = "") -> str:
    """``"120 in / 35 out"``; ``?`` for an unknown count. ``partial`` marks known counts that leave
    out some unknown part (a ``?`` says so already)."""
    text = f"{'?' if tokens_in is None else tokens_in} in / {'?' if tokens_out is None else tokens_out} out"
    text += unit
    return text + " (partial)" if partial and tokens_in is not None and tokens_out is not None else text


def step_line(step: StepRecord) -> str:
    """``"step 2 · 0.84 s · 120 in / 35 out"``, with the kind unless it is a plain action."""
    parts = [f"step {step.number}"]
    if step.kind in KIND_LABELS:
        parts.append(KIND_LABELS[step.kind])
    if step.interrupted:
        parts.append("interrupted")
    elif step.end_s is None:
        parts.append("running")
    parts.append(_seconds(step.duration_s))
    tokens = _counts(step.input_tokens, step.output_tokens, partial=step.usage_source == "unknown")
    parts.append(tokens + (" (estimated)" if step.usage_source == "estimated" else ""))
    return " · ".join(parts)


def summary_line(record: RunRecord) -> str:
    """One line: ``"success · 4 steps · 3.21 s · 349 in / 78 out tokens"``, then cost, queueing
    and why it stopped when there is something to say."""
    tokens = _counts(record.input_tokens, record.output_tokens, not record.usage_complete, " tokens")
    parts = [_one_line(record.status, 40), plural(len(record.steps), "step"), _seconds(record.duration_s)]
    parts.append(tokens)
    if record.cost_usd is not None:
        parts.append(f"${record.cost_usd:.4f}")
    if record.queued_s > 0:
        parts.append(f"queued {_seconds(record.queued_s)}")
    if record.wait_s > 0:
        parts.append(f"waited {_seconds(record.wait_s)} for approvals")
    why = ev.why_stopped(record.status, record.stop_reason)
    if why is not None:
        parts.append(_one_line(why, 80))
    return " · ".join(parts)


def _argument(value: Any) -> str:
    if isinstance(value, str):
        clipped = value if len(value) <= 120 else value[:119] + "…"
        return str.__repr__(clipped)  # quoted, and it escapes control characters
    return shorten(value, 80)


def call_lines(tool: str, arguments: Any, indent: str = "  ") -> list[str]:
    """A tool call as text: ``⚙ tool(a=1, b='x')``, then any code in it as an indented block.

    Code is python_interpreter's argument, a ``code`` argument or any multi-line string: collapsed
    onto one line it would be unreadable."""
    name = _one_line(tool, 80)
    blocks: list[tuple[str | None, str]] = []
    inline = ""
    if isinstance(arguments, str):
        if "\n" in arguments.strip() or tool == "python_interpreter":
            blocks.append((None, arguments))
        else:
            inline = _one_line(arguments, 160)
    elif isinstance(arguments, dict) and all(isinstance(key, str) for key in arguments):
        shown = []
        for key, value in arguments.items():
            if isinstance(value, str) and (key == "code" or "\n" in value.strip()):
                blocks.append((key if len(arguments) > 1 else None, value))
            else:
                shown.append(f"{key}={_argument(value)}")
        inline = _one_line(", ".join(shown), 160)
    elif arguments is not None:
        inline = _one_line(arguments, 160)
    lines = [f"{indent}⚙ {name}({inline})" if inline or not blocks else f"{indent}⚙ {name}"]
    for label, code in blocks:
        if label is not None:
            lines.append(f"{indent}  {_one_line(label, 60)}:")
        lines.extend(code_block(code, indent + "    "))
    return lines


def code_block(code: str, indent: str = "      ") -> list[str]:
    """``code`` as indented lines, dedented, at most ``CODE_LINES`` lines of ``CODE_WIDTH``."""
    text = textwrap.dedent(_safe(scrub(code[: CODE_LINES * CODE_WIDTH * 2])).strip("\n")).rstrip()
    lines = text.split("\n")
    shown = [
        indent + (line if len(line) <= CODE_WIDTH else line[: CODE_WIDTH - 1] + "…") if line else ""
        for line in lines[:CODE_LINES]
    ]
    more = len(lines) - CODE_LINES
    if more > 0 or len(code) > CODE_LINES * CODE_WIDTH * 2:
        shown.append(indent + "… (clipped; the record keeps the whole code)")
    return shown


def _outcome(status: str | None, result: Any, error: str | None, limit: int = 300) -> str:
    if status == "ok":
        return "→ " + _one_line(result, limit)
    if status is None:
        return "… still running"
    if status == "deferred":
        return "⏸ deferred to the caller"
    return f"✗ {_one_line(status, 20)}: {_one_line(error, limit)}"


def fork_text(run_id: str, at_step: int) -> str:
    """A fork's line: the run and step it forks, its prefix folded (the original's steps)."""
    before = f"steps 1–{at_step - 1}" if at_step > 2 else "step 1" if at_step == 2 else "no step before"
    return f"⑂ fork of run {_one_line(run_id, 40)} at step {at_step} · {before}: that run's, not made again"


def record_text(record: RunRecord) -> str:
    """A readable multi-line account of a run (``str(record)``), safe to print to a terminal."""
    lines = [
        f"Run {_one_line(record.run_id, 40)} · {_one_line(record.agent, 80)} / {_one_line(record.model, 80)}",
        f"  {summary_line(record)}",
        f"  task: {_one_line(record.task, 300)}",
    ]
    if record.continues_run_id:
        lines.append(f"  continues run {_one_line(record.continues_run_id, 40)}")
    if record.forked_from_run_id and record.forked_at_step:
        lines.append(f"  {fork_text(record.forked_from_run_id, record.forked_at_step)}")
    if record.parent_run_id:
        lines.append(f"  started by run {_one_line(record.parent_run_id, 40)}")
    if record.tags:
        lines.append("  tags: " + ", ".join(_one_line(tag, 60) for tag in record.tags))
    for step in record.steps:
        lines.append(f"  {step_line(step)}")
        if step.model_output:
            lines.append(f"    says: {_one_line(step.model_output, 300)}")
        for node in step.nodes:
            lines.append(
                f"    ◇ {_one_line(node.name, 80)} {_outcome(node.status, node.output, node.error, 200)}"
            )
        for call in step.tool_calls:
            lines.extend(call_lines(call.tool, call.arguments, indent="    "))
            lines.append(f"      {_outcome(call.status, call.result, call.error, 200)}")
            if call.progress is not None and call.status != "ok":
                lines.append(f"      at {_one_line(progress_text(call.progress), 200)}")
            if call.logs:
                shown, hidden = log_tail(call.logs, call.logs_dropped)
                if hidden:
                    lines.append(f"      … {plural(hidden, 'earlier log line')}")
                lines.extend(f"      │ {_one_line(line, 200)}" for line in shown)
        if step.error:
            lines.append(f"    error: {_one_line(step.error, 600)}")
    if record.error:
        lines.append(f"  error: {_one_line(record.error, 1000)}")
    if record.status == "success" or (record.status == "max_steps" and record.output is not None):
        lines.append(f"  output: {_one_line(record.output, 400)}")
    return "\n".join(lines)


def _wants_color(stream: TextIO) -> bool:
    if "NO_COLOR" in os.environ or os.environ.get("TERM") == "dumb":
        return False
    try:
        return bool(stream.isatty())
    except Exception:
        return False


_MID_TEXT = (
    ev.TextDelta, ev.ToolArgumentsDelta, ev.Usage, ev.ModelCallStarting, ev.ModelCallEnded, ev.ForkPoint,
)  # fmt: skip
"""Events that may come while the model's text streams, printing nothing of their own."""


def _echoes_ctrl_c(stream: TextIO) -> bool:
    """True when ``stream`` is a terminal that shows a typed Ctrl-C as ``^C``."""
    try:
        if not stream.isatty():
            return False
        import termios

        local_modes = termios.tcgetattr(stream.fileno())[3]
        return bool(local_modes & termios.ECHO and local_modes & termios.ECHOCTL)
    except ImportError:  # no termios (Windows): its console echoes ``^C``
        return True
    except Exception:  # not a real file, or a closed one
        return False


class _Shown:
    """What the view knows of one run: its own fold of the events, and the footers printed."""

    def __init__(self) -> None:
        self.recorder = Recorder()
        self.footed: set[int] = set()
        self.text = StreamScrub()
        """The model text streaming now: printed as it may be shown (``nbagent.secrets``)."""
        self.progress_at: dict[str, float] = {}
        """When each running call's progress was last printed (``perf_counter``)."""
        self.logs: dict[str, int] = {}
        """How many log lines of each call were seen (the first ``LOG_LINES_SHOWN`` print)."""

    def step(self, number: int) -> StepRecord | None:
        record = self.recorder.live
        if record is None:
            return None
        return next((s for s in record.steps if s.number == number), None)


class TextView(Sink):
    """A sink that prints each step of a run as it happens (tokens included).

    Args:
        stream: where to write (default: ``sys.stdout`` at each write, so a redirect is followed).
        color: colour the view's own marks; default: only on a terminal and without ``NO_COLOR``.
    """

    def __init__(self, stream: TextIO | None = None, *, color: bool | None = None) -> None:
        self._stream = stream
        self._color = color
        self._lock = threading.RLock()
        self._runs: dict[str, _Shown] = {}
        self._in_text = False
        self._newlines = 0

    @property
    def stream(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stdout

    # -- writing ---------------------------------------------------------------------------

    def _paint(self, text: str, style: str) -> str:
        color = self._color if self._color is not None else _wants_color(self.stream)
        return f"\x1b[{_COLORS[style]}m{text}\x1b[0m" if color else text

    def _write(self, text: str) -> None:
        stream = self.stream
        try:
            stream.write(text)
        except UnicodeEncodeError:  # a stream that cannot take "▶" or "│" still gets the run
            encoding = getattr(stream, "encoding", None) or "ascii"
            stream.write(text.encode(encoding, "backslashreplace").decode(encoding))

    def _lines(self, *lines: str) -> None:
        """Whole lines, after ending the model text in progress (its trailing newlines dropped)."""
        if self._in_text:
            self._write("\n")
            self._in_text = False
        self._newlines = 0
        self._write("".join(line + "\n" for line in lines))
        self.stream.flush()

    def _stream_text(self, text: str) -> None:
        for index, part in enumerate(text.split("\n")):
            if index:
                self._newlines += 1
            if not part:
                continue
            if not self._in_text:
                self._write(self._paint(TEXT_GUTTER, "dim"))
                self._in_text = True
            elif self._newlines:
                self._write(("\n" + self._paint(TEXT_GUTTER, "dim")) * self._newlines)
            self._newlines = 0
            self._write(part)
        self.stream.flush()

    def break_line(self) -> None:
        """End the current line now. For a Ctrl-C handler: a terminal has echoed ``^C`` where the
        cursor was, and what the view prints next must start on a line of its own. Model text
        in progress is ended wherever the view writes; a line of its own for the ``^C`` only on a
        terminal that echoed one (in a file or a pipe it would be a blank line)."""
        with self._lock:
            ended_text = self._in_text
            self._in_text = False
            self._newlines = 0
            if ended_text or _echoes_ctrl_c(self.stream):
                self._write("\n")
                self.stream.flush()

    # -- events ----------------------------------------------------------------------------

    def __call__(self, event: ev.RunEvent) -> None:
        with self._lock:
            shown = self._runs.get(event.run_id)
            if isinstance(event, ev.RunStarted) and shown is None:
                shown = self._runs[event.run_id] = _Shown()
            if shown is not None:
                shown.recorder.apply(event)
                held = "" if type(event) in _MID_TEXT else shown.text.flush()
                if held:  # what the text held back is shown before anything else
                    self._stream_text(_safe(held))
            self._show(event, shown)

    def _show(self, event: ev.RunEvent, shown: _Shown | None) -> None:
        if isinstance(event, ev.TextDelta):
            self._stream_text(_safe(shown.text.feed(event.text) if shown is not None else scrub(event.text)))
        elif isinstance(event, ev.RunStarted):
            who = f"{_one_line(event.agent, 80)} ({_one_line(event.model, 80)})"
            head = f"{who}: {_one_line(event.task, 300)}"
            if event.continues_run_id:
                head += f" · continues run {_one_line(event.continues_run_id, 40)}"
            self._lines(self._paint("▶ ", "bold") + head)
            if event.forked_from_run_id and event.forked_at_step:
                line = fork_text(event.forked_from_run_id, event.forked_at_step)
                self._lines(self._paint(f"  {line}", "dim"))
        elif isinstance(event, ev.RunQueued):
            after = _one_line(event.after_run_id or "another run", 40)
            self._lines(self._paint(f"  … waiting for run {after} of the same agent to end", "dim"))
        elif isinstance(event, ev.StepStarted):
            kind = " · planning" if event.kind == "planning" else ""
            self._lines(self._paint(f"── step {event.step}{kind}", "bold"))
        elif isinstance(event, ev.ToolCallStarted):
            self._lines(*call_lines(event.tool, event.arguments))
        elif isinstance(event, ev.ToolCallProgress) and shown is not None:
            self._progress(event, shown)
        elif isinstance(event, ev.ToolCallLog) and shown is not None:
            seen = shown.logs[event.call_id] = shown.logs.get(event.call_id, 0) + 1
            if seen <= LOG_LINES_SHOWN:
                self._lines(self._paint(f"      │ {event.level}: {_one_line(event.text, 200)}", "dim"))
        elif isinstance(event, ev.ToolCallFinished):
            outcome = _outcome(event.status, event.result, event.error)
            plain = event.status in ("ok", "deferred")
            more = shown.logs.pop(event.call_id, 0) - LOG_LINES_SHOWN if shown is not None else 0
            if more > 0:
                self._lines(self._paint(f"      … {plural(more, 'more log line')} (in the record)", "dim"))
            self._lines("    " + (outcome if plain else self._paint(outcome, "red")))
        elif isinstance(event, ev.NodeFinished):
            step = shown.step(event.step) if shown is not None else None
            names = {n.node_id: n.name for n in step.nodes} if step is not None else {}
            name = _one_line(names.get(event.node_id, event.node_id), 80)
            outcome = _outcome(event.status, event.output, event.error)
            self._lines(f"  ◇ {name} " + (outcome if event.status == "ok" else self._paint(outcome, "red")))
        elif isinstance(event, ev.ApprovalRequested):
            self._lines(self._paint(f"    ◆ waiting for approval ({_one_line(event.call_id, 40)})", "yellow"))
        elif isinstance(event, ev.ApprovalDecided):
            why = f": {_one_line(event.reason, 200)}" if event.reason else ""
            self._lines(f"    {event.decision}{why} after {_seconds(event.wait_s)}")
        elif isinstance(event, ev.Retrying):
            reason = _one_line(event.reason, 200)
            self._lines(
                f"  ↻ retrying in {event.delay_s:.1f} s (attempt {_one_line(event.attempt, 20)}): {reason}"
            )
        elif isinstance(event, ev.StepFinished):
            if event.error:
                self._lines(self._paint(f"    error: {_one_line(event.error, 600)}", "red"))
            self._footer(event.step, shown, failed=bool(event.error or event.interrupted))
        elif isinstance(event, ev.RunFinished):
            self._end(event, shown)

    def _progress(self, event: ev.ToolCallProgress, shown: _Shown) -> None:
        """Print a running call's progress: its first report, then at most once a second (a
        server may report hundreds of times; a terminal is read once, top to bottom)."""
        last = shown.progress_at.get(event.call_id)
        if last is not None and event.t - last < PROGRESS_EVERY_S:
            return
        record = shown.recorder.live
        call = next((c for c in record.tool_calls if c.call_id == event.call_id), None) if record else None
        if call is None or call.progress is None or call.status is not None:
            return
        shown.progress_at[event.call_id] = event.t
        self._lines(self._paint(f"    … {_one_line(progress_text(call.progress), 200)}", "dim"))

    def _footer(self, number: int, shown: _Shown | None, *, failed: bool) -> None:
        step = shown.step(number) if shown is not None else None
        if shown is not None:
            shown.footed.add(number)
        line = step_line(step) if step is not None else f"step {number}"
        failed = failed or (step is not None and (step.interrupted or bool(step.error)))
        self._lines(self._paint(f"  {'✗' if failed else '✓'} {line}", "red" if failed else "dim"))

    def _end(self, event: ev.RunFinished, shown: _Shown | None) -> None:
        record = shown.recorder.live if shown is not None else None
        if record is None or shown is None:
            self._lines(f"■ {_one_line(event.status, 40)}")
            return
        for step in record.steps:  # a step the end cut short never got its StepFinished
            if step.number not in shown.footed:
                self._footer(step.number, shown, failed=True)
        style = _STATUS_COLORS.get(record.status, "red")
        lines = [self._paint(f"■ {summary_line(record)}", style)]
        if record.error:
            lines.append(self._paint(f"  {_one_line(record.error, 1000)}", "red"))
        if record.status == "max_steps" and record.output is not None:
            lines.append(f"  output: {_one_line(record.output, 400)}")
        self._lines(*lines)
        del self._runs[event.run_id]
