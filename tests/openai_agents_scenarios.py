"""Agents SDK scenarios for tests/adapters/openai_agents/test_openai_agents_compat.py, in the style of
the SDK's own runner, guardrail, handoff, tool-use-behaviour, max-turns and human-in-the-loop tests,
built with the SDK's own test double (``agents.testing.ScriptedModel``). Each scenario builds a
fresh agent (a scripted model is used up by a run), so one build runs plainly and another through
nbagent."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agents import (
    Agent,
    AgentOutputSchema,
    GuardrailFunctionOutput,
    HandoffInputData,
    ModelSettings,
    RunConfig,
    RunContextWrapper,
    RunErrorHandlerResult,
    Runner,
    StopAtTools,
    ToolsToFinalOutputResult,
    function_tool,
    handoff,
    input_guardrail,
    output_guardrail,
)
from agents.extensions.handoff_filters import remove_all_tools
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from agents.usage import Usage
from openai import APIConnectionError, BadRequestError
from openai.types.responses import ResponseOutputMessage, ResponseOutputRefusal
from pydantic import BaseModel
from typing_extensions import TypedDict

try:
    import httpx2 as http  # the HTTP client openai >= 3 is built on
except ImportError:  # older openai
    import httpx as http  # type: ignore[no-redef]

API_URL = "https://api.example.test/v1/responses"


@dataclass
class Case:
    """One scenario, built fresh: the agent, its input, the run keywords, and for a run that pauses
    for approval the decisions, in order ("approve", or "reject" with an optional message)."""

    agent: Agent
    input: Any = "a task"
    options: dict[str, Any] = field(default_factory=dict)
    decisions: list[tuple[str, str | None]] = field(default_factory=list)
    requests_elsewhere: int = 0
    """Model requests the SDK counts that are no turn of this run (an agent used as a tool): their
    tokens are in the record's totals."""


def used(tokens_in: int, tokens_out: int) -> Usage:
    return Usage(
        requests=1, input_tokens=tokens_in, output_tokens=tokens_out, total_tokens=tokens_in + tokens_out
    )


def says(text: str, tokens: tuple[int, int] = (5, 1)) -> ModelStep:
    return ModelStep(output=[assistant_message(text)], usage=used(*tokens))


def calls(*items: tuple[str, dict[str, Any], str], tokens: tuple[int, int] = (10, 3)) -> ModelStep:
    return ModelStep(
        output=[function_call(name, args, call_id=cid) for name, args, cid in items], usage=used(*tokens)
    )


def scripted(*steps: Any) -> ScriptedModel:
    return ScriptedModel(list(steps))


class Answer(BaseModel):
    value: int


class Point(TypedDict):
    x: int
    y: int


@function_tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


@function_tool
async def lookup(city: str) -> str:
    """The weather in a city."""
    await asyncio.sleep(0)
    return f"sunny in {city}"


@function_tool
def explode() -> str:
    """Always fails."""
    raise RuntimeError("kaboom")


@function_tool(failure_error_function=None)
def explode_loudly() -> str:
    """Fails, and its errors are not returned to the model."""
    raise RuntimeError("kaboom")


@function_tool(failure_error_function=lambda ctx, error: f"sorry: {error}")
def explode_politely() -> str:
    """Fails, with a custom message for the model."""
    raise RuntimeError("kaboom")


@function_tool
def whoami(ctx: RunContextWrapper[dict]) -> str:
    """The user's name, from the run's context."""
    return ctx.context["user"]


@function_tool
def profile(name: str) -> dict:
    """A structured result."""
    return {"name": name, "age": 36}


@function_tool(needs_approval=True)
def send_email(to: str) -> str:
    """Sends an email (a person must approve it)."""
    return f"sent to {to}"


@function_tool(needs_approval=lambda ctx, params, call_id: params["amount"] > 100)
async def pay(amount: int) -> str:
    """Pays an amount (over 100 needs approval)."""
    return f"paid {amount}"


def trips(info: str = "tripped") -> Any:
    @input_guardrail
    def guard(ctx, agent, text) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info=info, tripwire_triggered=True)

    return guard


def passes() -> Any:
    @input_guardrail
    async def guard(ctx, agent, text) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info="fine", tripwire_triggered=False)

    return guard


def output_trips(word: str) -> Any:
    @output_guardrail
    def guard(ctx, agent, output) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered=word in str(output))

    return guard


def billing(text: str = "billing here") -> Agent:
    return Agent(name="billing", model=scripted(says(text, (7, 2))))


