"""The live notebook view of a run: ipywidgets kept up to date by a sink on the runner's thread.

Like ``tqdm.notebook`` over ``tqdm``, this is a thin layer over the runner. ``LiveView`` is a sink
(it receives every event, in order, on the runner's loop thread) and owns a plain widget tree::

    VBox .nbagent-run  [HTML <style>, HBox .nbagent-head [HTML head, Stop, Stop after step],
                        HTML summary, VBox [HTML step 1, HTML step 2, ...]]

Rules that keep it fast and safe:

- One writer. After construction only the runner's loop thread touches the widgets: events update
  a small state, and a flush scheduled with ``loop.call_later`` writes the widgets. The click
  handlers run on whatever thread the kernel delivers the click on and do one thing: call
  ``run.interrupt(...)``, which is thread-safe.
- Coalesced. Events only mark state dirty; a flush runs about ten times a second however fast
  tokens stream, and sends only what changed: the header (its clock), the summary when the totals
  moved, and the HTML of the current step. A finished step is rendered once and then frozen, so a
  flush costs O(current step), not O(run); its time bar follows the run's length through a CSS
  variable the header carries (see ``nbagent.view.html``).
- Final. ``RunFinished`` flushes at once from the run's final record: the badge shows the end
  state, errors stay on screen in red, the buttons are disabled. When the view was displayed, its
  output is then replaced by the same picture as static HTML (without buttons: nothing in it can
  be clicked), so a saved notebook shows the final state without needing widget state.
- Honest buttons. A click cannot reach the kernel while a cell blocks in ``run.wait()`` or
  ``nbagent.run()``; ``nbagent.runtime.interrupts.blocking_wait`` then calls ``block()``, and the buttons
  are disabled with a notice saying what works instead until ``unblock()``.
- Queued. A run waiting for an earlier run of the same agent shows "queued · after run …" until
  its turn (``RunDequeued``); its clock starts then.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from nbagent import events as ev
from nbagent.records import RunRecord
from nbagent.runtime.source import Sink
from nbagent.text import shorten
from nbagent.view.display import note_shown
from nbagent.view.format import esc
from nbagent.view.guards import GUARD_STYLE, ApprovalPanel, meters_html
from nbagent.view.html import (
    STYLE,
    TASK_LIMIT,
    ToolCallCache,
    head_html,
    record_html,
    record_summary,
    step_html,
    summary_html,
    total_style,
)
from nbagent.view.terminal import record_text

if TYPE_CHECKING:
    from nbagent.runtime.handle import Run

logger = logging.getLogger("nbagent")

WIDGET_MIMETYPE = "application/vnd.jupyter.widget-view+json"
INTERVAL_S = 0.1
"""Seconds between two flushes of a view: about ten updates a second."""
STOP_TOOLTIP = "Stop the run now, mid model call or tool"
AFTER_STEP_TOOLTIP = "Let the current step finish, then stop"
BLOCKING_NOTICE = "this cell is blocking: use ■ Interrupt, or await run"
"""What the header says while a cell blocks (as read; ``await run`` shows as code)."""
BLOCKING_NOTICE_HTML = f"{esc(BLOCKING_NOTICE.removesuffix('await run'))}<code>await run</code>"
BLOCKING_TOOLTIP = (
    "A cell is blocking in run.wait() or nbagent.run(), and the kernel takes no click until it ends: "
    "use Jupyter's ■ Interrupt to stop the run (or start it with nbagent.start, then await run)"
)

_views: weakref.WeakKeyDictionary[Run, list[weakref.ref[LiveView]]] = weakref.WeakKeyDictionary()
"""Each run's views, weakly both ways (a view refers to its run), so neither outlives its use."""
_views_lock = threading.Lock()


def views_of(run: Run) -> list[LiveView]:
    """The live views built for ``run`` (usually one). Any thread."""
    with _views_lock:
        refs = list(_views.get(run, ()))
    return [view for ref in refs if (view := ref()) is not None]


