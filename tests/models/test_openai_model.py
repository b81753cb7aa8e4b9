"""OpenAIChatModel against a real OpenAI-compatible HTTP server on 127.0.0.1 (tests/openai_server.py).

Streaming, tool calls, usage, retries, readable errors, a key that never leaks, and a Stop that
drops the connection, seen from the server's side.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import logging
import re
import sys
from contextlib import aclosing
from urllib.parse import quote

import pytest
from openai_server import OpenAIServer, Status, Stream, StreamedCall
from support import add, wait_until

import nbagent
from nbagent import events as ev
from nbagent.analytics.frames import runs_frame, steps_frame
from nbagent.analytics.store import RunStore
from nbagent.extras import install_hint
from nbagent.models import ModelText, OpenAIChatModel
from nbagent.models.credentials import scrub
from nbagent.models.openai import _retry_after
from nbagent.models.openai_reply import ReplyAssembly

pytestmark = pytest.mark.needs("openai")

SLOW = 50.0  # tokens per second: slow enough for a Stop to land mid-stream
LONG_TEXT = " ".join(f"word{i}" for i in range(400))
FAKE_KEY = "sk-nbagent-test-7f3a9c1e5b2d4f6a8e0c"


@pytest.fixture
def server():
    with OpenAIServer() as srv:
        yield srv


def model_for(server: OpenAIServer, **options) -> OpenAIChatModel:
    options.setdefault("api_key", FAKE_KEY)
    return OpenAIChatModel("test-model", base_url=server.base_url, **options)


def start(model: OpenAIChatModel, task: str = "go", tools=()) -> tuple[nbagent.Run, list[ev.RunEvent]]:
    events: list[ev.RunEvent] = []
    run = nbagent.start(nbagent.Agent(model, tools=tools), task, display=False, sinks=[events.append])
    return run, events


def of(events: list[ev.RunEvent], kind: type) -> list:
    return [e for e in events if isinstance(e, kind)]


# -- streaming ---------------------------------------------------------------------------------


def test_text_streams_piece_by_piece_as_it_arrives(server):
    server.push(Stream("The quick brown fox jumps.", tokens_per_s=10))
    run, events = start(model_for(server))
    record = run.wait(30)
    assert record.status == "success"
    assert record.output == "The quick brown fox jumps."
    deltas = of(events, ev.TextDelta)
    assert len(deltas) == 5
    assert "".join(d.text for d in deltas) == record.output
    # The first piece reached the run before the server had sent the last one.
    assert deltas[0].t < server.requests[0].finished
    body = server.requests[0].body
    assert body["model"] == "test-model"
    assert body["stream"] is True
    assert body["messages"] == [{"role": "user", "content": "go"}]
    assert "tools" not in body


def test_streamed_tool_calls_run_a_real_tool(server):
    server.push(
        Stream(
            tool_calls=[StreamedCall("add", '{"a": 2, "b": 3}', id="call_abc", pieces=4)],
            usage=(20, 7),
        ),
        Stream("The sum is 5.", usage=(40, 5)),
    )
    run, _ = start(model_for(server), "add 2 and 3", tools=[add])
    record = run.wait(30)
    assert record.status == "success", record.error
    assert record.output == "The sum is 5."
    assert [s.kind for s in record.steps] == ["action", "final"]
    call = record.steps[0].tool_calls[0]
    assert (call.call_id, call.tool, call.arguments, call.status, call.result) == (
        "call_abc",
        "add",
        {"a": 2, "b": 3},
        "ok",
        5,
    )
    first, second = (r.body for r in server.requests)
    assert first["tools"][0]["function"]["name"] == "add"
    assistant, answer = second["messages"][-2:]
    assert assistant["tool_calls"][0]["id"] == "call_abc"
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"a": 2, "b": 3}
    assert answer == {"role": "tool", "tool_call_id": "call_abc", "content": "5"}


def test_two_tool_calls_in_one_reply_are_assembled_apart(server):
    server.push(
        Stream(
            "Adding twice.",
            tool_calls=[StreamedCall("add", '{"a": 1, "b": 2}'), StreamedCall("add", '{"a": 10, "b": 20}')],
        ),
        Stream("3 and 30."),
    )
    record = start(model_for(server), tools=[add])[0].wait(30)
    assert record.status == "success", record.error
    calls = record.steps[0].tool_calls
    assert [(c.arguments, c.result) for c in calls] == [({"a": 1, "b": 2}, 3), ({"a": 10, "b": 20}, 30)]
    assert len({c.call_id for c in calls}) == 2
    assert record.steps[0].model_output == "Adding twice."


def test_tool_arguments_that_are_not_json_become_an_observation(server):
    server.push(Stream(tool_calls=[StreamedCall("add", '{"a": 2, "b":')]), Stream("Sorry."))
    record = start(model_for(server), tools=[add])[0].wait(30)
    assert record.status == "success"
    call = record.steps[0].tool_calls[0]
    assert call.status == "error"
    assert "not valid JSON" in call.error
    observation = server.requests[1].body["messages"][-1]
    assert observation["role"] == "tool"
    assert "not valid JSON" in observation["content"]


def test_tool_calls_without_an_index_are_told_apart_by_their_id():
    reply = ReplyAssembly()
    for call_id, name, arguments in [
        ("a", "add", '{"a": 1,'),
        (None, None, ' "b": 2}'),
        ("b", "add", '{"a": 3, "b": 4}'),
    ]:
        delta = {"id": call_id, "function": {"name": name, "arguments": arguments}}
        reply.feed({"choices": [{"index": 0, "delta": {"tool_calls": [delta]}}]})
    calls = reply.tool_calls()
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("a", "add", {"a": 1, "b": 2}),
        ("b", "add", {"a": 3, "b": 4}),
    ]


# -- usage -------------------------------------------------------------------------------------


def test_usage_chunk_is_recorded_as_reported(server):
    server.push(Stream("Hello there.", usage=(123, 45)))
    record = start(model_for(server))[0].wait(30)
    step = record.steps[0]
    assert (step.input_tokens, step.output_tokens, step.usage_source) == (123, 45, "reported")
    assert server.requests[0].body["stream_options"] == {"include_usage": True}
    assert record.usage_complete


def test_usage_streamed_on_every_chunk_counts_once(server):
    server.push(Stream("one two three four", usage_every_chunk=True, usage=(30, 4)))
    record = start(model_for(server))[0].wait(30)
    step = record.steps[0]
    assert (step.input_tokens, step.output_tokens, step.usage_source) == (30, 4, "reported")


def test_server_without_usage_leaves_it_unknown(server):
    server.push(Stream("no usage here"))
    record = start(model_for(server, stream_usage=False))[0].wait(30)
    assert "stream_options" not in server.requests[0].body
    step = record.steps[0]
    assert (step.input_tokens, step.output_tokens, step.usage_source) == (None, None, "unknown")
    assert not record.usage_complete


def test_extra_parameters_reach_the_server(server):
    server.push(Stream("ok"))
    model = model_for(server, temperature=0, max_tokens=64, extra_body={"top_k": 5})
    start(model)[0].wait(30)
    body = server.requests[0].body
    assert (body["temperature"], body["max_tokens"], body["top_k"]) == (0, 64, 5)


# -- retries -----------------------------------------------------------------------------------


def test_rate_limit_waits_for_retry_after_then_succeeds(server):
    server.push(Status(429, "Rate limit reached", headers={"Retry-After": "0.3"}), Stream("Done."))
    run, events = start(model_for(server))
    record = run.wait(30)
    assert record.status == "success"
    assert record.output == "Done."
    [retry] = of(events, ev.Retrying)
    assert (retry.attempt, retry.delay_s) == (1, 0.3)
    assert "429" in retry.reason
    assert record.steps[0].retries == 1
    first, second = server.requests
    assert second.started - first.finished >= 0.25  # the wait the server asked for
    assert len(of(events, ev.TextDelta)) == 1  # only the successful attempt produced text


def test_server_error_is_retried_then_succeeds(server):
    server.push(Status(500, "The server had an error"), Stream("Recovered."))
    run, events = start(model_for(server))
    record = run.wait(30)
    assert record.status == "success"
    assert record.output == "Recovered."
    [retry] = of(events, ev.Retrying)
    assert "500" in retry.reason
    assert retry.delay_s > 0  # no Retry-After: exponential backoff
    assert len(server.requests) == 2


def test_retries_are_bounded_then_the_run_errors(server):
    server.default = Status(503, "Overloaded", headers={"Retry-After": "0"})
    run, events = start(model_for(server, max_retries=2))
    record = run.wait(30)
    assert record.status == "error"
    assert record.error_type == "ModelError"
    assert "503" in record.error
    assert "gave up after 2 retries" in record.error
    assert [r.attempt for r in of(events, ev.Retrying)] == [1, 2]
    assert len(server.requests) == 3
    assert record.steps[0].retries == 2


def test_connection_lost_before_any_text_is_retried(server):
    server.push(Stream("never seen", disconnect_after=0), Stream("Second try."))
    run, events = start(model_for(server))
    record = run.wait(30)
    assert record.status == "success"
    assert record.output == "Second try."
    assert "connection lost" in of(events, ev.Retrying)[0].reason


def test_retry_after_longer_than_max_wait_is_an_error_not_a_wait(server):
    server.push(Status(429, "Daily quota", headers={"Retry-After": "3600"}))
    record = start(model_for(server))[0].wait(30)
    assert record.status == "error"
    assert "3600" in record.error
    assert "max_retry_wait_s" in record.error
    assert len(server.requests) == 1


def test_retry_after_forms():
    assert _retry_after({"retry-after": "2"}) == 2.0
    assert _retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert _retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # a date in the past
    assert _retry_after({"retry-after": "soon"}) is None
    assert _retry_after({}) is None


# -- errors ------------------------------------------------------------------------------------


def test_bad_key_gives_a_readable_error_that_never_shows_the_key():
    with OpenAIServer(api_key="sk-the-right-one") as server:  # its 401 echoes the key it got
        model = model_for(server)
        run, events = start(model)
        record = run.wait(30)
    assert record.status == "error"
    assert "401" in record.error
    assert "API key" in record.error
    assert "OPENAI_API_KEY" in record.error
    assert len(server.requests) == 1  # a bad key is not retried
    assert FAKE_KEY in server.requests[0].headers["authorization"]  # it was sent, and echoed back
    with pytest.raises(nbagent.ModelError) as caught:
        record.raise_for_status()
    agent = nbagent.Agent(model)
    for text in (
        record.error,
        str(record),
        repr(record),
        record._repr_html_(),
        repr(dataclasses.asdict(record)),
        str(caught.value),
        repr(caught.value),
        repr(model),
        repr(vars(model)),
        repr(agent),
        *(repr(e) for e in events),
    ):
        assert FAKE_KEY not in text


def test_key_never_appears_in_retry_notices_or_records(server):
    server.push(
        Status(429, f"Slow down, {FAKE_KEY}", headers={"Retry-After": "0"}),
        Stream("fine", usage=(3, 1)),
    )
    run, events = start(model_for(server))
    record = run.wait(30)
    assert record.status == "success"
    retry = of(events, ev.Retrying)[0]
    assert FAKE_KEY not in retry.reason
    for text in (str(record), repr(record), record._repr_html_(), *(repr(e) for e in events)):
        assert FAKE_KEY not in text


def test_unknown_model_is_a_clear_404(server):
    server.models = {"real-model"}
    record = start(model_for(server))[0].wait(30)
    assert record.status == "error"
    assert "404" in record.error
    assert "test-model" in record.error
    assert "base_url" in record.error
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ('{"id": "cut", "choices": [{"delta": {"content": "oo', "not JSON"),
        ("42", "got int"),
        ('{"choices": "none"}', "'choices' is not a list"),
        ('{"choices": [{"index": 0, "delta": "text"}]}', "got str"),
        ('{"choices": [{"index": 0, "delta": {"content": 5}}]}', "'content' is a int"),
        ('{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": 7}]}}]}', "got int"),
    ],
    ids=["not-json", "number", "choices", "delta", "content", "tool-call"],
)
def test_malformed_chunk_is_a_clear_error_and_keeps_the_text(server, data, says):
    server.push(Stream("alpha beta gamma delta", malformed_after=2, malformed=data))
    record = start(model_for(server))[0].wait(30)
    assert record.status == "error"
    assert "malformed chunk" in record.error
    assert says in record.error
    assert record.steps[0].model_output == "alpha beta"
    assert len(server.requests) == 1


def test_error_event_inside_the_stream_is_reported(server):
    server.push(Stream("alpha beta", malformed_after=1, malformed='{"error": {"message": "model crashed"}}'))
    record = start(model_for(server))[0].wait(30)
    assert record.status == "error"
    assert "reported an error mid-stream after 5 characters of reply: model crashed" in record.error


def test_content_sent_as_a_list_of_parts_is_text(server):
    parts = '{"choices": [{"index": 0, "delta": {"content": [{"type": "text", "text": " parts"}]}}]}'
    server.push(Stream("text in here", malformed_after=2, malformed=parts))
    record = start(model_for(server))[0].wait(30)
    assert record.status == "success"
    assert record.output == "text in parts here"


def test_server_closing_mid_stream_keeps_the_text_so_far(server):
    server.push(Stream("one two three four five", disconnect_after=3))
    record = start(model_for(server))[0].wait(30)
    assert record.status == "error"
    assert record.error_type == "ModelError"
    assert "closed the connection mid-stream" in record.error
    assert record.steps[0].model_output == "one two three"
    assert record.steps[0].usage_source == "unknown"
    assert len(server.requests) == 1  # text already reached the user: a retry would repeat it


def test_a_silent_server_times_out_with_a_clear_error(server):
    server.push(Stream("first then nothing", stall_after=1))
    record = start(model_for(server, timeout=1.0))[0].wait(30)
    assert record.status == "error"
    assert "timed out" in record.error
    assert record.steps[0].model_output == "first"
    request = server.requests[0]
    server.wait_until(lambda: request.disconnected is not None)


def test_unreachable_server_is_retried_then_a_clear_error():
    with OpenAIServer() as server:
        base_url = server.base_url  # a port nobody listens on once the server is closed
    model = OpenAIChatModel("m", base_url=base_url, max_retries=1)
    run, events = start(model)
    record = run.wait(30)
    assert record.status == "error"
    assert "cannot reach the server" in record.error
    assert len(of(events, ev.Retrying)) == 1


# -- Stop --------------------------------------------------------------------------------------


def test_stop_mid_stream_drops_the_connection_and_keeps_the_text(server):
    server.push(Stream(LONG_TEXT, tokens_per_s=SLOW))
    run, _ = start(model_for(server))
    server.wait_until(lambda: server.requests and server.requests[0].tokens_sent >= 3)
    wait_until(lambda: run.live_text(1).count("word") >= 3)
    assert run.interrupt() is True
    record = run.wait(30)
    request = server.requests[0]
    server.wait_until(lambda: request.disconnected is not None)
    assert request.finished is None
    assert record.status == "interrupted"
    step = record.steps[0]
    assert step.interrupted
    assert step.model_output.startswith("word0 word1 word2")
    assert LONG_TEXT.startswith(step.model_output)
    assert (step.input_tokens, step.output_tokens, step.usage_source) == (None, None, "unknown")


def test_stop_before_the_first_byte_drops_the_connection(server):
    server.push(Stream("late", headers_after_s=60))
    run, _ = start(model_for(server))
    server.wait_until(lambda: len(server.requests) == 1)
    run.interrupt()
    record = run.wait(30)
    assert record.status == "interrupted"
    request = server.requests[0]
    server.wait_until(lambda: request.disconnected is not None)


def test_stop_during_a_backoff_ends_the_run_at_once(server):
    server.default = Status(503, "Overloaded", headers={"Retry-After": "50"})
    run, events = start(model_for(server))
    wait_until(lambda: of(events, ev.Retrying))
    run.interrupt()
    record = run.wait(20)  # well before the 50 s backoff would end
    assert record.status == "interrupted"
    assert record.steps[0].retries == 1
    assert len(server.requests) == 1


def test_closing_the_stream_early_drops_the_connection(server):
    model = model_for(server)
    server.push(Stream("warm up"), Stream(LONG_TEXT, tokens_per_s=SLOW))
    assert nbagent.run(nbagent.Agent(model), "go", display=False).output == "warm up"  # on the runner's loop

    async def read_two_pieces_then_stop() -> list[str]:  # on another loop: the model gets a client for it
        pieces: list[str] = []
        async with aclosing(model.stream([{"role": "user", "content": "hi"}], [])) as parts:
            async for part in parts:
                if isinstance(part, ModelText):
                    pieces.append(part.text)
                if len(pieces) == 2:
                    break
        request = server.requests[1]
        await asyncio.to_thread(server.wait_until, lambda: request.disconnected is not None)
        return pieces

    assert asyncio.run(read_two_pieces_then_stop()) == ["word0", " word1"]


def test_many_stops_leak_no_connections(server):
    model = model_for(server)
    agent = nbagent.Agent(model)
    for i in range(30):
        # Half the stops land mid-stream, half while waiting for the response headers.
        server.push(Stream(LONG_TEXT, tokens_per_s=SLOW) if i % 2 else Stream("x", headers_after_s=60))
        run = nbagent.start(agent, "go", display=False)
        server.wait_until(lambda i=i: len(server.requests) == i + 1)
        request = server.requests[i]
        if i % 2:
            server.wait_until(lambda r=request: r.tokens_sent >= 1)
        run.interrupt()
        assert run.wait(30).status == "interrupted"
        server.wait_until(lambda r=request: r.disconnected is not None)
    server.wait_until(lambda: server.open_connections == 0)
    assert server.connections_opened == 30
    # The pool still works: a run that ends normally keeps its connection for the next one.
    server.push(Stream("first"), Stream("second"))
    assert nbagent.run(agent, "go", display=False).output == "first"
    assert nbagent.run(agent, "go", display=False).output == "second"
    assert server.connections_opened == 31
    assert server.open_connections == 1


# -- construction ------------------------------------------------------------------------------


def test_name_is_the_model_id_and_repr_hides_the_key(server):
    model = model_for(server)
    assert model.name == "test-model"
    assert repr(model) == f"OpenAIChatModel('test-model', base_url='{server.base_url}')"
    assert nbagent.Agent(model).model_name == "test-model"


def test_a_given_client_is_used_and_its_retries_become_visible(server):
    import openai

    client = openai.AsyncOpenAI(api_key=FAKE_KEY, base_url=server.base_url, max_retries=5)
    server.push(Status(500, "hiccup", headers={"Retry-After": "0"}), Stream("via the given client"))
    model = OpenAIChatModel("test-model", client=client)
    assert model.base_url == server.base_url
    run, events = start(model)
    assert run.wait(30).output == "via the given client"
    assert len(of(events, ev.Retrying)) == 1  # the client's own retry would have been invisible
    assert len(server.requests) == 2


def test_openai_without_a_key_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(nbagent.ModelError, match="OPENAI_API_KEY"):
        OpenAIChatModel("gpt-4.1-mini")


def test_local_server_needs_no_key(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.push(Stream("local"))
    model = OpenAIChatModel("qwen3:8b", base_url=server.base_url)
    assert nbagent.run(nbagent.Agent(model), "hi", display=False).output == "local"


def test_missing_openai_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(ImportError, match=re.escape(install_hint("openai"))):
        OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1")


def _tool_delta(call_id=None, name=None, arguments=None):
    function = {k: v for k, v in (("name", name), ("arguments", arguments)) if v is not None}
    call = {"function": function, **({"id": call_id} if call_id else {})}
    return {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}


def test_tool_call_pieces_without_an_index_are_joined_by_their_id():

    reply = ReplyAssembly()
    for chunk in [
        _tool_delta("a", "add", '{"a": '),
        _tool_delta("b", "add", '{"a": 3, '),
        _tool_delta("a", None, "1}"),
        _tool_delta("b", None, '"b": 4}'),
    ]:
        reply.feed(chunk)
    calls = reply.tool_calls()
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("a", "add", {"a": 1}),
        ("b", "add", {"a": 3, "b": 4}),
    ]


def test_a_usage_chunk_with_null_fields_keeps_the_counts_known_so_far():

    reply = ReplyAssembly()
    reply.feed({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 3}})
    reply.feed({"choices": [], "usage": {"prompt_tokens": None, "completion_tokens": 5}})
    assert reply.usage == (10, 5)


# -- secrets -----------------------------------------------------------------------------------

PLAIN_KEY = "nbk-test-7f3a9c1e5b2d4f6a8e0c9d1b"  # no known key shape: only the model knows it is one
FOREIGN_KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 3  # a key the model never had, shaped like one


def everything_shown(record: nbagent.RunRecord, events=(), model=None, store=None) -> str:
    """Every place a run's text reaches the user: record, HTML, frames, events, store and its file."""
    parts = [
        record.error or "",
        str(record),
        repr(record),
        record._repr_html_(),
        repr(dataclasses.asdict(record)),
        runs_frame(record).to_csv(),
        steps_frame(record).to_csv(),
        *(repr(e) for e in events),
    ]
    if model is not None:
        parts += [repr(model), str(model), repr(vars(model)), repr(nbagent.Agent(model))]
    if store is not None:
        parts += [repr(store.records()), store.runs().to_csv(), store.steps().to_csv()]
        for path in store.path.parent.iterdir():  # the SQLite file and its write-ahead log, as bytes
            parts.append(path.read_bytes().decode("utf-8", errors="replace"))
    return "\n".join(parts)


