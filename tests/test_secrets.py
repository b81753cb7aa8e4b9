"""Secrets never reach a record, whatever the source: an API key echoed in an error (a 401 that
repeats the key, a client that puts it in its message) or in a tool's error that goes back to the
model is scrubbed where it becomes an event, so ``record.error``, the steps, ``record.messages``,
the store's file, ``to_html``, the spans and ``raise_for_status`` only hold the scrubbed text.
Sources: pydantic-ai (``FunctionModel``, ``TestModel`` and its OpenAI model against the local
server), the OpenAI Agents SDK (its Responses model against the local server, its scripted test
model), LangGraph, smolagents, the native agent's tools, and a batch whose factory fails.

The table of shapes (``nbagent.secrets.SHAPES``) is held to one example per shape, and to texts
that look close but are no credential; a key streamed in pieces never shows its head."""

from __future__ import annotations

import base64
import io
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pytest
from openai_server import OpenAIServer

import nbagent
from nbagent import events as ev
from nbagent.analytics.store import RunStore
from nbagent.errors import scrub_secrets
from nbagent.explore import to_html
from nbagent.models import ScriptedModel, ToolCall
from nbagent.recorder import Recorder
from nbagent.records import RunRecord
from nbagent.secrets import SHAPES, StreamScrub, scrub_value
from nbagent.view.terminal import TextView

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
    text = "ValueError: expected 3 arguments, got 2 (see https://example.com/docs#args)"
    assert scrub_secrets(text) == text


# -- every copy of a run: record, messages, store file, HTML file, spans ---------------------------


def written_copies(record: RunRecord, store: RunStore, tmp_path: Path, spans) -> str:
    """What a run left on disk and on the wire, as one text: the store's file as bytes (with its
    write-ahead log), the exported HTML page, and every span's name, attributes and status."""
    store.flush(timeout=30)
    stored = b"".join(p.read_bytes() for p in store.path.parent.glob(store.path.name + "*"))
    page = to_html(record, tmp_path / "run.html").read_text(encoding="utf-8")
    finished = [
        f"{s.name} {dict(s.attributes or {})} {s.status.description}" for s in spans.get_finished_spans()
    ]
    return "\n".join([stored.decode("utf-8", "replace"), page, *finished])


def run_everywhere(agent, tmp_path: Path, spans) -> tuple[RunRecord, str]:
    from nbagent.otel import OTelSink

    store = RunStore(tmp_path / "runs.db")
    sink = OTelSink(spans.provider, content=True)
    record = nbagent.run(agent, "fetch it", store=store, sinks=[sink], display=False)
    copies = [repr(record), repr(record.messages), written_copies(record, store, tmp_path, spans)]
    return record, "\n".join(copies)


def native_agent():
    @nbagent.tool
    def fetch(url: str) -> str:
        """Fetch a URL."""
        return f"error: the gateway refused key {KEY}"  # an error the tool returns, not raises

    turns = [[ToolCall("fetch", {"url": "https://example.invalid/x"})], "could not fetch"]
    return nbagent.Agent(ScriptedModel(turns, tokens_per_s=1e9, first_token_s=0.0), tools=[fetch])


def pydantic_ai_agent():
    from pydantic_ai import Agent, ModelRetry
    from pydantic_ai.models.test import TestModel

    agent = Agent(TestModel(), retries=2)
    tries = []

    @agent.tool_plain
    def fetch(url: str) -> str:
        """Fetch a URL."""
        tries.append(url)
        if len(tries) == 1:
            raise ModelRetry(f"the gateway refused key {KEY}; try again")
        return "fetched"

    return agent


def langgraph_agent():
    from langchain.agents import create_agent
    from langchain_core.tools import ToolException, tool
    from langgraph_fakes import ScriptedChatModel, reply

    @tool
    def fetch(url: str) -> str:
        """Fetch a URL."""
        raise ToolException(f"the gateway refused key {KEY}")

    fetch.handle_tool_error = True
    model = ScriptedChatModel(replies=[reply("", [("fetch", {"url": "x"})]), reply("could not fetch")])
    return create_agent(model, tools=[fetch])


