"""The source contract (``nbagent.runtime.source``, docs/adapters.md), held against every source.

Each scenario runs the same scripted agent through each framework's adapter (``contract_harnesses``):
Stop now mid-stream and mid-tool, Stop after the step, a tool that raises, a model that raises, a
step budget, a tool call budget (the call over it never runs), a time budget, token budgets,
approvals (held for a person, or refused at start; with no one to approve, a call the framework
holds is handed back). After each end state a ``reset=False`` run continues the same agent, and
every record keeps the same invariants (only the agent's tools are tool calls: no graph node, no
sub-agent). A credential in an error is in no copy of the run; the framework's own
``records_from_*`` of a plain run tells what the live record tells; a fork at step 2 makes no call
of step 1 again and sends step 2's request. A source that misses a scenario is marked in ``GAPS``
(a strict xfail naming the gap), so the gaps stay listed until they are closed; a new adapter is
done when it passes the suite.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any, get_args

import pytest
from contract_harnesses import HARNESSES, KEY, TOOLS, Harness, Reply
from needs import skip_reason
from support import wait_until

import nbagent
from nbagent import events as ev
from nbagent.adapters import as_source
from nbagent.records import RunRecord
from nbagent.runtime.source import Source

GAPS: dict[tuple[str, str], str] = {}
"""(scenario, framework) -> the gap that makes the source fail the scenario (a strict xfail)."""

SOMETIMES: dict[tuple[str, str], str] = {}
"""(scenario, framework) -> a gap that shows only sometimes (a race): a non-strict xfail."""

HOOKS = (
    "name", "agent", "model_name", "model_name_for", "model_params", "task_text", "takes_turns",
    "turn_key", "supports_approvals", "approvals_refusal", "check_run", "warm_up", "drive",
)  # fmt: skip
"""Every hook of ``Source``: a source declares each (most by inheriting the default)."""


@pytest.fixture(params=HARNESSES, ids=lambda cls: cls.framework)
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    made = request.param()
    if not made.available():
        pytest.skip(skip_reason(f"the {made.framework} source", [made.extra]))
    gap = GAPS.get((request.node.originalname, made.framework))
    if gap is not None:
        request.applymarker(pytest.mark.xfail(strict=True, reason=gap))
    sometimes = SOMETIMES.get((request.node.originalname, made.framework))
    if sometimes is not None:  # a race: it passes most times, so a strict xfail would flap
        request.applymarker(pytest.mark.xfail(strict=False, reason=sometimes))
    yield made
    made.close()


def script(*replies: Reply) -> list[Reply]:
    """The scenario's replies, then answers for the runs that continue it."""
    return [*replies, *[Reply("continued and done")] * 4]


def holds_invariants(record: RunRecord) -> None:
    """What every finished record of every source says, whatever the end state."""
    assert record.done and record.status in get_args(ev.RunStatus)
    assert (record.stop_reason is None) == (record.status == "success"), record.stop_reason
    if record.stop_reason is not None:
        assert ev.stop_text(record.stop_reason)
    if record.status in ("success", "interrupted"):
        assert record.error is None, record.error
    if record.status == "interrupted":
        assert record.stop_reason in ("user", "user_after_step")
    if record.status == "limit":
        assert record.stop_reason in get_args(ev.LimitName) and record.error_type == "LimitExceeded"
    assert [s.number for s in record.steps] == list(range(1, len(record.steps) + 1))
    assert all(s.end_s is not None for s in record.steps), "a step left open"
    calls = [c for s in record.steps for c in s.tool_calls]
    assert all(c.status is not None for c in calls), "a tool call left without an end"
    assert len({c.call_id for c in calls}) == len(calls)
    assert {c.tool for c in calls} <= set(TOOLS), "a graph node or a framework's own tool is a tool call"
    assert record.tool_calls == calls


def continues(agent: Any, before: RunRecord) -> RunRecord:
    """A ``reset=False`` run after ``before`` ends as the model says, and names the run it continues."""
    record = nbagent.run(agent, "go on", reset=False, display=False)
    holds_invariants(record)
    assert (record.status, record.continues_run_id) == ("success", before.run_id), record.error
    assert record.output
    return record


def calls_named(run: nbagent.Run, tool: str) -> list[Any]:
    return [c for s in run.record.steps for c in s.tool_calls if c.tool == tool]


