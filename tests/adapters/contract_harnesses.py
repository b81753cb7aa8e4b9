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

KEY = "sk-proj-" + "Zq7" * 12
"""A credential ``boom`` puts in its error: no copy of a run may show it."""

TOOLS = ("add", "wait", "boom", "final_answer")
"""The tools of every harness's agent (smolagents' agents also have ``final_answer``, a tool in
``agent.tools`` the model calls to answer): a record's tool calls are calls of these, never of a
graph node or a sub-agent."""

"""A held reply or a closed gate waits this long: only a Stop (or the test's end) ends it."""


@dataclass(frozen=True)
class Reply:
    """One model reply: ``text`` streamed word by word, then ``call`` (a tool name and its
    arguments) or, with ``hold``, a wait that only a Stop ends; or, with ``fail``, an error."""

    text: str = ""
    call: tuple[str, dict[str, Any]] | None = None
    hold: bool = False
    fail: str | None = None
    """The model call raises ``RuntimeError(fail)`` instead of replying."""

    def words(self) -> list[str]:
        return [word + " " for word in self.text.split()]


class Harness:
    """A framework's stand-in: ``make(replies)`` returns the user's agent (what ``start`` takes)."""

    framework = ""
    extra: str | None = None
    """The nbagent extra that installs the framework (``None``: nothing beyond ``test``)."""
    holds_calls = False
    """Whether the framework holds a call for approval by its own means (``make_gated``)."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        """Opens the ``wait`` tool (a test that Stops after the step opens it)."""
        self.ids = itertools.count(1)
        self.gated = False
        """While ``make_gated`` makes the agent: ``add`` is held for approval."""
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

    def make_gated(self, replies: list[Reply]) -> Any:
        """The agent of ``make`` with ``add`` held for approval by its framework's own means
        (``None`` where the framework has none): with no view and no approver, the run must end
        as the framework's own run does, the call handed back to the caller."""
        if not self.holds_calls:
            return None
        self.gated = True
        try:
            return self.make(replies)
        finally:
            self.gated = False

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
        raise RuntimeError(f"boom: the gateway refused key {KEY}")

    def plain_records(self, replies: list[Reply], task: str) -> list[Any] | None:
        """The framework's own ``records_from_*`` of ``task`` run plainly (its own call, no
        nbagent) by an agent made from ``replies``; ``None`` for a source with no call of its own."""
        raise NotImplementedError


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
                if reply.fail is not None:
                    raise RuntimeError(reply.fail)
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

    def plain_records(self, replies: list[Reply], task: str) -> None:
        return None  # nbagent's own agent: its record is its result


class Smolagents(Harness):
    framework = "smolagents"
    extra = "smolagents"

    def make(self, replies: list[Reply]) -> Any:
        from smolagents import ToolCallingAgent, tool
        from smolagents_fakes import StreamingScriptedSmolModel, Turn

        turns = []
        for reply in replies:
            if reply.fail is not None:
                turns.append(Turn(error=RuntimeError(reply.fail)))
            elif reply.hold:
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

    def plain_records(self, replies: list[Reply], task: str) -> list[Any]:
        from nbagent.adapters import records_from_smolagents

        agent = self.make(replies)
        agent.run(task)
        return records_from_smolagents(agent)


class PydanticAI(Harness):
    framework = "pydantic-ai"
    extra = "pydantic-ai"
    holds_calls = True

    def make(self, replies: list[Reply]) -> Any:
        from pydantic_ai import Agent, DeferredToolRequests
        from pydantic_ai.models.function import DeltaToolCall, FunctionModel

        harness, script = self, list(replies)

        self.sent: list[Any] = []

        async def stream(messages: Any, info: Any) -> AsyncIterator[Any]:
            harness.sent.append(list(messages))
            reply = script.pop(0)
            if reply.fail is not None:
                raise RuntimeError(reply.fail)
            for word in reply.words():
                yield word
            if reply.hold:
                await asyncio.sleep(HANG_S)
            if reply.call is not None:
                name, arguments = reply.call
                call_id = f"call-{next(harness.ids)}"
                yield {0: DeltaToolCall(name=name, json_args=json.dumps(arguments), tool_call_id=call_id)}

        gated = self.gated
        output: Any = [str, DeferredToolRequests] if gated else str
        agent = Agent(FunctionModel(stream_function=stream), name="contract", output_type=output)

        @agent.tool_plain(requires_approval=gated)
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

    def plain_records(self, replies: list[Reply], task: str) -> list[Any]:
        from nbagent.adapters import records_from_pydantic_ai

        async def ignore(ctx: Any, events: AsyncIterator[Any]) -> None:
            async for _ in events:
                pass

        # streamed, as nbagent runs it (the scripted model answers only streamed requests)
        result = self.make(replies).run_sync(task, event_stream_handler=ignore)
        return records_from_pydantic_ai(result)