def openai_agents_agent():
    from agents import Agent, function_tool
    from agents.testing import ScriptedModel as SdkScriptedModel
    from openai_agents_scenarios import calls, says

    @function_tool(failure_error_function=lambda ctx, error: f"the tool failed: {error}")
    def fetch(url: str) -> str:
        """Fetch a URL."""
        raise RuntimeError(f"the gateway refused key {KEY}")

    model = SdkScriptedModel([calls(("fetch", {"url": "x"}, "call_1")), says("could not fetch")])
    return Agent(name="fetcher", model=model, tools=[fetch])


def smolagents_agent():
    from smolagents import ToolCallingAgent, tool
    from smolagents_fakes import ScriptedSmolModel, answer, call

    @tool
    def fetch(url: str) -> str:
        """Fetch a URL.

        Args:
            url: where to fetch from.
        """
        raise RuntimeError(f"the gateway refused key {KEY}")

    model = ScriptedSmolModel([call("fetch", url="x"), answer("could not fetch")])
    return ToolCallingAgent(tools=[fetch], model=model, verbosity_level=-1)


@pytest.fixture
def no_sdk_tracing():
    """The Agents SDK's own tracing off (it would try to send traces at exit)."""
    try:
        from agents import set_tracing_disabled
    except ImportError:
        yield
        return
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(False)


@pytest.mark.needs("otel")
@pytest.mark.parametrize(
    "make",
    [
        pytest.param(native_agent, id="native"),
        pytest.param(pydantic_ai_agent, id="pydantic-ai", marks=pytest.mark.needs("pydantic-ai")),
        pytest.param(langgraph_agent, id="langgraph", marks=pytest.mark.needs("langgraph")),
        pytest.param(openai_agents_agent, id="openai-agents", marks=pytest.mark.needs("openai-agents")),
        pytest.param(smolagents_agent, id="smolagents", marks=pytest.mark.needs("smolagents")),
    ],
)
def test_a_tool_error_echoing_a_key_is_in_no_copy_of_the_run(make, tmp_path, spans, no_sdk_tracing):
    record, everything = run_everywhere(make(), tmp_path, spans)
    assert record.status in ("success", "error"), record.error
    assert "the gateway refused key ***" in everything  # the error is there, scrubbed
    assert KEY not in everything
    assert KEY[:12] not in everything


@pytest.mark.needs("otel")
def test_a_record_made_outside_a_run_is_scrubbed_where_it_is_stored_shown_and_traced(tmp_path, spans):
    from nbagent import otel

    record = nbagent.run(native_agent(), "fetch it", display=False)
    call = record.tool_calls[0]
    call.result = {"status": "refused", "echo": f"key {KEY}", "password": "hunter2 horse"}
    record.steps[-1].model_output = f"Authorization: Bearer {GATEWAY_KEY}"
    record.messages = [{"role": "tool", "content": f"refused {KEY}"}]
    store = RunStore(tmp_path / "runs.db")
    store.add(record)
    otel.export([record], spans.provider, content=True)
    written = written_copies(record, store, tmp_path, spans)
    assert "Bearer ***" in written and "refused ***" in written
    for secret in (KEY, GATEWAY_KEY, "hunter2"):
        assert secret not in written


# -- the table of shapes ---------------------------------------------------------------------------

