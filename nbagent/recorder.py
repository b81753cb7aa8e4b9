"""The ``Recorder``: folds a run's event stream into its ``RunRecord`` (``nbagent.records``).

It is the single place that decides what a run looked like, so the live view, the store and the
frames all agree. It closes whatever a source left open when the run ends: a step cut by an
interrupt is kept with ``interrupted=True`` and unknown usage, a tool call still in flight becomes
``"cancelled"``. A source's bad token count (negative, fractional, not a number) is unknown.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from nbagent import events as ev
from nbagent.records import LOG_LINES_KEPT, NodeRecord, RunRecord, StepRecord, ToolCallRecord, ToolProgress
from nbagent.secrets import StreamScrub, scrub, scrub_cut
from nbagent.text import clean, clean_value, safe_text, shorten

LINE_LIMIT = 500
"""A progress message or a log line is kept to this many characters: one line, not a document."""

_SOURCE_RANK = {"unknown": 0, "estimated": 1, "reported": 2}


def _clean(text: str | None) -> str | None:
    return None if text is None else safe_text(text)


def _count(value: Any) -> int | None:
    """A token count as a non-negative int, or ``None`` (unknown) for anything else: a source's
    bad count must never reach a frame or a view as a negative or fractional number."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**53:
        return None
    return int(value)


def _amount(value: Any) -> float | None:
    """A progress amount as a finite float, or ``None``: a server's ``NaN`` or ``"3"`` must not
    reach a view's bar or a store row."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _add_known(total: int | None, part: int | None) -> int | None:
    if part is None:
        return total
    return part if total is None else total + part


class _ShownText:
    """What may be shown of a step's text while it streams: scrubbed, with a tail that may still
    become a key held back (``nbagent.secrets.StreamScrub``). Fed lazily, when someone looks, so
    a streamed piece costs the recorder a list append and nothing more."""

    __slots__ = ("fed", "scrub", "text")

    def __init__(self) -> None:
        self.fed = 0
        """How many of the step's pieces have been fed to ``scrub``."""
        self.scrub = StreamScrub()
        self.text = ""

    def catch_up(self, pieces: list[str], complete: bool) -> str:
        """The text to show of ``pieces``; ``complete``: the model's reply is whole (it ended, or
        its tool calls began), so nothing is held back any more."""
        if self.fed < len(pieces):
            self.text += self.scrub.feed("".join(pieces[self.fed :]))
            self.fed = len(pieces)
        if complete:
            self.text += self.scrub.flush()
        return self.text


