"""LangGraph's ``interrupt()`` answered by a person, inside one nbagent run.

When a graph pauses on ``interrupt(payload)``, its pending interrupts become the run's pending
approvals (``nbagent.guardrails.approvals``), so the live view shows them, ``approval_timeout_s``
applies, and the record keeps each as a call with its approval and wait. Two shapes:

- **Approval-shaped** payloads (LangChain's ``HumanInTheLoopMiddleware``: a batched request with
  ``action_requests`` and ``review_configs``, or a per-call ``{"type": "tool_approval", ...}``):
  one pending approval per action, attached to the model's tool call it reviews when there is
  one. Approve, Deny with a reason, or approve with edited arguments (the pending item's ``edit``) become
  ``approve`` / ``reject`` (its ``message``: "the user denied this call: <reason>") / ``edit``
  decisions, each only when the review's ``allowed_decisions`` has it (``run.approve`` /
  ``run.deny`` refuse the others). A timed-out approval is a ``reject``; when the review allows
  no ``reject``, the run ends ``interrupted`` (``stop_reason="timed_out"``) and the thread stays
  paused at the review.
- **Any other payload**: one pending request named ``interrupt``, answered with a value
  (the pending item's ``resume(value)``; the view's text box sends a string). A deny or a
  timeout cannot invent an answer: the run ends ``interrupted`` and the thread stays paused at
  the interrupt, so a later ``nbagent.start(graph, Command(resume=...), reset=False,
  config=...)`` answers it.

Every request of a pause is shown before the first is awaited, so a person decides them together;
then the graph resumes with ``Command(resume={interrupt_id: value, ...})``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nbagent.context import RunContext
from nbagent.errors import AgentInterrupted
from nbagent.guardrails.approvals import STOPPED_AFTER_STEP, Decision, denial_observation

ALL_DECISIONS = ("approve", "edit", "reject")


@dataclass
class _Ask:
    call_id: str
    tool: str
    arguments: Any
    form: dict[str, Any]
    started: bool
    """True when the call was reported already (the model's tool call it reviews)."""
    step: int = 0


@dataclass
class _Pause:
    """One pending interrupt and its questions."""

    interrupt: Any
    shape: str
    asks: list[_Ask] = field(default_factory=list)


def _allowed(configs: Any, name: str) -> list[str]:
    for config in configs or ():
        if isinstance(config, dict) and config.get("action_name") == name:
            return [d for d in config.get("allowed_decisions", ALL_DECISIONS) if d in ALL_DECISIONS]
    return list(ALL_DECISIONS)


def _pause_of(interrupt: Any, open_calls: dict[str, tuple[str, Any, int]], used: set[str]) -> _Pause:
    value, iid = interrupt.value, interrupt.id

    def match(name: str, args: Any, index: int) -> tuple[str, bool, int]:
        for call_id, (tool, arguments, step) in open_calls.items():
            if call_id not in used and tool == name and arguments == args:
                used.add(call_id)
                return call_id, True, step
        return f"{iid}:{index}", False, 0

    if isinstance(value, dict) and isinstance(value.get("action_requests"), list):
        pause = _Pause(interrupt, "batched")
        for index, action in enumerate(value["action_requests"]):
            name, args = str(action.get("name")), action.get("args")
            call_id, started, step = match(name, args, index)
            form = {"kind": "approval", "allowed": _allowed(value.get("review_configs"), name)}
            if action.get("description"):
                form["description"] = action["description"]
            pause.asks.append(_Ask(call_id, name, args, form, started, step))
        return pause
    if isinstance(value, dict) and value.get("type") == "tool_approval":
        pause = _Pause(interrupt, "per_call")
        name, args = str(value.get("name")), value.get("args")
        call_id = value.get("tool_call_id")
        if call_id in open_calls and call_id not in used:
            used.add(call_id)
            started, step = True, open_calls[call_id][2]
        else:
            call_id, started, step = match(name, args, 0)
        form = {"kind": "approval", "allowed": list(ALL_DECISIONS), "description": value.get("description")}
        pause.asks.append(_Ask(call_id, name, args, form, started, step))
        return pause
    return _Pause(interrupt, "text", [_Ask(str(iid), "interrupt", value, {"kind": "text"}, False)])


def _decision(ask: _Ask, answer: Decision) -> dict[str, Any]:
    if answer.approved and answer.value is not None and "edit" in ask.form.get("allowed", ()):
        return {"type": "edit", "edited_action": {"name": ask.tool, "args": answer.value}}
    if answer.approved:
        return {"type": "approve"}
    return {"type": "reject", "message": denial_observation(answer.reason)}


async def answer_interrupts(ctx: RunContext, tracker: Any, interrupts: list[Any]) -> dict[str, Any]:
    """Ask a person about every pending interrupt; the ``Command(resume=...)`` map of the answers.

    Raises ``AgentInterrupted`` when a free-form interrupt is denied or times out, or a Stop
    after step arrives while waiting: the thread stays paused at its interrupts."""
    open_calls = tracker.open_calls()
    used: set[str] = set()
    pauses = [_pause_of(interrupt, open_calls, used) for interrupt in interrupts]
    for pause in pauses:
        for ask in pause.asks:
            number = ask.step or tracker.newest_step()
            ask.step = number
            ctx.step = number
            if not ask.started:  # a question, or a review of no call of this run: a node line
                ctx.node_started(
                    ask.call_id, "interrupt" if pause.shape == "text" else f"review › {ask.tool}"
                )
                tracker.asking[ask.call_id] = number
            ctx.approvals.request(ctx, ask.call_id, ask.tool, ask.arguments, form=ask.form)
            tracker._done()
    resume: dict[str, Any] = {}
    for pause in pauses:
        answers = []
        for ask in pause.asks:
            answer = await ctx.approvals.wait(ctx, ask.call_id)
            if answer.reason == STOPPED_AFTER_STEP and ctx.scope.stop_after_step:
                raise AgentInterrupted("stopped while the graph waited for an answer")
            answers.append((ask, answer))
        resume[pause.interrupt.id] = _resume_value(ctx, tracker, pause, answers)
    return resume


def _resume_value(ctx: RunContext, tracker: Any, pause: _Pause, answers: list[tuple[_Ask, Decision]]) -> Any:
    if pause.shape == "text":
        ask, answer = answers[0]
        if not answer.approved:
            ctx.scope.interrupt("now", reason=answer.decision)
            raise AgentInterrupted(f"the interrupt was {answer.decision.replace('_', ' ')}")
        ctx.step = ask.step
        tracker.asking.pop(ask.call_id, None)
        ctx.node_finished(ask.call_id, "ok", answer.value)
        tracker._done()
        return answer.value
    for ask, answer in answers:
        if not answer.approved and "reject" not in ask.form.get("allowed", ALL_DECISIONS):
            # A review that allows no rejection: a timeout cannot answer it. The thread stays paused.
            ctx.scope.interrupt("now", reason=answer.decision)
            raise AgentInterrupted(f"the review of {ask.tool} allows no rejection and was {answer.decision}")
    decisions = []
    for ask, answer in answers:
        decision = _decision(ask, answer)
        decisions.append(decision)
        if decision["type"] == "reject":
            tracker.denied.add(ask.call_id)
        if not ask.started:  # a request that is no tool call of the model: answered here
            ctx.step = ask.step
            tracker.asking.pop(ask.call_id, None)
            ctx.node_finished(ask.call_id, "ok", decision)
            tracker._done()
    return decisions[0] if pause.shape == "per_call" else {"decisions": decisions}
