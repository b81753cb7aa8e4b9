"""The guardrails part of a ``Run``'s API: its pending approvals and decisions, the use of its
budgets, and the estimated usage a step cut by a budget keeps. A base of ``Run``
(``nbagent.runtime.handle``), kept apart so each file reads in one sitting."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from nbagent import events as ev
from nbagent.guardrails.approvals import Approvals, PendingApproval

if TYPE_CHECKING:
    from nbagent.context import RunContext
    from nbagent.guardrails.limits import Limits, LimitWatcher
    from nbagent.records import Recorder


class RunGuards:
    """Approvals and budgets of one run (the attributes are set by ``Run.__init__``)."""

    approvals: Approvals
    limits: Limits | None
    run_id: str
    _watcher: LimitWatcher | None
    _recorder: Recorder

    def _fan_out(self, event: ev.RunEvent) -> None:
        raise NotImplementedError

    @property
    def pending_approvals(self) -> list[PendingApproval]:
        """The tool calls waiting for a decision now (``call_id``, ``tool``, ``arguments``). Any thread."""
        return self.approvals.pending

    def approve(self, call_id: str) -> bool:
        """Let the pending call ``call_id`` run; True if it was pending and undecided. Any thread.
        A ValueError for a LangGraph interrupt that asks for an answer, or whose review does not
        allow approving."""
        self._check_decision(call_id, "approve")
        return self.approvals.decide(call_id, "approved")

    def deny(self, call_id: str, reason: str | None = None) -> bool:
        """Refuse the pending call ``call_id``: it does not run, and the model sees "the user
        denied this call: <reason>"; True if it was pending and undecided. Any thread.
        A ValueError for a LangGraph interrupt that asks for an answer, or whose review does not
        allow rejecting."""
        self._check_decision(call_id, "reject")
        return self.approvals.decide(call_id, "denied", reason)

    def _check_decision(self, call_id: str, decision: str) -> None:
        """Refuse a decision the pending LangGraph interrupt ``call_id`` cannot take: a question
        is answered with a value, a review only with its ``allowed_decisions``."""
        form = next((p.form for p in self.approvals.pending if p.call_id == call_id), None)
        if form is None:
            return
        if form.get("kind") != "approval":
            raise ValueError(
                f"{call_id} asks for an answer, not a decision: use run.resume(value, {call_id!r})"
            )
        allowed = list(form.get("allowed", ()))
        if decision not in allowed:
            raise ValueError(f"the review of {call_id} does not allow {decision!r}; it allows {allowed}")

    def resume(self, value: Any, call_id: str | None = None) -> bool:
        """Answer the pending LangGraph ``interrupt()`` ``call_id`` (the only one pending when
        ``None``) with ``value``: the graph goes on with it (``Command(resume=value)``), in this
        run; True if it was pending and unanswered. Any thread."""
        pending = self._interrupt(call_id, "text")
        return self.approvals.decide(pending.call_id, "approved", value=value)

    def edit(self, call_id: str | None, arguments: Any) -> bool:
        """Approve the pending call ``call_id`` that a LangGraph interrupt reviews, with
        ``arguments`` in place of the model's (an ``edit`` decision). Any thread."""
        pending = self._interrupt(call_id, "approval")
        if "edit" not in pending.form.get("allowed", ()):  # type: ignore[union-attr]
            raise ValueError(f"the review of {pending.tool} does not allow editing its arguments")
        return self.approvals.decide(pending.call_id, "approved", value=arguments)

    def _interrupt(self, call_id: str | None, kind: str) -> PendingApproval:
        pending = [p for p in self.approvals.pending if p.form is not None]
        if call_id is not None:
            pending = [p for p in pending if p.call_id == call_id]
        if len(pending) != 1:
            which = f"{call_id!r}" if call_id is not None else "one (pass its call_id)"
            raise ValueError(f"no single pending interrupt to answer: {which}; see run.pending_approvals")
        if pending[0].form.get("kind") != kind:  # type: ignore[union-attr]
            use = "run.resume(value)" if kind == "approval" else "run.approve / run.deny / run.edit"
            raise ValueError(f"{pending[0].call_id} asks for a {pending[0].form.get('kind')}: use {use}")  # type: ignore[union-attr]
        return pending[0]

    def limits_used(self) -> dict[str, tuple[float, float]]:
        """Each set limit as ``(used so far, limit)`` (estimates included while a reply streams)."""
        if self._watcher is None or self.limits is None:
            return {}
        used = self._watcher.used()
        return {name: (used.get(name, 0.0), limit) for name, limit in self.limits.set().items()}

    def _keep_cut_usage(self, ctx: RunContext) -> None:
        """A step cut by a limit keeps the tokens it streamed, as an estimate."""
        live = self._recorder.live
        if self._watcher is None or live is None or not live.steps or live.steps[-1].end_s is not None:
            return
        step = live.steps[-1].number
        cut = self._watcher.cut_usage(step)
        if cut is not None:
            usage = ev.Usage(self.run_id, step, time.perf_counter(), cut[0], cut[1], "estimated")
            self._recorder.apply(usage)
            self._fan_out(usage)
