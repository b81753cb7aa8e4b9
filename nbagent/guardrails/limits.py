"""Budgets for a run: ``Limits``, and the watcher that stops a run when one trips.

Design. A limit is a watcher on the run's events, like a sink: it never reaches into a source.
The runner feeds it every event on the loop thread, in order, before any other sink, and it asks
the run's ``CancelScope`` to stop (``CancelScope.trip``) the moment a budget is crossed, so a limit
stops a run exactly as the Stop button does: mid-stream, mid-tool, with a complete record. The run
then ends with the status ``"limit"`` and ``stop_reason`` naming the limit.

When each limit is checked, so it is not overshot by a whole reply:

- tokens and cost: as usage arrives and, while a reply streams, against the text and tool-call
  arguments streamed so far (an estimate, about four characters a token; a reply's reported
  usage replaces it). A step cut by a token or cost limit keeps its streamed output count,
  marked ``usage_source="estimated"``.
  Input tokens are also checked before a request is sent, against an estimate of the prompt
  (``events.ModelCallStarting``, sent by the native agent), and again when the server reports them;
- ``max_seconds``: a timer on the loop; the time tool calls wait for a person's approval does not
  count (``max_wait_seconds`` bounds that wait instead), nor does time queued behind another run;
- ``max_tool_calls``: when one call more than allowed starts (it is stopped before it runs). A
  source whose tools run on a thread of their own (smolagents) asks ``tool_call_allowed`` on that
  thread before each call runs, as events reach the loop too late to hold a call that is already
  running;
- ``max_steps``: after that many steps, at the step boundary (a final answer in the last allowed
  step still succeeds). An agent's own ``max_steps`` still ends the run ``"max_steps"`` (the
  framework's own end, its final answer included); both set ``stop_reason == "max_steps"``.

A cost limit needs a price: ``check_priced`` refuses a run whose model has none when it starts
(``set_price`` gives one), so a budget is never silently ignored. The cost is then the known
per-token rates times the tokens, computed without the price library on the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any

from nbagent import events as ev
from nbagent.analytics import cost
from nbagent.extras import install_hint
from nbagent.runtime.cancel import CancelScope, InterruptMode


@dataclass(frozen=True)
class Limits:
    """Budgets for one run (``start(agent, task, limits=...)`` or ``configure(limits=...)``).

    Every field is optional; ``None`` means no limit. A tripped limit ends the run ``"limit"``
    with ``stop_reason`` the field's name.

    Args:
        max_tokens: input + output tokens of the whole run.
        max_input_tokens: input (prompt) tokens of the whole run.
        max_output_tokens: output tokens of the whole run.
        max_cost_usd: US dollars; the model must have a price (``nbagent.analytics.cost.set_price``).
        max_seconds: wall seconds of the run, not counting waits for approvals.
        max_wait_seconds: total seconds tool calls may wait for approvals.
        max_tool_calls: tool calls of the run.
        max_steps: steps of the run (planning steps included).
    """

    max_tokens: int | None = None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_cost_usd: float | None = None
    max_seconds: float | None = None
    max_wait_seconds: float | None = None
    max_tool_calls: int | None = None
    max_steps: int | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            whole = f.name in ("max_tokens", "max_input_tokens", "max_output_tokens", "max_tool_calls")
            whole = whole or f.name == "max_steps"
            kind_ok = isinstance(value, int) if whole else isinstance(value, (int, float))
            if isinstance(value, bool) or not kind_ok or not value > 0 or not math.isfinite(value):
                what = "a positive int" if whole else "a positive number"
                raise ValueError(f"Limits.{f.name} must be {what} or None, not {value!r}")

    def set(self) -> dict[str, float]:
        """The limits that are set, by name."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    def __bool__(self) -> bool:
        return bool(self.set())


def estimate_tokens(text: str) -> int:
    """A rough token count of streamed text: about four characters a token, at least one a piece
    (a streamed piece is usually one token)."""
    return max(1, round(len(text) / 4)) if text else 0


