"""``nbagent.fork`` on the native ``Agent`` and the shared part every source gets: what a fork
sends, what it does not make again, its record, its refusals, and ``compare`` of the two paths."""

from __future__ import annotations

import asyncio
import dataclasses
import gc

import pytest
from fork_support import Counter, Spy, five_steps, fresh_process
from support import wait_until

import nbagent
from nbagent.errors import ForkError
from nbagent.models import ScriptedModel
from nbagent.runtime.source import Source


@dataclasses.dataclass
class Original:
    """A 5-step run of the native agent, and what made it."""

    agent: nbagent.Agent
    model: Spy
    tools: Counter
    record: nbagent.RunRecord


def original(**options) -> Original:
    tools = Counter()
    model = Spy(five_steps())
    agent = nbagent.Agent(model, tools=[tools.add], instructions="Add carefully.")
    record = nbagent.run(agent, "Add 1+1, 2+2, 3+3 and 4+4.", display=False, **options)
    assert record.status == "success" and len(record.steps) == 5
    return Original(agent, model, tools, record)


def test_a_fork_at_step_3_makes_no_call_of_steps_1_and_2_and_sends_step_3s_request():
    made = original()
    model, record = made.model, made.record
    step3_request = model.requests[2]
    other = Spy(["forty"])
    counter = Counter()
    forked_agent = nbagent.Agent(other, tools=[counter.add])
    fork = nbagent.fork(record, at_step=3, agent=forked_agent, display=False).wait(timeout=20)
    assert other.requests[0] == step3_request  # message for message
    assert len(other.requests) == 1 and counter.calls == [] and len(model.requests) == 5
    assert fork.status == "success" and fork.output == "forty"
    assert fork.forked_from_run_id == record.run_id and fork.forked_at_step == 3
    assert [s.number for s in fork.steps] == [3]
    # Its totals are its own step's only: the prefix is the original's.
    assert fork.input_tokens == fork.steps[0].input_tokens
    assert fork.input_tokens < record.input_tokens


def test_message_and_tool_results_edit_the_request_and_nothing_else():
    made = original()
    model, record = made.model, made.record
    step3_request = model.requests[2]
    other = Spy(["done"])
    fork = nbagent.fork(
        record, at_step=3, agent=nbagent.Agent(other, tools=[Counter().add]),
        tool_results={"c2": "the adder is broken"}, message="Check the units.", display=False,
    ).wait(timeout=20)  # fmt: skip
    sent = other.requests[0]
    expected = [dict(m) for m in step3_request]
    (edited,) = [m for m in expected if m.get("tool_call_id") == "c2"]
    edited["content"] = "the adder is broken"
    assert sent == [*expected, {"role": "user", "content": "Check the units."}]
    assert fork.status == "success"


def test_the_default_agent_is_the_originals_and_a_run_id_finds_the_run():
    made = original()
    model, tools, record = made.model, made.tools, made.record
    model._turns.append("again")  # the same agent's model plays the fork's one step
    fork = nbagent.fork(record.run_id, at_step=5, display=False).wait(timeout=20)
    assert model.requests[5] == model.requests[4] and tools.calls == [(n, n) for n in range(1, 5)]
    assert fork.output == "again" and fork.agent == record.agent


def test_at_step_past_the_last_goes_on_after_it_with_a_message():
    made = original()
    record = made.record
    other = Spy(["then 40"])
    fork = nbagent.fork(
        record, at_step=6, agent=nbagent.Agent(other), message="Double it.", display=False
    ).wait(timeout=20)
    assert other.requests[0] == [*record.fork_data["conversation"], {"role": "user", "content": "Double it."}]
    assert [s.number for s in fork.steps] == [6]


def test_at_step_1_with_a_message_is_a_new_turn_on_the_same_task():
    made = original()
    model, record = made.model, made.record
    other = Spy(["ok"])
    nbagent.fork(record, at_step=1, agent=nbagent.Agent(other), message="In French.", display=False).wait(20)
    assert other.requests[0] == [*model.requests[0], {"role": "user", "content": "In French."}]


def test_a_fork_of_a_fork_starts_from_the_forks_own_conversation():
    made = original()
    model, record = made.model, made.record
    first = Spy([[nbagent.models.ToolCall("add", {"a": 9, "b": 9}, "f3")], "eighteen"])
    counter = Counter()
    fork = nbagent.fork(record, at_step=3, agent=nbagent.Agent(first, tools=[counter.add]),
                        message="Use nines.", display=False).wait(20)  # fmt: skip
    assert [s.number for s in fork.steps] == [3, 4]
    second = Spy(["changed my mind"])
    again = nbagent.fork(fork, at_step=4, agent=nbagent.Agent(second, tools=[counter.add]),
                         tool_results={"f3": "19"}, display=False).wait(20)  # fmt: skip
    expected = [dict(m) for m in first.requests[1]]
    (edited,) = [m for m in expected if m.get("tool_call_id") == "f3"]
    edited["content"] = "19"
    assert second.requests[0] == expected and counter.calls == [(9, 9)]
    assert again.forked_from_run_id == fork.run_id and again.forked_at_step == 4
    # Before the fork's own first step, a fork of a fork is a fork of its original.
    third = Spy(["x"])
    earlier = nbagent.fork(fork, at_step=2, agent=nbagent.Agent(third), display=False).wait(20)
    assert earlier.forked_from_run_id == record.run_id and third.requests[0] == model.requests[1]