def assert_hidden(secret: str, text: str) -> None:
    """Neither the secret nor its first 10 or more characters: what a cut through it would leave."""
    for end in range(10, len(secret) + 1):
        assert secret[:end] not in text, f"{secret[:end]!r} is shown"


@pytest.mark.parametrize(
    ("key", "echoed"),
    [(PLAIN_KEY, PLAIN_KEY), (FAKE_KEY, FOREIGN_KEY)],
    ids=["the-models-own-key", "a-key-shaped-like-one"],
)
def test_a_key_near_the_cut_is_scrubbed_before_the_message_is_shortened(server, tmp_path, key, echoed):
    # The case: the key starts 283 characters into a 401 body; errors keep 300 characters.
    server.push(Status(401, "x" * 270 + f" the key was {echoed}", "invalid_request_error"))
    store = RunStore(tmp_path / "runs.db")
    model = model_for(server, api_key=key)
    events: list[ev.RunEvent] = []
    run = nbagent.start(nbagent.Agent(model), "go", display=False, sinks=[events.append], store=store)
    record = run.wait(30)
    assert record.status == "error"
    assert "401" in record.error
    assert "x" * 100 in record.error  # the server's message is there, shortened
    assert "the key was ***" in record.error
    assert len(server.requests) == 1
    shown = everything_shown(record, events, model, store)
    assert_hidden(echoed, shown)
    assert_hidden(key, shown)