def estimate_prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """A rough token count of a chat prompt (content and tool calls, plus a few per message)."""
    from nbagent.text import observation

    total = 0
    for message in messages:
        total += 4 + estimate_tokens(str(message.get("content") or ""))
        for call in message.get("tool_calls") or ():
            total += estimate_tokens(observation(call))
    return total


class PromptEstimate:
    """``estimate_prompt_tokens`` of a conversation that grows by appending, counted incrementally.

    An agent checks its prompt before every request; counting the whole conversation each time
    would make a run's cost grow with the square of its length. Messages already counted are
    recognised by identity (a message edited in place keeps its old count: this is an estimate), so
    a replaced conversation is counted again from where it differs.
    """

    def __init__(self) -> None:
        self._counted: list[tuple[Any, int]] = []
        self._total = 0

    def of(self, messages: list[dict[str, Any]]) -> int:
        same = 0
        for (message, _), current in zip(self._counted, messages, strict=False):
            if message is not current:
                break
            same += 1
        if same < len(self._counted):
            del self._counted[same:]
            self._total = sum(tokens for _, tokens in self._counted)
        for message in messages[same:]:
            tokens = estimate_prompt_tokens([message])
            self._counted.append((message, tokens))
            self._total += tokens
        return self._total


@dataclass(frozen=True)
class Rates:
    """US dollars per input and per output token."""

    input: float
    output: float


def check_priced(limits: Limits | None, model: str) -> Rates | None:
    """The per-token prices a cost limit needs; refuses (``ValueError``) a model with no price.

    Runs on the caller's thread as the run starts (it may import the price library)."""
    if limits is None or limits.max_cost_usd is None:
        return None
    missing_extra = False
    try:
        priced = cost.has_price(model)
        per_input = cost.step_cost(model, 1_000_000, 0) if priced else None
        per_output = cost.step_cost(model, 0, 1_000_000) if priced else None
    except ImportError:  # no cost extra: its price library might know the model
        priced, per_input, per_output, missing_extra = False, None, None, True
    if not priced or per_input is None or per_output is None:
        hint = (
            f" (or install the cost extra, whose price library may know it: {install_hint('cost')})"
            if missing_extra
            else ""
        )
        raise ValueError(
            f"max_cost_usd needs the price of the model {model!r}, and nbagent has none: give it one "
            f"with nbagent.analytics.cost.set_price({model!r}, input_per_mtok=..., output_per_mtok=...)"
            f"{hint}. The run was not started."
        )
    return Rates(per_input / 1e6, per_output / 1e6)


_tool_budgets: weakref.WeakKeyDictionary[CancelScope, LimitWatcher] = weakref.WeakKeyDictionary()
"""The watcher of each live run with a ``max_tool_calls``, by the run's scope."""


def tool_call_allowed(scope: CancelScope | None, refused: Callable[[str], None] | None = None) -> bool:
    """Count one tool call that is about to run in the run of ``scope``, from the thread that runs
    it; False when it goes over the run's ``max_tool_calls``: the call must not run, and the run is
    stopped, right after ``refused(message)`` (the source's last word on the call before the Stop).
    True with no such limit, or outside a run. Any thread."""
    watcher = _tool_budgets.get(scope) if scope is not None else None
    return watcher is None or watcher.claim_tool_call(refused)