class OpenAIAgents(Harness):
    framework = "openai-agents"
    extra = "openai-agents"
    holds_calls = True

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
            if reply.fail is not None:
                steps.append(ModelStep.raise_error(RuntimeError(reply.fail)))
            elif reply.hold:
                steps.append(held(reply.text))
            elif reply.call is not None:
                call = function_call(reply.call[0], reply.call[1], call_id=f"call-{next(self.ids)}")
                steps.append(ModelStep(output=[call], usage=usage))
            else:
                steps.append(ModelStep(output=[assistant_message(reply.text)], usage=usage))

        @function_tool(needs_approval=self.gated)
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

    def plain_records(self, replies: list[Reply], task: str) -> list[Any]:
        from agents import Runner

        from nbagent.adapters import records_from_openai_agents

        return records_from_openai_agents(Runner.run_sync(self.make(replies), task))


class LangGraph(Harness):
    framework = "langgraph"
    extra = "langgraph"
    holds_calls = True

    def make(self, replies: list[Reply]) -> Any:
        from langchain.agents import create_agent
        from langchain_core.tools import tool
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph_fakes import ScriptedChatModel, reply

        class Holding(ScriptedChatModel):
            """Streams each reply; a held one hangs after its first words."""

            held: list[bool]
            fails: list[str | None]

            def _next(self) -> Any:
                fail = self.fails[self.index] if self.index < len(self.fails) else None
                if fail is not None:
                    self.index += 1
                    raise RuntimeError(fail)
                return super()._next()

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
        model = Holding(
            replies=messages, held=[r.hold for r in replies], fails=[r.fail for r in replies], chunk_size=9
        )

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
        gate = ["tools"] if self.gated else None
        tools, saver = [add, wait, boom], InMemorySaver()
        return create_agent(model, tools, checkpointer=saver, name="contract", interrupt_before=gate)

    def requests(self) -> list[Any]:
        return self.model.seen

    def plain_records(self, replies: list[Reply], task: str) -> list[Any]:
        from nbagent.adapters import records_from_langgraph

        graph = self.make(replies)
        state = graph.invoke({"messages": [("user", task)]}, {"configurable": {"thread_id": "plain"}})
        return records_from_langgraph(state, task=task)


class Adk(Harness):
    framework = "adk"
    extra = "adk"
    holds_calls = True

    def make(self, replies: list[Reply]) -> Any:
        from adk_fakes import Turn, scripted
        from google.adk import Agent

        turns = [
            Turn(r.text, [r.call] if r.call else [], hold=r.hold, raise_=r.fail and RuntimeError(r.fail))
            for r in replies
        ]
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
        adding: Any = add
        if self.gated:
            from google.adk.tools import FunctionTool

            adding = FunctionTool(add, require_confirmation=True)
        return Agent(name="contract", model=model, tools=[adding, wait, boom], instruction="Use the tools.")

    def requests(self) -> list[Any]:
        return [request.contents for request in self.model.script.requests]

    def plain_records(self, replies: list[Reply], task: str) -> list[Any]:
        from google.adk.runners import InMemoryRunner
        from google.genai import types

        from nbagent.adapters import records_from_adk

        agent = self.make(replies)

        async def go() -> Any:
            runner = InMemoryRunner(agent=agent)
            session = await runner.session_service.create_session(app_name=runner.app_name, user_id="u")
            message = types.Content(role="user", parts=[types.Part(text=task)])
            async for _ in runner.run_async(user_id="u", session_id=session.id, new_message=message):
                pass
            return await runner.session_service.get_session(
                app_name=runner.app_name, user_id="u", session_id=session.id
            )

        return records_from_adk(asyncio.run(go()), agent)


HARNESSES = [Native, Smolagents, PydanticAI, OpenAIAgents, LangGraph, Adk]
