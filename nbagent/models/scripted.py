"""``ScriptedModel``: a deterministic, offline model for demos and for testing your own tools.

Each call plays the next turn of a script: a string is a final answer, a list of ``ToolCall`` asks
for tools, a ``Reply`` does both (text first). The reply streams token by token at
``tokens_per_s`` after ``first_token_s``, through ``asyncio.sleep``, so a Stop lands mid-stream
exactly as it would on a real server; a tool call's arguments stream the same way
(``ToolCallDelta`` pieces of their JSON text) before the complete ``ToolCall``. Usage is
reported like a real API: input tokens counted from the prompt, output tokens from what was
streamed.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field

from nbagent.errors import ModelError
from nbagent.models.base import (
    Message,
    Model,
    ModelPart,
    ModelText,
    ModelUsage,
    ToolCall,
    ToolCallDelta,
    ToolSpec,
)
from nbagent.text import observation

_TOKEN = re.compile(r"\s*\S+|\s+")


def split_tokens(text: str) -> list[str]:
    """Word-sized pieces that join back to ``text`` exactly."""
    return _TOKEN.findall(text)


def count_tokens(messages: Sequence[Message]) -> int:
    """A rough, deterministic token count of a prompt (words and punctuation runs)."""
    total = 0
    for message in messages:
        total += 4 + len(split_tokens(str(message.get("content") or "")))
        for call in message.get("tool_calls") or ():
            total += len(split_tokens(observation(call)))
    return total


@dataclass(frozen=True)
class Reply:
    """One scripted turn: some text, then zero or more tool calls."""

    text: str = ""
    tool_calls: Sequence[ToolCall] = field(default_factory=tuple)


Turn = str | Sequence[ToolCall] | Reply
Policy = Callable[[list[Message]], Turn]


def as_reply(turn: Turn) -> Reply:
    if isinstance(turn, Reply):
        return turn
    if isinstance(turn, str):
        return Reply(text=turn)
    return Reply(tool_calls=tuple(turn))


class ScriptedModel(Model):
    """Plays ``turns`` in order; ``turns`` may also be a function of the messages (a policy).

    Raises ``ModelError`` when the script runs out, so a test sees a clear failure instead of a hang.
    """

    def __init__(
        self,
        turns: Iterable[Turn] | Policy,
        tokens_per_s: float = 50.0,
        first_token_s: float = 0.3,
        name: str = "scripted",
    ) -> None:
        if tokens_per_s <= 0:
            raise ValueError("tokens_per_s must be positive")
        self._policy: Policy | None = turns if callable(turns) else None
        self._turns: list[Turn] = [] if callable(turns) else list(turns)
        self._next = 0
        self.tokens_per_s = tokens_per_s
        self.first_token_s = first_token_s
        self.name = name

    @property
    def calls(self) -> int:
        """How many replies were started."""
        return self._next

    def _turn(self, messages: list[Message]) -> Reply:
        index = self._next
        self._next += 1
        if self._policy is not None:
            return as_reply(self._policy(messages))
        if index >= len(self._turns):
            raise ModelError(
                f"ScriptedModel has no turn {index + 1}: its script has {len(self._turns)} turns"
            )
        return as_reply(self._turns[index])

    async def stream(self, messages: list[Message], tools: list[ToolSpec]) -> AsyncIterator[ModelPart]:
        reply = self._turn(messages)
        delay = 1.0 / self.tokens_per_s
        if self.first_token_s > 0:
            await asyncio.sleep(self.first_token_s)
        output_tokens = 0
        for piece in split_tokens(reply.text):
            output_tokens += 1
            yield ModelText(piece)
            if delay > 0:
                await asyncio.sleep(delay)
        for call in reply.tool_calls:
            pieces = split_tokens(observation(call.arguments))
            output_tokens += 4 + len(pieces)
            for piece in pieces:
                yield ToolCallDelta(piece)
                if delay > 0:
                    await asyncio.sleep(delay)
            if not pieces and delay > 0:
                await asyncio.sleep(delay)
            yield call
        yield ModelUsage(count_tokens(messages), output_tokens, "reported")
