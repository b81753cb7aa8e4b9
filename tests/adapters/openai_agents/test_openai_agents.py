"""OpenAI Agents SDK agents under nbagent: records, handoffs, Stop in each phase and continue, with
the SDK's own test double (``agents.testing.ScriptedModel``); no network. Stop mid-stream against
a real local server is in test_openai_agents_http.py."""

from __future__ import annotations

import asyncio
import sys
import threading

import pytest
from agents import (
    Agent,
    ModelSettings,
    RunConfig,
    RunContextWrapper,
    Runner,
    function_tool,
    handoff,
    set_tracing_disabled,
)
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from agents.usage import Usage
from support import HANG_S, wait_until

import nbagent
from nbagent.adapters import source_for
from nbagent.adapters.openai_agents import source as adapter

pytestmark = pytest.mark.needs("openai-agents")

"""A tool or callback that 'hangs' waits this long: only a Stop ends it within a test."""


@pytest.fixture(autouse=True, scope="module")
def no_trace_export():
    """The SDK exports traces to OpenAI by default; these runs are offline."""
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(False)


def usage(tokens_in: int, tokens_out: int) -> Usage:
    return Usage(
        requests=1, input_tokens=tokens_in, output_tokens=tokens_out, total_tokens=tokens_in + tokens_out
    )


@function_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def triage(billing_model=None, **handoff_options) -> tuple[Agent, ScriptedModel]:
    """A triage agent that adds, then hands off to billing, which answers."""
    billing = Agent(
        name="billing",
        model=billing_model
        or ScriptedModel([ModelStep(output=[assistant_message("Billing: 3")], usage=usage(7, 2))]),
    )
    model = ScriptedModel(
        [
            ModelStep(output=[function_call("add", {"a": 1, "b": 2}, call_id="c1")], usage=usage(10, 3)),
            [function_call("transfer_to_billing", {}, call_id="c2")],
        ]
    )
    target = handoff(billing, **handoff_options) if handoff_options else billing
    return Agent(name="triage", model=model, tools=[add], handoffs=[target]), model


def test_detected_and_runs_to_success_through_a_handoff():
    agent, _ = triage()
    assert isinstance(source_for(agent), adapter.OpenAIAgentsSource)
    record = nbagent.run(agent, "what is 1 + 2?")

    assert record.status == "success" and record.output == "Billing: 3"
    assert record.agent == "triage"
    adding, handing, answering = record.steps
    assert [(c.tool, c.arguments, c.status, c.result) for c in adding.tool_calls] == [
        ("add", {"a": 1, "b": 2}, "ok", 3)
    ]
    assert [(c.tool, c.status, c.result) for c in handing.tool_calls] == [
        ("transfer_to_billing", "ok", "handoff to billing")
    ]
    assert (adding.kind, handing.kind, answering.kind) == ("action", "action", "final")
    assert answering.model_output == "Billing: 3"
    # usage per turn; the handoff turn's model reported none, so it is unknown, not 0
    assert (adding.input_tokens, adding.output_tokens, adding.usage_source) == (10, 3, "reported")
    assert (handing.input_tokens, handing.usage_source) == (None, "unknown")
    assert (answering.input_tokens, answering.output_tokens) == (7, 2)
    assert not record.usage_complete and record.input_tokens == 17
    assert record.messages[0] == {"content": "what is 1 + 2?", "role": "user"}


def test_stop_mid_tool_keeps_the_turns_usage():
    started = threading.Event()

    @function_tool
    async def slow() -> str:
        """Takes forever."""
        started.set()
        await asyncio.sleep(HANG_S)
        return "never"

    def agent_with_slow_tool():
        model = ScriptedModel(
            [ModelStep(output=[function_call("slow", {}, call_id="s1")], usage=usage(11, 4))]
        )
        return Agent(name="waiter", model=model, tools=[slow])

    run = nbagent.start(agent_with_slow_tool(), "go")
    wait_until(started.is_set)
    run.interrupt()
    record = run.wait(timeout=20)
    assert record.status == "interrupted" and record.stop_reason == "user"
    assert run.result is None  # a Stop: the SDK's run has no result to give
    (step,) = record.steps
    assert step.interrupted and [(c.tool, c.status) for c in step.tool_calls] == [("slow", "cancelled")]
    assert (step.input_tokens, step.output_tokens, step.usage_source) == (11, 4, "reported")

    # The SDK's own immediate cancel at the same moment counts the same usage (openai-agents 0.24
    # keeps a completed response's usage; older releases lost it, issue 1895).
    async def plain() -> Usage:
        started.clear()
        result = Runner.run_streamed(agent_with_slow_tool(), "go")

        async def cancel_once_the_tool_runs() -> None:
            while not started.is_set():
                await asyncio.sleep(0.005)
            result.cancel()

        canceller = asyncio.create_task(cancel_once_the_tool_runs())
        async for _ in result.stream_events():
            pass
        await canceller
        return result.context_wrapper.usage

    sdk = asyncio.run(plain())
    assert (sdk.input_tokens, sdk.output_tokens) == (step.input_tokens, step.output_tokens)