_PEM_BODY = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw"
_BASIC = base64.b64encode(b"alice:wonderland-42").decode()
_JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
SHAPE_EXAMPLES: dict[str, list[tuple[str, str]]] = {
    "pem_private_key": [
        (f"-----BEGIN RSA PRIVATE KEY-----\n{_PEM_BODY}\n-----END RSA PRIVATE KEY-----", _PEM_BODY),
        (f"-----BEGIN PRIVATE KEY-----\\n{_PEM_BODY}\\n-----END PRIVATE KEY-----\\n", _PEM_BODY),
    ],
    "url_userinfo": [("postgres://admin:s3cretPassw0rd@db.example.com:5432/app", "s3cretPassw0rd")],
    "authorization_header": [("Authorization: token 9f8e7d6c5b4a39281706", "9f8e7d6c5b4a39281706")],
    "bearer_token": [("header: Bearer abcDEF123456.xyz", "abcDEF123456.xyz")],
    "basic_credentials": [(f"sent Basic {_BASIC} to the proxy", _BASIC)],
    "aws_secret_access_key": [
        ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG"),
        ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG"),
    ],
    "credential_field": [
        ('{"token": "tok-4f1b2c3d5e6f7a8b"}', "tok-4f1b2c3d5e6f7a8b"),
        ('{"refresh_token": "1//0gLq-rT5yWmZ8aBcDeFg"}', "1//0gLq-rT5yWmZ8aBcDeFg"),
        ('{"private_key": "MIIBVwIBADANBgkqhkiG9w0B"}', "MIIBVwIBADANBgkqhkiG9w0B"),
        ('{"api_key": "k-20a1b2c3d4e5f6"}', "k-20a1b2c3d4e5f6"),
        ('{"password": "correct horse battery staple"}', "horse battery"),
        ("{'client_secret': 'cs-8a7b6c5d4e3f'}", "cs-8a7b6c5d4e3f"),
        ('"{\\"token\\": \\"tok-4f1b2c3d5e6f7a8b\\"}"', "tok-4f1b2c3d5e6f7a8b"),  # JSON in JSON
        ("password: hunter2-and-more", "hunter2-and-more"),
    ],
    "credential_parameter": [
        ("GET https://api.example.com/v1?api_key=Q1w2E3r4T5y6&x=1", "Q1w2E3r4T5y6"),
        ("https://acct.blob.example.net/c/b?sv=2022-11-02&sig=abc123def456%3D&se=1", "abc123def456"),
    ],
    "jwt": [(f"id_token was {_JWT}", _JWT)],
    "anthropic_key": [("key sk-ant-api03-AbCdEf0123456789_-xyzXYZ", "AbCdEf0123456789")],
    "openai_key": [
        (f"key {KEY}", KEY),
        ("key sk-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdEFGH", "AbCdEfGhIjKlMnOpQrSt"),
    ],
    "stripe_key": [("stripe: sk_live_4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc")],
    "github_token": [
        ("ghp_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ done", "1a2B3c4D5e6F7g8H9i0J"),
        ("ghs_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ", "1a2B3c4D5e6F7g8H9i0J"),
        ("gho_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ", "1a2B3c4D5e6F7g8H9i0J"),
        ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "11ABCDEFG0123456789_abc"),
    ],
    "slack_token": [
        ("xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "AbCdEfGhIjKlMnOpQrStUvWx"),
        ("xoxp-123456789012-1234567890123-AbCdEfGhIjKl", "1234567890123-AbCdEfGhIjKl"),
    ],
    "aws_access_key_id": [("access key AKIAIOSFODNN7EXAMPLE in use", "AKIAIOSFODNN7EXAMPLE")],
    "google_api_key": [("AIzaSyA-1234567890abcdefghijklmnopqrstu", "1234567890abcdefghijklmnop")],
    "provider_key": [("HF hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "AbCdEfGhIjKlMnOpQrSt")],
}
"""One or more texts per shape of ``SHAPES``, each with the part that must not survive."""

NOT_CREDENTIALS = [
    "The quick brown fox jumps over the lazy dog.",
    "run 123e4567-e89b-12d3-a456-426614174000 ended",
    "commit 0ee8bdb1a2f3c4d5e6f708192a3b4c5d6e7f8091 on main",
    "sha256:9f86d081884c7d659a2feaf0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "the model gpt-4o-mini is busy",
    "max_tokens=512 is too large",
    "{'input_tokens': 10, 'output_tokens': 2, 'total_tokens': 12}",
    "Tokens: 1,024 in / 32 out",
    "basic authentication is off",
    "a token is a piece of text; the key is in the drawer; password reset link sent",
    "ask-the-user-for-permission-before-deleting-files",
    "task-0123456789abcdefghijklmnop",
    "Asia/Tokyo and AKIA are just words",
    "mail alice@example.com or clone git@github.com:org/repo.git",
    "see https://example.com/docs#args and ?page=2&sort=asc",
    "eyJhbGciOiJIUzI1NiJ9 is a header alone",
    "short keys like sk-1234 are not keys",
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
    "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUZ\n-----END CERTIFICATE-----",
]


def test_every_shape_in_the_table_has_examples():
    assert set(SHAPE_EXAMPLES) == {shape.name for shape in SHAPES}


@pytest.mark.parametrize(
    ("name", "text", "secret"),
    [
        pytest.param(name, text, secret, id=f"{name}-{i}")
        for name, cases in SHAPE_EXAMPLES.items()
        for i, (text, secret) in enumerate(cases)
    ],
)
def test_a_credential_of_each_shape_is_scrubbed_and_the_text_around_it_kept(name, text, secret):
    (shape,) = [s for s in SHAPES if s.name == name]
    assert shape.pattern.search(text), "the example is of another shape"
    assert any(trigger in text.lower() for trigger in shape.triggers), "a match without its trigger"
    scrubbed = scrub_secrets(f"the server said: {text} (try again later)")
    assert secret not in scrubbed
    assert "***" in scrubbed
    assert scrubbed.startswith("the server said: ") and scrubbed.endswith(" (try again later)")


@pytest.mark.parametrize("text", NOT_CREDENTIALS)
def test_a_text_that_only_looks_close_to_a_credential_is_kept_as_it_is(text):
    assert scrub_secrets(text) == text


def test_a_private_key_block_cut_short_is_hidden_to_the_end():
    text = f"key: -----BEGIN OPENSSH PRIVATE KEY-----\n{_PEM_BODY}\n{_PEM_BODY[:20]}"
    assert scrub_secrets(text) == "key: -----BEGIN OPENSSH PRIVATE KEY-----***"


def test_a_credential_under_a_credential_named_key_is_hidden_whatever_its_shape():
    value = {"user": "ada", "password": "hunter2", "nested": [{"token": "t0"}], "tokens": "many"}
    assert scrub_value(value) == {
        "user": "ada",
        "password": "***",
        "nested": [{"token": "***"}],
        "tokens": "many",
    }
    plain = {"user": "ada", "count": 3}
    assert scrub_value(plain) is plain  # nothing hidden: the very object


# -- streamed text ---------------------------------------------------------------------------------

STREAMED = [
    f"Here it is: {KEY} and that is all.\n",
    f"Authorization: Bearer {GATEWAY_KEY}\nnext line\n",
    f'config {{"password": "gw pass {GATEWAY_KEY}"}} done\n',
    f"-----BEGIN PRIVATE KEY-----\n{_PEM_BODY}\n{_PEM_BODY}\n-----END PRIVATE KEY-----\nafter\n",
]
"""Texts a model streams, each holding a secret (``KEY``, ``GATEWAY_KEY`` or a PEM body) that no
piece may show the head of, wherever the pieces are cut."""


def _heads(text: str) -> list[str]:
    """The heads of every secret in ``text`` long enough to give one away."""
    secrets = [s for s in (KEY, GATEWAY_KEY, _PEM_BODY) if s in text]
    return [secret[:end] for secret in secrets for end in range(8, len(secret) + 1)]


@pytest.mark.parametrize("text", STREAMED, ids=["shaped", "bearer", "json-field", "pem"])
def test_a_secret_split_across_streamed_pieces_never_shows_its_head(text):
    heads = _heads(text)
    for size in (1, 2, 3, 5, 7):
        stream = StreamScrub()
        shown = ""
        for start in range(0, len(text), size):
            shown += stream.feed(text[start : start + size])
            assert not any(head in shown for head in heads), (size, shown)
        shown += stream.flush()
        assert shown == scrub_secrets(text)


@pytest.mark.parametrize("text", STREAMED, ids=["shaped", "bearer", "json-field", "pem"])
def test_the_live_text_and_snapshots_of_a_streaming_step_never_show_a_secrets_head(text):
    recorder = Recorder()
    recorder.apply(ev.RunStarted("r1", 0, 1.0, "task", "agent", "model", datetime.now(timezone.utc)))
    recorder.apply(ev.StepStarted("r1", 1, 1.0, "action"))
    heads = _heads(text)
    for index, char in enumerate(text):
        recorder.apply(ev.TextDelta("r1", 1, 1.0 + index / 1e4, char))
        live, snapshot = recorder.live_text(1), recorder.snapshot()
        assert snapshot is not None
        for shown in (live, snapshot.steps[0].model_output):
            assert not any(head in shown for head in heads), shown
    recorder.apply(ev.StepFinished("r1", 1, 2.0))
    assert recorder.live_text(1) == recorder.snapshot().steps[0].model_output == scrub_secrets(text)


def test_a_step_cut_mid_key_keeps_no_head_of_the_key():
    recorder = Recorder()
    recorder.apply(ev.RunStarted("r1", 0, 1.0, "task", "agent", "model", datetime.now(timezone.utc)))
    recorder.apply(ev.StepStarted("r1", 1, 1.0, "action"))
    for piece in ("your key is ", KEY[:12]):
        recorder.apply(ev.TextDelta("r1", 1, 1.1, piece))
    recorder.apply(ev.RunFinished("r1", 1, 1.2, "interrupted", stop_reason="user"))
    record = recorder.snapshot()
    assert record is not None and record.steps[0].model_output == "your key is ***"


def test_the_terminal_view_prints_a_streamed_key_scrubbed():
    out = io.StringIO()
    view = TextView(out)
    view(ev.RunStarted("r1", 0, 1.0, "task", "agent", "model", datetime.now(timezone.utc)))
    view(ev.StepStarted("r1", 1, 1.0, "action"))
    text = STREAMED[1]
    for index, char in enumerate(text):
        view(ev.TextDelta("r1", 1, 1.0 + index / 1e4, char))
        assert not any(head in out.getvalue() for head in _heads(text))
    view(ev.StepFinished("r1", 1, 2.0))
    assert "Authorization: Bearer ***" in out.getvalue() and "next line" in out.getvalue()


@dataclass
class Reply:
    """A tool's result that is no JSON: its text is its ``repr``."""

    status: str
    detail: str


@pytest.mark.needs("otel")
def test_an_object_a_tool_returns_is_stored_and_shown_without_the_key_its_repr_holds(tmp_path, spans):
    @nbagent.tool
    def fetch(url: str) -> Reply:
        """Fetch a URL."""
        return Reply("refused", f"the gateway refused key {KEY}")

    turns = [[ToolCall("fetch", {"url": "https://example.invalid/x"})], "could not fetch"]
    agent = nbagent.Agent(ScriptedModel(turns, tokens_per_s=1e9, first_token_s=0.0), tools=[fetch])
    from nbagent.otel import OTelSink

    store = RunStore(tmp_path / "runs.db")
    sink = OTelSink(spans.provider, content=True)
    record = nbagent.run(agent, "fetch it", store=store, sinks=[sink], display=False)
    assert isinstance(record.tool_calls[0].result, Reply)  # the record keeps the tool's own object
    written = written_copies(record, store, tmp_path, spans)
    assert "the gateway refused key ***" in written and KEY not in written
