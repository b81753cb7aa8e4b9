"""LangGraph interrupts in the live view's approval panel.

A graph paused on ``interrupt(payload)`` has pending requests (``PendingApproval.form`` says what
each asks; ``nbagent.adapters.langgraph.interrupts``). The approval panel draws a row per request:

- an approval-shaped request (LangChain's human-in-the-loop review of a tool call): the call's
  arguments and the decisions its review allows (``allowed_decisions``): **Approve**, **Deny**
  with a reason field, the arguments as editable JSON with **Approve edited**;
- any other payload: the payload in full, a text box and **Send**.

Like the tool-call rows, the click handlers run on whatever thread the kernel delivers the click
on and only call the run's thread-safe ``approve`` / ``deny`` and its approvals' ``edit`` /
``resume``. A row whose edited JSON does not parse, or whose answer is refused or comes too late
(a double click, a request already answered), says so in the row; nothing raises into the kernel.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from nbagent.view.format import esc
from nbagent.view.guards import arguments_in_full

if TYPE_CHECKING:
    from nbagent.runtime.handle import Run


def form_of(run: Run, call_id: str) -> dict[str, Any] | None:
    """What the pending request ``call_id`` asks, or None for a plain tool call."""
    for pending in run.approvals.pending:
        if pending.call_id == call_id:
            return pending.form
    return None


class InterruptRow:
    """One pending interrupt request: its payload and the controls its form asks for."""

    def __init__(self, run: Run, call_id: str, tool: str, arguments: Any, form: dict[str, Any]) -> None:
        self.run = run
        self.call_id = call_id
        self.controls: list[widgets.Widget] = []
        approval = form.get("kind") == "approval"
        what = "waits for your review" if approval else "asks for your answer"
        description = form.get("description")
        note = f'<div class="nbagent-dim">{esc(description)}</div>' if description else ""
        self.info = widgets.HTML(
            f"<div><b>◆ {esc(tool)}</b> {what} "
            f'<span class="nbagent-dim">({esc(call_id)})</span></div>{note}'
            f'<div class="nbagent-args">{esc(arguments_in_full(arguments))}</div>'
        )
        self.message = widgets.HTML("")
        rows: list[widgets.Widget] = [self.info]
        if approval:
            rows += self._approval_controls(form.get("allowed", ()), arguments)
        else:
            self.answer = widgets.Text(placeholder="your answer")
            self.send_button = self._button("Send", "paper-plane", "Resume the graph with this answer")
            self.send_button.on_click(self._on_send)
            rows.append(widgets.HBox([self.answer, self.send_button]))
        rows.append(self.message)
        self.widget = widgets.VBox(rows)
        self.widget.add_class("nbagent-approval")

    def _button(self, label: str, icon: str, tooltip: str) -> widgets.Button:
        button = widgets.Button(description=label, icon=icon, tooltip=tooltip)
        self.controls.append(button)
        return button

    def _approval_controls(self, allowed: Any, arguments: Any) -> list[widgets.Widget]:
        """Only the decisions the review allows: a button it would refuse is not drawn."""
        buttons: list[widgets.Widget] = []
        if "approve" in allowed:
            self.approve_button = self._button("Approve", "check", "Run this call")
            self.approve_button.add_class("nbagent-approve")
            self.approve_button.on_click(lambda _b: self._answer(self.run.approve, self.call_id))
            buttons.append(self.approve_button)
        if "reject" in allowed:
            self.reason = widgets.Text(placeholder="reason (shown to the model if you deny)")
            self.deny_button = self._button("Deny", "times", "Refuse this call")
            self.deny_button.add_class("nbagent-deny")
            self.deny_button.on_click(
                lambda _b: self._answer(self.run.deny, self.call_id, self.reason.value.strip() or None)
            )
            self.controls.append(self.reason)
            buttons += [self.deny_button, self.reason]
        rows: list[widgets.Widget] = [widgets.HBox(buttons)] if buttons else []
        if "edit" in allowed:
            self.arguments = widgets.Textarea(value=arguments_in_full(arguments), rows=4)
            self.arguments.layout.width = "100%"
            self.edit_button = self._button("Approve edited", "pencil", "Run this call with these arguments")
            self.edit_button.add_class("nbagent-edit")
            self.edit_button.on_click(self._on_edit)
            self.controls.append(self.arguments)
            rows.append(widgets.VBox([self.arguments, self.edit_button]))
        return rows

    # Clicks: any thread; they only answer through the run, which is thread-safe. A click never
    # raises into the kernel's comm handler: a refused or late answer is said in the row.
    def _answer(self, answer: Any, *args: Any) -> None:
        try:
            counted = answer(*args)
        except ValueError as exc:
            self.message.value = f'<div class="nbagent-error">{esc(exc)}</div>'
            return
        if not counted:
            self.message.value = '<div class="nbagent-dim">already answered</div>'

    def _on_edit(self, _button: widgets.Button) -> None:
        try:
            arguments = json.loads(self.arguments.value)
        except ValueError as exc:
            self.message.value = f'<div class="nbagent-error">the arguments are not JSON: {esc(exc)}</div>'
            return
        self._answer(self.run.approvals.edit, self.call_id, arguments)

    def _on_send(self, _button: widgets.Button) -> None:
        self._answer(self.run.approvals.resume, self.answer.value, self.call_id)

    def close(self) -> None:
        for control in self.controls:
            control.disabled = True
