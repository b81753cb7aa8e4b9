"""``nbagent.fork`` of a smolagents run: the memory steps up to the step, handed to smolagents."""

from __future__ import annotations

import copy
import dataclasses

import pytest
from fork_support import fresh_process

pytestmark = pytest.mark.needs("smolagents")

from fork_smolagents_agents import Recording, as_json, five_steps, make_agent  # noqa: E402
from smolagents_fakes import Turn, answer  # noqa: E402

import nbagent  # noqa: E402
from nbagent.forks.origins import kept_run  # noqa: E402

TASK = "Add 1+1, 2+2, 3+3 and 4+4."


def original(**options):
    model, calls = Recording(five_steps()), []
    agent = make_agent(model, calls)
    record = nbagent.run(agent, TASK, display=False, **options)
    assert record.status == "success" and len(record.steps) == 5 and len(calls) == 4, record.error
    return agent, model, calls, record


def test_a_fork_at_step_3_sends_step_3s_request_and_makes_no_earlier_call():
    agent, model, calls, record = original()
    kept = list(kept_run(record.run_id).conversation.steps)
    other, other_calls = Recording([answer("forty")]), []
    fork = nbagent.fork(record, at_step=3, agent=make_agent(other, other_calls), display=False).wait(20)
    assert fork.status == "success" and fork.output == "forty", fork.error
    assert len(other.requests) == 1 and other_calls == [] and len(model.requests) == 5 and len(calls) == 4
    assert other.requests[0] == model.requests[2]
    assert [s.number for s in fork.steps] == [3] and fork.steps[0].fork_point == 3
    assert (fork.forked_from_run_id, fork.forked_at_step) == (record.run_id, 3)
    # The original's memory is as it was: the fork's memory is a list of its own.
    assert kept_run(record.run_id).conversation.steps == kept and len(agent.memory.steps) == 6


def test_the_default_agent_forks_on_its_own_memory_and_the_original_stays():
    agent, model, calls, record = original()
    kept = kept_run(record.run_id).conversation.steps
    before = list(kept)
    model.turns.append(answer("again"))
    fork = nbagent.fork(record, 2, display=False).wait(20)
    assert fork.status == "success" and fork.output == "again" and len(calls) == 4
    assert len(model.requests) == 6 and model.requests[5] == model.requests[1]
    assert kept == before and agent.memory.steps is not kept and len(agent.memory.steps) == 3


def test_edits_are_in_step_3s_request_as_plain_smolagents_sends_them():
    _agent, model, _calls, record = original()
    other = Recording([answer("ok")])
    forked = nbagent.fork(record, at_step=3, agent=make_agent(other, []), tool_results={"2:call_2": "broken"},
                          message="Check the units.", display=False).wait(20)  # fmt: skip
    sent, expected = other.requests[0], model.requests[2]
    assert sent[:-2] == expected[:-1] and sent[-2]["content"][0]["text"] == "Observation:\nbroken"
    assert expected[-1]["content"][0]["text"] == "Observation:\n4"
    assert sent[-1] == {"role": "user", "content": [{"type": "text", "text": "New task:\nCheck the units."}],
                        "tool_calls": None, "raw": None, "token_usage": None}  # fmt: skip
    # smolagents driven plainly: the original's memory up to step 3, step 2's observation
    # replaced, then run(message, reset=False): the same request, the same output.
    plain_model = Recording([answer("ok")])
    plain = make_agent(plain_model, [])
    prefix = copy.copy(kept_run(record.run_id).conversation.steps[:3])
    prefix[2] = dataclasses.replace(prefix[2], observations="broken")
    plain.memory.steps = prefix
    output = plain.run("Check the units.", reset=False)
    assert plain_model.requests == other.requests and output == forked.output == "ok"


def test_one_of_several_results_of_a_step_is_replaced_in_their_joined_observation():
    model, calls = Recording([Turn(tool_calls=[("add", {"a": 1, "b": 1}), ("add", {"a": 2, "b": 2})]),
                              answer("6")]), []  # fmt: skip
    record = nbagent.run(make_agent(model, calls), "Add.", display=False)
    assert record.status == "success" and [c.call_id for c in record.steps[0].tool_calls] == [
        "1:call_1",
        "1:call_2",
    ]
    assert model.requests[1][-1]["content"][0]["text"] == "Observation:\n2\n4"
    other = Recording([answer("x")])
    nbagent.fork(record, 2, agent=make_agent(other, []), tool_results={"1:call_2": 40}, display=False).wait(
        20
    )
    assert other.requests[0][:-1] == model.requests[1][:-1]
    assert other.requests[0][-1]["content"][0]["text"] == "Observation:\n2\n40"


def test_a_stored_run_forks_in_a_fresh_process_with_agent(tmp_path):
    path = tmp_path / "runs.db"
    _agent, model, calls, record = original(store=str(path))
    out = fresh_process(f"""
import json, nbagent
from fork_smolagents_agents import Recording, make_agent
from smolagents_fakes import answer
other, calls = Recording([answer("forty")]), []
try:
    nbagent.fork({record.run_id!r}, 3, store={str(path)!r}, display=False)
except nbagent.errors.ForkError as exc:
    refused = str(exc)
fork = nbagent.fork({record.run_id!r}, 3, agent=make_agent(other, calls), store={str(path)!r},
                    tool_results={{"2:call_2": "broken"}}, display=False).wait(20)
print(json.dumps({{"refused": refused, "status": fork.status, "output": fork.output, "calls": calls,
                   "requests": other.requests}}))
""")
    assert "pass agent=" in out["refused"]
    assert out["status"] == "success" and out["output"] == "forty" and out["calls"] == []
    (sent,) = out["requests"]
    assert sent[:-1] == model.requests[2][:-1] and sent[-1]["content"][0]["text"] == "Observation:\nbroken"
    assert len(calls) == 4 and len(model.requests) == 5


def test_a_native_agent_is_refused_for_a_smolagents_run():
    _agent, _model, _calls, record = original()
    with pytest.raises(
        nbagent.errors.ForkError, match="ran on smolagents: agent= must be an agent of smolagents"
    ):
        nbagent.fork(record, 3, agent=nbagent.demo_agent(), display=False)


def test_a_stored_history_round_trips_to_the_same_requests():
    """Every memory step kind smolagents makes requests of comes back from the record's JSON."""
    from nbagent.adapters.smolagents.fork import _step_from_json, _step_json

    _agent, _model, _calls, record = original()
    steps = kept_run(record.run_id).conversation.steps
    again = [_step_from_json(_step_json(s), "run") for s in steps]
    assert [as_json(s.to_messages()) for s in again] == [as_json(s.to_messages()) for s in steps]
