"""pydantic-ai runs under nbagent limits: the model a run is priced at (a per-run ``model=``), and
``max_tool_calls`` against a step whose calls pydantic-ai announces all together. No network."""

from __future__ import annotations

import pytest
from pydantic_ai import Agent
from pydantic_ai.models.function import DeltaToolCall, FunctionModel
from pydantic_ai.models.test import TestModel

import nbagent
from nbagent.adapters.pydantic_ai import source as adapter
from nbagent.analytics import cost

pytestmark = pytest.mark.needs("pydantic-ai")


@pytest.fixture
def prices():
    yield cost.set_price
    cost.clear_prices()


def expensive_model() -> FunctionModel:
    async def talk(messages, info):
        for _ in range(2000):
            yield "word "

    return FunctionModel(stream_function=talk, model_name="expensive")


def test_model_name_for_is_the_runs_model_else_the_agents():
    source = adapter.PydanticAISource(Agent(TestModel()))
    assert source.model_name_for({}) == "test"
    assert source.model_name_for({"model": expensive_model()}) == "expensive"
    assert source.model_name_for({"model": "openai:gpt-4.1-mini"}) == "openai:gpt-4.1-mini"
    assert adapter.PydanticAISource(Agent()).model_name_for({"model": TestModel()}) == "test"


def test_a_cost_budget_is_priced_at_the_model_the_run_uses(prices):
    prices("test", input_per_mtok=0.0001, output_per_mtok=0.0001)
    prices("expensive", input_per_mtok=100.0, output_per_mtok=100.0)
    agent = Agent(TestModel())
    record = nbagent.run(agent, "go", model=expensive_model(), limits=nbagent.Limits(max_cost_usd=0.01))
    assert record.model == "expensive"
    assert record.status == "limit" and record.stop_reason == "max_cost_usd"


def test_an_agent_without_a_model_runs_under_a_cost_budget_with_one_given_per_run(prices):
    prices("test", input_per_mtok=1.0, output_per_mtok=1.0)
    record = nbagent.run(Agent(), "go", model=TestModel(), limits=nbagent.Limits(max_cost_usd=1.0))
    assert record.status == "success" and record.model == "test"


@pytest.mark.parametrize("sync", [False, True])
def test_max_tool_calls_below_a_steps_calls_cancels_the_whole_step(sync):
    """Pinned behaviour (see the adapter's docstring): pydantic-ai announces every call of a step
    before it runs any, so a step whose calls go past the budget runs none of them (an async tool
    would have run, to its end, had the run only been cancelled)."""
    ran: list[str] = []

    async def two_calls(messages, info):
        if len(messages) == 1:
            yield {
                0: DeltaToolCall("rm", '{"path": "a"}', tool_call_id="t1"),
                1: DeltaToolCall("rm", '{"path": "b"}', tool_call_id="t2"),
            }
        else:
            yield "done"

    agent = Agent(FunctionModel(stream_function=two_calls))

    def rm(path: str) -> str:
        ran.append(path)
        return "removed"

    async def rm_async(path: str) -> str:
        return rm(path)

    agent.tool_plain(name="rm")(rm if sync else rm_async)

    record = nbagent.run(agent, "go", limits=nbagent.Limits(max_tool_calls=1))
    assert record.status == "limit" and record.stop_reason == "max_tool_calls"
    assert [(c.tool, c.status) for c in record.tool_calls] == [("rm", "cancelled"), ("rm", "cancelled")]
    assert ran == []
