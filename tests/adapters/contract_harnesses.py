"""One harness per source for the contract suite: the same scripted agent in each framework.

A script is a list of ``Reply``s, one per model call: words streamed, then optionally a tool call,
or a hold (the reply hangs after its words until a Stop). Every harness offers the same three
tools: ``add(a, b)``, ``wait()`` (blocks until the harness's ``gate`` opens) and ``boom()`` (raises).
Each harness builds its framework's own agent over its framework's own offline model, so a scenario
runs the real adapter end to end: no network, no mocks of nbagent.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from needs import missing_extras
from support import HANG_S

"""A held reply or a closed gate waits this long: only a Stop (or the test's end) ends it."""


@dataclass(frozen=True)
class Reply:
    """One model reply: ``text`` streamed word by word, then ``call`` (a tool name and its
    arguments) or, with ``hold``, a wait that only a Stop ends."""

    text: str = ""
    call: tuple[str, dict[str, Any]] | None = None
    hold: bool = False

    def words(self) -> list[str]:
        return [word + " " for word in self.text.split()]


class Harness:
    """A framework's stand-in: ``make(replies)`` returns the user's agent (what ``start`` takes)."""

    framework = ""
    extra: str | None = None
    """The nbagent extra that installs the framework (``None``: nothing beyond ``test``)."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        """Opens the ``wait`` tool (a test that Stops after the step opens it)."""
        self.ids = itertools.count(1)
        self.added: list[tuple[int, int]] = []
        """Every call of ``add`` (a scenario counts the calls a fork made again)."""

    def requests(self) -> list[Any]:
        """What the model was sent at each call, in a form that compares equal when the request
        was the same (the framework's own objects, less what it stamps with the time)."""
        raise NotImplementedError

    def available(self) -> bool:
        # By the installed distributions, not by import: a tests folder named like the framework
        # (tests/adapters/smolagents/) is importable as a namespace package when it is missing.
        return self.extra is None or not missing_extras([self.extra])

    def make(self, replies: list[Reply]) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        self.gate.set()

    def add(self, a: int, b: int) -> int:
        self.added.append((a, b))
        return a + b

    async def wait_async(self) -> str:
        while not self.gate.is_set():  # a fake tool's own poll, not a test's sleep
            await asyncio.sleep(0.005)
        return "opened"

    def wait_sync(self) -> str:
        self.gate.wait(HANG_S)
        return "opened"

    def boom(self) -> str:
        raise RuntimeError("boom")


class Native(Harness):
    framework = "native"

    def make(self, replies: list[Reply]) -> Any:
        import nbagent
        from nbagent.models.base import Model, ModelText, ModelUsage, ToolCall

        harness, script = self, list(replies)
        self.sent: list[Any] = []

        class Scripted(Model):
            name = "scripted"

            async def stream(self, messages: Any, tools: Any) -> AsyncIterator[Any]:
                harness.sent.append(json.loads(json.dumps(list(messages), default=repr)))
                reply = script.pop(0)
                for word in reply.words():
                    yield ModelText(word)
                if reply.hold:
                    await asyncio.sleep(HANG_S)
                if reply.call is not None:
                    yield ToolCall(reply.call[0], reply.call[1], id=f"call-{next(harness.ids)}")
                yield ModelUsage(10, 5)

        def add(a: int, b: int) -> int:
            """Add two integers."""
            return self.add(a, b)

        async def wait() -> str:
            """Wait for the gate."""
            return await self.wait_async()

        def boom() -> str:
            """Fail."""
            return self.boom()

        return nbagent.Agent(Scripted(), tools=[add, wait, boom], name="contract")

    def requests(self) -> list[Any]:
        return self.sent


class Smolagents(Harness):
    framework = "smolagents"
    extra = "smolagents"

    def make(self, replies: list[Reply]) -> Any:
        from smolagents import ToolCallingAgent, tool
        from smolagents_fakes import StreamingScriptedSmolModel, Turn

        turns = []
        for reply in replies:
            if reply.hold:
                turns.append(Turn(text=reply.text, hold_after=1))
            elif reply.call is not None:
                turns.append(Turn(text=reply.text, tool_calls=[reply.call]))
            else:
                turns.append(Turn(text="", tool_calls=[("final_answer", {"answer": reply.text})]))
        self.model = StreamingScriptedSmolModel(turns, chunks=2)

        @tool
        def add(a: int, b: int) -> int:
            """Add two integers.

            Args:
                a: the first.
                b: the second.
            """
            return self.add(a, b)

        @tool
        def wait() -> str:
            """Wait for the gate."""
            return self.wait_sync()

        @tool
        def boom() -> str:
            """Fail."""
            return self.boom()

        return ToolCallingAgent(
            tools=[add, wait, boom], model=self.model, name="contract", stream_outputs=True
        )

    def close(self) -> None:
        super().close()
        if hasattr(self, "model"):
            self.model.release()

    def requests(self) -> list[Any]:
        return self.model.prompts


class PydanticAI(Harness):
    framework = "pydantic-ai"
    extra = "pydantic-ai"

    def make(self, replies: list[Reply]) -> Any:
        from pydantic_ai import Agent
        from pydantic_ai.models.function import DeltaToolCall, FunctionModel

        harness, script = self, list(replies)

        self.sent: list[Any] = []

        async def stream(messages: Any, info: Any) -> AsyncIterator[Any]:
            harness.sent.append(list(messages))
            reply = script.pop(0)
            for word in reply.words():
                yield word
            if reply.hold:
                await asyncio.sleep(HANG_S)
            if reply.call is not None:
                name, arguments = reply.call
                call_id = f"call-{next(harness.ids)}"
                yield {0: DeltaToolCall(name=name, json_args=json.dumps(arguments), tool_call_id=call_id)}

        agent = Agent(FunctionModel(stream_function=stream), name="contract")

        @agent.tool_plain
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return self.add(a, b)

        @agent.tool_plain
        async def wait() -> str:
            """Wait for the gate."""
            return await self.wait_async()

        @agent.tool_plain
        def boom() -> str:
            """Fail."""
            return self.boom()

        return agent

    def requests(self) -> list[Any]:
        import dataclasses

        # pydantic-ai stamps the request it sends with the time it sends it
        return [[dataclasses.replace(m, timestamp=None) if m.kind == "request" else m for m in sent]
                for sent in self.sent]  # fmt: skip


class OpenAIAgents(Harness):
    framework = "openai-agents"
    extra = "openai-agents"

    def make(self, replies: list[Reply]) -> Any:
        from agents import Agent, function_tool
        from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
        from agents.testing.model import _stream_events_for_step
        from agents.usage import Usage
        from openai.types.responses import ResponseTextDeltaEvent

        def held(text: str) -> ModelStep:
            """A reply that streams up to its first words, then hangs."""
            events = _stream_events_for_step(
                ModelStep(output=[assistant_message(text)]), preserve_raw_usage=False
            )

            async def stream(call: Any) -> AsyncIterator[Any]:
                for event in events:
                    yield event
                    if isinstance(event, ResponseTextDeltaEvent):
                        await asyncio.sleep(HANG_S)

            return ModelStep.stream(stream)

        steps = []
        for reply in replies:
            usage = Usage(requests=1, input_tokens=10, output_tokens=5, total_tokens=15)
            if reply.hold:
                steps.append(held(reply.text))
            elif reply.call is not None:
                call = function_call(reply.call[0], reply.call[1], call_id=f"call-{next(self.ids)}")
                steps.append(ModelStep(output=[call], usage=usage))
            else:
                steps.append(ModelStep(output=[assistant_message(reply.text)], usage=usage))

        @function_tool
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return self.add(a, b)

        @function_tool
        async def wait() -> str:
            """Wait for the gate."""
            return await self.wait_async()

        @function_tool
        def boom() -> str:
            """Fail."""
            return self.boom()

        self.model = ScriptedModel(steps)
        return Agent(name="contract", model=self.model, tools=[add, wait, boom])

    def requests(self) -> list[Any]:
        return [call.input for call in self.model.calls]


class LangGraph(Harness):
    framework = "langgraph"
    extra = "langgraph"

    def make(self, replies: list[Reply]) -> Any:
        from langchain.agents import create_agent
        from langchain_core.tools import tool
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph_fakes import ScriptedChatModel, reply

        class Holding(ScriptedChatModel):
            """Streams each reply; a held one hangs after its first words."""

            held: list[bool]

            async def _astream(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any):
                hold = self.held[self.index] if self.index < len(self.held) else False
                first = True
                async for chunk in super()._astream(messages, stop, run_manager, **kw):
                    yield chunk
                    if hold and first:
                        await asyncio.sleep(HANG_S)
                    first = False

        messages = []
        for item in replies:
            calls = [item.call] if item.call is not None else []
            messages.append(reply(item.text, calls, id=f"reply-{next(self.ids)}"))
        model = Holding(replies=messages, held=[r.hold for r in replies], chunk_size=9)

        @tool
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return self.add(a, b)

        @tool
        async def wait() -> str:
            """Wait for the gate."""
            return await self.wait_async()

        @tool
        def boom() -> str:
            """Fail."""
            return self.boom()

        self.model = model
        return create_agent(model, tools=[add, wait, boom], checkpointer=InMemorySaver(), name="contract")

    def requests(self) -> list[Any]:
        return self.model.seen


class Adk(Harness):
    framework = "adk"
    extra = "adk"

    def make(self, replies: list[Reply]) -> Any:
        from adk_fakes import Turn, scripted
        from google.adk import Agent

        turns = [Turn(r.text, [r.call] if r.call else [], hold=r.hold) for r in replies]
        harness = self

        def add(a: int, b: int) -> int:
            """Add two integers."""
            return harness.add(a, b)

        async def wait() -> str:
            """Wait for the gate."""
            return await harness.wait_async()

        def boom() -> str:
            """Fail."""
            return harness.boom()

        model = self.model = scripted(turns, always_stream=True)
        return Agent(name="contract", model=model, tools=[add, wait, boom], instruction="Use the tools.")

    def requests(self) -> list[Any]:
        return [request.contents for request in self.model.script.requests]


HARNESSES = [Native, Smolagents, PydanticAI, OpenAIAgents, LangGraph, Adk]
