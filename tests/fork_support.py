"""Helpers of the fork tests: a scripted model that keeps every request it was sent, a tool that
counts its calls, and the 5-step task they play (4 tool-calling steps, then an answer)."""

from __future__ import annotations

from typing import Any

from support import TESTS

from nbagent.models import ScriptedModel, ToolCall


class Spy(ScriptedModel):
    """A ``ScriptedModel`` without delays that keeps a copy of each request's messages."""

    def __init__(self, turns: Any, **options: Any) -> None:
        options.setdefault("first_token_s", 0.0)
        options.setdefault("tokens_per_s", 1e9)
        super().__init__(turns, **options)
        self.requests: list[list[dict[str, Any]]] = []

    async def stream(self, messages, tools):
        self.requests.append([dict(m) for m in messages])
        async for part in super().stream(messages, tools):
            yield part


class Counter:
    """A tool that adds and counts its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def add(self, a: int, b: int) -> int:
        """Add two numbers."""
        self.calls.append((a, b))
        return a + b


def five_steps() -> list[Any]:
    """Steps 1-4 call ``add`` once each (call ids c1..c4), step 5 answers."""
    return [[ToolCall("add", {"a": n, "b": n}, f"c{n}")] for n in range(1, 5)] + ["the sum is 20"]


def fresh_process(code: str, timeout: float = 120.0) -> dict[str, Any]:
    """Run ``code`` in a new interpreter (this worktree's nbagent, the tests' helpers importable)
    and return the JSON it printed last: what a fork in another kernel sees."""
    import json
    import os
    import subprocess
    import sys

    tests = TESTS
    path = os.pathsep.join([str(tests.parent), str(tests), os.environ.get("PYTHONPATH", "")])
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])
