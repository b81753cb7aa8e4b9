"""A LangChain agent on a real OpenAI-compatible server (``langchain_openai.ChatOpenAI`` against
``tests/openai_server.py``): what nbagent's token stream asks of the server, and where usage goes."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
from langchain.agents import create_agent
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from openai_server import OpenAIServer, Stream
from support import wait_until

import nbagent

pytestmark = pytest.mark.needs("langgraph", "test-all")


def _agent(server: OpenAIServer, **model: Any) -> Any:
    chat = ChatOpenAI(model="test-model", base_url=server.base_url, api_key="k", **model)
    return create_agent(chat, tools=[], checkpointer=InMemorySaver())


def _config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def test_a_chat_openai_made_with_stream_usage_keeps_usage_in_the_record_and_the_thread() -> None:
    with OpenAIServer([Stream("Hi there.", usage=(12, 3))]) as server:
        graph = _agent(server, stream_usage=True)
        record = nbagent.run(graph, "hi", display=False, config=_config("u1"))
        [request] = server.requests
    assert request.body["stream_options"] == {"include_usage": True}
    assert record.status == "success" and (record.input_tokens, record.output_tokens) == (12, 3)
    assert record.steps[0].usage_source == "reported"
    assert record.model == "test-model"  # found in create_agent's model node, never called
    kept = graph.get_state(_config("u1")).values["messages"][-1].usage_metadata
    assert (kept["input_tokens"], kept["output_tokens"]) == (12, 3)


def test_nbagent_asks_the_server_what_langgraphs_own_token_stream_asks_and_keeps_unknown_unknown() -> None:
    """nbagent changes nothing on the request: the same body as ``astream(stream_mode="messages")``.
    A model made without ``stream_usage`` streams without usage there too (nbagent cannot ask for
    it per run: see ``nbagent.adapters.langgraph.source``); the record says unknown, not zero."""
    with OpenAIServer([Stream("Hi there.", usage=(12, 3)), Stream("Hi there.", usage=(12, 3))]) as server:
        # its own HTTP client: LangChain's shared default one stays bound to the loop it first ran on
        plain_graph = _agent(server, http_async_client=httpx.AsyncClient())

        async def plain() -> None:
            async for _chunk in plain_graph.astream(
                {"messages": [{"role": "user", "content": "hi"}]}, _config("p"), stream_mode="messages"
            ):
                pass

        asyncio.run(plain())
        record = nbagent.run(_agent(server), "hi", display=False, config=_config("n"))
        plain_request, ours = server.requests
    assert ours.body == plain_request.body and "stream_options" not in ours.body
    assert record.status == "success" and record.output == "Hi there."
    assert record.input_tokens is None and record.steps[0].usage_source == "unknown"


def test_a_stop_mid_stream_drops_the_connection_even_when_a_chunk_wait_swallows_the_cancel() -> None:
    """At a fast stream ChatOpenAI's per-chunk ``asyncio.wait_for`` loses about half the cancels
    on CPython 3.11 (the chunk was already there); LangGraph then waited for the whole reply.
    Every trial here must end interrupted with the server seeing the client go mid-reply."""
    long_reply = "word " * 20_000  # 10 s at 2000 tokens/s: a lost Stop would let it finish
    with OpenAIServer() as server:
        for trial in range(5):
            server.push(Stream(long_reply, tokens_per_s=2000.0))
            run = nbagent.start(
                _agent(server, stream_usage=True), "go", display=False, config=_config(f"s{trial}")
            )
            wait_until(lambda run=run: bool(run.record.steps) and len(run.live_text(1)) > 100)
            assert run.interrupt() is True
            assert run.wait(timeout=60).status == "interrupted"
            request = server.requests[-1]
            server.wait_until(lambda request=request: request.disconnected is not None, timeout=60)


def test_a_stop_while_the_model_thinks_keeps_the_node_in_flight_as_a_step_and_drops_the_connection() -> None:
    with OpenAIServer([Stream("late", first_token_s=60)]) as server:
        run = nbagent.start(_agent(server), "think hard", display=False, config=_config("t1"))
        server.wait_until(lambda: len(server.requests) == 1)
        asked = server.requests[0].started
        wait_until(lambda: time.perf_counter() - asked > 0.2)  # a wait long enough to see in the step
        stopped = time.perf_counter()
        assert run.interrupt() is True
        record = run.wait(timeout=20)
        server.wait_until(lambda: server.requests[0].disconnected is not None)
        assert server.requests[0].disconnected - stopped < 1.0

    assert record.status == "interrupted"
    (thinking,) = record.steps  # the model node had sent no chunk: its time is still a step
    assert thinking.interrupted and thinking.duration_s >= stopped - asked
    (node,) = thinking.nodes
    assert (node.name, node.status, node.error) == ("model", "cancelled", "interrupted")
