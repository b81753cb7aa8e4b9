"""``max_tool_calls`` on smolagents agents stops the call over the budget before its body runs,
on the smolagents thread (where approvals hold a call too), for code and for tool-calling agents."""

from __future__ import annotations

import pytest
from smolagents_fakes import Turn, answer, code
from test_smolagents import Fakes

import nbagent
from nbagent.adapters.smolagents import source as adapter
from nbagent.guardrails import Limits

pytestmark = pytest.mark.needs("smolagents")


@pytest.fixture
def fakes():
    made = Fakes()
    yield made
    made.close()


def assert_stopped_by_the_budget(record: nbagent.RunRecord) -> None:
    assert record.status == "limit" and record.stop_reason == "max_tool_calls"
    assert "max_tool_calls" in record.error
    held = [c for c in record.tool_calls if c.tool == "lookup" and c.status != "ok"]
    assert held and all(c.status == "cancelled" and "max_tool_calls" in c.error for c in held)


def test_code_agent_calling_a_tool_in_a_loop_runs_it_only_as_often_as_the_budget_allows(fakes):
    """The step's code is a call of its own (``python_interpreter`` in the record), so a budget of
    2 leaves one call for the tool the code calls five times."""
    tool = fakes.tool()
    source = "for i in range(5):\n    print(lookup(f'topic {i}'))"
    model = fakes.model([code(source), code("final_answer('42')")])
    agent = fakes.agent("code", model, tools=[tool])
    record = nbagent.run(agent, "look up five", limits=Limits(max_tool_calls=2))
    assert adapter.wait_idle(agent, timeout=20)
    assert tool.calls_started == 1  # the second call was stopped before its body started
    assert_stopped_by_the_budget(record)
    calls = [c for c in record.tool_calls if c.tool == "lookup"]
    assert [c.status for c in calls][:1] == ["ok"] and all(c.status == "cancelled" for c in calls[1:])
    assert model.calls_started == 1


def test_code_agent_within_its_tool_call_budget_runs_every_call(fakes):
    tool = fakes.tool()
    source = "for i in range(3):\n    print(lookup(f'topic {i}'))"
    model = fakes.model([code(source), code("final_answer('42')")])
    budget = Limits(max_tool_calls=5)  # two steps of code, three calls of the tool
    record = nbagent.run(fakes.agent("code", model, tools=[tool]), "look", limits=budget)
    assert record.status == "success" and tool.calls_started == 3


def test_tool_calling_agent_step_over_the_budget_runs_none_of_its_calls(fakes):
    """smolagents runs a step's calls together (in parallel threads): when they would go over the
    budget, none of them starts, and the record says they were cancelled, not abandoned."""
    tool = fakes.tool()
    turn = Turn(
        tool_calls=(("lookup", {"query": "a"}), ("lookup", {"query": "b"}), ("lookup", {"query": "c"}))
    )
    agent = fakes.agent("tool", fakes.model([turn, answer("42")]), tools=[tool])
    record = nbagent.run(agent, "look up three", limits=Limits(max_tool_calls=1))
    assert adapter.wait_idle(agent, timeout=20)
    assert tool.calls_started == 0
    assert_stopped_by_the_budget(record)
    # The third call was never yielded by smolagents: the first two were held, with it, unrun.
    assert [c.status for c in record.tool_calls] == ["cancelled", "cancelled"]


def test_tool_calling_agent_steps_within_the_budget_run(fakes):
    tool = fakes.tool()
    two = Turn(tool_calls=(("lookup", {"query": "a"}), ("lookup", {"query": "b"})))
    one = Turn(tool_calls=(("lookup", {"query": "c"}),))
    agent = fakes.agent("tool", fakes.model([two, one, answer("42")]), tools=[tool])
    record = nbagent.run(agent, "look up", limits=Limits(max_tool_calls=2))
    assert adapter.wait_idle(agent, timeout=20)
    assert tool.calls_started == 2  # the first step's two; the next step would go over
    assert_stopped_by_the_budget(record)
