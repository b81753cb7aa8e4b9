"""Compatibility: scenarios in the style of pydantic-ai's own tests (its ``TestModel`` and
``FunctionModel``), run plainly (``agent.run`` streaming) and through nbagent, give the same output,
the same usage and the same error."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

pytest.importorskip("pydantic_ai")

from pydantic import BaseModel
from pydantic_ai import Agent, ModelRetry, UsageLimits
from pydantic_ai.models.function import DeltaToolCall, FunctionModel
from pydantic_ai.models.test import TestModel

import nbagent
from nbagent.errors import describe


class Weather(BaseModel):
    city: str
    celsius: int


def tools_all() -> tuple[Agent, dict]:
    """TestModel calls every tool once with generated arguments, then answers with their results."""
    agent = Agent(TestModel())

    @agent.tool_plain
    def double(x: int) -> int:
        """Double x."""
        return 2 * x

    @agent.tool_plain
    def shout(text: str) -> str:
        """Upper-case a text."""
        return text.upper()

    return agent, {}


def custom_text() -> tuple[Agent, dict]:
    return Agent(TestModel(custom_output_text="custom answer")), {}


def structured() -> tuple[Agent, dict]:
    return Agent(TestModel(), output_type=Weather), {}


def structured_custom_args() -> tuple[Agent, dict]:
    return Agent(TestModel(custom_output_args={"city": "Oslo", "celsius": -3}), output_type=Weather), {}


def output_retry() -> tuple[Agent, dict]:
    """An output validator that asks the model to try again once."""

    async def stream(messages, info):
        tries = sum(1 for m in messages if m.kind == "response")
        yield "draft" if tries == 0 else "final"

    agent = Agent(FunctionModel(stream_function=stream))

    @agent.output_validator
    def no_drafts(output: str) -> str:
        if output == "draft":
            raise ModelRetry("not a draft, please")
        return output

    return agent, {}


def tool_raises() -> tuple[Agent, dict]:
    agent = Agent(TestModel())

    @agent.tool_plain
    def explode() -> str:
        """Always fails."""
        raise RuntimeError("kaboom")

    return agent, {}


def request_limit() -> tuple[Agent, dict]:
    async def loop(messages, info):
        yield {0: DeltaToolCall(name="noop", json_args="{}", tool_call_id=f"n{len(messages)}")}

    agent = Agent(FunctionModel(stream_function=loop))

    @agent.tool_plain
    def noop() -> str:
        """Does nothing."""
        return "ok"

    return agent, {"usage_limits": UsageLimits(request_limit=2)}


def deps_and_settings() -> tuple[Agent, dict]:
    async def stream(messages, info):
        yield f"temperature {info.model_settings['temperature']}"

    return Agent(FunctionModel(stream_function=stream)), {"model_settings": {"temperature": 0.5}}


SCENARIOS: dict[str, Callable[[], tuple[Agent, dict]]] = {
    "tools_all": tools_all,
    "custom_text": custom_text,
    "structured": structured,
    "structured_custom_args": structured_custom_args,
    "output_retry": output_retry,
    "tool_raises": tool_raises,
    "request_limit": request_limit,
    "deps_and_settings": deps_and_settings,
}


async def drain(ctx, events) -> None:
    async for _ in events:
        pass


def plain(make: Callable[[], tuple[Agent, dict]]) -> tuple[object, tuple[int, int] | None, Exception | None]:
    agent, options = make()
    try:
        result = asyncio.run(agent.run("a task", event_stream_handler=drain, **options))
    except Exception as exc:
        return None, None, exc
    usage = result.usage
    return result.output, (usage.input_tokens, usage.output_tokens), None


@pytest.mark.parametrize("name", SCENARIOS)
def test_same_output_usage_and_error(name):
    output, usage, error = plain(SCENARIOS[name])
    agent, options = SCENARIOS[name]()
    record = nbagent.run(agent, "a task", **options)

    assert record.output == output
    if error is None:
        assert record.status == "success"
        assert (record.input_tokens, record.output_tokens) == usage
    else:
        # the same error: its message (a request limit is nbagent's "max_steps", under that name)
        if record.status == "max_steps":
            assert record.error == f"MaxStepsReached: {error}"
        else:
            assert record.status == "error" and record.error_type == type(error).__name__
            assert record.error == describe(error)
