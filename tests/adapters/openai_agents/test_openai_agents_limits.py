"""OpenAI Agents SDK runs: the model a run is priced at (``run_config.model``), and what a Stop
records for a tool still running (a sync tool's thread cannot be stopped). No network."""

from __future__ import annotations

import asyncio
import threading

import pytest
from agents import (
    Agent,
    RunConfig,
    RunHooks,
    ToolGuardrailFunctionOutput,
    function_tool,
    set_tracing_disabled,
    tool_input_guardrail,
)
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from agents.usage import Usage
from support import HANG_S, wait_until

import nbagent
from nbagent.adapters.openai_agents import source as adapter
from nbagent.analytics import cost

pytestmark = pytest.mark.needs("openai-agents")

"""A tool or guardrail that 'hangs' waits this long: only a Stop ends it within a test."""


@pytest.fixture(autouse=True, scope="module")
def no_trace_export():
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(False)


@pytest.fixture
def prices():
    yield cost.set_price
    cost.clear_prices()


def long_reply() -> ScriptedModel:
    usage = Usage(requests=1, input_tokens=100, output_tokens=2000, total_tokens=2100)
    return ScriptedModel([ModelStep(output=[assistant_message("word " * 2000)], usage=usage)])


def test_model_name_for_is_the_run_configs_model_else_the_agents():
    source = adapter.OpenAIAgentsSource(Agent(name="a", model="cheap-model"))
    assert source.model_name_for({}) == "cheap-model"
    assert source.model_name_for({"run_config": RunConfig()}) == "cheap-model"
    assert source.model_name_for({"run_config": RunConfig(model="other-model")}) == "other-model"
    assert source.model_name_for({"run_config": RunConfig(model=long_reply())}) == "ScriptedModel"


def test_a_cost_budget_is_priced_at_the_run_configs_model(prices):
    prices("cheap-model", input_per_mtok=0.0001, output_per_mtok=0.0001)
    prices("ScriptedModel", input_per_mtok=100.0, output_per_mtok=100.0)
    agent = Agent(name="a", model="cheap-model")
    record = nbagent.run(
        agent, "go", run_config=RunConfig(model=long_reply()), limits=nbagent.Limits(max_cost_usd=0.01)
    )
    assert record.model == "ScriptedModel"
    assert record.status == "limit" and record.stop_reason == "max_cost_usd"


def slow_tools(release: threading.Event, began: threading.Event, ended: list[str]):
    @function_tool
    def slow_sync() -> str:
        """Blocks its thread until released."""
        began.set()
        release.wait(HANG_S)
        ended.append("sync")
        return "late"

    @function_tool
    async def slow_async() -> str:
        """Waits until cancelled."""
        began.set()
        try:
            await asyncio.sleep(HANG_S)
        finally:
            ended.append("async")
        return "never"

    return slow_sync, slow_async


@pytest.mark.parametrize("tool_name, status", [("slow_sync", "abandoned"), ("slow_async", "cancelled")])
def test_a_stop_abandons_a_running_sync_tool_and_cancels_an_async_one(tool_name, status):
    release, began, ended = threading.Event(), threading.Event(), []
    tools = {t.name: t for t in slow_tools(release, began, ended)}
    model = ScriptedModel([[function_call(tool_name, {}, call_id="c1")], [assistant_message("done")]])
    run = nbagent.start(Agent(name="a", model=model, tools=[tools[tool_name]]), "go")
    try:
        wait_until(began.is_set)
        run.interrupt()
        record = run.wait(timeout=20)
    finally:
        release.set()
    assert record.status == "interrupted"
    (call,) = record.tool_calls
    assert call.status == status
    if status == "abandoned":
        assert "thread" in call.error and "may still be running" in call.error
        wait_until(lambda: ended == ["sync"])  # the thread went on after the run had ended
    else:
        wait_until(lambda: ended == ["async"])  # the SDK's cancel ended it (it never returns)


def test_a_sync_tool_the_sdk_had_not_begun_at_a_stop_is_cancelled():
    checking = threading.Event()
    ran: list[str] = []

    @tool_input_guardrail
    async def slow_check(data) -> ToolGuardrailFunctionOutput:
        checking.set()
        await asyncio.sleep(HANG_S)
        return ToolGuardrailFunctionOutput.allow()

    @function_tool(tool_input_guardrails=[slow_check])
    def rm(path: str) -> str:
        """Remove a file."""
        ran.append(path)
        return "removed"

    model = ScriptedModel([[function_call("rm", {"path": "a"}, call_id="c1")], [assistant_message("done")]])
    run = nbagent.start(Agent(name="a", model=model, tools=[rm]), "go")
    wait_until(checking.is_set)  # the call is announced; its guardrail runs before the tool would
    run.interrupt()
    record = run.wait(timeout=20)
    assert [(c.tool, c.status) for c in record.tool_calls] == [("rm", "cancelled")]
    assert ran == []


def test_the_users_run_hooks_still_get_every_callback():
    seen: list[str] = []

    class Hooks(RunHooks):
        async def on_llm_start(self, context, agent, system_prompt, input_items) -> None:
            seen.append(f"model {len(input_items)}")

        async def on_tool_start(self, context, agent, tool) -> None:
            seen.append(f"start {tool.name}")

        async def on_tool_end(self, context, agent, tool, result) -> None:
            seen.append(f"end {tool.name} {result}")

        async def on_agent_end(self, context, agent, output) -> None:
            seen.append(f"agent end {output}")

    @function_tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    model = ScriptedModel([[function_call("add", {"a": 1, "b": 2}, call_id="c1")], [assistant_message("3")]])
    record = nbagent.run(Agent(name="a", model=model, tools=[add]), "1 + 2?", hooks=Hooks())
    assert record.status == "success"
    assert seen == ["model 1", "start add", "end add 3", "model 3", "agent end 3"]


def test_agent_hooks_given_as_run_hooks_get_the_sdks_own_error():
    from agents import AgentHooks

    model = ScriptedModel([[assistant_message("hi")]])
    record = nbagent.run(Agent(name="a", model=model), "x", hooks=AgentHooks())
    assert record.status == "error" and "must be instances of RunHooks" in record.error
