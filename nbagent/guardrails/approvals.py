"""Tool calls that wait for a person: which calls need approval, and the run's pending decisions.

Design. An approval is an await. A call that needs one is reported (``ToolCallStarted``, then
``ApprovalRequested``) and its source awaits a future owned by the run's ``Approvals``, on the
runner's loop; the kernel stays idle, so the Approve / Deny buttons (or ``run.approve`` /
``run.deny`` from code, on any thread) resolve it with ``loop.call_soon_threadsafe``. A Stop cancels
the await like any other, so nothing runs after a Stop. All calls of one step that need approval
are requested before the first is awaited: a person sees and decides them together.

Who wins a race. The first decision of a call wins (approve, deny, or the ``approval_timeout_s``
timer, which denies with the reason "timed out"); later ones return False. ``decide`` is
thread-safe and idempotent.

Which calls need approval: a ``@tool(requires_approval=True)``, or a policy given to the agent
or the run (``approve=``): ``True`` (every call), a set of tool names, or a predicate that gets an
``ApprovalCall`` and returns True for a call that must wait.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from nbagent import events as ev

TIMED_OUT = "timed out"
STOPPED_AFTER_STEP = "the run was stopped after this step"
DENIED_PREFIX = "the user denied this call"


@dataclass(frozen=True)
class ApprovalCall:
    """What an ``approve=`` predicate gets: the tool's name, the call's arguments and id."""

    tool: str
    arguments: Any
    call_id: str


ApprovalPolicy = bool | Collection[str] | Callable[[ApprovalCall], bool] | None
"""``True`` (every call), tool names, or a predicate on an ``ApprovalCall``; ``None``: none."""


def check_policy(policy: Any) -> ApprovalPolicy:
    """``policy`` if it is one, else a ``TypeError`` saying what is accepted."""
    if policy is None or isinstance(policy, bool) or callable(policy):
        return policy  # type: ignore[no-any-return]
    if isinstance(policy, str):
        return frozenset({policy})
    if isinstance(policy, Collection) and all(isinstance(n, str) for n in policy):
        return frozenset(policy)
    raise TypeError(
        "approve must be True, a set of tool names (approve={'send_email'}) or a predicate "
        f"(approve=lambda call: call.tool == 'send_email'), not {type(policy).__name__}"
    )


def policy_wants(policy: ApprovalPolicy, call: ApprovalCall) -> bool:
    """True when ``policy`` says ``call`` must wait for a person."""
    if policy is None or policy is False:
        return False
    if policy is True:
        return True
    if callable(policy):
        return bool(policy(call))
    return call.tool in policy  # type: ignore[operator]


def denial_observation(reason: str | None) -> str:
    """What the model sees for a denied call."""
    return f"{DENIED_PREFIX}: {reason}" if reason else f"{DENIED_PREFIX}."


@dataclass(frozen=True)
class Decision:
    decision: ev.Approval
    reason: str | None = None
    at: float = 0.0
    """``time.perf_counter()`` when it was decided."""
    value: Any = None
    """The answer given with an approval (a pending item's ``resume`` or ``edit``): edited arguments, or the
    value a LangGraph ``interrupt()`` resumes with; ``None`` for a plain approve."""

    @property
    def approved(self) -> bool:
        return self.decision == "approved"


@dataclass
class PendingApproval:
    """A tool call waiting for a decision (``run.pending_approvals``)."""

    call_id: str
    tool: str
    arguments: Any
    step: int
    requested_t: float = field(repr=False)
    _future: asyncio.Future[Decision] = field(repr=False)
    _decided: bool = field(default=False, repr=False)
    form: dict[str, Any] | None = None
    """``None`` for a tool call; for a LangGraph interrupt, what it asks: ``{"kind": "approval",
    "allowed": [...]}`` or ``{"kind": "text"}`` (the view shows the matching controls)."""
    _approvals: Approvals | None = field(default=None, repr=False, compare=False)

    # The decisions a pending item takes, beside ``run.approve`` / ``run.deny``: the ones only some
    # sources ask for (a LangGraph interrupt's answer, an edited review) live here, with the request
    # that asks for them, not on every ``Run``. Any thread; True if this decision counts.

    def approve(self) -> bool:
        """Let the call run."""
        return self._decider().approve(self.call_id)

    def deny(self, reason: str | None = None) -> bool:
        """Refuse the call: it does not run; the model sees "the user denied this call: <reason>"."""
        return self._decider().deny(self.call_id, reason)

    def edit(self, arguments: Any) -> bool:
        """Approve a call a LangGraph interrupt reviews, with ``arguments`` in place of the model's."""
        return self._decider().edit(self.call_id, arguments)

    def resume(self, value: Any) -> bool:
        """Answer a LangGraph ``interrupt()`` with ``value``: the graph goes on with it, in this run."""
        return self._decider().resume(value, self.call_id)

    def _decider(self) -> Approvals:
        if self._approvals is None:
            raise RuntimeError(f"{self.call_id} waits in another process: decide it through its run's handle")
        return self._approvals


def check_approval_timeout(timeout_s: Any) -> float | None:
    """``approval_timeout_s`` as given (``None``: no end), or a ``ValueError`` saying what it takes."""
    if timeout_s is not None and (
        isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0
    ):
        raise ValueError(
            f"approval_timeout_s must be a positive number of seconds or None, not {timeout_s!r}"
        )
    return timeout_s


class Approvals:
    """The pending approvals of one run. ``request`` and ``wait`` run on the runner's loop;
    ``decide`` and ``pending`` may be used from any thread."""

    def __init__(self, policy: ApprovalPolicy = None, timeout_s: float | None = None) -> None:
        self.timeout_s = check_approval_timeout(timeout_s)
        self.policy = check_policy(policy)
        self._lock = threading.Lock()
        self._pending: dict[str, PendingApproval] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ctx: Any = None

    def wants(self, tool: str, arguments: Any, call_id: str, *, required: bool = False) -> bool:
        """True when the call must wait: ``required`` (the tool says so) or the run's policy."""
        return required or policy_wants(self.policy, ApprovalCall(tool, arguments, call_id))

    @property
    def pending(self) -> list[PendingApproval]:
        with self._lock:
            return list(self._pending.values())

    def request(
        self, ctx: Any, call_id: str, tool: str, arguments: Any, form: dict[str, Any] | None = None
    ) -> None:
        """Report that the started call ``call_id`` waits for a decision (loop thread)."""
        loop = asyncio.get_running_loop()
        now = time.perf_counter()
        pending = PendingApproval(
            call_id, tool, arguments, ctx.step, now, loop.create_future(), form=form, _approvals=self
        )
        with self._lock:
            self._loop, self._ctx = loop, ctx
            self._pending[call_id] = pending
        ctx.emit(ev.ApprovalRequested(ctx.run_id, ctx.step, pending.requested_t, call_id, tool, arguments))

    async def wait(self, ctx: Any, call_id: str) -> Decision:
        """The decision on ``call_id`` (requested before). A Stop cancels this await: the call never
        runs. A Stop after step denies a call still undecided, so the step can end."""
        with self._lock:
            pending = self._pending[call_id]
        stop = asyncio.ensure_future(ctx.scope.after_step_requested())
        try:
            while not pending._future.done():
                left = None
                if self.timeout_s is not None:
                    left = self.timeout_s - (time.perf_counter() - pending.requested_t)
                    if left <= 0:
                        self.decide(call_id, "timed_out", TIMED_OUT)
                        break
                if stop.done():
                    self.decide(call_id, "denied", STOPPED_AFTER_STEP)
                    break
                await asyncio.wait({pending._future, stop}, timeout=left, return_when=asyncio.FIRST_COMPLETED)
            return await pending._future
        finally:
            stop.cancel()
            with self._lock:
                self._pending.pop(call_id, None)

    def close(self) -> None:
        """The run ended: nothing is pending any more (its calls never ran)."""
        with self._lock:
            self._pending.clear()

    def decide(
        self, call_id: str, decision: ev.Approval, reason: str | None = None, value: Any = None
    ) -> bool:
        """Decide a pending call; True if this decision counts (the first one). Any thread.
        ``value`` goes with an approval of a request that takes one (``PendingApproval.form``)."""
        if decision not in ("approved", "denied", "timed_out"):
            raise ValueError(f"decision must be 'approved', 'denied' or 'timed_out', not {decision!r}")
        if reason is not None and not isinstance(reason, str):
            raise TypeError(f"reason must be a str, not {type(reason).__name__}")
        with self._lock:
            pending = self._pending.get(call_id)
            loop, ctx = self._loop, self._ctx
            if pending is None or loop is None or pending._decided:
                return False
            if ctx is not None and ctx.scope.interrupted:  # stopped: the call will never run
                return False
            pending._decided = True
        result = Decision(decision, reason or None, time.perf_counter(), value)

        def settle() -> None:
            # Reported when decided, not when the agent reads the decision: a call decided while
            # another call of its step runs has stopped waiting for a person (limits, wait_s).
            if pending._future.done():
                return
            pending._future.set_result(result)
            ctx.emit(
                ev.ApprovalDecided(
                    ctx.run_id,
                    pending.step,
                    result.at,
                    call_id,
                    result.decision,
                    result.reason,
                    result.at - pending.requested_t,
                    arguments=value
                    if pending.form is not None and pending.form.get("kind") == "approval"
                    else None,
                )
            )

        try:
            if loop is _running_loop():
                settle()
            else:
                loop.call_soon_threadsafe(settle)
        except RuntimeError:  # the loop is closed: the run has ended
            return False
        return True

    # -- the decisions a user makes (Run.approve, .deny, .resume, .edit) -------------------------

    def approve(self, call_id: str) -> bool:
        """Let the pending call ``call_id`` run; True if it was pending and undecided. Any thread.
        A ValueError for a LangGraph interrupt that asks for an answer, or whose review does not
        allow approving."""
        self._check_decision(call_id, "approve")
        return self.decide(call_id, "approved")

    def deny(self, call_id: str, reason: str | None = None) -> bool:
        """Refuse the pending call ``call_id``: it does not run, and the model sees "the user
        denied this call: <reason>"; True if it was pending and undecided. Any thread.
        A ValueError for a LangGraph interrupt that asks for an answer, or whose review does not
        allow rejecting."""
        self._check_decision(call_id, "reject")
        return self.decide(call_id, "denied", reason)

    def _check_decision(self, call_id: str, decision: str) -> None:
        """Refuse a decision the pending LangGraph interrupt ``call_id`` cannot take: a question
        is answered with a value, a review only with its ``allowed_decisions``."""
        form = next((p.form for p in self.pending if p.call_id == call_id), None)
        if form is None:
            return
        if form.get("kind") != "approval":
            raise ValueError(
                f"{call_id} asks for an answer, not a decision: answer it with its pending item's "
                f".resume(value) (run.pending_approvals)"
            )
        allowed = list(form.get("allowed", ()))
        if decision not in allowed:
            raise ValueError(f"the review of {call_id} does not allow {decision!r}; it allows {allowed}")

    def resume(self, value: Any, call_id: str | None = None) -> bool:
        """Answer the pending LangGraph ``interrupt()`` ``call_id`` (the only one pending when
        ``None``) with ``value``: the graph goes on with it (``Command(resume=value)``), in this
        run; True if it was pending and unanswered. Any thread."""
        pending = self._interrupt(call_id, "text")
        return self.decide(pending.call_id, "approved", value=value)

    def edit(self, call_id: str | None, arguments: Any) -> bool:
        """Approve the pending call ``call_id`` that a LangGraph interrupt reviews, with
        ``arguments`` in place of the model's (an ``edit`` decision). Any thread."""
        pending = self._interrupt(call_id, "approval")
        if "edit" not in pending.form.get("allowed", ()):  # type: ignore[union-attr]
            raise ValueError(f"the review of {pending.tool} does not allow editing its arguments")
        return self.decide(pending.call_id, "approved", value=arguments)

    def _interrupt(self, call_id: str | None, kind: str) -> PendingApproval:
        pending = [p for p in self.pending if p.form is not None]
        if call_id is not None:
            pending = [p for p in pending if p.call_id == call_id]
        if len(pending) != 1:
            which = f"{call_id!r}" if call_id is not None else "one (pass its call_id)"
            raise ValueError(f"no single pending interrupt to answer: {which}; see run.pending_approvals")
        if pending[0].form.get("kind") != kind:  # type: ignore[union-attr]
            use = ".resume(value)" if kind == "approval" else ".approve() / .deny() / .edit(arguments)"
            kind_asked = pending[0].form.get("kind")  # type: ignore[union-attr]
            raise ValueError(f"{pending[0].call_id} asks for a {kind_asked}: use its pending item's {use}")
        return pending[0]


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