def test_the_source_declares_every_hook(harness):
    agent = harness.make(script())
    source = as_source(agent)
    assert isinstance(source, Source)
    for hook in HOOKS:
        assert hasattr(source, hook), hook
    assert inspect.iscoroutinefunction(source.drive)
    assert source.agent is agent
    assert isinstance(source.name, str) and isinstance(source.model_name, str)
    assert source.model_name_for({}) == source.model_name
    assert isinstance(source.model_params(), dict)
    assert source.task_text("a task") == "a task"
    assert isinstance(source.takes_turns, bool) and isinstance(source.supports_approvals, bool)
    if not source.supports_approvals:
        assert "approve=" in source.approvals_refusal()


def test_stop_now_mid_stream_ends_interrupted_with_the_streamed_words_kept(harness):
    agent = harness.make(script(Reply("Thinking about it", hold=True)))
    run = nbagent.start(agent, "think", display=False)
    wait_until(lambda: run.record.steps and "Thinking" in run.live_text(run.record.steps[-1].number))
    assert run.interrupt()
    record = run.wait(timeout=30)
    harness.close()
    holds_invariants(record)
    assert (record.status, record.stop_reason) == ("interrupted", "user")
    assert record.steps[-1].interrupted and "Thinking" in record.steps[-1].model_output
    continues(agent, record)


def test_stop_now_mid_tool_ends_interrupted_with_the_call_cut(harness):
    agent = harness.make(script(Reply("Let me wait.", call=("wait", {}))))
    run = nbagent.start(agent, "wait", display=False)
    wait_until(lambda: calls_named(run, "wait"))
    assert run.interrupt()
    record = run.wait(timeout=30)
    harness.close()
    holds_invariants(record)
    assert (record.status, record.stop_reason) == ("interrupted", "user")
    (call,) = [c for s in record.steps for c in s.tool_calls if c.tool == "wait"]
    assert call.status in ("cancelled", "abandoned")
    continues(agent, record)


def test_stop_after_step_lets_the_tool_finish_and_starts_no_next_step(harness):
    agent = harness.make(script(Reply("Let me wait.", call=("wait", {}))))
    run = nbagent.start(agent, "wait", display=False)
    wait_until(lambda: calls_named(run, "wait"))
    assert run.interrupt("after_step")
    harness.gate.set()
    record = run.wait(timeout=30)
    holds_invariants(record)
    assert (record.status, record.stop_reason) == ("interrupted", "user_after_step"), [
        (s.number, s.kind, [c.tool for c in s.tool_calls], s.model_output) for s in record.steps
    ]
    (call,) = [c for s in record.steps for c in s.tool_calls if c.tool == "wait"]
    assert (call.status, call.result) == ("ok", "opened")
    assert not any("continued" in s.model_output for s in record.steps)
    continues(agent, record)


def test_a_tool_that_raises_is_a_failed_call_and_the_run_ends_as_its_framework_says(harness):
    """A framework that shows the model the failure goes on; one that raises ends ``"error"``."""
    agent = harness.make(script(Reply("Trying.", call=("boom", {})), Reply("It failed, so: recovered")))
    record = nbagent.run(agent, "try", display=False)
    holds_invariants(record)
    (call,) = [c for s in record.steps for c in s.tool_calls if c.tool == "boom"]
    assert call.status == "error" and "boom" in (call.error or ""), (call.status, call.result)
    if record.status == "error":
        assert "boom" in (record.error or "")
    else:
        assert record.status == "success" and "recovered" in str(record.output)
    continues(agent, record)


def test_a_step_budget_ends_the_run_limit_max_steps(harness):
    adding = Reply("Adding.", call=("add", {"a": 1, "b": 2}))
    agent = harness.make(script(adding, adding))
    record = nbagent.run(agent, "add forever", display=False, limits=nbagent.Limits(max_steps=2))
    holds_invariants(record)
    assert (record.status, record.stop_reason) == ("limit", "max_steps"), [
        (s.number, s.kind, [c.tool for c in s.tool_calls], s.model_output) for s in record.steps
    ]
    assert len(record.steps) == 2
    assert [str(c.result) for s in record.steps for c in s.tool_calls] == ["3", "3"]
    continues(agent, record)


