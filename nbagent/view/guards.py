"""The guardrails in the live view: the budget meters, and the panel of calls waiting for approval.

Both are written by the live view on the runner's loop thread (its one writer). The meters are part
of the coalesced flush (about ten a second), like the header's clock. A pending call gets its row
at once, when it is requested: a person should see it without waiting for a tick, and requests are
rare. A row shows the call's arguments in full (escaped), a reason field and **Approve** /
**Deny** buttons; the click handlers run on whatever thread the kernel delivers the click on and
only call ``run.approve`` / ``run.deny``, which are thread-safe. A decided row is removed.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from nbagent.text import safe_text
from nbagent.view.format import attr, esc, seconds

if TYPE_CHECKING:
    from nbagent.runtime.handle import Run

GUARD_STYLE = """<style>
.nbagent-meters { display: flex; gap: 14px; flex-wrap: wrap; padding: 4px 12px 0; font-size: 12px; }
.nbagent-meter { display: inline-flex; gap: 6px; align-items: center; }
.nbagent-meterbar { display: inline-block; width: 70px; height: 6px; border-radius: 3px; position: relative;
  background: var(--jp-border-color2, rgba(128,128,128,.25)); }
.nbagent-meterbar > span { position: absolute; left: 0; top: 0; height: 6px; border-radius: 3px;
  background: var(--jp-brand-color2, #64b5f6); }
.nbagent-meter.nbagent-full .nbagent-meterbar > span { background: var(--jp-warn-color2, #ffb74d); }
.nbagent-approval { border-top: 1px solid var(--jp-border-color3, rgba(128,128,128,.2)); padding: 6px 12px;
  background: rgba(255,152,0,.08); }
.nbagent-approval .nbagent-args { white-space: pre-wrap; overflow-wrap: anywhere; margin: 4px 0;
  max-height: 24em; overflow: auto; font-size: 12px;
  font-family: var(--jp-code-font-family, Menlo, Consolas, monospace); }
</style>"""

METER_LABELS = {
    "max_tokens": "tokens",
    "max_input_tokens": "input tokens",
    "max_output_tokens": "output tokens",
    "max_cost_usd": "cost",
    "max_seconds": "time",
    "max_wait_seconds": "approval wait",
    "max_tool_calls": "tool calls",
    "max_steps": "steps",
}


def _amount(name: str, value: float) -> str:
    if name == "max_cost_usd":
        return f"${value:.4f}"
    if name in ("max_seconds", "max_wait_seconds"):
        return seconds(value)
    return f"{int(value):,}"


def meters_html(used: dict[str, tuple[float, float]], tripped: str | None = None) -> str:
    """Each set limit as ``label used / limit`` with a small bar; the tripped one is marked."""
    if not used:
        return ""
    parts = []
    for name, (value, limit) in used.items():
        share = min(1.0, value / limit) if limit else 1.0
        full = " nbagent-full" if share >= 1.0 or name == tripped else ""
        label = METER_LABELS.get(name, name)
        parts.append(
            f'<span class="nbagent-meter{full}" title="{attr(name)}">{esc(label)} '
            f'<span class="nbagent-meterbar"><span style="width:{share * 100:.1f}%"></span></span> '
            f"{esc(_amount(name, value))} / {esc(_amount(name, limit))}</span>"
        )
    return f'<div class="nbagent-meters">{"".join(parts)}</div>'


def arguments_in_full(arguments: Any) -> str:
    """The arguments as a person must see them to decide: all of them, pretty JSON when possible."""
    if isinstance(arguments, str):
        return safe_text(arguments)
    try:
        return json.dumps(arguments, indent=2, ensure_ascii=False, default=safe_text)
    except Exception:
        return safe_text(arguments)


class ApprovalRow:
    """One pending call: its arguments, a reason field, Approve and Deny."""

    def __init__(self, run: Run, call_id: str, tool: str, arguments: Any) -> None:
        self.run = run
        self.call_id = call_id
        self.info = widgets.HTML(
            f"<div><b>◆ {esc(tool)}</b> waits for your approval "
            f'<span class="nbagent-dim">({esc(call_id)})</span></div>'
            f'<div class="nbagent-args">{esc(arguments_in_full(arguments))}</div>'
        )
        self.reason = widgets.Text(placeholder="reason (shown to the model if you deny)")
        self.approve_button = widgets.Button(description="Approve", icon="check", tooltip="Run this call")
        self.deny_button = widgets.Button(description="Deny", icon="times", tooltip="Refuse this call")
        self.approve_button.add_class("nbagent-approve")
        self.deny_button.add_class("nbagent-deny")
        self.approve_button.on_click(self._on_approve)
        self.deny_button.on_click(self._on_deny)
        buttons = widgets.HBox([self.approve_button, self.deny_button, self.reason])
        self.widget = widgets.VBox([self.info, buttons])
        self.widget.add_class("nbagent-approval")

    # Clicks: any thread; they only decide through the run, which is thread-safe.
    def _on_approve(self, _button: widgets.Button) -> None:
        self.run.approve(self.call_id)

    def _on_deny(self, _button: widgets.Button) -> None:
        self.run.deny(self.call_id, self.reason.value.strip() or None)

    def close(self) -> None:
        self.approve_button.disabled = self.deny_button.disabled = self.reason.disabled = True


class ApprovalPanel:
    """The rows of the calls waiting now. Loop thread only (the live view's writer)."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.rows: dict[str, ApprovalRow] = {}
        self.widget = widgets.VBox([])

    def add(self, call_id: str, tool: str, arguments: Any) -> None:
        from nbagent.view.interrupts import InterruptRow, form_of

        form = form_of(self.run, call_id)  # a LangGraph interrupt asks for more than approve / deny
        row: Any = InterruptRow(self.run, call_id, tool, arguments, form) if form else None
        row = row or ApprovalRow(self.run, call_id, tool, arguments)
        self.rows[call_id] = row
        self.widget.children = (*self.widget.children, row.widget)

    def remove(self, call_id: str) -> None:
        row = self.rows.pop(call_id, None)
        if row is not None:
            row.close()
            self.widget.children = tuple(c for c in self.widget.children if c is not row.widget)

    def clear(self) -> None:
        for call_id in list(self.rows):
            self.remove(call_id)
