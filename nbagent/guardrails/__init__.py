"""Guardrails: budgets that stop a run with a reason (``Limits``) and tool calls that wait for a
person's approval (``Approvals``). Both act only through the run's cancel scope and events."""

from nbagent.guardrails.approvals import ApprovalCall, Approvals, PendingApproval
from nbagent.guardrails.limits import Limits

__all__ = ["ApprovalCall", "Approvals", "Limits", "PendingApproval"]