class Recorder:
    """Folds the events of one run into a ``RunRecord``.

    ``apply`` runs on the runner's loop thread; ``snapshot`` may be called from any thread and
    returns an independent copy, so a caller never sees a half-applied event.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._record: RunRecord | None = None
        self._t0 = 0.0
        self._steps: dict[int, StepRecord] = {}
        self._text: dict[int, list[str]] = {}
        """Each step's streamed pieces, as they came (never shown as they are: see ``_shown``)."""
        self._shown: dict[int, _ShownText] = {}
        self._calls: dict[str, ToolCallRecord] = {}
        self._nodes: dict[str, NodeRecord] = {}
        self._usage_seen: set[int] = set()

    def _at(self, t: float) -> tuple[datetime, float]:
        offset = t - self._t0
        assert self._record is not None
        return self._record.started_at + timedelta(seconds=offset), offset

    def apply(self, event: ev.RunEvent) -> None:
        with self._lock:
            if type(event) is ev.TextDelta:  # most events are text: no lookup for them
                self._text.setdefault(event.step, []).append(clean(event.text))
                return
            fold = _FOLDS.get(type(event))
            if fold is not None:
                fold(self, event)

    def _model_call_ended(self, e: ev.ModelCallEnded) -> None:
        step = self._steps.get(e.step)
        if step is not None:
            step.model_ended_at = self._at(e.t)[0]

    def _fork_point(self, e: ev.ForkPoint) -> None:
        step = self._steps.get(e.step)
        if step is not None and step.fork_point is None:  # the step's first request is where it began
            step.fork_point = e.point

    def _retrying(self, e: ev.Retrying) -> None:
        step = self._steps.get(e.step)
        if step is not None:
            step.retries += 1

    def _queued(self, e: ev.RunQueued) -> None:
        assert self._record is not None
        self._record.queued_after = e.after_run_id

    def _start(self, e: ev.RunStarted) -> None:
        self._t0 = e.t
        self._record = RunRecord(
            run_id=e.run_id,
            task=clean(e.task),
            agent=safe_text(e.agent),
            model=safe_text(e.model),
            started_at=e.started_at,
            parent_run_id=e.parent_run_id,
            continues_run_id=e.continues_run_id,
            forked_from_run_id=e.forked_from_run_id,
            forked_at_step=e.forked_at_step,
            tags=[clean(t) for t in e.tags],
            metadata=clean_value(dict(e.metadata)),
            model_params=clean_value(dict(e.model_params)),
        )

    def _run_dequeued(self, e: ev.RunDequeued) -> None:
        self._dequeued(e.t)

    def _dequeued(self, t: float) -> None:
        """The run really starts: its clock (and ``started_at``) move to now."""
        record = self._record
        assert record is not None
        waited = max(0.0, t - self._t0)
        record.queued_s += waited
        record.queued_after = None
        record.started_at += timedelta(seconds=waited)
        self._t0 = t

    def _step_started(self, e: ev.StepStarted) -> None:
        at, offset = self._at(e.t)
        step = StepRecord(number=e.step, kind=e.kind, started_at=at, start_s=offset)
        self._steps[e.step] = step
        self._text[e.step] = []
        assert self._record is not None
        self._record.steps.append(step)

    def _approval_requested(self, e: ev.ApprovalRequested) -> None:
        call = self._calls.get(e.call_id)
        if call is not None and call.status is None:
            call.approval = "pending"

    def _approval_decided(self, e: ev.ApprovalDecided) -> None:
        call = self._calls.get(e.call_id)
        if call is None or call.approval != "pending":
            return
        call.approval, call.approval_wait_s = e.decision, max(0.0, e.wait_s)
        if e.arguments is not None:  # what really runs, not what the model asked for
            call.arguments = clean_value(e.arguments)
        if e.decision == "approved":  # the call's own time starts now, after the person's
            call.started_at, call.start_s = self._at(e.t)

    def _call_started(self, e: ev.ToolCallStarted) -> None:
        at, offset = self._at(e.t)
        call = ToolCallRecord(
            call_id=e.call_id,
            tool=clean(e.tool),
            arguments=clean_value(e.arguments),
            started_at=at,
            start_s=offset,
        )
        self._calls[e.call_id] = call
        self._steps[e.step].tool_calls.append(call)

    def _call_finished(self, e: ev.ToolCallFinished) -> None:
        call = self._calls.get(e.call_id)
        if call is None or call.status is not None:
            return
        call.ended_at, call.end_s = self._at(e.t)
        call.status, call.result, call.error = e.status, clean_value(e.result), _clean(e.error)

    def _call_progress(self, e: ev.ToolCallProgress) -> None:
        call = self._calls.get(e.call_id)
        progress = _amount(e.progress)
        if call is None or call.status is not None or progress is None:
            return  # a late report (the call ended) or a broken one changes nothing
        total = _amount(e.total)
        message = None if e.message is None else shorten(e.message, LINE_LIMIT)
        call.progress = ToolProgress(progress, total if total is not None and total > 0 else None, message)

    def _call_log(self, e: ev.ToolCallLog) -> None:
        call = self._calls.get(e.call_id)
        if call is None or call.status is not None:
            return
        call.logs.append(f"{shorten(e.level, 20)}: {shorten(e.text, LINE_LIMIT)}")
        if len(call.logs) > LOG_LINES_KEPT:
            del call.logs[0]
            call.logs_dropped += 1

    def _node_started(self, e: ev.NodeStarted) -> None:
        at, offset = self._at(e.t)
        node = NodeRecord(node_id=e.node_id, name=clean(e.name), started_at=at, start_s=offset)
        self._nodes[e.node_id] = node
        self._steps[e.step].nodes.append(node)

    def _node_finished(self, e: ev.NodeFinished) -> None:
        node = self._nodes.get(e.node_id)
        if node is None or node.status is not None:
            return
        node.ended_at, node.end_s = self._at(e.t)
        node.status, node.output, node.error = e.status, clean_value(e.output), _clean(e.error)

    def _usage(self, e: ev.Usage) -> None:
        step = self._steps.get(e.step)
        if step is None:
            return
        # Several model calls in one step add up their known counts; the step's source is the
        # weakest of its parts, so one call of unknown usage marks the step's sum as partial.
        first = e.step not in self._usage_seen
        self._usage_seen.add(e.step)
        tokens_in, tokens_out = _count(e.input_tokens), _count(e.output_tokens)
        step.input_tokens = _add_known(step.input_tokens, tokens_in)
        step.output_tokens = _add_known(step.output_tokens, tokens_out)
        unknown_part = tokens_in is None or tokens_out is None
        source: ev.UsageSource = "unknown" if unknown_part else e.source
        if first or _SOURCE_RANK[source] < _SOURCE_RANK[step.usage_source]:
            step.usage_source = source

    def _close_step(
        self, step: StepRecord, t: float, model_output: str | None = None, cut: bool = False
    ) -> None:
        """End ``step`` at ``t``. Its text is ``model_output`` when the source told it (scrubbed
        as the event was made), else the streamed pieces joined and scrubbed as a whole (a key
        split across pieces is found); a ``cut`` step's last word is hidden when it begins a key."""
        step.ended_at, step.end_s = self._at(t)
        self._shown.pop(step.number, None)
        if model_output is not None:
            step.model_output = safe_text(model_output)
            return
        pieces = self._text.get(step.number)
        if pieces and not step.model_output:
            text = "".join(pieces)
            step.model_output = scrub_cut(text) if cut else scrub(text)

    def _step_finished(self, e: ev.StepFinished) -> None:
        step = self._steps.get(e.step)
        if step is None or step.end_s is not None:
            return
        self._close_step(step, e.t, e.model_output, cut=e.interrupted)
        if e.kind is not None:
            step.kind = e.kind
        step.error = _clean(e.error)
        step.interrupted = e.interrupted

    def _run_finished(self, e: ev.RunFinished) -> None:
        record = self._record
        assert record is not None
        for call in self._calls.values():
            if call.status is None:
                call.ended_at, call.end_s = self._at(e.t)
                call.status = "cancelled"
            if call.approval == "pending":  # the run ended while it waited: it never ran
                call.approval_wait_s = max(0.0, call.end_s - call.start_s) if call.end_s is not None else None
                call.approval = None
        for node in self._nodes.values():
            if node.status is None:
                node.ended_at, node.end_s = self._at(e.t)
                node.status = "cancelled"
        for step in record.steps:
            if step.end_s is None:
                self._close_step(step, e.t, cut=True)
                step.interrupted = e.status in ("interrupted", "limit")
                if e.status == "error":
                    step.error = _clean(e.error)
        if record.queued_after is not None:  # ended while still waiting for its turn
            self._dequeued(e.t)
        record.ended_at, record.duration_s = self._at(e.t)
        record.status, record.output, record.error = e.status, clean_value(e.output), _clean(e.error)
        record.error_type, record.cost_usd = e.error_type, e.cost_usd
        record.stop_reason, record.queued_after = e.stop_reason, None
        if e.messages is not None:
            record.messages = clean_value(list(e.messages))
        if e.fork_data is not None:
            record.fork_data = clean_value(dict(e.fork_data))

    @property
    def live(self) -> RunRecord | None:
        """The record being built, not a copy: for sinks on the loop thread, between events."""
        return self._record

    def snapshot(self) -> RunRecord | None:
        """An independent copy of the record as it stands now (``None`` before the run started)."""
        with self._lock:
            record = self._record
            if record is None:
                return None
            steps = []
            for step in record.steps:
                copy = replace(
                    step,
                    tool_calls=[replace(c, logs=list(c.logs)) for c in step.tool_calls],
                    nodes=[replace(n) for n in step.nodes],
                )
                if copy.end_s is None:
                    copy.model_output = self.shown_text(step.number)
                steps.append(copy)
            return replace(record, steps=steps)

    def step(self, number: int) -> StepRecord | None:
        """Step ``number`` of the record being built (on the loop thread, or within ``held``)."""
        return self._steps.get(number)

    @contextmanager
    def held(self) -> Iterator[RunRecord | None]:
        """The record being built, held still: no event is applied until the block ends. For a
        thread other than the loop's that reads the record in place (a store's writer building
        rows), without the cost of a copy; ``shown_text`` gives a step's text in the block."""
        with self._lock:
            yield self._record

    def live_text(self, step: int) -> str:
        """The text streamed so far in ``step``, scrubbed of credentials, less a tail that may
        still become one (it shows once the text goes on, the reply ends, or the step ends)."""
        with self._lock:
            return self.shown_text(step)

    def shown_text(self, number: int) -> str:
        """``live_text``, for a caller that holds the record already (``held``)."""
        step = self._steps.get(number)
        if step is not None and step.end_s is not None:
            return step.model_output
        pieces = self._text.get(number)
        if not pieces:
            return ""
        shown = self._shown.get(number)
        if shown is None:
            shown = self._shown[number] = _ShownText()
        complete = step is not None and (step.model_ended_at is not None or bool(step.tool_calls))
        return shown.catch_up(pieces, complete)


_FOLDS: dict[type, Callable[[Recorder, Any], None]] = {
    ev.RunStarted: Recorder._start,
    ev.RunQueued: Recorder._queued,
    ev.RunDequeued: Recorder._run_dequeued,
    ev.StepStarted: Recorder._step_started,
    ev.ToolCallStarted: Recorder._call_started,
    ev.ToolCallFinished: Recorder._call_finished,
    ev.ToolCallProgress: Recorder._call_progress,
    ev.ToolCallLog: Recorder._call_log,
    ev.NodeStarted: Recorder._node_started,
    ev.NodeFinished: Recorder._node_finished,
    ev.Usage: Recorder._usage,
    ev.ModelCallEnded: Recorder._model_call_ended,
    ev.ApprovalRequested: Recorder._approval_requested,
    ev.ApprovalDecided: Recorder._approval_decided,
    ev.Retrying: Recorder._retrying,
    ev.ForkPoint: Recorder._fork_point,
    ev.StepFinished: Recorder._step_finished,
    ev.RunFinished: Recorder._run_finished,
}
"""How each kind of event changes the record (``TextDelta`` is handled before the lookup; any
other event, such as ``ToolArgumentsDelta``, changes nothing)."""
