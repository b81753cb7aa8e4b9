"""Compatibility: pydantic-ai agents behave under nbagent as they do under ``agent.run``.

Every scenario of ``pydantic_ai_scenarios`` (in the style of pydantic-ai's own agent tests) runs
plainly and through nbagent; both must give the same output, end state, error, usage (requests,
input and output tokens), tool calls and history (the one a ``reset=False`` run continues).

The plain run is what a user runs: ``agent.run`` with no ``event_stream_handler`` (unless the
scenario gives one), which asks the model with ``model.request``. nbagent streams whenever the
model can (the live view shows the text as it comes). Real providers report their usage, the same
streamed or not; pydantic-ai's test models (``TestModel``, ``FunctionModel``) *estimate* it, and
the estimate differs between the two paths. So, one documented difference: for a scenario nbagent
streams, its tokens are compared with the same scenario run plainly through a handler (streamed),
and everything else with the handler-less run, which also shows the estimate is the only thing
the streamed and non-streamed paths differ in. A model that can only stream (a ``FunctionModel``
with only a ``stream_function``) cannot run under a handler-less ``agent.run`` at all (it fails,
as checked); its users run it through a handler, so that is its plain run.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic_ai import Agent, capture_run_messages
from pydantic_ai.exceptions import ModelAPIError, RunCancelled, UsageLimitExceeded
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai_scenarios import SCENARIOS, Case, with_tools

import nbagent
from nbagent.adapters.pydantic_ai.records import (
    chat_messages,
    records_from_pydantic_ai,
    tool_calls_of,
    tool_outcome,
    usage_of,
)
from nbagent.adapters.pydantic_ai.stream import streams_as_agent_run
from nbagent.errors import describe

pytestmark = pytest.mark.needs("pydantic-ai")


async def drain(ctx, events) -> None:
    async for _ in events:
        pass


def model_of(case: Case) -> Any:
    return case.options.get("model") or case.agent.model


def nbagent_streams(case: Case) -> bool:
    """nbagent streams the run where a handler-less ``agent.run`` would not: no handler of the
    run's or the agent's own, a model that can stream, and no token limit."""
    handler = case.options.get("event_stream_handler") or case.agent.event_stream_handler
    return handler is None and streams_as_agent_run(model_of(case), case.options.get("usage_limits"))


def stream_only(case: Case) -> bool:
    model = model_of(case)
    return isinstance(model, FunctionModel) and model.function is None


class Plain:
    """What ``agent.run`` gave (through ``handler`` if one is given): its result or error, and the
    messages of the run."""

    def __init__(self, case: Case, handler: Any = None) -> None:
        options = dict(case.options)
        if handler is not None:
            options["event_stream_handler"] = handler
        carried = options.get("usage")
        self.carried = (carried.input_tokens, carried.output_tokens) if carried else (0, 0)
        self.resumes = case.resumes
        self.result: Any = None
        self.error: BaseException | None = None
        with capture_run_messages() as messages:
            try:
                self.result = asyncio.run(case.agent.run(case.task, **options))
            except Exception as exc:
                self.error = exc
        self.messages = self.result.all_messages() if self.result is not None else messages
        self.responses = [m for m in self.messages if m.kind == "response" and m.run_id == self.run_id]

    @property
    def run_id(self) -> str:
        return self.messages[-1].run_id

    def tokens(self) -> tuple[int, int]:
        """This run's tokens: the result's usage (what tools added included), less what it carried in."""
        if self.result is not None:
            usage = self.result.usage
            return usage.input_tokens - self.carried[0], usage.output_tokens - self.carried[1]
        counts = [usage_of(r.usage) for r in self.responses]
        return sum(i or 0 for i, _ in counts), sum(o or 0 for _, o in counts)

    def tool_calls(self) -> list[tuple[str, str]]:
        """The run's calls: those it started with (a resumed run), then its own responses' calls."""
        record = records_from_pydantic_ai(self.result if self.result is not None else self.messages)[-1]
        return self._resumed_calls() + [(c.tool, c.status) for c in record.tool_calls]

    def _resumed_calls(self) -> list[tuple[str, str]]:
        if not self.resumes:
            return []
        first = next(i for i, m in enumerate(self.messages) if m.run_id == self.run_id)
        history_response, answers = self.messages[first - 1], self.messages[first]
        returns = {p.tool_call_id: p for p in answers.parts if hasattr(p, "tool_call_id")}
        calls = [c for c in tool_calls_of(history_response) if c.tool_call_id in returns]
        return [(c.tool_name, tool_outcome(returns[c.tool_call_id])[0]) for c in calls]


def same_chat(ours: list[dict] | None, theirs: list[dict]) -> None:
    """The same conversation, tool call ids aside (a retried call gets a random one)."""

    def strip(chat):
        return [{k: v for k, v in m.items() if k not in ("tool_call_id", "tool_calls")} for m in chat or []]

    assert strip(ours) == strip(theirs)
    assert [[c["name"] for c in m.get("tool_calls", ())] for m in ours or []] == [
        [c["name"] for c in m.get("tool_calls", ())] for m in theirs
    ]


def check_same_end(record, plain: Plain) -> None:
    error = plain.error
    if error is None:
        assert record.status == "success", record.error
        assert record.output == plain.result.output
    elif isinstance(error, UsageLimitExceeded) and "request_limit" in str(error):
        assert (record.status, record.error) == ("max_steps", f"MaxStepsReached: {error}")
    elif isinstance(error, UsageLimitExceeded):
        assert (record.status, record.error) == ("limit", describe(error))
    elif isinstance(error, RunCancelled):
        assert (record.status, record.stop_reason, record.error) == ("interrupted", "agent", None)
    elif isinstance(error, ModelAPIError):  # nbagent's one type for a failed model call, pydantic-ai's text
        assert (record.status, record.error_type) == ("error", "ModelError")
        assert record.error.endswith(f": {describe(error)}")
    else:
        assert record.status == "error" and record.error_type == type(error).__name__
        assert record.error == describe(error)


def check_same_run(record, plain: Plain, name: str) -> None:
    """Everything but the tokens: end state, output, error, steps, tool calls, history."""
    check_same_end(record, plain)
    # one step per model request; a request that failed is a step too (its error in it); the
    # calls a resumed run starts with are a step of their own
    failed = record.status == "error" and record.steps and record.steps[-1].model_ended_at is None
    # (a failed streamed request leaves an empty, "interrupted" response in pydantic-ai's messages)
    cut = bool(plain.responses) and plain.responses[-1].state == "interrupted"
    assert len(record.steps) == len(plain.responses) + (failed and not cut) + plain.resumes
    if plain.result is not None and not SCENARIOS[name]().tool_usage:
        requests = plain.result.usage.requests - (1 if name == "carried_usage" else 0)
        assert len(record.steps) == requests + plain.resumes
    ours = [(c.tool, c.status) for c in record.tool_calls]
    theirs = plain.tool_calls()
    assert [t for t, _ in ours] == [t for t, _ in theirs]
    if plain.error is None or isinstance(plain.error, UsageLimitExceeded):
        assert ours == theirs  # refused calls included ("cancelled"), handed-back ones ("deferred")
    same_chat(record.messages, chat_messages(plain.messages))


@pytest.mark.parametrize("name", SCENARIOS)
def test_same_output_end_usage_calls_and_history(name):
    bare = Plain(SCENARIOS[name]())
    streamed = Plain(SCENARIOS[name](), drain) if nbagent_streams(SCENARIOS[name]()) else None
    case = SCENARIOS[name]()
    record = nbagent.run(case.agent, case.task, display=False, **case.options)
    tokens = (record.input_tokens or 0, record.output_tokens or 0)

    if stream_only(case):  # a handler-less agent.run cannot run it: the plain run streams
        assert isinstance(bare.error, AssertionError) and "must receive a `function`" in str(bare.error)
        check_same_run(record, streamed, name)
        assert tokens == streamed.tokens()
        return
    if streamed is None:
        check_same_run(record, bare, name)
        assert tokens == bare.tokens()
        return
    check_same_run(record, bare, name)  # the streamed path differs from agent.run's in nothing else
    assert tokens == streamed.tokens()
    if tokens != bare.tokens():  # only a test model's estimate may differ streamed vs not
        assert isinstance(model_of(case), (TestModel, FunctionModel))


CONTINUED = [
    "tools_all",
    "structured",
    "stream_tool_then_text",
    "plain_tool_then_text",
    "stream_output_retry",
    "deferred_approved_resumed",
]


@pytest.mark.parametrize("name", CONTINUED)
def test_reset_false_continues_as_message_history_would(name):
    plain = Plain(SCENARIOS[name](), drain if stream_only(SCENARIOS[name]()) else None)
    then = asyncio.run(_continue(SCENARIOS[name](), plain))

    case = SCENARIOS[name]()
    nbagent.run(case.agent, case.task, display=False, **case.options)
    record = nbagent.run(case.agent, "and then?", display=False, reset=False, **_first_only(case.options))

    assert record.status == "success" and record.output == then.output
    same_chat(record.messages, chat_messages(then.all_messages()))


def _first_only(options: dict[str, Any]) -> dict[str, Any]:
    """The options a continuing run keeps: a history and deferred results belong to the first run."""
    return {k: v for k, v in options.items() if k not in ("message_history", "deferred_tool_results")}


async def _continue(case: Case, plain: Plain) -> Any:
    options = _first_only(case.options)
    if stream_only(case):
        options["event_stream_handler"] = drain
    return await case.agent.run("and then?", message_history=plain.result.all_messages(), **options)


def test_the_plain_side_is_agent_run_without_a_handler():
    """What the suite compares with is what a user runs: ``agent.run`` with no handler gives the
    same usage as the plain side, and a streamed run of a test model estimates other counts (the
    one documented difference)."""
    users = with_tools(Agent(TestModel())).run_sync("a task").usage
    plain = Plain(SCENARIOS["tools_all"]())
    assert plain.tokens() == (users.input_tokens, users.output_tokens)
    estimated = Plain(SCENARIOS["both_functions"]())
    assert Plain(SCENARIOS["both_functions"](), drain).tokens() != estimated.tokens()


def test_the_suite_has_at_least_forty_scenarios():
    assert len(SCENARIOS) >= 40
