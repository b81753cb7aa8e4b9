"""Secrets never reach a record, whatever the source: an API key echoed in an error (a 401 that
repeats the key, a client that puts it in its message) is scrubbed where the error becomes an
event, so ``record.error``, the steps, the store, ``to_html`` and ``raise_for_status`` only hold
the scrubbed text. Sources: pydantic-ai (``FunctionModel`` and its OpenAI model against the local
server), the OpenAI Agents SDK (its Responses model against the local server), the native agent's
tools, and a batch whose factory fails."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from openai_server import OpenAIServer

import nbagent
from nbagent.analytics.store import RunStore
from nbagent.explore import to_html
from nbagent.models import ScriptedModel, ToolCall
from nbagent.records import RunRecord

KEY = "sk-proj-LEAKED0123456789abcdefXYZ"
"""A key shaped like OpenAI's: scrubbed wherever it shows up."""
GATEWAY_KEY = "gw-7f3a91c2e5d84b60"
"""A key of no known shape, given in a credential-named environment variable."""


def stored_texts(path: Path, run_id: str) -> str:
    """Every error and output text the store holds for the run, joined."""
    with closing(sqlite3.connect(path)) as conn:
        rows = [
            *conn.execute("SELECT error, output FROM runs WHERE run_id = ?", (run_id,)),
            *conn.execute("SELECT error, model_output FROM steps WHERE run_id = ?", (run_id,)),
            *conn.execute("SELECT error, result FROM tool_calls WHERE run_id = ?", (run_id,)),
        ]
    return "\n".join(str(value) for row in rows for value in row if value is not None)


def assert_scrubbed(record: RunRecord, store_path: Path, tmp_path: Path, secret: str = KEY) -> None:
    """The run's record, its stored rows, its HTML page and its raised error hold no ``secret``
    (and do hold the scrubbed error, so the test cannot pass on an empty record)."""
    assert record.status == "error" and record.error is not None
    assert secret not in record.error and "***" in record.error
    texts = [s.error or "" for s in record.steps] + [c.error or "" for c in record.tool_calls]
    assert not any(secret in text for text in texts)
    stored = stored_texts(store_path, record.run_id)
    assert "***" in stored and secret not in stored
    page = to_html(record, tmp_path / f"{record.run_id}.html").read_text(encoding="utf-8")
    assert "***" in page and secret not in page
    with pytest.raises(nbagent.AgentError) as raised:
        record.raise_for_status()
    assert secret not in str(raised.value)


@pytest.mark.needs("pydantic-ai")
def test_a_pydantic_ai_model_error_echoing_a_key_is_scrubbed_everywhere(tmp_path):
    from pydantic_ai import Agent
    from pydantic_ai.models.function import FunctionModel

    async def stream(messages, info):
        raise RuntimeError(f"401 Unauthorized: Incorrect API key provided: {KEY}")
        yield ""  # pragma: no cover (makes this an async generator)

    store = RunStore(tmp_path / "runs.db")
    record = nbagent.run(Agent(FunctionModel(stream_function=stream)), "hi", store=store, display=False)
    store.flush(timeout=30)
    assert "Incorrect API key provided" in record.error
    assert_scrubbed(record, store.path, tmp_path)


@pytest.mark.needs("pydantic-ai")
def test_a_real_401_to_a_pydantic_ai_agent_is_scrubbed(tmp_path):
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    store = RunStore(tmp_path / "runs.db")
    with OpenAIServer(api_key="sk-the-right-one-0000000000") as server:
        provider = OpenAIProvider(base_url=server.base_url, api_key=KEY)
        agent = Agent(OpenAIChatModel("test-model", provider=provider))
        record = nbagent.run(agent, "hi", store=store, display=False)
    store.flush(timeout=30)
    assert "401" in record.error and record.error_type == "ModelError"
    assert_scrubbed(record, store.path, tmp_path)


@pytest.mark.needs("openai-agents")
def test_a_real_401_to_an_agents_sdk_agent_is_scrubbed(tmp_path):
    from agents import Agent, OpenAIResponsesModel, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    try:
        store = RunStore(tmp_path / "runs.db")
        with OpenAIServer(api_key="sk-the-right-one-0000000000") as server:
            model = OpenAIResponsesModel("test-model", AsyncOpenAI(base_url=server.base_url, api_key=KEY))
            record = nbagent.run(Agent(name="sdk", model=model), "hi", store=store, display=False)
        store.flush(timeout=30)
    finally:
        set_tracing_disabled(False)
    assert "401" in record.error
    assert_scrubbed(record, store.path, tmp_path)


@pytest.mark.needs("pydantic-ai")
def test_a_key_from_a_credential_named_environment_variable_is_scrubbed(tmp_path, monkeypatch):
    from pydantic_ai import Agent
    from pydantic_ai.models.function import FunctionModel

    monkeypatch.setenv("MY_GATEWAY_API_KEY", GATEWAY_KEY)

    async def stream(messages, info):
        raise PermissionError(f"the gateway refused the key {GATEWAY_KEY}")
        yield ""  # pragma: no cover

    store = RunStore(tmp_path / "runs.db")
    record = nbagent.run(Agent(FunctionModel(stream_function=stream)), "hi", store=store, display=False)
    store.flush(timeout=30)
    assert "the gateway refused the key" in record.error
    assert_scrubbed(record, store.path, tmp_path, secret=GATEWAY_KEY)


def test_a_tool_error_echoing_a_key_is_scrubbed_in_the_tool_call(tmp_path):
    @nbagent.tool
    def fetch(url: str) -> str:
        """Fetch a URL."""
        raise ConnectionError(f"GET {url} failed: Authorization: Bearer {KEY}")

    turns = [[ToolCall("fetch", {"url": "https://example.invalid/x"})], "could not fetch"]
    agent = nbagent.Agent(ScriptedModel(turns, tokens_per_s=1e9, first_token_s=0.0), tools=[fetch])
    store = RunStore(tmp_path / "runs.db")
    record = nbagent.run(agent, "fetch it", store=store, display=False)
    store.flush(timeout=30)
    (call,) = record.tool_calls
    assert call.status == "error" and "Bearer ***" in call.error and KEY not in call.error
    stored = stored_texts(store.path, record.run_id)
    assert "Bearer ***" in stored and KEY not in stored


def test_a_batch_factory_error_echoing_a_key_is_scrubbed(tmp_path):
    def factory():
        raise RuntimeError(f"could not build the client with api_key={KEY}")

    frame = nbagent.run_batch(factory, ["a task"], display=False)
    (row,) = frame.to_dict("records")
    assert row["status"] == "error" and "api_key=***" in row["error"] and KEY not in row["error"]


def test_scrubbing_keeps_an_ordinary_error_readable():
    from nbagent.errors import scrub_secrets

    text = "ValueError: expected 3 arguments, got 2 (see https://example.com/docs#args)"
    assert scrub_secrets(text) == text