def test_a_fork_at_step_2_sends_step_2s_request_and_makes_no_call_of_step_1_again(harness):
    first = Reply("Adding.", call=("add", {"a": 1, "b": 2}))
    agent = harness.make(script(first, Reply("More.", call=("add", {"a": 3, "b": 4})), Reply("done")))
    record = nbagent.run(agent, "add twice", display=False)
    holds_invariants(record)
    assert record.status == "success" and len(record.steps) == 3, record.error
    before = record.to_dict() if hasattr(record, "to_dict") else repr(record)
    assert len(harness.requests()) == 3 and harness.added == [(1, 2), (3, 4)]
    fork = nbagent.fork(record, at_step=2, display=False).wait(timeout=30)  # the original's agent
    assert fork.status == "success" and fork.output, fork.error
    assert (fork.forked_from_run_id, fork.forked_at_step) == (record.run_id, 2)
    assert [s.number for s in fork.steps] == [2]
    assert not [c for c in fork.steps[0].tool_calls if c.tool == "add"]
    # one model call (step 2 again, answered "continued and done"), no tool call of step 1 again
    requests = harness.requests()
    assert len(requests) == 4 and harness.added == [(1, 2), (3, 4)]
    assert requests[3] == requests[1]
    assert requests[3] != requests[2]  # the comparison can tell one request from another
    # The original is as it was: its record, and its history (a second fork sends the same).
    assert (record.to_dict() if hasattr(record, "to_dict") else repr(record)) == before
    again = nbagent.fork(record, at_step=2, display=False).wait(timeout=30)
    assert again.status == "success" and harness.requests()[4] == requests[1]


def test_a_call_budget_ends_the_run_before_the_call_over_it_runs(harness):
    adding = Reply("Adding.", call=("add", {"a": 1, "b": 2}))
    agent = harness.make(script(adding, adding))
    record = nbagent.run(agent, "add twice", display=False, limits=nbagent.Limits(max_tool_calls=1))
    holds_invariants(record)
    assert (record.status, record.stop_reason) == ("limit", "max_tool_calls"), [
        (s.number, s.kind, [(c.tool, c.status) for c in s.tool_calls]) for s in record.steps
    ]
    assert harness.added == [(1, 2)], "the call over the budget ran"
    continues(agent, record)


def test_approve_holds_a_call_for_a_person_or_is_refused_at_start(harness):
    """A source that can hold a call waits for the decision (here from code, as a click does);
    one that cannot refuses ``approve=`` before anything runs, saying what its framework offers."""
    agent = harness.make(script(Reply("Adding.", call=("add", {"a": 1, "b": 2})), Reply("It is 3")))
    if not as_source(agent).supports_approvals:
        with pytest.raises(TypeError, match="approve="):
            nbagent.start(agent, "add", display=False, approve={"add"})
        assert harness.added == []
        return
    run = nbagent.start(agent, "add", display=False, approve={"add"}, approval_timeout_s=60)
    wait_until(lambda: run.pending_approvals, timeout=30)
    assert harness.added == [], "the call ran before its decision"
    [pending] = run.pending_approvals
    assert pending.tool == "add" and pending.approve()
    record = run.wait(timeout=30)
    holds_invariants(record)
    assert record.status == "success", (record.status, record.error)
    (call,) = [c for s in record.steps for c in s.tool_calls if c.tool == "add"]
    assert (call.status, call.approval, str(call.result)) == ("ok", "approved", "3")
    assert harness.added == [(1, 2)]
    continues(agent, record)


def test_with_no_view_and_no_approver_a_call_its_framework_holds_is_handed_back(harness):
    """Where no one can approve (no view, no ``approve=``), the framework's own contract holds: the
    run ends as its plain run does, the held call ``deferred`` (not run), never waiting for a
    person who cannot see it."""
    agent = harness.make_gated(script(Reply("Adding.", call=("add", {"a": 1, "b": 2})), Reply("It is 3")))
    if agent is None:
        pytest.skip(f"{harness.framework} agents hold no call for approval by their framework's own means")
    record = nbagent.start(agent, "add", display=False).wait(timeout=30)
    holds_invariants(record)
    assert record.status == "success", (record.status, record.error)
    assert [(c.tool, c.status) for c in record.tool_calls] == [("add", "deferred")]
    assert harness.added == [], "a call held for approval ran"


def test_a_model_that_raises_ends_the_run_error_with_its_text_and_the_agent_goes_on(harness):
    agent = harness.make(script(Reply("Adding.", call=("add", {"a": 1, "b": 2})), Reply(fail="model down")))
    record = nbagent.run(agent, "add", display=False)
    holds_invariants(record)
    assert record.status == "error" and "model down" in (record.error or ""), (record.status, record.error)
    assert record.error_type
    assert [str(c.result) for s in record.steps for c in s.tool_calls] == ["3"], "the finished step is lost"
    continues(agent, record)


