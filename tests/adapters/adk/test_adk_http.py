"""An ADK agent on a real OpenAI-compatible server through ADK's ``LiteLlm`` (``litellm``), against
``tests/openai_server.py``: a Stop closes the connection, tokens are the server's, and the
session's next turn works."""

from __future__ import annotations

import os
import time

import pytest
from openai_server import OpenAIServer, Stream, StreamedCall
from support import wait_until

import nbagent

pytestmark = pytest.mark.needs("adk", "test-all")

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm: no fetch from the internet

from google.adk import Agent  # noqa: E402
from google.adk.agents.run_config import RunConfig, StreamingMode  # noqa: E402
from google.adk.models.lite_llm import LiteLlm  # noqa: E402

DISCONNECT_WITHIN_S = 0.1
"""Stop -> the server sees the client go (the issue's bound)."""

SSE = RunConfig(streaming_mode=StreamingMode.SSE)


def agent_on(server: OpenAIServer, tools=()) -> Agent:
    model = LiteLlm(model="openai/test-model", api_base=server.base_url, api_key="test-key")
    return Agent(name="assistant", model=model, tools=list(tools), instruction="Be brief.")


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def test_tokens_are_the_servers_counts_and_the_tool_runs():
    replies = [
        Stream(tool_calls=[StreamedCall("add", '{"a": 1, "b": 2}')], usage=(30, 5)),
        Stream("It is 3.", usage=(40, 4)),
    ]
    with OpenAIServer(replies) as server:
        record = nbagent.run(agent_on(server, [add]), "1 + 2?", display=False, run_config=SSE)
    assert (record.status, record.output) == ("success", "It is 3."), record.error
    assert [(s.input_tokens, s.output_tokens) for s in record.steps] == [(30, 5), (40, 4)]
    assert record.steps[0].tool_calls[0].result == 3
    assert record.model == "openai/test-model"


@pytest.mark.parametrize("where", ["mid-stream", "thinking"])
def test_a_stop_closes_the_connection_and_the_next_turn_works(where):
    first = (
        Stream("word " * 2000, tokens_per_s=100)
        if where == "mid-stream"
        else Stream("late", first_token_s=60)
    )
    with OpenAIServer([first, Stream("Going on.", usage=(50, 3))]) as server:
        agent = agent_on(server)
        run = nbagent.start(agent, "talk", display=False, run_config=SSE)
        if where == "mid-stream":
            wait_until(lambda: run.live_text(1).startswith("word word"))
        else:
            server.wait_until(lambda: server.requests)
        stopped = time.perf_counter()
        assert run.interrupt()
        record = run.wait(timeout=20)
        server.wait_until(lambda: server.requests[0].disconnected is not None)
        assert server.requests[0].finished is None
        assert server.requests[0].disconnected - stopped < DISCONNECT_WITHIN_S
        assert record.status == "interrupted" and record.steps[-1].interrupted
        if where == "mid-stream":
            assert record.steps[-1].model_output.startswith("word word")
        more = nbagent.run(agent, "go on", reset=False, display=False, run_config=SSE)
        assert (more.status, more.output) == ("success", "Going on."), more.error
        assert (more.input_tokens, more.output_tokens) == (50, 3)
        contents = server.requests[1].body["messages"]
        assert contents[-1]["role"] == "user" and "go on" in str(contents[-1]["content"])
