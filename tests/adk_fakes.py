"""A scripted ADK model (a ``BaseLlm`` subclass) for offline tests, notebooks and benchmarks.

Each model call takes the next ``Turn`` of its script: words streamed as ``partial`` responses
(as ADK's own models do under ``StreamingMode.SSE``; whole when ``stream`` is False), then the
whole reply with its function calls and ``usage_metadata``. A turn may ``hold`` after its first
words (a model still generating) or before any (``think``: a model that has not answered yet),
or ``raise_`` an error. The script is shared by every copy of the model, so ADK's cloning of an
agent does not restart it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from support import HANG_S


@dataclass
class Turn:
    text: str = ""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    hold: bool = False
    think: bool = False
    raise_: BaseException | None = None
    usage: tuple[int, int] = (10, 5)
    thoughts: int | None = None
    cached: int | None = None
    error_code: str | None = None
    """A reply that is an error (``LlmResponse.error_code``), as a model API's refusal comes."""
    respond: Any = None
    """``respond(llm_request) -> str``: the reply's text, from what the model was sent."""


class Script:
    """The turns left, and what the model was asked (each request's contents)."""

    def __init__(self, turns: list[Turn]) -> None:
        self.turns = list(turns)
        self.requests: list[Any] = []
        self.calls = 0


class ScriptedLlm(BaseLlm):
    """Answers from its script; ``stream`` decides partial responses as for a real model."""

    model: str = "scripted"
    script: Any = None
    always_stream: bool = False

    async def generate_content_async(
        self, llm_request: Any, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        script: Script = self.script
        script.requests.append(llm_request)
        script.calls += 1
        turn = script.turns.pop(0) if script.turns else Turn("(script ended)")
        if turn.think:
            await asyncio.sleep(HANG_S)
        if turn.raise_ is not None:
            raise turn.raise_
        if turn.error_code is not None:
            yield LlmResponse(error_code=turn.error_code, error_message=turn.text or None)
            return
        text = turn.respond(llm_request) if turn.respond is not None else turn.text
        words = [w + " " for w in text.split()]
        if stream or self.always_stream or turn.hold:
            for number, word in enumerate(words):
                piece = types.Content(role="model", parts=[types.Part(text=word)])
                yield LlmResponse(content=piece, partial=True)
                if turn.hold and number == len(words) - 1:
                    await asyncio.sleep(HANG_S)
        parts = [types.Part(text="".join(words))] if words else []
        parts += [types.Part(function_call=types.FunctionCall(name=n, args=a)) for n, a in turn.calls]
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=turn.usage[0], candidates_token_count=turn.usage[1],
            total_token_count=sum(turn.usage), thoughts_token_count=turn.thoughts,
            cached_content_token_count=turn.cached,
        )  # fmt: skip
        whole = types.Content(role="model", parts=parts)
        yield LlmResponse(content=whole, usage_metadata=usage, turn_complete=True)


def scripted(turns: list[Turn], **kwargs: Any) -> ScriptedLlm:
    return ScriptedLlm(script=Script(turns), **kwargs)