def drop_everything(data: HandoffInputData) -> HandoffInputData:
    return HandoffInputData(input_history=data.input_history, pre_handoff_items=(), new_items=())


# -- the scenarios -------------------------------------------------------------------------------


def text_only() -> Case:
    return Case(Agent(name="greeter", model=scripted(says("hello"))))


def instructions_function() -> Case:
    model = scripted(ModelStep.respond(lambda call: [assistant_message(call.system_instructions or "none")]))
    return Case(Agent(name="i", model=model, instructions=lambda ctx, agent: f"be brief, {agent.name}"))


def tool_then_text() -> Case:
    model = scripted(calls(("multiply", {"a": 6, "b": 7}, "m1"), tokens=(20, 4)), says("42", (30, 2)))
    return Case(Agent(name="calc", model=model, tools=[multiply]))


def two_tools_in_one_turn() -> Case:
    model = scripted(
        calls(("multiply", {"a": 2, "b": 3}, "m1"), ("lookup", {"city": "Oslo"}, "w1")), says("both")
    )
    return Case(Agent(name="pair", model=model, tools=[multiply, lookup]))


def tools_over_three_turns() -> Case:
    model = scripted(
        calls(("multiply", {"a": 2, "b": 3}, "m1")),
        calls(("multiply", {"a": 6, "b": 7}, "m2")),
        calls(("lookup", {"city": "Rome"}, "w1")),
        says("done", (40, 1)),
    )
    return Case(Agent(name="chain", model=model, tools=[multiply, lookup]))


def tool_reads_the_context() -> Case:
    model = scripted(calls(("whoami", {}, "u1")), says("hi ada"))
    return Case(Agent(name="ctx", model=model, tools=[whoami]), options={"context": {"user": "ada"}})


def tool_returns_a_dict() -> Case:
    model = scripted(calls(("profile", {"name": "ada"}, "p1")), says("ada is 36"))
    return Case(Agent(name="profiles", model=model, tools=[profile]))


def tool_error_is_observed() -> Case:
    model = scripted(calls(("explode", {}, "e1")), says("it failed"))
    return Case(Agent(name="unlucky", model=model, tools=[explode]))


def tool_error_with_failure_function() -> Case:
    model = scripted(calls(("explode_politely", {}, "e1")), says("it failed politely"))
    return Case(Agent(name="polite", model=model, tools=[explode_politely]))


def tool_error_raised() -> Case:
    model = scripted(calls(("explode_loudly", {}, "e1")), says("never"))
    return Case(Agent(name="loud", model=model, tools=[explode_loudly]))


@function_tool
async def wait_long(seconds: float) -> str:
    """Waits (the SDK cancels it when a sibling call raises)."""
    await asyncio.sleep(seconds)
    return "waited"


def tool_error_raised_beside_a_slow_tool() -> Case:
    """The raising call is the run's error; the SDK cancels its sibling, which never answers."""
    model = scripted(calls(("wait_long", {"seconds": 60}, "w1"), ("explode_loudly", {}, "e1")), says("never"))
    return Case(Agent(name="loud", model=model, tools=[wait_long, explode_loudly]))


def tool_not_found() -> Case:
    model = scripted(calls(("no_such_tool", {}, "x1")), says("never"))
    return Case(Agent(name="lost", model=model, tools=[multiply]))


def tool_with_bad_arguments() -> Case:
    model = scripted(
        ModelStep(output=[function_call("multiply", "{not json", call_id="m1")], usage=used(9, 2)),
        says("oops"),
    )
    return Case(Agent(name="garbled", model=model, tools=[multiply]))


def stop_on_first_tool() -> Case:
    model = scripted(calls(("multiply", {"a": 3, "b": 3}, "m1")), says("never"))
    return Case(Agent(name="first", model=model, tools=[multiply], tool_use_behavior="stop_on_first_tool"))


def stop_at_tool_names() -> Case:
    model = scripted(
        calls(("lookup", {"city": "Lima"}, "w1")), calls(("multiply", {"a": 4, "b": 5}, "m1")), says("never")
    )
    behavior = StopAtTools(stop_at_tool_names=["multiply"])
    return Case(Agent(name="stopper", model=model, tools=[multiply, lookup], tool_use_behavior=behavior))


def custom_tool_use_behavior() -> Case:
    def decide(ctx, results) -> ToolsToFinalOutputResult:
        return ToolsToFinalOutputResult(is_final_output=True, final_output=f"custom {results[0].output}")

    model = scripted(calls(("multiply", {"a": 5, "b": 5}, "m1")), says("never"))
    return Case(Agent(name="custom", model=model, tools=[multiply], tool_use_behavior=decide))


