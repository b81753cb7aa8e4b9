"""nbagent's ``approve=`` policy for a pydantic-ai run, as pydantic-ai's own deferred approvals.

A call the policy picks raises pydantic-ai's ``ApprovalRequired`` (its ``ApprovalRequiredToolset``
does that), so it takes the path a ``requires_approval=True`` tool takes: pydantic-ai defers it,
nbagent's ``HandleDeferredToolCalls`` handler puts it in the run's approval panel, and an approved
call runs (pydantic-ai marks it ``tool_call_approved``, so it is not asked twice). The wrapper
exists for that run only, as a capability passed to ``agent.iter``: the agent is never changed.
"""

from __future__ import annotations

from typing import Any

from nbagent.guardrails.approvals import Approvals


def approval_policy(approvals: Approvals) -> Any:
    """A capability holding the calls ``approvals``' policy picks, or ``None`` without a policy."""
    if approvals.policy in (None, False):
        return None
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.toolsets.approval_required import ApprovalRequiredToolset

    def wanted(ctx: Any, tool_def: Any, arguments: dict[str, Any]) -> bool:
        return approvals.wants(tool_def.name, arguments, ctx.tool_call_id or "")

    class NbagentApprovalPolicy(AbstractCapability[Any]):
        """Calls nbagent's ``approve=`` picks need approval (for this run only)."""

        def __init__(self) -> None:
            pass

        @classmethod
        def get_serialization_name(cls) -> str | None:
            return None

        def get_wrapper_toolset(self, toolset: Any) -> Any:
            return ApprovalRequiredToolset(toolset, approval_required_func=wanted)

    return NbagentApprovalPolicy()
