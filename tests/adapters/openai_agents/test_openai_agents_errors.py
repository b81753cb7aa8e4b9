"""OpenAI Agents SDK agents under nbagent: how errors are recorded (the call that raised, a model
API error as ``ModelError``) and the ``include_usage`` nbagent asks for, with the SDK's own test
double (``agents.testing.ScriptedModel``); no network."""

from __future__ import annotations

import asyncio

import pytest
from agents import Agent, ModelSettings, RunConfig, function_tool, handoff, set_tracing_disabled
from agents.handoffs import Handoff
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from openai import APIConnectionError, BadRequestError
from openai_agents_scenarios import API_URL, explode_loudly, http, says

import nbagent
from nbagent.adapters.openai_agents.source import model_error, with_usage_asked
from nbagent.errors import ModelError

pytestmark = pytest.mark.needs("openai-agents")


@pytest.fixture(autouse=True, scope="module")
def no_trace_export():
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(False)


def transfer() -> ModelStep:
    return ModelStep(output=[function_call("transfer_to_billing", {}, call_id="h1")])


def test_include_usage_false_on_an_agent_reached_through_handoff_is_kept():
    billing_model = ScriptedModel([says("billing here")])
    billing = Agent(name="billing", model=billing_model, model_settings=ModelSettings(include_usage=False))
    triage_model = ScriptedModel([transfer()])
    triage = Agent(name="triage", model=triage_model, handoffs=[handoff(billing)])
    config = RunConfig(model_settings=ModelSettings(max_tokens=50))

    record = nbagent.run(triage, "hi", run_config=config)

    assert record.status == "success" and record.output == "billing here"
    settings = billing_model.last_call.model_settings
    assert settings.include_usage is False and settings.max_tokens == 50
    assert triage_model.last_call.model_settings.include_usage is None
    assert config.model_settings.include_usage is None  # the user's run config is untouched


def test_include_usage_is_asked_for_an_agent_reached_through_handoff_that_does_not_set_it():
    billing = Agent(name="billing", model=ScriptedModel([says("billing here")]))
    triage = Agent(name="triage", model=ScriptedModel([transfer()]), handoffs=[handoff(billing)])
    assert with_usage_asked(triage, None).model_settings.include_usage is True


def test_a_handoff_whose_agent_cannot_be_known_gets_no_include_usage():
    async def invoke(ctx, arguments):  # a custom Handoff: its agent is named nowhere
        return Agent(name="hidden", model=ScriptedModel([says("hi")]))

    custom = Handoff(
        tool_name="transfer_to_hidden",
        tool_description="hands off",
        input_json_schema={},
        on_invoke_handoff=invoke,
        agent_name="hidden",
    )
    triage = Agent(name="triage", model=ScriptedModel([says("hi")]), handoffs=[custom])
    assert with_usage_asked(triage, None) is None


@function_tool
async def wait_long(seconds: float) -> str:
    """Waits until the SDK cancels it."""
    await asyncio.sleep(seconds)
    return "waited"


def test_a_raising_tool_is_the_only_error_and_the_sibling_the_sdk_cancelled_is_cancelled():
    model = ScriptedModel(
        [
            [
                function_call("wait_long", {"seconds": 60}, call_id="w1"),
                function_call("explode_loudly", {}, call_id="e1"),
            ],
            [assistant_message("never")],
        ]
    )
    record = nbagent.run(Agent(name="loud", model=model, tools=[wait_long, explode_loudly]), "go")

    assert record.status == "error" and record.error_type == "UserError"
    assert record.error == "UserError: Error running tool explode_loudly: kaboom"
    calls = {call.tool: call for call in record.steps[0].tool_calls}
    assert (calls["explode_loudly"].status, calls["explode_loudly"].error) == ("error", record.error)
    assert calls["wait_long"].status == "cancelled"
    assert calls["wait_long"].error == "cancelled: explode_loudly raised"


def bad_request() -> BadRequestError:
    request = http.Request("POST", API_URL)
    body = {"message": "bad model", "type": "invalid_request_error"}
    response = http.Response(400, request=request, json={"error": body})
    return BadRequestError("Error code: 400 - bad model", response=response, body=body)


@pytest.mark.parametrize(
    ("error", "sdk_text", "status_code", "retryable"),
    [
        (APIConnectionError(request=http.Request("POST", API_URL)),
         "APIConnectionError: Connection error.", None, True),
        (bad_request(), "BadRequestError: Error code: 400 - bad model", 400, False),
    ],
    ids=["connection", "bad-request"],
)  # fmt: skip
def test_an_openai_api_error_is_a_model_error_with_the_sdks_type_message_and_status(
    error, sdk_text, status_code, retryable
):
    agent = Agent(name="broken", model=ScriptedModel([ModelStep.raise_error(error)]))
    record = nbagent.run(agent, "go")

    assert record.status == "error" and record.error_type == "ModelError"
    assert record.error == f"ModelError: {record.model}: {sdk_text}"
    assert record.error.count(record.model) == 1
    # the model call that failed before its reply began is a step, with the error
    (failed,) = record.steps
    assert (failed.error, failed.kind) == (sdk_text, "action")
    assert not (failed.model_output or failed.tool_calls)
    with pytest.raises(ModelError) as raised:
        record.raise_for_status()
    assert str(raised.value) == f"{record.model}: {sdk_text}"
    # the ModelError the run raised carries the HTTP status and whether a retry could succeed
    raised_in_run = model_error(error, record.model)
    assert str(raised_in_run) == str(raised.value)
    assert (raised_in_run.status_code, raised_in_run.retryable) == (status_code, retryable)


def test_a_retried_model_call_is_one_step_and_a_model_still_thinking_at_the_stop_keeps_its_step():
    import threading

    from agents.retry import ModelRetrySettings
    from openai.types.responses import Response, ResponseCreatedEvent
    from openai_agents_scenarios import calls, scripted
    from support import wait_until

    created = ResponseCreatedEvent.model_construct(
        type="response.created", sequence_number=0, response=Response.model_construct(id="r1", output=[])
    )

    async def reset_after_it_began(call):
        yield created
        raise ConnectionError("reset")  # the SDK may retry: only response.created was sent

    thinking = threading.Event()

    async def thinks(call):
        thinking.set()
        await asyncio.sleep(60)
        yield created

    @function_tool
    def ping() -> str:
        """Answer pong."""
        return "pong"

    model = scripted(
        ModelStep.stream(reset_after_it_began), calls(("ping", {}, "c1")), ModelStep.stream(thinks)
    )
    retry = ModelRetrySettings(max_retries=2, policy=lambda context: True)
    agent = Agent(name="retried", model=model, tools=[ping], model_settings=ModelSettings(retry=retry))
    run = nbagent.start(agent, "go")
    wait_until(thinking.is_set)
    assert run.interrupt()
    record = run.wait(timeout=20)

    assert record.status == "interrupted" and len(model.calls) == 3
    first, second = record.steps  # the retry is the same model call: one step, one retry
    assert first.retries == 1 and [(c.tool, c.status) for c in first.tool_calls] == [("ping", "ok")]
    assert second.interrupted and not second.tool_calls and second.duration_s >= 0