def custom_behavior_runs_again() -> Case:
    async def decide(ctx, results) -> ToolsToFinalOutputResult:
        return ToolsToFinalOutputResult(is_final_output=False)

    model = scripted(calls(("multiply", {"a": 5, "b": 5}, "m1")), says("again"))
    return Case(Agent(name="again", model=model, tools=[multiply], tool_use_behavior=decide))


def structured_output() -> Case:
    model = scripted(says('{"value": 7}', (4, 3)))
    return Case(Agent(name="typed", model=model, output_type=Answer))


def structured_output_invalid() -> Case:
    model = scripted(says("not json at all"))
    return Case(Agent(name="typed", model=model, output_type=Answer))


def list_output() -> Case:
    model = scripted(says('{"response": [1, 2, 3]}'))
    return Case(Agent(name="listed", model=model, output_type=list[int]))


def typed_dict_output() -> Case:
    model = scripted(says('{"x": 1, "y": 2}'))
    return Case(
        Agent(name="point", model=model, output_type=AgentOutputSchema(Point, strict_json_schema=False))
    )


def tool_then_structured_output() -> Case:
    model = scripted(calls(("multiply", {"a": 3, "b": 4}, "m1")), says('{"value": 12}'))
    return Case(Agent(name="typed-tool", model=model, tools=[multiply], output_type=Answer))


def refusal() -> Case:
    message = ResponseOutputMessage(
        id="r1", type="message", role="assistant", status="completed",
        content=[ResponseOutputRefusal(type="refusal", refusal="I can't help with that")],
    )  # fmt: skip
    model = scripted(ModelStep(output=[message], usage=used(6, 2)))
    return Case(Agent(name="refuser", model=model, output_type=Answer))


def handoff_chain() -> Case:
    model = scripted(calls(("transfer_to_billing", {}, "h1"), tokens=(8, 2)))
    return Case(Agent(name="triage", model=model, handoffs=[billing()]))


def tool_then_handoff() -> Case:
    model = scripted(calls(("multiply", {"a": 1, "b": 2}, "m1")), calls(("transfer_to_billing", {}, "h1")))
    return Case(Agent(name="triage", model=model, tools=[multiply], handoffs=[billing("Billing: 2")]))


def handoff_filter_drops_items() -> Case:
    model = scripted(calls(("transfer_to_billing", {}, "h1")))
    target = handoff(billing(), input_filter=drop_everything)
    return Case(Agent(name="triage", model=model, handoffs=[target]))


def handoff_chain_filters_drop_items() -> Case:
    refunds = Agent(name="refunds", model=scripted(says("refunded", (3, 1))))
    billing_agent = Agent(
        name="billing",
        model=scripted(calls(("transfer_to_refunds", {}, "h2"))),
        handoffs=[handoff(refunds, input_filter=drop_everything)],
    )
    first = handoff(billing_agent, input_filter=drop_everything)
    model = scripted(calls(("transfer_to_billing", {}, "h1")))
    return Case(Agent(name="triage", model=model, handoffs=[first]))


def handoff_remove_all_tools() -> Case:
    model = scripted(calls(("multiply", {"a": 2, "b": 2}, "m1")), calls(("transfer_to_billing", {}, "h1")))
    target = handoff(billing(), input_filter=remove_all_tools)
    return Case(Agent(name="triage", model=model, tools=[multiply], handoffs=[target]))


def handoff_invalid_filter() -> Case:
    model = scripted(calls(("transfer_to_billing", {}, "h1")))
    target = handoff(billing(), input_filter=lambda data: "not input data")
    return Case(Agent(name="triage", model=model, handoffs=[target]))


def handoff_with_input() -> Case:
    class Reason(BaseModel):
        reason: str

    seen: list[str] = []

    async def on_handoff(ctx, data: Reason) -> None:
        seen.append(data.reason)

    model = scripted(calls(("transfer_to_billing", {"reason": "refund"}, "h1")))
    target = handoff(billing(), on_handoff=on_handoff, input_type=Reason)
    return Case(Agent(name="triage", model=model, handoffs=[target]))


def nested_handoffs() -> Case:
    last = Agent(name="refunds", model=scripted(says("refunded", (3, 1))))
    middle = Agent(name="billing", model=scripted(calls(("transfer_to_refunds", {}, "h2"))), handoffs=[last])
    model = scripted(calls(("transfer_to_billing", {}, "h1")))
    return Case(Agent(name="triage", model=model, handoffs=[middle]))