def test_credentials_of_every_shape_in_a_server_message_are_scrubbed(server):
    key = "nbk/7f3a+9c1e=5b2d"  # URL-encoding changes it: nbk%2F7f3a%2B9c1e%3D5b2d
    basic = base64.b64encode(b"alice:wonderland-42").decode()
    foreign = {
        "basic": basic,
        "bearer": "tok_9Zy8Xw7Vu6Ts5",
        "userinfo": "hunter2-proxy-pw",
        "query": "QPARAM-123-456",
        "form": "FORMKEY-987-654",
        "access": "ACCESS-TOK-456789",
        "token": "TOKEN-999-888-777",
        "json": "JSONKEY-5551234",
        "sk": FOREIGN_KEY,
    }
    message = (
        f"Use basic authentication. Got Authorization: Basic {basic}, and Bearer {foreign['bearer']}; "
        f"proxy https://bob:{foreign['userinfo']}@proxy.example/v1; "
        f"url https://gw.example/v1/chat/completions?api-key={foreign['query']}&x=1; "
        f"form api_key={foreign['form']}&access_token={foreign['access']} token={foreign['token']}; "
        f'json {{"api-key": "{foreign["json"]}"}}; keys {foreign["sk"]}, {quote(key, safe="")}, {key}'
    )
    server.push(Status(403, message, "invalid_request_error"))
    model = model_for(server, api_key=key)
    record = start(model)[0].wait(30)
    assert record.status == "error"
    assert "403" in record.error
    assert "Use basic authentication." in record.error  # ordinary words stay readable
    shown = everything_shown(record, model=model)
    for secret in (*foreign.values(), key, quote(key, safe=""), "bob:"):
        assert secret not in shown


