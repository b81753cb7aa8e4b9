"""pydantic-ai's own OpenAI model under nbagent against the project's local OpenAI-compatible
server (tests/openai_server.py): usage as the server reports it, and a Stop drops the connection."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from openai_server import OpenAIServer, Stream, StreamedCall
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

import nbagent

pytestmark = pytest.mark.needs("pydantic-ai")

DISCONNECT_WITHIN_S = 1.0
"""Stop -> the server sees the client go (measured: a few ms; generous for a loaded machine)."""


def agent_on(server: OpenAIServer) -> Agent:
    model = OpenAIChatModel(
        "test-model", provider=OpenAIProvider(base_url=server.base_url, api_key="test-key")
    )
    agent = Agent(model, name="http-adder")

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    return agent


def test_a_run_over_http_records_the_servers_usage():
    replies = [
        Stream(tool_calls=[StreamedCall("add", '{"a": 1, "b": 2}')], usage=(30, 5)),
        Stream("It is 3."),
    ]
    with OpenAIServer(replies) as server:
        record = nbagent.run(agent_on(server), "what is 1 + 2?")
    assert record.status == "success" and record.output == "It is 3."
    assert record.model == "test-model"
    first, final = record.steps
    assert (first.input_tokens, first.output_tokens, first.usage_source) == (30, 5, "reported")
    assert first.tool_calls[0].result == 3
    assert final.usage_known and final.model_output == "It is 3."
    assert [r.body.get("stream") for r in server.requests] == [True, True]


def test_stop_mid_stream_drops_the_connection_and_the_run_can_go_on():
    with OpenAIServer([Stream("word " * 2000, tokens_per_s=100), Stream("Going on.")]) as server:
        agent = agent_on(server)
        run = nbagent.start(agent, "talk for long")
        server.wait_until(lambda: server.requests and server.requests[0].tokens_sent >= 3)
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
        sent = server.requests[1].body["messages"]
        assert [m["role"] for m in sent] == ["user", "assistant", "user"]
        assert sent[1]["content"].startswith("word word")


def test_plain_and_nbagent_runs_of_one_agent_mix_as_in_a_kernel():
    """A plain ``agent.run`` on another running loop (the kernel's), then nbagent, then plain again:
    each works, and the user's provider keeps its own client."""

    async def drain(ctx, events) -> None:
        async for _ in events:
            pass

    kernel_loop = asyncio.new_event_loop()
    thread = threading.Thread(target=kernel_loop.run_forever, daemon=True)
    thread.start()

    def plainly(agent: Agent, task: str) -> str:
        run = agent.run(task, event_stream_handler=drain)  # streamed, as the server answers
        return asyncio.run_coroutine_threadsafe(run, kernel_loop).result(timeout=20).output

    try:
        replies = [Stream("plain."), Stream("nbagent."), Stream("plain again."), Stream("nbagent again.")]
        with OpenAIServer(replies) as server:
            agent = agent_on(server)
            provider = agent.model.provider
            client, http_client = provider.client, provider._own_http_client

            assert plainly(agent, "one") == "plain."
            record = nbagent.run(agent, "two", display=False)
            assert (record.status, record.error, record.output) == ("success", None, "nbagent.")
            assert plainly(agent, "three") == "plain again."
            assert nbagent.run(agent, "four", display=False).output == "nbagent again."

            assert agent.model.provider is provider and provider.client is client
            assert provider._own_http_client is http_client and not http_client.is_closed
    finally:
        kernel_loop.call_soon_threadsafe(kernel_loop.stop)
        thread.join(timeout=5)