class LimitWatcher:
    """Watches one run's events and trips its scope when a limit is crossed. Loop thread only,
    except ``start``/``stop`` (also on the loop) and ``claim_tool_call`` (any thread)."""

    def __init__(self, limits: Limits, scope: CancelScope, rates: Rates | None, task: str = "") -> None:
        self.limits = limits
        self.next_prompt = 4 + estimate_tokens(task)
        """A guess at the next request's prompt for a source that does not tell it before sending
        (smolagents): the last reported prompt and reply, or the task for the first."""
        self.scope = scope
        self.rates = rates
        self.input_tokens = 0
        self.output_tokens = 0
        self.streamed: dict[int, int] = {}
        """Per open step: output tokens estimated from the text streamed since its last usage."""
        self.prompt: dict[int, int] = {}
        """Per step: the estimated prompt of a request whose input was not reported yet."""
        self.usage_steps: set[int] = set()
        self.tool_calls = 0
        """Tool calls reported by events (``ToolCallStarted``)."""
        self.claimed_calls = 0
        """Tool calls counted before they ran, by a source that runs them on its own thread."""
        self._claims = threading.Lock()
        if limits.max_tool_calls is not None:
            _tool_budgets[scope] = self
        self._token_limits = tuple(name for name in self._TOKENS if getattr(limits, name) is not None)
        self.steps = 0
        self.pending: set[str] = set()
        self.queued = False
        self.active_s = 0.0
        self.wait_s = 0.0
        self._mark = time.perf_counter()
        self._changed: asyncio.Event | None = None
        self._clock: asyncio.Task[None] | None = None
        self.message: str | None = None

    # -- usage --------------------------------------------------------------------------------

    def used(self) -> dict[str, float]:
        """What the run has used so far, per limit name (estimates included). Reads only: safe to
        call from another thread for a display (a value may be a moment old)."""
        active_s, wait_s = self._clock_now()
        used: dict[str, float] = {
            "max_seconds": active_s,
            "max_wait_seconds": wait_s,
            "max_tool_calls": max(self.tool_calls, self.claimed_calls),  # each call counts once
            "max_steps": self.steps,
        }
        used.update(self._token_usage())
        return used

    def _token_usage(self) -> dict[str, float]:
        """The token and cost figures alone: all a streamed piece needs checked."""
        input_tokens = self.input_tokens + sum(self.prompt.values())
        output_tokens = self.output_tokens + sum(self.streamed.values())
        used = {
            "max_input_tokens": input_tokens,
            "max_output_tokens": output_tokens,
            "max_tokens": input_tokens + output_tokens,
        }
        if self.rates is not None:
            used["max_cost_usd"] = input_tokens * self.rates.input + output_tokens * self.rates.output
        return used

    def _clock_now(self) -> tuple[float, float]:
        """Active and waiting seconds up to now, without committing them."""
        elapsed = time.perf_counter() - self._mark
        if self.queued:
            return self.active_s, self.wait_s
        if self.pending:
            return self.active_s, self.wait_s + elapsed
        return self.active_s + elapsed, self.wait_s

    def _tick(self) -> None:
        """Commit the time since the last tick (loop thread, before the state changes)."""
        self.active_s, self.wait_s = self._clock_now()
        self._mark = time.perf_counter()

    def _check_tokens(self) -> None:
        """Check the token and cost limits (on every streamed piece: only what they need)."""
        names = self._token_limits
        if not names:  # the common case on every streamed token: no such limit is set
            return
        used = self._token_usage()
        for name in names:
            limit = getattr(self.limits, name)
            if used.get(name, 0) > limit:
                self._trip(name, used[name], limit)
                return

    def claim_tool_call(self, refused: Callable[[str], None] | None = None) -> bool:
        """Count a tool call before it runs (``tool_call_allowed``); False, and the run stopped,
        when it is one more than ``max_tool_calls``. The same call's ``ToolCallStarted`` is not
        counted again: the budget reads the larger of the two counts. Any thread."""
        limit = self.limits.max_tool_calls
        with self._claims:
            self.claimed_calls += 1
            claimed = self.claimed_calls
        if limit is None or claimed <= limit:
            return True
        message = f"limit max_tool_calls reached: {claimed} of {limit}"
        if refused is not None:
            refused(message)
        self.scope.trip("max_tool_calls", message)
        return False

    def _trip(self, name: str, used: float, limit: float, mode: InterruptMode = "now") -> None:
        if self.message is not None or self.scope.closed:
            return
        if name == "max_cost_usd":
            detail = f"{cost.dollars(used)} of a {cost.dollars(limit)} budget"
        elif name in ("max_seconds", "max_wait_seconds"):
            detail = f"{used:.2f} s of {limit:g} s"
        else:
            detail = f"{used:g} of {limit:g}"
        self.message = f"limit {name} reached: {detail}"
        self.scope.trip(name, self.message, mode=mode)

    def cut_usage(self, step: int) -> tuple[int | None, int] | None:
        """The estimated usage of ``step`` when a limit cut it before its usage was reported."""
        if step in self.usage_steps or (step not in self.streamed and step not in self.prompt):
            return None
        prompt = self.prompt.get(step)
        return prompt, self.streamed.get(step, 0)

    # -- events -------------------------------------------------------------------------------

    _TOKENS = ("max_tokens", "max_input_tokens", "max_output_tokens", "max_cost_usd")

    def __call__(self, event: ev.RunEvent) -> None:
        kind = type(event)
        if kind is ev.TextDelta or kind is ev.ToolArgumentsDelta:
            tokens = estimate_tokens(event.text)  # type: ignore[attr-defined]
            if tokens:
                self.streamed[event.step] = self.streamed.get(event.step, 0) + tokens
                self._check_tokens()
        elif kind is ev.Usage:
            self.usage_steps.add(event.step)
            self.streamed.pop(event.step, None)
            self.prompt.pop(event.step, None)
            self.input_tokens += event.input_tokens or 0  # type: ignore[attr-defined]
            self.output_tokens += event.output_tokens or 0  # type: ignore[attr-defined]
            if event.input_tokens is not None:  # type: ignore[attr-defined]
                self.next_prompt = event.input_tokens + (event.output_tokens or 0)  # type: ignore[attr-defined]
            self._check_tokens()
        elif kind is ev.ModelCallStarting:
            self.prompt[event.step] = event.prompt_tokens  # type: ignore[attr-defined]
            self._check_tokens()
        elif kind is ev.ToolCallStarted:
            self.tool_calls += 1
            limit = self.limits.max_tool_calls
            if limit is not None and self.tool_calls > limit:  # events only: a claim trips itself
                self._trip("max_tool_calls", self.tool_calls, limit)
        elif kind is ev.StepStarted:
            self.prompt[event.step] = self.next_prompt  # replaced by the source's own estimate
            self._check_tokens()
            self.steps += 1
            if self.limits.max_steps is not None and self.steps > self.limits.max_steps:
                self.steps -= 1  # the step that would break the budget does not count
                self._trip("max_steps", self.steps + 1, self.limits.max_steps)
        elif kind is ev.StepFinished:
            limit = self.limits.max_steps
            if limit is not None and self.steps >= limit and event.kind != "final":  # type: ignore[attr-defined]
                self._trip("max_steps", self.steps, limit, mode="after_step")
        elif kind is ev.ApprovalRequested or kind is ev.ApprovalDecided or kind is ev.ToolCallFinished:
            self._tick()
            call_id = event.call_id  # type: ignore[attr-defined]
            if kind is ev.ApprovalRequested:
                self.pending.add(call_id)
            else:
                self.pending.discard(call_id)
            self._wake()
        elif kind is ev.RunQueued or kind is ev.RunDequeued:
            self._tick()
            self.queued = kind is ev.RunQueued
            self._wake()

    # -- time ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the clock of the time limits (on the loop, as the run starts)."""
        self._mark = time.perf_counter()
        if self.limits.max_seconds is None and self.limits.max_wait_seconds is None:
            return
        self._changed = asyncio.Event()
        self._clock = asyncio.get_running_loop().create_task(self._run_clock())

    def stop(self) -> None:
        if self._clock is not None:
            self._clock.cancel()

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()

    async def _run_clock(self) -> None:
        limits = self.limits
        assert self._changed is not None
        while self.message is None:
            self._changed.clear()
            self._tick()
            timeouts = []
            if not self.queued and not self.pending and limits.max_seconds is not None:
                timeouts.append(limits.max_seconds - self.active_s)
            if not self.queued and self.pending and limits.max_wait_seconds is not None:
                timeouts.append(limits.max_wait_seconds - self.wait_s)
            if timeouts and min(timeouts) <= 0:
                name = "max_seconds" if not self.pending else "max_wait_seconds"
                used = self.active_s if name == "max_seconds" else self.wait_s
                self._trip(name, used, getattr(limits, name))
                return
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(timeouts) if timeouts else None)