def test_stop_during_a_handoff():
    entered = threading.Event()

    async def on_handoff(ctx: RunContextWrapper) -> None:
        entered.set()
        await asyncio.sleep(HANG_S)

    agent, _ = triage(on_handoff=on_handoff)
    run = nbagent.start(agent, "go")
    wait_until(entered.is_set)
    run.interrupt()
    record = run.wait(timeout=20)
    assert record.status == "interrupted"
    adding, handing = record.steps
    assert not adding.interrupted and adding.tool_calls[0].status == "ok"
    assert handing.interrupted and [(c.tool, c.status) for c in handing.tool_calls] == [
        ("transfer_to_billing", "cancelled")
    ]


def test_stop_before_the_model_answers():
    entered = threading.Event()

    async def never(call):
        entered.set()
        await asyncio.sleep(HANG_S)

    agent = Agent(name="mute", model=ScriptedModel([ModelStep.respond(never)]))
    run = nbagent.start(agent, "go")
    wait_until(entered.is_set)
    run.interrupt()
    record = run.wait(timeout=20)
    assert record.status == "interrupted" and record.error is None


def test_stop_after_step_is_the_sdks_after_turn_cancel():
    entered, release = threading.Event(), threading.Event()

    @function_tool
    async def wait_for_it() -> str:
        """Waits for the test."""
        entered.set()
        while not release.is_set():
            await asyncio.sleep(0.005)
        return "done"

    model = ScriptedModel([[function_call("wait_for_it", {}, call_id="w1")], [assistant_message("too late")]])
    run = nbagent.start(Agent(name="patient", model=model, tools=[wait_for_it]), "go")
    wait_until(entered.is_set)
    assert run.interrupt("after_step")
    release.set()
    record = run.wait(timeout=20)
    assert record.status == "interrupted" and record.stop_reason == "user_after_step"
    (step,) = record.steps
    assert not step.interrupted and step.tool_calls[0].result == "done"
    assert len(model.calls) == 1


def test_continue_sends_the_kept_items_then_the_new_task():
    model = ScriptedModel([[assistant_message("first answer")], [assistant_message("second answer")]])
    agent = Agent(name="talker", model=model)
    assert nbagent.run(agent, "first").output == "first answer"
    record = nbagent.run(agent, "second", reset=False)
    assert record.output == "second answer"
    sent = model.last_call.input
    assert [item.get("role") for item in sent] == ["user", "assistant", "user"]
    assert sent[-1]["content"] == "second"


def test_run_arguments_pass_through():
    seen = {}

    @function_tool
    def whoami(ctx: RunContextWrapper[dict]) -> str:
        """Says who the user is."""
        seen["context"] = ctx.context
        return ctx.context["user"]

    model = ScriptedModel([[function_call("whoami", {}, call_id="u1")], [assistant_message("hi ada")]])
    context = {"user": "ada"}
    config = RunConfig(model_settings=ModelSettings(temperature=0.25), tracing_disabled=True)
    record = nbagent.run(
        Agent(name="greeter", model=model, tools=[whoami]), "hi", context=context, run_config=config
    )
    assert record.output == "hi ada" and seen["context"] is context
    assert model.first_call.model_settings.temperature == 0.25
    with pytest.raises(TypeError, match="max_turns"):
        nbagent.start(Agent(name="x", model=model), "x", max_steps=2)


def test_max_turns_ends_max_steps():
    loop = ScriptedModel([[function_call("add", {"a": 1, "b": 1}, call_id=f"c{i}")] for i in range(5)])
    record = nbagent.run(Agent(name="looper", model=loop, tools=[add]), "loop", max_turns=2)
    assert record.status == "max_steps" and record.stop_reason == "max_steps"
    assert len(record.steps) == 2 and "2" in record.error