def replace_display(display_id: str, record: RunRecord) -> None:
    """Replace the output shown as ``display_id`` with the static view of ``record``.

    The widget gives way to static HTML that looks the same, so a notebook saved from here on
    shows the final state without widget state. Front ends route the update by display id:
    JupyterLab to the cell that showed the view (until that cell runs again), nbclient only when
    the message names the cell it is running now. The run's task inherited the starting cell's
    context, whose parent header names that cell, so publish from an empty context: the kernel
    then uses the header of the request it is handling now."""
    from IPython.display import update_display

    bundle = {"text/html": record_html(record), "text/plain": record_text(record)}
    contextvars.Context().run(update_display, bundle, raw=True, display_id=display_id)


@dataclass
class _Panel:
    """The widget of one step not frozen yet, and its latest retry notice."""

    number: int
    retry: ev.Retrying | None = None
    widget: widgets.HTML | None = None


class LiveView(Sink):
    """The widget view of one run, and the sink that keeps it current.

    Build it before the run starts and add it with ``run.add_sink(view)``; ``display()`` shows it.
    ``widget`` is the whole view; ``head``, ``summary``, ``steps`` (one HTML per step),
    ``stop_button`` and ``after_step_button`` are its parts, to read, not to write. ``loop`` and
    ``clock`` exist for tests: by default the runner's loop and ``time.perf_counter`` (the clock
    events are stamped with).
    """

    def __init__(
        self,
        run: Run,
        *,
        loop: asyncio.AbstractEventLoop | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if loop is None:
            from nbagent.runtime.loop import runner_loop

            loop = runner_loop()
        self.run = run
        self._loop = loop
        self._clock = clock
        self.display_id = f"nbagent-{run.run_id}"
        self._displayed = False
        self._agent = shorten(getattr(run.source, "name", type(run.agent).__name__), 100)
        self._model = shorten(run.model_name, 100)
        self._task = shorten(run.task, TASK_LIMIT)
        fork = getattr(run, "fork", None)
        self._fork = (fork.origin.record.run_id, fork.at_step) if fork is not None else None
        """The run and step this run forks (``nbagent.fork``), for its line in the summary."""
        """Shortened once: a 10 MB task must not be re-read on every tick."""
        self._t0: float | None = None
        self._started_at = datetime.now(timezone.utc)
        self._panels: dict[int, _Panel] = {}
        """Steps not frozen yet: the current one, and any finished since the last flush."""
        self._dirty: set[int] = set()
        self._calls = ToolCallCache()
        self._timer: asyncio.TimerHandle | None = None
        self._queued = False
        self._blocked = 0
        """How many blocking waits hold the kernel (loop thread only)."""
        self._finished = False
        self._broken = False

        self.head = widgets.HTML(self._head_value("running", None))
        self.stop_button = widgets.Button(description="Stop", icon="stop", tooltip=STOP_TOOLTIP)
        self.stop_button.add_class("nbagent-stop")
        self.after_step_button = widgets.Button(description="Stop after step", tooltip=AFTER_STEP_TOOLTIP)
        self.stop_button.on_click(self._on_stop)
        self.after_step_button.on_click(self._on_stop_after_step)
        header = widgets.HBox([self.head, self.stop_button, self.after_step_button])
        header.add_class("nbagent-head")
        self.summary = widgets.HTML(summary_html(self._task, steps=0, fork=self._fork))
        self.steps = widgets.VBox([])
        self.meters = widgets.HTML(meters_html(run.limits_used()))
        self.approvals = ApprovalPanel(run)
        """The calls waiting for a decision, with their Approve / Deny buttons."""
        style = widgets.HTML(STYLE + GUARD_STYLE, layout=widgets.Layout(display="none"))
        self.widget = widgets.VBox(
            [style, header, self.meters, self.summary, self.approvals.widget, self.steps]
        )
        self.widget.add_class("nbagent-run")
        self.widget.add_class(f"nbagent-run-{run.run_id}")
        with _views_lock:
            _views.setdefault(run, []).append(weakref.ref(self))

    # -- clicks: any thread; they only signal the run's cancel scope --------------------------

    def _on_stop(self, _button: widgets.Button) -> None:
        self.run.interrupt("now")

    def _on_stop_after_step(self, _button: widgets.Button) -> None:
        self.run.interrupt("after_step")

    # -- a blocking wait: any thread; the change is written on the loop thread -------------------

    def block(self) -> bool:
        """A cell now blocks until the run ends, so no click can arrive: disable the buttons and
        say what works instead. True if it did (only in a kernel: elsewhere nothing is held).
        Any thread; ``unblock()`` undoes it."""
        from nbagent.view.display import in_kernel

        if not in_kernel():
            return False
        self._loop.call_soon_threadsafe(self._block_changed, 1)
        return True

    def unblock(self) -> None:
        """The blocking wait is over: the buttons work again (unless the run has ended)."""
        self._loop.call_soon_threadsafe(self._block_changed, -1)

    def _block_changed(self, delta: int) -> None:
        self._blocked = max(0, self._blocked + delta)
        if self._finished or self._broken:
            return  # the final state has its own disabled buttons and no notice
        blocked = self._blocked > 0
        try:
            self.stop_button.disabled = self.after_step_button.disabled = blocked
            self.stop_button.tooltip = BLOCKING_TOOLTIP if blocked else STOP_TOOLTIP
            self.after_step_button.tooltip = BLOCKING_TOOLTIP if blocked else AFTER_STEP_TOOLTIP
        except Exception:
            self._broken = True
            logger.exception("nbagent: the live view of run %s stopped updating", self.run.run_id)
            return
        self._write(self._clock())

    # -- display ---------------------------------------------------------------------------

    def mimebundle(self) -> dict[str, Any]:
        """The widget, with static fallbacks for front ends that cannot render widgets."""
        not_started = RunRecord(self.run.run_id, self._task, self._agent, self._model, self._started_at)
        return {
            WIDGET_MIMETYPE: {"version_major": 2, "version_minor": 0, "model_id": self.widget.model_id},
            "text/html": record_html(not_started),
            "text/plain": f"nbagent run {self.run.run_id} ({self._agent}): running",
        }

    def display(self) -> None:
        """Show the view in the current output (in a Jupyter kernel)."""
        from IPython.display import display

        display(self.mimebundle(), raw=True, display_id=self.display_id)
        self._displayed = True
        note_shown(self.run.run_id)

    # -- the sink: the runner's loop thread ------------------------------------------------

    def __call__(self, event: ev.RunEvent) -> None:
        # The run's Recorder has already folded this event (the runner applies it before any
        # sink); the view only notes which step to redraw and reads the step back when it writes.
        kind = type(event)
        if kind is ev.StepStarted:
            self._panels[event.step] = _Panel(event.step)
        elif kind is ev.Retrying and event.step in self._panels:
            self._panels[event.step].retry = event  # type: ignore[assignment]
        elif kind is ev.RunStarted:
            self._t0 = event.t
            live = self.run.live_record()  # its text is clean (valid UTF-8); the event's may not be
            self._started_at = live.started_at
            self._agent, self._model = shorten(live.agent, 100), shorten(live.model, 100)
            self._task = shorten(live.task, TASK_LIMIT)
        elif kind is ev.RunQueued:
            self._queued = True
        elif kind is ev.RunDequeued:
            self._queued = False
            self._t0 = event.t  # the clock counts from the real start, as the record does
        elif kind is ev.RunFinished:
            self._run_finished()
            return
        elif kind is ev.ApprovalRequested:
            self._guarded(self.approvals.add, event.call_id, event.tool, event.arguments)  # type: ignore[attr-defined]
        elif kind is ev.ApprovalDecided:
            self._guarded(self.approvals.remove, event.call_id)  # type: ignore[attr-defined]
        if event.step in self._panels:
            self._dirty.add(event.step)
        self._schedule()

    def _guarded(self, change: Callable[..., None], *args: Any) -> None:
        if self._broken:
            return
        try:
            change(*args)
        except Exception:
            self._broken = True
            logger.exception("nbagent: the live view of run %s stopped updating", self.run.run_id)

    def _offset(self, t: float) -> float:
        return t - (self._t0 if self._t0 is not None else t)

    def _schedule(self) -> None:
        if self._timer is None and not self._finished:
            self._timer = self._loop.call_later(INTERVAL_S, self._tick)

    def _tick(self) -> None:
        self._timer = None
        if self._finished:
            return
        self._write(self._clock())
        if not self._broken:
            self._schedule()  # the header's clock keeps moving while the run is live

    # -- writing the widgets ---------------------------------------------------------------

    def _head_value(
        self,
        status: str,
        elapsed_s: float | None,
        stopping: str | None = None,
        queued_after: str | None = None,
        why: str | None = None,
    ) -> str:
        bar_scale = f"<style>.nbagent-run-{self.run.run_id}{{{total_style(elapsed_s)}}}</style>"
        notice = BLOCKING_NOTICE_HTML if self._blocked and status in ("running", "queued") else None
        head = head_html(
            self._agent,
            self._model,
            status,
            elapsed_s,
            stopping=stopping,
            queued_after=queued_after,
            notice_html=notice,
            why=why,
        )
        return bar_scale + head

    def _set(self, widget: widgets.HTML, value: str) -> None:
        if widget.value != value:
            widget.value = value

    def _write(self, now: float, record: RunRecord | None = None) -> None:
        """Send what changed since the last write. Never raises: a broken front end must not
        break the run, so the first failure is logged and the view stops updating."""
        if self._broken:
            return
        try:
            self._write_widgets(now, record)
        except Exception:
            self._broken = True
            logger.exception("nbagent: the live view of run %s stopped updating", self.run.run_id)

    def _write_widgets(self, now: float, record: RunRecord | None) -> None:
        try:
            live = self.run.live_record()
        except RuntimeError:
            return  # not started: the opening state is all there is to show
        if record is None:
            scope, stopping = self.run.scope, None
            if scope.interrupted:
                stopping = "stopping…"
            elif scope.stop_after_step:
                stopping = "stopping after this step…"
            if self._queued:
                head = self._head_value("queued", None, stopping, queued_after=live.queued_after)
            else:
                elapsed = self._offset(now) if self._t0 is not None else None
                head = self._head_value("running", elapsed, stopping)
            self._set(self.head, head)
            if self.run.limits is not None:
                self._set(self.meters, meters_html(self.run.limits_used()))
            summary = summary_html(
                self._task,
                steps=len(live.steps),
                cut=sum(s.interrupted for s in live.steps),
                input_tokens=live.input_tokens,
                output_tokens=live.output_tokens,
                unknown_usage=sum(s.end_s is not None and not s.usage_known for s in live.steps),
                fork=self._fork,
            )
        else:
            live = record
            why = ev.why_stopped(record.status, record.stop_reason)
            self._set(self.head, self._head_value(str(record.status), record.duration_s, why=why))
            if self.run.limits is not None:
                tripped = record.stop_reason if record.status == "limit" else None
                self._set(self.meters, meters_html(self.run.limits_used(), tripped))
            summary = record_summary(record)
        self._set(self.summary, summary)
        steps = {s.number: s for s in live.steps[-len(self._panels) :]} if self._panels else {}
        new: list[widgets.HTML] = []
        for number in sorted(self._dirty):
            panel, step = self._panels[number], steps[number]
            running = step.end_s is None
            html = step_html(
                step,
                text=self.run.live_text(number) if running else None,
                retry=panel.retry if running else None,
                calls=self._calls,
            )
            if panel.widget is None:
                panel.widget = widgets.HTML(html)
                new.append(panel.widget)
            else:
                self._set(panel.widget, html)
            if not running:
                del self._panels[number]  # frozen: never rendered again
                self._calls.forget(step)
        self._dirty.clear()
        if new:
            self.steps.children = (*self.steps.children, *new)

    def _run_finished(self) -> None:
        self._finished = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        record = self.run.record  # the recorder has folded RunFinished: it closed what was open
        self._dirty.update(self._panels)
        self._write(self._clock(), record)
        # Even a view whose updates broke tries to show the end: a "running" badge must not stay.
        try:
            self.approvals.clear()
            self.stop_button.disabled = True
            self.after_step_button.disabled = True
            if self._displayed:
                replace_display(self.display_id, record)
        except Exception:
            logger.exception("nbagent: could not show the final state of run %s", self.run.run_id)