def test_scrub_removes_what_looks_like_a_credential_and_keeps_ordinary_text():
    cases = {
        "Authorization: Basic dXNlcjpwYXNz": "Authorization: Basic ***",
        "header 'Basic dXNlcjpwYXNz' rejected": "header 'Basic ***' rejected",
        "basic authentication is off": "basic authentication is off",
        "Bearer abc.def-ghi": "Bearer ***",
        "http://user:p@ss@host:8080/v1": "http://***@host:8080/v1",
        "GET /v1/x?api-key=S3CR3T&a=1": "GET /v1/x?api-key=***&a=1",
        "?key=K&token=T&access_token=A&api_key=B": "?key=***&token=***&access_token=***&api_key=***",
        '{"api-key": "S3CR3T", "model": "m"}': '{"api-key": "***", "model": "m"}',
        "key sk-ant-api03-abcdefghijklmnop1234": "key ***",
        "the model gpt-4o-mini is busy": "the model gpt-4o-mini is busy",
        "max_tokens=512 is too large": "max_tokens=512 is too large",
    }
    for text, scrubbed in cases.items():
        assert scrub(text) == scrubbed
    assert scrub("a%2Fb and a/b", ["a%2Fb", "a/b"]) == "*** and ***"


def test_credentials_in_the_base_url_are_sent_on_the_wire_and_never_shown(caplog):
    password, query_key = "s3cr@t/pw", "QKEY-0a9b8c7d6e5f"
    caplog.set_level(logging.DEBUG)  # every logger: openai's, httpx's, httpcore's
    with OpenAIServer(api_key=query_key, key_param="api-key", basic_auth=("alice", password)) as server:
        server.push(Stream("through", usage=(3, 1)))
        host = server.base_url.removeprefix("http://")
        url = f"http://alice:{quote(password, safe='')}@{host}?api-key={query_key}&api-version=2024-06-01"
        model = OpenAIChatModel("test-model", base_url=url)
        run, events = start(model)
        record = run.wait(30)
    assert record.status == "success", record.error
    assert record.output == "through"
    [request] = server.requests
    # The old URL join made this /v1/?api-key=...chat/completions.
    assert request.route == "/v1/chat/completions"
    assert request.query == {"api-key": [query_key], "api-version": ["2024-06-01"]}
    basic = base64.b64encode(f"alice:{password}".encode()).decode()
    assert request.headers["authorization"] == f"Basic {basic}"
    assert model.base_url == server.base_url
    assert repr(model) == f"OpenAIChatModel('test-model', base_url='{server.base_url}')"
    # httpx's own line names the URL it sent to: the public one.
    [sent] = [r.getMessage() for r in caplog.records if r.name in ("httpx", "httpx2")]
    assert sent.startswith(f"HTTP Request: POST {server.base_url}/chat/completions ")
    logged = caplog.text + "\n".join(r.getMessage() for r in caplog.records)
    shown = everything_shown(record, events, model) + logged
    for secret in (password, quote(password, safe=""), query_key, "alice:", basic):
        assert secret not in shown