def test_a_model_error_ends_the_run_with_the_sdks_error():
    broken = ScriptedModel([ModelStep.raise_error(RuntimeError("model down"))])
    record = nbagent.run(Agent(name="broken", model=broken), "go")
    assert record.status == "error" and record.error == "RuntimeError: model down"


def test_a_tool_that_raises_is_an_observation_as_in_the_sdk():
    @function_tool
    def fails() -> str:
        """Always fails."""
        raise ValueError("the tool broke")

    model = ScriptedModel([[function_call("fails", {}, call_id="f1")], [assistant_message("sorry")]])
    record = nbagent.run(Agent(name="unlucky", model=model, tools=[fails]), "go")
    assert record.status == "success" and record.output == "sorry"
    call = record.steps[0].tool_calls[0]
    assert call.tool == "fails" and "error occurred" in call.result


def test_the_agent_is_left_as_it_was():
    agent, model = triage()
    asyncio.run(Runner.run(agent, "go"))  # what a plain run changes (the SDK caches on the agent)
    model.extend(
        [
            [function_call("add", {"a": 1, "b": 2}, call_id="c3")],
            [function_call("transfer_to_billing", {}, call_id="c4")],
        ]
    )
    agent.handoffs[0].model.enqueue([assistant_message("Billing: 3")])
    before = dict(vars(agent))
    assert nbagent.run(agent, "go").status == "success"
    assert set(vars(agent)) == set(before) and all(vars(agent)[k] is v for k, v in before.items())


def test_records_from_a_plain_run():
    agent, _ = triage()
    result = asyncio.run(Runner.run(agent, "what is 1 + 2?"))
    (record,) = adapter.records_from_openai_agents(result)
    ours = nbagent.run(triage()[0], "what is 1 + 2?")
    assert record.status == ours.status == "success" and record.output == ours.output
    assert [[(c.tool, c.result) for c in s.tool_calls] for s in record.steps] == [
        [(c.tool, c.result) for c in s.tool_calls] for s in ours.steps
    ]
    assert [(s.input_tokens, s.output_tokens) for s in record.steps] == [
        (s.input_tokens, s.output_tokens) for s in ours.steps
    ]
    assert record.steps[-1].model_output == "Billing: 3"
    assert (record.agent, record.model) == ("triage", "ScriptedModel")
    with pytest.raises(TypeError, match="records_from_openai_agents takes"):
        adapter.records_from_openai_agents("nope")


def test_detection_does_not_import_the_sdk(monkeypatch):
    for name in [m for m in sys.modules if m == "agents" or m.startswith("agents.")]:
        monkeypatch.delitem(sys.modules, name)
    assert source_for(object()) is None
    assert "agents" not in sys.modules


def test_continue_after_a_stop_mid_tool_sends_the_cut_turn():
    started = threading.Event()

    @function_tool
    async def slow() -> str:
        """Takes forever."""
        started.set()
        await asyncio.sleep(HANG_S)
        return "never"

    model = ScriptedModel([[assistant_message("checking"), function_call("slow", {}, call_id="s1")]])
    agent = Agent(name="waiter", model=model, tools=[slow])
    run = nbagent.start(agent, "go")
    wait_until(started.is_set)
    run.interrupt()
    assert run.wait(timeout=20).status == "interrupted"

    model.enqueue([assistant_message("sorry for the wait")])
    record = nbagent.run(agent, "go on", reset=False)
    assert record.status == "success"
    sent = model.last_call.input
    assert [item.get("role") or item.get("type") for item in sent] == [
        "user", "assistant", "function_call", "function_call_output", "user"
    ]  # fmt: skip
    assert sent[3] == {"type": "function_call_output", "call_id": "s1", "output": adapter.INTERRUPTED_OUTPUT}


def test_run_result_has_what_runner_run_returns():
    plain_agent, _ = triage()
    plain = asyncio.run(Runner.run(plain_agent, "what is 1 + 2?"))
    agent, _ = triage()
    run = nbagent.start(agent, "what is 1 + 2?", display=False)
    record = run.wait(timeout=20)

    result = run.result
    assert result.final_output == plain.final_output == record.output
    assert result.to_input_list() == plain.to_input_list()
    assert result.last_agent.name == plain.last_agent.name == "billing"
    assert result.context_wrapper.usage.input_tokens == plain.context_wrapper.usage.input_tokens == 17
    assert [type(item).__name__ for item in result.new_items] == [
        type(item).__name__ for item in plain.new_items
    ]
    assert result.to_state().to_json()["current_turn"] == plain.to_state().to_json()["current_turn"]