def test_a_time_budget_cuts_the_call_in_flight_and_ends_the_run_limit(harness):
    agent = harness.make(script(Reply("Let me wait.", call=("wait", {}))))
    limits = nbagent.Limits(max_seconds=0.5)
    record = nbagent.start(agent, "wait", display=False, limits=limits).wait(timeout=30)
    harness.close()
    holds_invariants(record)
    assert (record.status, record.stop_reason) == ("limit", "max_seconds")
    (call,) = [c for s in record.steps for c in s.tool_calls if c.tool == "wait"]
    assert call.status in ("cancelled", "abandoned") and call.result != "opened"
    continues(agent, record)


def test_a_credential_in_a_tool_error_is_in_no_copy_of_the_run(harness, tmp_path):
    from nbagent.analytics.store import RunStore
    from nbagent.explore import to_html

    agent = harness.make(script(Reply("Trying.", call=("boom", {})), Reply("It failed, so: recovered")))
    store = RunStore(tmp_path / "runs.db")
    record = nbagent.run(agent, "try", display=False, store=store)
    holds_invariants(record)
    (call,) = [c for s in record.steps for c in s.tool_calls if c.tool == "boom"]
    assert "refused key ***" in (call.error or ""), call.error  # the error is there, scrubbed
    store.flush(timeout=30)
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("runs.db*")).decode("utf-8", "replace")
    page = to_html(record, tmp_path / "run.html").read_text(encoding="utf-8")
    copies = "\n".join([repr(record), repr(record.messages), str(record), stored, page])
    assert KEY[:12] not in copies
    store.close()


def test_the_frameworks_own_reading_of_a_plain_run_tells_what_the_live_record_tells(harness):
    """``records_from_*`` over the framework's own run of the same script: same end, output,
    tokens and tool calls (name, status, result) as nbagent's record of the run."""
    replies = [
        Reply("Adding.", call=("add", {"a": 1, "b": 2})),
        Reply("More.", call=("add", {"a": 3, "b": 4})),
        Reply("The sums are 3 and 7"),
    ]
    plain = harness.plain_records(list(replies), "add twice")
    if plain is None:
        pytest.skip(f"the {harness.framework} source has no run of its own: its record is its result")

    def seen(record: RunRecord) -> tuple[Any, ...]:
        calls = [[(c.tool, c.status, str(c.result)) for c in s.tool_calls] for s in record.steps]
        return record.status, str(record.output), record.input_tokens, record.output_tokens, calls

    live = nbagent.run(harness.make(list(replies)), "add twice", display=False)
    holds_invariants(live)
    holds_invariants(plain[-1])
    assert seen(plain[-1]) == seen(live)
    assert seen(live)[4][:2] == [[("add", "ok", "3")], [("add", "ok", "7")]]


@pytest.mark.parametrize("budget", ["max_tokens", "max_output_tokens"])
def test_a_token_budget_ends_the_run_limit_in_the_step_that_crossed_it(harness, budget):
    """``max_tokens=1`` is crossed by the first request's prompt (an estimate before it is sent),
    ``max_output_tokens=1`` by the reply's first streamed words: either way the step's call never
    runs and the step keeps the tokens counted against the budget (the reply's reported usage when
    it came whole, else the estimate the budget was checked against)."""
    adding = Reply("Adding it up now.", call=("add", {"a": 1, "b": 2}))
    agent = harness.make(script(adding, adding, adding))
    limits = nbagent.Limits(**{budget: 1})
    record = nbagent.run(agent, "add forever", display=False, limits=limits)
    holds_invariants(record)
    assert (record.status, record.stop_reason) == ("limit", budget), [
        (s.number, s.input_tokens, s.output_tokens, [c.tool for c in s.tool_calls]) for s in record.steps
    ]
    (step,) = record.steps
    assert step.usage_source == "reported" or (step.interrupted and step.usage_source == "estimated")
    used = record.output_tokens if budget == "max_output_tokens" else record.total_tokens
    assert (used or 0) > 1, (record.input_tokens, record.output_tokens)
    assert harness.added == [], "the call of the step over the budget ran"
    continues(agent, record)