def test_a_fork_of_an_interrupted_run_leaves_the_cut_reply_out():
    model = Spy([*five_steps()[:2], "a long answer that is cut " * 50], tokens_per_s=200.0)
    counter = Counter()
    agent = nbagent.Agent(model, tools=[counter.add])
    run = nbagent.start(agent, "go", display=False)
    wait_until(lambda: len(run.record.steps) == 3 and run.live_text(3))
    run.interrupt()
    record = run.wait(timeout=20)
    assert record.status == "interrupted" and record.steps[-1].interrupted
    assert any("[interrupted]" in str(m.get("content")) for m in record.fork_data["conversation"])
    other = Spy(["short"])
    fork = nbagent.fork(record, at_step=3, agent=nbagent.Agent(other), display=False).wait(20)
    assert other.requests[0] == model.requests[2] and fork.status == "success"
    with pytest.raises(ForkError, match=r"step 3 .* was cut by a Stop.*fork at step 3"):
        nbagent.fork(record, at_step=4, agent=nbagent.Agent(Spy(["x"])), display=False)


def test_a_running_run_forks_at_a_step_that_ended_and_refuses_the_running_one():
    gate = asyncio.Event()
    counter = Counter()

    async def add(a: int, b: int) -> int:
        """Add; the third call waits for ever."""
        if a == 3:
            await gate.wait()
        return counter.add(a, b)

    model = Spy(five_steps())
    run = nbagent.start(nbagent.Agent(model, tools=[add]), "go", display=False)
    try:
        wait_until(lambda: len(run.record.steps) == 3 and run.record.steps[2].tool_calls)
        with pytest.raises(ForkError, match="still running step 3"):
            nbagent.fork(run, at_step=3, agent=nbagent.Agent(Spy(["x"])), display=False)
        with pytest.raises(ForkError, match="still running"):
            nbagent.fork(run, at_step=4, agent=nbagent.Agent(Spy(["x"])), display=False)
        other = Spy(["two"])
        fork = nbagent.fork(run, at_step=2, agent=nbagent.Agent(other), display=False).wait(20)
        assert other.requests[0] == model.requests[1] and fork.status == "success"
    finally:
        run.interrupt()
        run.wait(timeout=20)


class Plain(Source):
    """A source that implements no fork hook."""

    async def drive(self, task, ctx, reset=True):
        ctx.start_step("final")
        ctx.conversation = [task]
        ctx.finish_step(model_output=task, kind="final")
        return task


def refusals(tmp_path):
    """Each bad fork, as (what to call, the error's words)."""
    store = nbagent.RunStore(tmp_path / "runs.db")
    made = original(store=store)
    model, record = made.model, made.record
    other = lambda: nbagent.Agent(Spy(["x"]))  # noqa: E731
    plain = nbagent.run(Plain(), "hi", display=False, store=store)
    bare = dataclasses.replace(record, run_id="no-history", fork_data=None)
    store.add(bare)
    return store, model, record, [
        (lambda: nbagent.fork("nope", 2, agent=other(), store=store), "no run 'nope'"),
        (lambda: nbagent.fork(record, 0, agent=other(), store=store), "from 1 to 6 .* not 0"),
        (lambda: nbagent.fork(record, 7, agent=other(), store=store), "from 1 to 6 .* not 7"),
        (lambda: nbagent.fork(record, 3, agent=Plain(), store=store), "ran on nbagent: agent= must be"),
        (lambda: nbagent.fork(record, 3, agent=other(), tool_results={"c1": "x"}, store=store),
         "no call 'c1' in step 2 .* 'c2'"),
        (lambda: nbagent.fork(record, 1, agent=other(), tool_results={"c1": "x"}, store=store),
         "has no step 0"),
        (lambda: nbagent.fork("no-history", 2, agent=other(), store=store), "keeps no history"),
        (lambda: nbagent.fork(plain, 1, agent=Plain(), store=store),
         "cannot be forked: its source \\(Plain\\)"),
    ]  # fmt: skip


def test_each_bad_fork_is_a_clear_error_before_anything_runs_and_writes_nothing(tmp_path):
    store, model, _record, cases = refusals(tmp_path)
    stored = len(store.records())
    for call, words in cases:
        with pytest.raises(ForkError, match=words):
            call()
    assert store.flush(10) and len(store.records()) == stored and len(model.requests) == 5


def test_a_run_whose_agent_is_gone_needs_agent():
    made = original()
    record = made.record
    del made
    gc.collect()
    with pytest.raises(ForkError, match=r"agent of run .* is not in this process.*pass agent="):
        nbagent.fork(record, at_step=2, display=False)


