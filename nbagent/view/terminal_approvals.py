"""Approvals in a terminal: the text front end asks on stdin, or denies when no one can answer.

A sink like the text view. On ``ApprovalRequested`` it hands the call to one asker thread (the
runner's loop never waits on a person), which prints the call with its full arguments and reads
``y`` (approve) or anything else (deny; the text typed after ``n`` is the reason). When stdin is
not interactive (a pipe, a CI log, a scheduled job) no one can answer, so the call is denied at
once with a reason saying how to approve from code instead; a run that wants approvals from code
uses ``display=False`` and ``run.approve(call_id)`` / ``run.deny(call_id, reason)``.

A LangGraph ``interrupt()`` that asks a question (``PendingApproval.form`` ``{"kind": "text"}``)
is answered with the line typed (the pending item's ``resume``); where no one can answer, it is
declined, which ends the run and leaves the graph paused at it. A decision that fails is logged:
the asker thread goes on to the next question.
"""

from __future__ import annotations

import logging
import queue
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from nbagent import events as ev
from nbagent.runtime.source import Sink
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


class TerminalApprovals(Sink):
    """Asks the person at the terminal to approve each pending call of ``run``, one at a time.

    The questions of every run go through one asker thread for the whole process: a terminal has
    one stdin, and two threads blocked on it would take each other's answers (a run stopped while
    its question is on screen would answer the next run's question with the line typed for it).
    """

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

    def __call__(self, event: ev.RunEvent) -> None:
        if type(event) is not ev.ApprovalRequested:
            return
        if not self._interactive():
            self._decline(event.call_id)
            return
        _ask_in_turn(self, event)  # type: ignore[arg-type]

    def _decline(self, call_id: str) -> None:
        """No one can answer: deny a call; decline a question (a denial cannot answer it)."""
        self.run.approvals.decide(call_id, "denied", NOT_INTERACTIVE)

    def _still_pending(self, call_id: str) -> bool:
        return not self.run.done() and any(p.call_id == call_id for p in self.run.pending_approvals)

    def _question(self, call_id: str) -> bool:
        form = next((p.form for p in self.run.pending_approvals if p.call_id == call_id), None)
        return form is not None and form.get("kind") == "text"

    def _decide(self, event: ev.ApprovalRequested) -> None:
        arguments: Any = observation(event.arguments)
        question = self._question(event.call_id)
        prompt = f"◆ {arguments} " if question else f"◆ approve {event.tool}({arguments})? [y / n reason] "
        try:
            answer = self._ask(terminal_safe(prompt)).strip()
        except (EOFError, OSError):
            self._decline(event.call_id)
            return
        if not self._still_pending(event.call_id):
            return  # the run stopped, or the call was decided elsewhere, while the question was shown
        if question:
            self.run.approvals.resume(answer, event.call_id)
        elif answer.lower() in ("y", "yes"):
            self.run.approve(event.call_id)
        else:
            reason = answer[1:].strip() if answer[:1].lower() == "n" else answer
            self.run.deny(event.call_id, reason or "denied at the terminal")


_questions: queue.Queue[tuple[TerminalApprovals, ev.ApprovalRequested]] = queue.Queue()
_asker_lock = threading.Lock()
_asker: threading.Thread | None = None
_IDLE_S = 0.2


def _ask_in_turn(approvals: TerminalApprovals, event: ev.ApprovalRequested) -> None:
    """Queue a question for the process's one asker thread (started when there is none)."""
    global _asker
    _questions.put((approvals, event))
    with _asker_lock:
        if _asker is None:
            _asker = threading.Thread(target=_answer_questions, name="nbagent-approvals", daemon=True)
            _asker.start()


def _answer_questions() -> None:
    """Ask the queued questions in turn; end once none has come for a moment (no idle thread)."""
    global _asker
    while True:
        try:
            approvals, event = _questions.get(timeout=_IDLE_S)
        except queue.Empty:
            with _asker_lock:  # a question queued now finds no asker and starts one
                if _questions.empty():
                    _asker = None
                    return
            continue
        if approvals._still_pending(event.call_id):  # skip calls decided or runs ended meanwhile
            try:
                approvals._decide(event)
            except Exception:  # one failed decision must not silence every later question
                logging.getLogger("nbagent").exception("nbagent: the terminal could not decide a call")
