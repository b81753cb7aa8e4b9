"""Scripted smolagents models and tools: offline stand-ins for the tests and the benchmark.

``ScriptedSmolModel`` is a real ``smolagents.Model`` subclass that plays a script of ``Turn``s, one
per call: text for a ``CodeAgent`` (a thought and a ``<code>`` block), tool calls for a
``ToolCallingAgent``, or an exception to raise. ``StreamingScriptedSmolModel`` adds
``generate_stream`` (the text in ``chunks`` pieces, tool calls as stream deltas, usage in the last
delta, as OpenAI-style servers do). ``SlowTool`` is a smolagents ``Tool`` that takes its time.

Every wait is on a ``threading.Event``: ``release()`` ends all sleeps at once, so a call that nbagent
abandoned does not outlive the test that made it. Counters and ``wait_for_*`` helpers let a test
interrupt exactly in the phase it means to (mid-generate, mid-stream, mid-tool) without fixed sleeps.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from smolagents import Tool
from smolagents.models import (
    ChatMessage,
    ChatMessageStreamDelta,
    ChatMessageToolCall,
    ChatMessageToolCallFunction,
    ChatMessageToolCallStreamDelta,
    MessageRole,
    Model,
)
from smolagents.monitoring import TokenUsage


@dataclass(frozen=True)
class Turn:
    """One scripted model reply.

    ``usage`` is what the "server" reports (``None``: it reports nothing); ``delay_s`` overrides
    the model's delay for this turn; ``error`` is raised instead of replying. ``hold_after`` (for
    streams) sends that many chunks, then holds the stream until ``release()``.
    """

    text: str = ""
    tool_calls: Sequence[tuple[str, dict[str, Any]]] = field(default_factory=tuple)
    usage: tuple[int, int] | None = (100, 10)
    delay_s: float | None = None
    error: BaseException | None = None
    hold_after: int | None = None


HOLD_S = 60.0
"""How long a held call waits for ``release()`` at most (a test releases it long before)."""


def code(source: str, thought: str = "I will run some code.", **options: Any) -> Turn:
    """A CodeAgent turn: a thought, then ``source`` in a ``<code>`` block."""
    return Turn(text=f"Thought: {thought}\n<code>\n{source}\n</code>", **options)


def call(tool: str, /, **arguments: Any) -> Turn:
    """A ToolCallingAgent turn calling ``tool`` with ``arguments``."""
    return Turn(tool_calls=((tool, arguments),))


def answer(value: Any, **options: Any) -> Turn:
    """A ToolCallingAgent turn that gives the final answer."""
    return Turn(tool_calls=(("final_answer", {"answer": value}),), **options)


def plan(text: str = "1. Look it up.\n2. Answer.", **options: Any) -> Turn:
    """A planning turn (any text)."""
    return Turn(text=text, **options)


def fails(error: BaseException) -> Turn:
    """A turn whose call raises ``error``."""
    return Turn(error=error)


class ScriptedSmolModel(Model):
    """Plays ``turns`` in order, one per ``generate`` call, each after ``delay_s`` seconds."""

    def __init__(self, turns: Sequence[Turn], delay_s: float = 0.0, model_id: str = "scripted-smol") -> None:
        super().__init__(model_id=model_id)
        self.turns = list(turns)
        self.delay_s = delay_s
        self._cond = threading.Condition()
        self._released = threading.Event()
        self.calls_started = 0
        self.calls_finished = 0
        self.prompts: list[str] = []
        """The text of every prompt the model was sent, one string per call."""
        self._ids = itertools.count(1)
        """Tool call ids, per model: two models on the same script give the same ids."""

    # -- test helpers ------------------------------------------------------------------------

    def release(self) -> None:
        """End every sleep now (and every later one): abandoned calls finish at once."""
        self._released.set()

    def wait_for_call(self, n: int, timeout: float = 20.0) -> bool:
        """Block until the ``n``-th call (1-based) has started."""
        with self._cond:
            return self._cond.wait_for(lambda: self.calls_started >= n, timeout)

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._released.wait(seconds)

    def _take(self, messages: list[Any]) -> Turn:
        self.prompts.append("\n".join(_text(m) for m in messages))
        with self._cond:
            index = self.calls_started
            self.calls_started += 1
            self._cond.notify_all()
        if index >= len(self.turns):
            raise RuntimeError(f"the script has no turn {index + 1}")
        return self.turns[index]

    def _done(self) -> None:
        with self._cond:
            self.calls_finished += 1
            self._cond.notify_all()

    # -- the smolagents Model interface -------------------------------------------------------

    def generate(
        self,
        messages: list[ChatMessage],
        stop_sequences: list[str] | None = None,
        response_format: dict[str, str] | None = None,
        tools_to_call_from: list[Any] | None = None,
        **kwargs: Any,
    ) -> ChatMessage:
        turn = self._take(messages)
        self._sleep(self.delay_s if turn.delay_s is None else turn.delay_s)
        self._done()
        if turn.error is not None:
            raise turn.error
        return ChatMessage(
            role=MessageRole.ASSISTANT,
            content=turn.text or None,
            tool_calls=[
                ChatMessageToolCall(
                    function=ChatMessageToolCallFunction(name=name, arguments=arguments),
                    id=f"call_{next(self._ids)}",
                    type="function",
                )
                for name, arguments in turn.tool_calls
            ]
            or None,
            token_usage=None if turn.usage is None else TokenUsage(*turn.usage),
        )


class StreamingScriptedSmolModel(ScriptedSmolModel):
    """Streams each turn: the text in ``chunks`` pieces, ``delay_s`` spread evenly over them."""

    def __init__(self, turns: Sequence[Turn], delay_s: float = 0.0, chunks: int = 4, **options: Any) -> None:
        super().__init__(turns, delay_s=delay_s, **options)
        self.chunks = chunks
        self.chunks_sent = 0

    def wait_for_chunks(self, n: int, timeout: float = 20.0) -> bool:
        """Block until ``n`` chunks (over all calls) have been sent."""
        with self._cond:
            return self._cond.wait_for(lambda: self.chunks_sent >= n, timeout)

    def generate_stream(
        self,
        messages: list[ChatMessage],
        stop_sequences: list[str] | None = None,
        response_format: dict[str, str] | None = None,
        tools_to_call_from: list[Any] | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatMessageStreamDelta]:
        turn = self._take(messages)
        delay = self.delay_s if turn.delay_s is None else turn.delay_s
        if turn.error is not None:
            self._sleep(delay)
            self._done()
            raise turn.error
        size = max(1, -(-len(turn.text) // self.chunks))
        pieces = [turn.text[i : i + size] for i in range(0, len(turn.text), size)] or [""]
        pieces += [""] * (self.chunks - len(pieces))
        for index, piece in enumerate(pieces):
            if index == turn.hold_after:
                self._sleep(HOLD_S)
            self._sleep(delay / self.chunks)
            deltas = None
            if index == len(pieces) - 1 and turn.tool_calls:
                deltas = [
                    ChatMessageToolCallStreamDelta(
                        index=i,
                        id=f"call_{next(self._ids)}",
                        type="function",
                        function=ChatMessageToolCallFunction(name=name, arguments=json.dumps(arguments)),
                    )
                    for i, (name, arguments) in enumerate(turn.tool_calls)
                ]
            with self._cond:
                self.chunks_sent += 1
                self._cond.notify_all()
            yield ChatMessageStreamDelta(content=piece or None, tool_calls=deltas)
        self._done()
        if turn.usage is not None:
            yield ChatMessageStreamDelta(content="", token_usage=TokenUsage(*turn.usage))


def _text(message: Any) -> str:
    content = message.content if isinstance(message, ChatMessage) else message.get("content")
    if isinstance(content, list):
        return "".join(str(block.get("text", "")) for block in content if isinstance(block, dict))
    return str(content or "")


class SlowTool(Tool):
    """Looks something up, taking ``delay_s`` seconds; raises instead when ``fail`` is set."""

    name = "lookup"
    description = "Looks up facts about a topic."
    inputs = {"query": {"type": "string", "description": "What to look up."}}  # noqa: RUF012
    output_type = "string"

    def __init__(self, delay_s: float = 0.0, fail: bool = False) -> None:
        super().__init__()
        self.delay_s = delay_s
        self.fail = fail
        self._cond = threading.Condition()
        self._released = threading.Event()
        self.calls_started = 0
        self.calls_finished = 0
        self.finished_at: float | None = None

    def release(self) -> None:
        self._released.set()

    def wait_for_call(self, n: int = 1, timeout: float = 20.0) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self.calls_started >= n, timeout)

    def forward(self, query: str) -> str:
        with self._cond:
            self.calls_started += 1
            self._cond.notify_all()
        if self.delay_s > 0:
            self._released.wait(self.delay_s)
        with self._cond:
            self.calls_finished += 1
            self.finished_at = time.perf_counter()
            self._cond.notify_all()
        if self.fail:
            raise RuntimeError("the lookup service is down")
        return f"facts about {query}"
