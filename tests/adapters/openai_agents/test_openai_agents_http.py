"""The OpenAI Agents SDK's own OpenAI models under nbagent against the project's local server
(tests/openai_server.py): the Responses API model (the SDK's default) on ``/responses`` and the
chat-completions model; usage as the server reports it, and a Stop drops the connection."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI
from openai_server import OpenAIServer, Stream, StreamedCall
from support import wait_until

import nbagent

pytestmark = pytest.mark.needs("openai-agents")

DISCONNECT_WITHIN_S = 1.0
"""Stop -> the server sees the client go (measured: a few ms; generous for a loaded machine)."""


@pytest.fixture(autouse=True, scope="module")
def no_trace_export():
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(False)


@function_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def agent_on(server: OpenAIServer, api: str) -> Agent:
    client = AsyncOpenAI(base_url=server.base_url, api_key="test-key")
    if api == "responses":
        model = OpenAIResponsesModel("test-model", client)
    else:
        # chat completions stream usage only when asked for (as with the SDK alone)
        model = OpenAIChatCompletionsModel("test-model", client)
        settings = ModelSettings(include_usage=True)
        return Agent(name="http-adder", model=model, tools=[add], model_settings=settings)
    return Agent(name="http-adder", model=model, tools=[add])


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_a_run_over_http_records_the_servers_usage(api):
    replies = [
        Stream(tool_calls=[StreamedCall("add", '{"a": 1, "b": 2}')], usage=(30, 5)),
        Stream("It is 3."),
    ]
    with OpenAIServer(replies) as server:
        record = nbagent.run(agent_on(server, api), "what is 1 + 2?")
    assert record.status == "success" and record.output == "It is 3."
    assert record.model == "test-model"
    first, final = record.steps
    assert (first.input_tokens, first.output_tokens, first.usage_source) == (30, 5, "reported")
    assert first.tool_calls[0].result == 3
    assert final.model_output == "It is 3."
    route = "/v1/responses" if api == "responses" else "/v1/chat/completions"
    assert [r.route for r in server.requests] == [route, route]


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_stop_mid_stream_drops_the_connection_and_the_run_can_go_on(api):
    with OpenAIServer([Stream("word " * 2000, tokens_per_s=100), Stream("Going on.")]) as server:
        agent = agent_on(server, api)
        run = nbagent.start(agent, "talk for long")
        # Mid-stream is when nbagent shows text, not when the server has sent some: a cold first
        # run parses its first events a second or more after the server sent them.
        wait_until(lambda: run.live_text(1).startswith("word word"))
        stopped = time.perf_counter()
        assert run.interrupt()
        record = run.wait(timeout=20)
        server.wait_until(lambda: server.requests[0].disconnected is not None)
        first = server.requests[0]
        assert first.finished is None and first.disconnected - stopped < DISCONNECT_WITHIN_S

        assert record.status == "interrupted"
        (cut,) = record.steps
        assert cut.interrupted and cut.model_output.startswith("word word")
        assert cut.usage_source == "unknown" and cut.input_tokens is None  # the stream never said

        more = nbagent.run(agent, "go on", reset=False)
        assert more.status == "success" and more.output == "Going on."


def chat_agent(server: OpenAIServer, settings: ModelSettings | None = None) -> Agent:
    model = OpenAIChatCompletionsModel(
        "test-model", AsyncOpenAI(base_url=server.base_url, api_key="test-key")
    )
    return Agent(name="chat", model=model, model_settings=settings or ModelSettings())


def test_a_chat_model_records_usage_without_include_usage_and_the_agent_is_untouched():
    with OpenAIServer([Stream("Hi.", usage=(12, 3))]) as server:
        agent = chat_agent(server)
        record = nbagent.run(agent, "hello")
        assert server.requests[0].body["stream_options"] == {"include_usage": True}
    assert record.status == "success" and record.output == "Hi."
    assert (record.input_tokens, record.output_tokens, record.steps[0].usage_source) == (12, 3, "reported")
    assert agent.model_settings.include_usage is None


def test_include_usage_false_given_by_the_user_is_kept():
    with OpenAIServer([Stream("Hi.", usage=(12, 3)), Stream("Hi again.", usage=(14, 3))]) as server:
        record = nbagent.run(chat_agent(server, ModelSettings(include_usage=False)), "hello")
        config = RunConfig(model_settings=ModelSettings(include_usage=False, temperature=0.5))
        other = nbagent.run(chat_agent(server), "hello", run_config=config)
        bodies = [request.body for request in server.requests]
    assert [body["stream_options"] for body in bodies] == [{"include_usage": False}] * 2
    assert bodies[1]["temperature"] == 0.5
    assert record.input_tokens is None and other.input_tokens is None


def test_a_stop_while_the_model_thinks_keeps_that_model_calls_step_and_drops_the_connection():
    # chat completions send nothing before the first token: the SDK has no reply to show yet
    with OpenAIServer([Stream("late", first_token_s=60), Stream("Going on.")]) as server:
        agent = chat_agent(server)
        run = nbagent.start(agent, "think hard")
        server.wait_until(lambda: len(server.requests) == 1)
        asked = server.requests[0].started
        wait_until(lambda: time.perf_counter() - asked > 0.2)  # a wait long enough to see in the step
        stopped = time.perf_counter()
        assert run.interrupt()
        record = run.wait(timeout=20)
        server.wait_until(lambda: server.requests[0].disconnected is not None)
        assert server.requests[0].disconnected - stopped < DISCONNECT_WITHIN_S

        assert record.status == "interrupted"
        (thinking,) = record.steps
        assert thinking.interrupted and not thinking.model_output and thinking.usage_source == "unknown"
        # the step is the model call's: from before the request went out until the Stop
        assert thinking.duration_s >= stopped - asked

        more = nbagent.run(agent, "go on", reset=False)
        assert more.status == "success" and more.output == "Going on."


def test_plain_and_nbagent_runs_through_the_default_client_mix_as_in_a_kernel():
    """``Runner.run`` on another running loop (the kernel's), then nbagent, then plain again, all
    through the SDK's default client: each works, and that client stays the user's."""
    from agents import set_default_openai_client
    from agents.models import _openai_shared

    kernel_loop = asyncio.new_event_loop()
    thread = threading.Thread(target=kernel_loop.run_forever, daemon=True)
    thread.start()
    before = _openai_shared.get_default_openai_client()
    try:
        with OpenAIServer([Stream("plain."), Stream("nbagent."), Stream("plain again.")]) as server:
            client = AsyncOpenAI(base_url=server.base_url, api_key="test-key")
            set_default_openai_client(client)
            agent = Agent(name="mixer", model="test-model")

            async def streamed(task: str) -> str:  # as the server answers
                result = Runner.run_streamed(agent, task)
                async for _ in result.stream_events():
                    pass
                return result.final_output

            def plainly(task: str) -> str:
                return asyncio.run_coroutine_threadsafe(streamed(task), kernel_loop).result(timeout=20)

            assert plainly("one") == "plain."
            record = nbagent.run(agent, "two", display=False)
            assert (record.status, record.error, record.output) == ("success", None, "nbagent.")
            assert plainly("three") == "plain again."
            assert _openai_shared.get_default_openai_client() is client
    finally:
        _openai_shared.set_default_openai_client(before)
        kernel_loop.call_soon_threadsafe(kernel_loop.stop)
        thread.join(timeout=5)
