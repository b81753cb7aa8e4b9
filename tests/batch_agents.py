"""Agent factories for batch tests that run in other processes (Ray workers import this module)."""

from __future__ import annotations

import os

import nbagent
from nbagent.models import ScriptedModel, ToolCall


@nbagent.tool
def whoami() -> int:
    """The id of the process running the tool."""
    return os.getpid()


def pid_agent(row: dict) -> nbagent.Agent:
    """Calls ``whoami`` once, then answers with the task's id."""
    model = ScriptedModel(
        [[ToolCall("whoami", {})], f"done {row['id']}"], tokens_per_s=1e6, first_token_s=0.01
    )
    return nbagent.Agent(model, tools=[whoami], name="pid")


def talker(row: dict) -> nbagent.Agent:
    """Streams for ``row["seconds"]`` seconds (100 words a second), then ends."""
    words = int(100 * row.get("seconds", 20))
    model = ScriptedModel([f"{row['id']} " + "word " * words], tokens_per_s=100, first_token_s=0.0)
    return nbagent.Agent(model, name="talker")


def broken(row: dict) -> nbagent.Agent:
    raise RuntimeError(f"cannot build an agent for {row['id']}")
