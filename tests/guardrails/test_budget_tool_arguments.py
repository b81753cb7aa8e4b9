"""Token budgets count tool-call arguments as they stream: a reply that is all arguments is cut
within one streamed piece of the budget, like text, offline and against a real HTTP server."""

from __future__ import annotations

import asyncio
import json

import pytest
from openai_server import OpenAIServer, Stream, StreamedCall
from support import add, wait_until

import nbagent
from nbagent import events as ev
from nbagent.guardrails import Limits
from nbagent.guardrails.limits import estimate_tokens
from nbagent.models import ScriptedModel, ToolCall, ToolCallDelta

BUDGET = 40
NOTE = "x" * 4000
"""A long argument: about a thousand tokens of JSON text, far over the budget."""
PIECES = 1000


def arguments_of(events: list[ev.RunEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, ev.ToolArgumentsDelta))


def assert_cut_within_one_piece(record: nbagent.RunRecord, piece: str) -> None:
    assert record.status == "limit" and record.stop_reason == "max_output_tokens"
    (step,) = record.steps
    assert step.interrupted and step.usage_source == "estimated"
    assert BUDGET < step.output_tokens <= BUDGET + estimate_tokens(piece)
    assert record.tool_calls == []  # the call never ran: its arguments never finished


def test_a_reply_of_tool_call_arguments_is_cut_by_an_output_token_limit_offline():
    call = ToolCall("add", {"a": 1, "b": 2, "note": " ".join(["word"] * 1000)}, id="c-1")
    model = ScriptedModel([[call], "unused"], tokens_per_s=5000, first_token_s=0)
    events: list[ev.RunEvent] = []
    agent = nbagent.Agent(model, tools=[add])
    record = nbagent.run(agent, "add", sinks=[events.append], limits=Limits(max_output_tokens=BUDGET))
    assert_cut_within_one_piece(record, " word")
    streamed = arguments_of(events)
    assert streamed and json.dumps(call.arguments).startswith(streamed)  # the arguments, as they came
    assert model.calls == 1


def test_scripted_tool_calls_stream_their_arguments_before_the_call():
    call = ToolCall("add", {"a": 1, "b": 2}, id="c-1")
    model = ScriptedModel([[call]], tokens_per_s=1e9, first_token_s=0)

    async def parts():
        return [part async for part in model.stream([{"role": "user", "content": "x"}], [])]

    got = asyncio.run(parts())
    deltas = [p.arguments for p in got if isinstance(p, ToolCallDelta)]
    assert json.loads("".join(deltas)) == call.arguments
    assert got.index(call) > max(i for i, p in enumerate(got) if isinstance(p, ToolCallDelta))


@pytest.mark.needs("openai")
@pytest.mark.parametrize("tokens_per_s", [1e9, 2000.0], ids=["all-at-once", "paced"])
def test_a_reply_of_tool_call_arguments_from_a_server_is_cut_within_one_chunk(tokens_per_s):
    """The server streams a thousand pieces of arguments (and would report 1,000 tokens): the run
    stops within one piece of the budget, however many pieces arrived in one packet."""
    arguments = json.dumps({"a": 1, "b": 2, "note": NOTE})
    piece = arguments[: -(-len(arguments) // PIECES)]
    reply = Stream(
        tool_calls=[StreamedCall("add", arguments, pieces=PIECES)],
        usage=(10, 1000),
        tokens_per_s=tokens_per_s,
    )
    with OpenAIServer([reply]) as server:
        model = nbagent.models.OpenAIChatModel("test-model", base_url=server.base_url, api_key="k")
        events: list[ev.RunEvent] = []
        agent = nbagent.Agent(model, tools=[add])
        record = nbagent.run(agent, "add", sinks=[events.append], limits=Limits(max_output_tokens=BUDGET))
        assert_cut_within_one_piece(record, piece)
        assert arguments.startswith(arguments_of(events))
        if tokens_per_s < 1e6:  # paced: the client left mid-reply, and the server saw it go
            wait_until(lambda: server.requests and server.requests[0].disconnected is not None)
            assert server.requests[0].finished is None
