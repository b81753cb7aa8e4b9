"""Agent factories for the Ray backend's approval tests (Ray workers import this module)."""

from __future__ import annotations

import os

import nbagent
from nbagent.models import ScriptedModel, ToolCall


@nbagent.tool(requires_approval=True)
def send(to: str) -> str:
    """Sends a message to ``to``; says which process sent it."""
    return f"sent to {to} by {os.getpid()}"


def mailer(row: dict) -> nbagent.Agent:
    """Calls ``send`` once (the call waits for approval), then answers."""
    model = ScriptedModel(
        [[ToolCall("send", {"to": row["id"]}, id=f"call-{row['id']}")], f"done {row['id']}"],
        tokens_per_s=1e6,
        first_token_s=0.01,
    )
    return nbagent.Agent(model, tools=[send], name="mailer")
