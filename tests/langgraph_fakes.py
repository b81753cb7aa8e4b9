"""Fake chat models for the LangGraph tests, built as LangGraph's and LangChain's own agent tests
build theirs: a list of scripted ``AIMessage`` replies, tools bound by ignoring them. This one also
streams (text in small chunks, then tool call chunks and usage on the last chunk), can be slowed,
and counts its calls, so Stop and usage can be checked."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import Field


class ScriptedChatModel(BaseChatModel):
    """Replies with ``replies`` in turn (cycling when ``cycle``); ``delay_s`` before each streamed
    chunk; ``stream_chunks=False`` makes it a model that cannot stream (``_generate`` only)."""

    replies: list[AIMessage]
    index: int = 0
    cycle: bool = False
    delay_s: float = 0.0
    chunk_size: int = 4
    calls: int = 0
    cancelled: int = 0
    seen: list[list[BaseMessage]] = Field(default_factory=list)
    """The messages of each call, as the model got them."""

    @property
    def _llm_type(self) -> str:
        return "scripted-chat"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        return self

    def _next(self) -> AIMessage:
        if self.index >= len(self.replies):
            if not self.cycle:
                raise IndexError("the scripted model has no reply left")
            self.index = 0
        reply = self.replies[self.index]
        self.index += 1
        self.calls += 1
        return reply.model_copy(deep=True)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.seen.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=self._next())])

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        if self.delay_s:
            await self._sleep()
        return self._generate(messages)

    async def _sleep(self) -> None:
        try:
            await asyncio.sleep(self.delay_s)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise

    def _chunks(self, reply: AIMessage) -> Iterator[AIMessageChunk]:
        text = reply.content if isinstance(reply.content, str) else ""
        pieces = [text[i : i + self.chunk_size] for i in range(0, len(text), self.chunk_size)] or [""]
        for piece in pieces[:-1]:
            yield AIMessageChunk(content=piece, id=reply.id)
        tool_chunks = [
            {
                "name": call["name"],
                "args": _json(call["args"]),
                "id": call["id"],
                "index": i,
                "type": "tool_call_chunk",
            }
            for i, call in enumerate(reply.tool_calls)
        ]
        yield AIMessageChunk(
            content=pieces[-1],
            id=reply.id,
            tool_call_chunks=tool_chunks,
            usage_metadata=reply.usage_metadata,
            chunk_position="last",
        )

    def _stream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> Iterator[ChatGenerationChunk]:
        self.seen.append(list(messages))
        for chunk in self._chunks(self._next()):
            yield ChatGenerationChunk(message=chunk)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        self.seen.append(list(messages))
        for chunk in self._chunks(self._next()):
            if self.delay_s:
                await self._sleep()
            generation = ChatGenerationChunk(message=chunk)
            if run_manager is not None and isinstance(chunk.content, str) and chunk.content:
                await run_manager.on_llm_new_token(chunk.content, chunk=generation)
            yield generation


class NonStreamingChatModel(ScriptedChatModel):
    """The same replies, from ``_generate`` only: a model that cannot stream."""

    def _stream(self, *args: Any, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        raise NotImplementedError

    disable_streaming: bool = True


def _json(args: Any) -> str:
    import json

    return json.dumps(args)


def reply(
    text: str = "",
    calls: Sequence[tuple[str, dict[str, Any]]] = (),
    *,
    usage: tuple[int, int] | None = (10, 5),
    id: str | None = None,
) -> AIMessage:
    """A scripted reply: ``text``, tool ``calls`` as (name, args), and its usage (None: unknown)."""
    tool_calls = [
        {"name": name, "args": args, "id": f"call_{name}_{i}_{id or ''}", "type": "tool_call"}
        for i, (name, args) in enumerate(calls)
    ]
    meta = None
    if usage is not None:
        meta = {"input_tokens": usage[0], "output_tokens": usage[1], "total_tokens": sum(usage)}
    return AIMessage(content=text, tool_calls=tool_calls, usage_metadata=meta, id=id)