def test_wrong_credentials_in_the_base_url_give_a_401_that_shows_none_of_them(caplog):
    caplog.set_level(logging.DEBUG)
    with OpenAIServer(basic_auth=("alice", "the-right-one")) as server:  # its 401 echoes the header
        host = server.base_url.removeprefix("http://")
        model = OpenAIChatModel("test-model", base_url=f"http://alice:wrong-pass-123@{host}")
        run, events = start(model)
        record = run.wait(30)
    assert record.status == "error"
    assert "401" in record.error
    sent = server.requests[0].headers["authorization"]
    assert sent == "Basic " + base64.b64encode(b"alice:wrong-pass-123").decode()
    shown = everything_shown(record, events, model) + caplog.text
    for secret in ("wrong-pass-123", sent.removeprefix("Basic ")):
        assert secret not in shown


def test_a_redirect_to_another_server_carries_no_credentials(caplog):
    caplog.set_level(logging.DEBUG)
    with OpenAIServer() as elsewhere, OpenAIServer() as server:
        server.push(Status(307, "moved", headers={"Location": f"{elsewhere.base_url}/chat/completions"}))
        elsewhere.push(Stream("from elsewhere"))
        host = server.base_url.removeprefix("http://")
        model = OpenAIChatModel("test-model", base_url=f"http://alice:pw-9876@{host}?api-key=QK-12345")
        record = start(model)[0].wait(30)
    assert record.status == "success", record.error
    assert record.output == "from elsewhere"
    assert server.requests[0].query == {"api-key": ["QK-12345"]}
    [moved] = elsewhere.requests
    assert moved.query == {}
    assert "authorization" not in moved.headers
    assert "QK-12345" not in caplog.text and "pw-9876" not in caplog.text


