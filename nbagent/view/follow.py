"""A live run shown again (``nbagent.show(run)``, a ``Run`` as a cell's last line): a view that
follows the run to its end.

The run's own live view is a sink, in place before the run starts; a view asked for later has
missed the events before it. So this one reads the run's snapshot (``run.record``, a consistent
copy, any thread) and redraws it on the runner's loop every ``INTERVAL_S`` while the run is live,
with the same Stop buttons. When the run ends (however: even when its loop dies, through the
handle's future) the view shows the final record, disables its buttons and gives way to static
HTML, as the live view does. A redraw renders the whole record, so it comes less often than the
live view's.
"""

from __future__ import annotations

import threading
import uuid
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from nbagent.view.html import record_html
from nbagent.view.live import AFTER_STEP_TOOLTIP, STOP_TOOLTIP, WIDGET_MIMETYPE, replace_display
from nbagent.view.terminal import record_text

if TYPE_CHECKING:
    from nbagent.runtime.handle import Run

INTERVAL_S = 0.25
"""Seconds between two redraws while the run is live."""


class FollowingView:
    """A view of a live ``run`` built after it started; ``display()`` shows it and starts following."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.display_id = f"nbagent-{run.run_id}-again-{uuid.uuid4().hex[:8]}"
        self.body = widgets.HTML(record_html(run.record))
        self.stop_button = widgets.Button(description="Stop", icon="stop", tooltip=STOP_TOOLTIP)
        self.after_step_button = widgets.Button(description="Stop after step", tooltip=AFTER_STEP_TOOLTIP)
        self.stop_button.on_click(lambda _: run.interrupt("now"))
        self.after_step_button.on_click(lambda _: run.interrupt("after_step"))
        self.widget = widgets.VBox([widgets.HBox([self.stop_button, self.after_step_button]), self.body])
        self._lock = threading.Lock()
        self._ended = False

    def display(self) -> None:
        from IPython.display import display

        from nbagent.runtime.loop import runner_loop

        bundle: dict[str, Any] = {
            WIDGET_MIMETYPE: {"version_major": 2, "version_minor": 0, "model_id": self.widget.model_id},
            "text/html": self.body.value,
            "text/plain": record_text(self.run.record),
        }
        display(bundle, raw=True, display_id=self.display_id)
        runner_loop().call_soon_threadsafe(self._redraw)
        self.run.completion.add_done_callback(lambda _: self._end())

    def _redraw(self) -> None:
        """On the runner's loop: the run so far, then again in a moment while it is live."""
        from nbagent.runtime.loop import runner_loop

        with self._lock:
            if self._ended or self.run.done():
                return
            html = record_html(self.run.record)
            if self.body.value != html:
                self.body.value = html
        runner_loop().call_later(INTERVAL_S, self._redraw)

    def _end(self) -> None:
        """The run has ended (any thread, once): its final view, no buttons."""
        with self._lock:
            if self._ended:
                return
            self._ended = True
            record = self.run.record
            self.body.value = record_html(record)
            self.stop_button.disabled = self.after_step_button.disabled = True
            replace_display(self.display_id, record)