def test_compare_shows_the_prefix_once_and_the_two_paths_with_their_deltas():
    made = original()
    record = made.record
    fork = nbagent.fork(record, at_step=3, agent=nbagent.Agent(Spy(["forty"])), display=False).wait(20)
    comparison = nbagent.compare(record, fork)
    assert comparison.at_step == 3
    assert [p.number for p in comparison.prefix] == [1, 2] and all(p.a is p.b for p in comparison.prefix)
    assert [p.number for p in comparison.steps if not p.shared] == [3, 4, 5]
    assert not any(d.startswith(("step 1", "step 2")) for d in comparison.differences)
    # The paths from step 3: the original's steps 3-5 against the fork's step 3.
    assert comparison.delta("n_steps") == 1 - 3
    mine = sum(s.input_tokens for s in record.steps[2:])
    assert comparison.delta("input_tokens") == fork.input_tokens - mine
    html = comparison._repr_html_()
    assert "steps 1–2: shared, made once" in html and html.count("<b>Step 1</b>") == 1
    frame = nbagent.explore.compare_frame([record, fork])
    steps = frame[(frame.level == "step") & (frame.run_id == fork.run_id)]
    assert steps.shared.tolist() == [True, True, False, False, False]
    assert steps[steps.shared].input_tokens_delta.isna().all()
    assert frame[(frame.level == "run") & (frame.run_id == fork.run_id)].at_step.tolist() == [3]


def test_the_fork_is_in_the_runs_frame_the_store_and_says_so_in_its_view(tmp_path):
    store = nbagent.RunStore(tmp_path / "runs.db")
    made = original(store=store)
    record = made.record
    fork = nbagent.fork(record, at_step=3, agent=nbagent.Agent(Spy(["forty"])), store=store,
                        display=False).wait(20)  # fmt: skip
    stored = nbagent.RunStore(tmp_path / "runs.db").record(fork.run_id)
    assert dataclasses.asdict(stored) == dataclasses.asdict(fork)
    assert [s.fork_point for s in stored.steps] == [s.fork_point for s in fork.steps]
    runs = store.runs().set_index("run_id")
    assert runs.loc[fork.run_id, "forked_from_run_id"] == record.run_id
    assert runs.loc[fork.run_id, "forked_at_step"] == 3
    assert f"fork of run {record.run_id} at step 3" in str(fork)
    assert "steps 1–2: that run's, not made again" in str(fork)
    from nbagent.view.html import record_html

    assert f"fork of run {record.run_id} at step 3" in record_html(fork)


def test_the_live_view_of_a_fork_says_what_it_forks(views):
    made = original()
    record = made.record
    agent = nbagent.Agent(ScriptedModel(["x"], first_token_s=0.0))
    run = nbagent.fork(record, at_step=3, agent=agent, display=True)
    wait_until(run.done)  # not run.wait(): a kernel's blocking wait warns
    (view,) = views
    assert f"fork of run {record.run_id} at step 3" in view.summary.value
    assert "steps 1–2" in view.summary.value


def test_a_stored_run_forks_in_a_fresh_process_with_agent(tmp_path):
    path = tmp_path / "runs.db"
    made = original(store=nbagent.RunStore(path))
    out = fresh_process(f"""
import json, nbagent
from fork_support import Counter, Spy
try:
    nbagent.fork({made.record.run_id!r}, 3, store={str(path)!r}, display=False)
except nbagent.errors.ForkError as exc:
    refused = str(exc)
other, counter = Spy(["forty"]), Counter()
fork = nbagent.fork({made.record.run_id!r}, 3, agent=nbagent.Agent(other, tools=[counter.add]),
                    message="Check.", store={str(path)!r}, display=False).wait(20)
print(json.dumps({{"refused": refused, "status": fork.status, "calls": counter.calls,
                   "requests": other.requests, "forked_from": fork.forked_from_run_id}}))
""")
    assert "not in this process" in out["refused"] and "pass agent=" in out["refused"]
    assert out["status"] == "success" and out["calls"] == [] and len(out["requests"]) == 1
    assert out["requests"][0] == [*made.model.requests[2], {"role": "user", "content": "Check."}]
    assert out["forked_from"] == made.record.run_id and len(made.model.requests) == 5


def test_a_source_without_fork_input_is_refused_clearly_at_the_call():
    from nbagent.runtime.source import Source

    class Plain(Source):
        """A source that implements no fork hook (every framework's source does now)."""

        async def drive(self, task, ctx, reset=True):
            ctx.start_step("final")
            ctx.finish_step(model_output="done", kind="final")
            return "done"

    agent = Plain()  # alive: the fork's default agent
    record = nbagent.run(agent, "go", display=False)
    assert record.status == "success"
    with pytest.raises(ForkError, match=r"cannot be forked: its source .* does not implement fork_input"):
        nbagent.fork(record, 1, display=False)