def test_model_attributes_and_repr_hold_no_credential():
    model = OpenAIChatModel(
        "m",
        base_url="http://user:p@ss@127.0.0.1:9/v1?api-key=hunter2pw",
        api_key=FAKE_KEY,
        default_headers={"api-key": "header-secret-123"},
    )
    assert model.base_url == "http://127.0.0.1:9/v1"
    shown = "\n".join(
        [repr(model), str(model), repr(vars(model)), str(vars(model)), repr(nbagent.Agent(model))]
    )
    assert "<credentials hidden>" in repr(vars(model))
    error = model._error("server said: api-key=hunter2pw, header-secret-123, user:p@ss, " + FAKE_KEY)
    for secret in ("hunter2pw", "header-secret-123", "p@ss", FAKE_KEY):
        assert secret not in shown
        assert secret not in str(error)


def test_extra_headers_and_extra_query_are_sent_and_kept_out_of_sight(server, caplog):
    caplog.set_level(logging.DEBUG)
    server.push(Stream("ok"))
    model = model_for(server, extra_headers={"api-key": "HDR-KEY-24680"}, extra_query={"token": "QRY-13579"})
    record = start(model)[0].wait(30)
    assert record.status == "success", record.error
    [request] = server.requests
    assert request.headers["api-key"] == "HDR-KEY-24680"
    assert request.query == {"token": ["QRY-13579"]}
    assert "extra_headers" not in model.params and "extra_query" not in model.params
    shown = everything_shown(record, model=model) + caplog.text
    assert "HDR-KEY-24680" not in shown and "QRY-13579" not in shown


def test_credentials_in_the_base_url_go_through_the_environments_proxy(server, monkeypatch):
    for name in ("no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY", "HTTP_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("http_proxy", server.base_url.removesuffix("/v1"))  # the test server plays the proxy
    server.push(Stream("via the proxy"))
    model = OpenAIChatModel("test-model", base_url="http://api.example.invalid/v1?api-key=PXY-112233")
    record = start(model)[0].wait(30)
    assert record.status == "success", record.error
    [request] = server.requests
    assert request.path == "http://api.example.invalid/v1/chat/completions?api-key=PXY-112233"
