"""Compatibility: scenarios in the style of the OpenAI Agents SDK's own tests (its
``agents.testing.ScriptedModel``), run plainly (``Runner.run_streamed``) and through nbagent, give
the same final output, the same usage and the same error."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

pytest.importorskip("agents")

from agents import (
    Agent,
    GuardrailFunctionOutput,
    Runner,
    function_tool,
    input_guardrail,
    set_tracing_disabled,
)
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from agents.usage import Usage
from pydantic import BaseModel

import nbagent
from nbagent.errors import describe


@pytest.fixture(autouse=True, scope="module")
def no_trace_export():
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(False)


def used(tokens_in: int, tokens_out: int) -> Usage:
    return Usage(
        requests=1, input_tokens=tokens_in, output_tokens=tokens_out, total_tokens=tokens_in + tokens_out
    )


class Answer(BaseModel):
    value: int


@function_tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


@function_tool
def explode() -> str:
    """Always fails."""
    raise RuntimeError("kaboom")


def text_only() -> tuple[Agent, dict]:
    model = ScriptedModel([ModelStep(output=[assistant_message("hello")], usage=used(5, 1))])
    return Agent(name="greeter", model=model), {}


def tool_then_text() -> tuple[Agent, dict]:
    model = ScriptedModel(
        [
            ModelStep(output=[function_call("multiply", {"a": 6, "b": 7}, call_id="m1")], usage=used(20, 4)),
            ModelStep(output=[assistant_message("42")], usage=used(30, 2)),
        ]
    )
    return Agent(name="calc", model=model, tools=[multiply]), {}


def handoff_chain() -> tuple[Agent, dict]:
    specialist = Agent(
        name="specialist",
        model=ScriptedModel([ModelStep(output=[assistant_message("done")], usage=used(9, 1))]),
    )
    model = ScriptedModel(
        [ModelStep(output=[function_call("transfer_to_specialist", {}, call_id="h1")], usage=used(8, 2))]
    )
    return Agent(name="triage", model=model, handoffs=[specialist]), {}


def structured_output() -> tuple[Agent, dict]:
    model = ScriptedModel([ModelStep(output=[assistant_message('{"value": 7}')], usage=used(4, 3))])
    return Agent(name="typed", model=model, output_type=Answer), {}


def tool_error_is_observed() -> tuple[Agent, dict]:
    model = ScriptedModel([[function_call("explode", {}, call_id="e1")], [assistant_message("it failed")]])
    return Agent(name="unlucky", model=model, tools=[explode]), {}


def max_turns() -> tuple[Agent, dict]:
    model = ScriptedModel([[function_call("multiply", {"a": 1, "b": 1}, call_id=f"m{i}")] for i in range(4)])
    return Agent(name="looper", model=model, tools=[multiply]), {"max_turns": 2}


def model_error() -> tuple[Agent, dict]:
    return Agent(name="broken", model=ScriptedModel([ModelStep.raise_error(ValueError("bad reply"))])), {}


def guardrail_tripped() -> tuple[Agent, dict]:
    @input_guardrail
    def no_secrets(ctx, agent, text) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info="secret", tripwire_triggered=True)

    model = ScriptedModel([[assistant_message("never")]])
    return Agent(name="guarded", model=model, input_guardrails=[no_secrets]), {}


def with_context() -> tuple[Agent, dict]:
    model = ScriptedModel(
        [ModelStep.respond(lambda call: [assistant_message(f"saw {len(call.input)} items")])]
    )
    return Agent(name="ctx", model=model), {"context": {"user": "ada"}}


SCENARIOS: dict[str, Callable[[], tuple[Agent, dict]]] = {
    "text_only": text_only,
    "tool_then_text": tool_then_text,
    "handoff_chain": handoff_chain,
    "structured_output": structured_output,
    "tool_error_is_observed": tool_error_is_observed,
    "max_turns": max_turns,
    "model_error": model_error,
    "guardrail_tripped": guardrail_tripped,
    "with_context": with_context,
}


def plain(make: Callable[[], tuple[Agent, dict]]) -> tuple[object, tuple[int, int] | None, Exception | None]:
    agent, options = make()

    async def go():
        result = Runner.run_streamed(agent, "a task", **options)
        async for _ in result.stream_events():
            pass
        return result

    try:
        result = asyncio.run(go())
    except Exception as exc:
        return None, None, exc
    usage = result.context_wrapper.usage
    return result.final_output, (usage.input_tokens, usage.output_tokens), None


@pytest.mark.parametrize("name", SCENARIOS)
def test_same_output_usage_and_error(name):
    output, usage, error = plain(SCENARIOS[name])
    agent, options = SCENARIOS[name]()
    record = nbagent.run(agent, "a task", **options)

    assert record.output == output
    if error is None:
        assert record.status == "success"
        # nbagent leaves a turn without reported usage unknown; the SDK counts it as 0
        assert (record.input_tokens or 0, record.output_tokens or 0) == usage
    elif record.status == "max_steps":
        assert record.error == f"MaxStepsReached: {error}"
    else:
        assert record.status == "error" and record.error_type == type(error).__name__
        assert record.error == describe(error)
