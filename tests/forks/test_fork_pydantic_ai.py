"""``nbagent.fork`` of a pydantic-ai run: the prefix goes in as ``message_history``."""

from __future__ import annotations

import asyncio

import pytest
from fork_support import fresh_process

pytestmark = pytest.mark.needs("pydantic-ai")

from fork_pydantic_ai_agents import Scripted, make_agent, same  # noqa: E402

import nbagent  # noqa: E402
from nbagent.forks.origins import kept_run  # noqa: E402


def original(**options):
    script, calls = Scripted(), []
    agent = make_agent(script, calls)
    record = nbagent.run(agent, "Add 1+1, 2+2, 3+3 and 4+4.", display=False, **options)
    assert record.status == "success" and len(record.steps) == 5 and len(calls) == 4
    return agent, script, calls, record


def test_a_fork_at_step_3_sends_step_3s_request_and_makes_no_earlier_call():
    _agent, script, calls, record = original()
    other, other_calls = Scripted("forty", calls=0), []
    fork = nbagent.fork(record, at_step=3, agent=make_agent(other, other_calls), display=False).wait(20)
    assert len(other.requests) == 1 and other_calls == [] and len(script.requests) == 5 and len(calls) == 4
    assert same(other.requests[0]) == same(script.requests[2])
    assert fork.status == "success" and fork.output == "forty" and [s.number for s in fork.steps] == [3]
    # pydantic-ai itself, handed the same prefix, sends the same request.
    plain = Scripted("plain", calls=0)
    prefix = nbagent.fork(record, 3, agent=make_agent(Scripted("x", 0), []), display=False)
    prefix.wait(20)
    history = prefix.fork.input[1]
    asyncio.run(make_agent(plain, []).run(None, message_history=history))
    assert same(plain.requests[0]) == same(other.requests[0])


def test_edits_are_in_step_3s_request():
    _agent, script, _calls, record = original()
    other = Scripted("ok", calls=0)
    nbagent.fork(record, at_step=3, agent=make_agent(other, []), tool_results={"2:c2": "broken"},
                 message="Check the units.", display=False).wait(20)  # fmt: skip
    sent = other.requests[0]
    expected = same(script.requests[2])
    assert same(sent)[:-1] == expected[:-1]
    parts = sent[-1].parts
    assert [p.part_kind for p in parts] == ["tool-return", "user-prompt"]
    assert (
        parts[0].content == "broken"
        and parts[0].tool_call_id == "c2"
        and parts[1].content == "Check the units."
    )


def test_past_the_last_step_the_message_is_the_next_prompt_and_a_fork_of_a_fork_works():
    _agent, _script, _calls, record = original()
    other = Scripted("forty", calls=0)
    fork = nbagent.fork(record, 6, agent=make_agent(other, []), message="Double it.", display=False).wait(20)
    whole = kept_run(record.run_id).conversation  # the original's history as pydantic-ai kept it
    assert [m.kind for m in whole[-2:]] == ["request", "response"] and len(whole) == 10
    assert same(other.requests[0][:-1]) == same(whole)
    assert other.requests[0][-1].parts[-1].content == "Double it." and fork.steps[0].number == 6
    again = Scripted("eighty", calls=0)
    nbagent.fork(fork, 6, agent=make_agent(again, []), display=False).wait(20)
    assert same(again.requests[0]) == same(other.requests[0])


def test_a_stored_run_forks_in_a_fresh_process_with_agent(tmp_path):
    path = tmp_path / "runs.db"
    _agent, script, calls, record = original(store=str(path))
    out = fresh_process(f"""
import json, nbagent
from fork_pydantic_ai_agents import Scripted, make_agent, same
other, calls = Scripted("forty", calls=0), []
try:
    nbagent.fork({record.run_id!r}, 3, store={str(path)!r}, display=False)
except nbagent.errors.ForkError as exc:
    refused = str(exc)
fork = nbagent.fork({record.run_id!r}, 3, agent=make_agent(other, calls), store={str(path)!r},
                    display=False).wait(20)
from pydantic_ai.messages import ModelMessagesTypeAdapter
print(json.dumps({{"refused": refused, "status": fork.status, "calls": calls, "requests": len(other.requests),
    "sent": ModelMessagesTypeAdapter.dump_python(same(other.requests[0]), mode="json")}}))
""")
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    assert "pass agent=" in out["refused"]
    assert out["status"] == "success" and out["calls"] == [] and out["requests"] == 1
    assert out["sent"] == ModelMessagesTypeAdapter.dump_python(same(script.requests[2]), mode="json")
    assert len(calls) == 4 and len(script.requests) == 5


def test_a_native_agent_is_refused_for_a_pydantic_ai_run():
    _agent, _script, _calls, record = original()
    with pytest.raises(
        nbagent.errors.ForkError, match="ran on pydantic-ai: agent= must be an agent of pydantic-ai"
    ):
        nbagent.fork(record, 3, agent=nbagent.demo_agent(), display=False)
