"""Plain-text front end: a sink that prints a run as it happens, and a text rendering of a record.

Used by ``python -m nbagent`` and wherever widgets cannot render (an IPython terminal).
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

from . import events as ev
from .records import RunRecord


def shorten(value: Any, limit: int = 200) -> str:
    """``value`` as one line of at most ``limit`` characters."""
    text = value if isinstance(value, str) else repr(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _tokens(i: int | None, o: int | None) -> str:
    return (
        "tokens ?"
        if i is None and o is None
        else f"tokens {i if i is not None else '?'} in / {o if o is not None else '?'} out"
    )


def record_text(record: RunRecord) -> str:
    """A readable multi-line account of a run."""
    lines = [
        f"Run {record.run_id} [{record.agent} / {record.model}] {record.summary()}",
        f"  task: {shorten(record.task)}",
    ]
    for step in record.steps:
        duration = "?" if step.duration_s is None else f"{step.duration_s:.2f}s"
        flag = " INTERRUPTED" if step.interrupted else ""
        tokens = _tokens(step.input_tokens, step.output_tokens)
        lines.append(f"  step {step.number} {step.kind}{flag}: {duration}, {tokens}")
        if step.model_output:
            lines.append(f"    says: {shorten(step.model_output)}")
        for call in step.tool_calls:
            outcome = call.error if call.status != "ok" else shorten(call.result, 120)
            lines.append(f"    {call.tool}({shorten(call.arguments, 80)}) -> {call.status}: {outcome}")
        if step.error:
            lines.append(f"    error: {step.error}")
    if record.status == "success":
        lines.append(f"  output: {shorten(record.output, 400)}")
    return "\n".join(lines)


class TextView:
    """A sink that writes each step to a text stream as it happens (tokens included)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self._in_text = False

    def _line(self, text: str) -> None:
        if self._in_text:
            self.stream.write("\n")
            self._in_text = False
        self.stream.write(text + "\n")
        self.stream.flush()

    def __call__(self, event: ev.RunEvent) -> None:
        if isinstance(event, ev.TextDelta):
            if not self._in_text:
                self.stream.write("  │ ")
                self._in_text = True
            self.stream.write(event.text.replace("\n", "\n  │ "))
            self.stream.flush()
        elif isinstance(event, ev.RunStarted):
            self._line(f"▶ {event.agent} ({event.model}): {shorten(event.task)}")
        elif isinstance(event, ev.StepStarted):
            self._line(f"— step {event.step} ({event.kind})")
        elif isinstance(event, ev.ToolCallStarted):
            self._line(f"  ⚙ {event.tool}({shorten(event.arguments, 100)})")
        elif isinstance(event, ev.ToolCallFinished):
            outcome = shorten(event.result, 160) if event.status == "ok" else f"{event.status}: {event.error}"
            self._line(f"    → {outcome}")
        elif isinstance(event, ev.Retrying):
            self._line(f"  ↻ retrying in {event.delay_s:.1f} s (attempt {event.attempt}): {event.reason}")
        elif isinstance(event, ev.StepFinished):
            if event.error:
                self._line(f"  ✗ {event.error}")
        elif isinstance(event, ev.RunFinished):
            self._line(
                f"■ {event.status}"
                + (f": {event.error}" if event.error and event.status != "interrupted" else "")
            )