def input_guardrail_tripped() -> Case:
    model = scripted(says("never", (11, 7)))
    return Case(Agent(name="guarded", model=model, input_guardrails=[trips()]))


def blocking_input_guardrail_tripped() -> Case:
    guard = trips()
    guard.run_in_parallel = False
    model = scripted(says("never", (11, 7)))
    return Case(Agent(name="blocked", model=model, input_guardrails=[guard]))


def input_guardrail_passes() -> Case:
    return Case(Agent(name="guarded", model=scripted(says("fine")), input_guardrails=[passes()]))


def run_config_input_guardrail() -> Case:
    model = scripted(says("never", (11, 7)))
    return Case(
        Agent(name="plain", model=model), options={"run_config": RunConfig(input_guardrails=[trips()])}
    )


def output_guardrail_tripped() -> Case:
    model = scripted(says("a secret", (9, 4)))
    return Case(Agent(name="careful", model=model, output_guardrails=[output_trips("secret")]))


def output_guardrail_passes() -> Case:
    return Case(
        Agent(name="careful", model=scripted(says("public")), output_guardrails=[output_trips("secret")])
    )


def max_turns_reached() -> Case:
    model = scripted(*[calls(("multiply", {"a": 1, "b": 1}, f"m{i}")) for i in range(4)])
    return Case(Agent(name="looper", model=model, tools=[multiply]), options={"max_turns": 2})


def max_turns_none() -> Case:
    model = scripted(*[calls(("multiply", {"a": i, "b": 1}, f"m{i}")) for i in range(12)], says("twelve"))
    return Case(Agent(name="long", model=model, tools=[multiply]), options={"max_turns": None})


def max_turns_handler() -> Case:
    model = scripted(*[calls(("multiply", {"a": 1, "b": 1}, f"m{i}")) for i in range(3)])

    def give_up(data):
        return RunErrorHandlerResult(final_output=f"gave up after {len(data.run_data.raw_responses)}")

    handlers = {"max_turns": give_up}
    return Case(
        Agent(name="handled", model=model, tools=[multiply]),
        options={"max_turns": 2, "error_handlers": handlers},
    )


def list_input() -> Case:
    model = scripted(ModelStep.respond(lambda call: [assistant_message(f"{len(call.input)} items")]))
    items = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "second"},
    ]
    return Case(Agent(name="lister", model=model), input=items)


def list_input_with_content_parts() -> Case:
    model = scripted(
        ModelStep.respond(lambda call: [assistant_message(call.input[-1]["content"][0]["text"])])
    )
    items = [{"role": "user", "content": [{"type": "input_text", "text": "parts work"}]}]
    return Case(Agent(name="parts", model=model), input=items)


def model_error() -> Case:
    return Case(Agent(name="broken", model=scripted(ModelStep.raise_error(ValueError("bad reply")))))


def model_api_connection_error() -> Case:
    """An ``openai.APIError`` (nbagent's ``ModelError``, with the SDK's type and message)."""
    error = APIConnectionError(request=http.Request("POST", API_URL))
    return Case(Agent(name="offline", model=scripted(ModelStep.raise_error(error))))


def model_api_status_error() -> Case:
    """A 4xx reply, after a tool ran: the ``openai.APIStatusError`` the SDK raises as it is."""
    request = http.Request("POST", API_URL)
    body = {"message": "bad model", "type": "invalid_request_error"}
    response = http.Response(400, request=request, json={"error": body})
    error = BadRequestError("Error code: 400 - bad model", response=response, body=body)
    model = scripted(calls(("multiply", {"a": 2, "b": 5}, "m1")), ModelStep.raise_error(error))
    return Case(Agent(name="refused", model=model, tools=[multiply]))


def model_error_after_a_tool() -> Case:
    model = scripted(
        calls(("multiply", {"a": 2, "b": 2}, "m1")), ModelStep.raise_error(ConnectionError("gone"))
    )
    return Case(Agent(name="flaky", model=model, tools=[multiply]))


def run_config_model_settings() -> Case:
    model = scripted(
        ModelStep.respond(lambda call: [assistant_message(f"t={call.model_settings.temperature}")])
    )
    options = {"run_config": RunConfig(model_settings=ModelSettings(temperature=0.25))}
    return Case(Agent(name="tuned", model=model), options=options)


def run_config_model_overrides_agents() -> Case:
    model = scripted(says("from the run's model"))
    return Case(
        Agent(name="overridden", model="gpt-never-called"), options={"run_config": RunConfig(model=model)}
    )


