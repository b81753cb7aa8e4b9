"""Approvals in a terminal: the text front end asks on stdin, or denies when no one can answer.

A sink like the text view. On ``ApprovalRequested`` it hands the call to one asker thread (the
runner's loop never waits on a person), which prints the call with its full arguments and reads
``y`` (approve) or anything else (deny; the text typed after ``n`` is the reason). When stdin is
not interactive (a pipe, a CI log, a scheduled job) no one can answer, so the call is denied at
once with a reason saying how to approve from code instead; a run that wants approvals from code
uses ``display=False`` and ``run.approve(call_id)`` / ``run.deny(call_id, reason)``.
"""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from nbagent import events as ev
from nbagent.text import observation, terminal_safe

if TYPE_CHECKING:
    from nbagent.runtime.handle import Run

NOT_INTERACTIVE = (
    "no one can approve it: the run shows in a non-interactive terminal "
    "(start it with display=False and call run.approve(call_id) or run.deny(call_id, reason))"
)


def _interactive() -> bool:
    try:
        return bool(sys.stdin is not None and sys.stdin.isatty())
    except Exception:
        return False


class TerminalApprovals:
    """Asks the person at the terminal to approve each pending call of ``run``, one at a time."""

    def __init__(
        self,
        run: Run,
        *,
        ask: Callable[[str], str] = input,
        interactive: Callable[[], bool] = _interactive,
    ) -> None:
        self.run = run
        self._ask = ask
        self._interactive = interactive
        self._queue: queue.Queue[ev.ApprovalRequested] = queue.Queue()
        self._thread: threading.Thread | None = None

    def __call__(self, event: ev.RunEvent) -> None:
        if type(event) is not ev.ApprovalRequested:
            return
        if not self._interactive():
            self.run.deny(event.call_id, NOT_INTERACTIVE)  # type: ignore[attr-defined]
            return
        self._queue.put(event)  # type: ignore[arg-type]
        if self._thread is None:
            self._thread = threading.Thread(target=self._answer, name="nbagent-approvals", daemon=True)
            self._thread.start()

    def _answer(self) -> None:
        while not self.run.done():
            try:
                event = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            if all(p.call_id != event.call_id for p in self.run.pending_approvals):
                continue  # decided meanwhile (from code, by a timeout) or the run stopped
            self._decide(event)

    def _decide(self, event: ev.ApprovalRequested) -> None:
        arguments: Any = observation(event.arguments)
        prompt = terminal_safe(f"◆ approve {event.tool}({arguments})? [y / n reason] ")
        try:
            answer = self._ask(prompt).strip()
        except (EOFError, OSError):
            self.run.deny(event.call_id, NOT_INTERACTIVE)
            return
        if answer.lower() in ("y", "yes"):
            self.run.approve(event.call_id)
        else:
            reason = answer[1:].strip() if answer[:1].lower() == "n" else answer
            self.run.deny(event.call_id, reason or "denied at the terminal")