def agent_as_tool() -> Case:
    helper = Agent(name="helper", model=scripted(says("helped", (2, 1))))
    model = scripted(calls(("ask_helper", {"input": "please"}, "a1")), says("the helper helped"))
    tools = [helper.as_tool("ask_helper", "Asks the helper")]
    return Case(Agent(name="boss", model=model, tools=tools), requests_elsewhere=1)


def approval_approved() -> Case:
    model = scripted(calls(("send_email", {"to": "bob"}, "s1"), tokens=(3, 2)), says("sent", (4, 1)))
    return Case(Agent(name="mailer", model=model, tools=[send_email]), decisions=[("approve", None)])


def approval_nobody_decides() -> Case:
    """No view and no one to decide: the run ends paused, its call in ``result.interruptions``."""
    model = scripted(calls(("send_email", {"to": "bob"}, "s1"), tokens=(3, 2)), says("sent", (4, 1)))
    return Case(Agent(name="mailer", model=model, tools=[send_email]))


def approval_rejected() -> Case:
    model = scripted(calls(("send_email", {"to": "bob"}, "s1")), says("not sent"))
    return Case(Agent(name="mailer", model=model, tools=[send_email]), decisions=[("reject", None)])


def approval_rejected_with_reason() -> Case:
    model = scripted(calls(("send_email", {"to": "eve"}, "s1")), says("not sent"))
    return Case(Agent(name="mailer", model=model, tools=[send_email]), decisions=[("reject", "not to eve")])


def approvals_mixed_in_one_turn() -> Case:
    model = scripted(
        calls(
            ("send_email", {"to": "bob"}, "s1"),
            ("send_email", {"to": "eve"}, "s2"),
            ("multiply", {"a": 2, "b": 2}, "m1"),
        ),
        says("one sent"),
    )
    decisions = [("approve", None), ("reject", "no")]
    return Case(Agent(name="mailer", model=model, tools=[send_email, multiply]), decisions=decisions)


def approval_by_a_condition() -> Case:
    model = scripted(calls(("pay", {"amount": 5}, "p1"), ("pay", {"amount": 500}, "p2")), says("paid"))
    return Case(Agent(name="payer", model=model, tools=[pay]), decisions=[("approve", None)])


def approvals_over_two_turns() -> Case:
    model = scripted(
        calls(("send_email", {"to": "a"}, "s1")), calls(("send_email", {"to": "b"}, "s2")), says("both")
    )
    return Case(
        Agent(name="mailer", model=model, tools=[send_email]),
        decisions=[("approve", None), ("approve", None)],
    )


def resume_a_run_state() -> Case:
    """The input is a ``RunState``: a run paused (plainly) for approval, decided, then resumed."""
    model = scripted(calls(("send_email", {"to": "bob"}, "s1"), tokens=(3, 2)), says("sent", (4, 1)))
    agent = Agent(name="mailer", model=model, tools=[send_email])
    paused = asyncio.run(Runner.run(agent, "mail bob"))
    state = paused.to_state()
    state.approve(paused.interruptions[0])
    return Case(agent, input=state)


SCENARIOS: dict[str, Callable[[], Case]] = {
    f.__name__: f
    for f in (
        text_only, instructions_function, tool_then_text, two_tools_in_one_turn, tools_over_three_turns,
        tool_reads_the_context, tool_returns_a_dict, tool_error_is_observed,
        tool_error_with_failure_function, tool_error_raised, tool_error_raised_beside_a_slow_tool,
        tool_not_found, tool_with_bad_arguments, stop_on_first_tool, stop_at_tool_names,
        custom_tool_use_behavior, custom_behavior_runs_again, structured_output,
        structured_output_invalid, list_output, typed_dict_output, tool_then_structured_output, refusal,
        handoff_chain, tool_then_handoff, handoff_filter_drops_items, handoff_chain_filters_drop_items,
        handoff_remove_all_tools, handoff_invalid_filter, handoff_with_input, nested_handoffs,
        input_guardrail_tripped,
        blocking_input_guardrail_tripped, input_guardrail_passes, run_config_input_guardrail,
        output_guardrail_tripped, output_guardrail_passes, max_turns_reached, max_turns_none,
        max_turns_handler, list_input, list_input_with_content_parts, model_error,
        model_api_connection_error, model_api_status_error, model_error_after_a_tool,
        run_config_model_settings, run_config_model_overrides_agents, agent_as_tool, approval_approved,
        approval_nobody_decides,
        approval_rejected, approval_rejected_with_reason, approvals_mixed_in_one_turn,
        approval_by_a_condition, approvals_over_two_turns, resume_a_run_state,
    )
}  # fmt: skip
