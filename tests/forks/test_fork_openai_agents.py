"""``nbagent.fork`` of an OpenAI Agents SDK run: the prefix goes in as the run's input items."""

from __future__ import annotations

import asyncio

import pytest
from fork_support import fresh_process

pytestmark = pytest.mark.needs("openai-agents")

from agents import Runner  # noqa: E402
from agents.testing import ScriptedModel  # noqa: E402
from fork_openai_agents_agents import answer, five_steps, make_agent  # noqa: E402

import nbagent  # noqa: E402


def original(**options):
    model, calls = ScriptedModel(five_steps()), []
    agent = make_agent(model, calls)
    record = nbagent.run(agent, "Add 1+1, 2+2, 3+3 and 4+4.", display=False, **options)
    assert record.status == "success" and len(record.steps) == 5 and len(calls) == 4
    return agent, model, calls, record


def test_a_fork_at_step_3_sends_step_3s_items_and_makes_no_earlier_call():
    _agent, model, calls, record = original()
    other, other_calls = ScriptedModel(answer("forty")), []
    fork = nbagent.fork(record, at_step=3, agent=make_agent(other, other_calls), display=False).wait(20)
    assert len(other.calls) == 1 and other_calls == [] and len(model.calls) == 5 and len(calls) == 4
    assert other.calls[0].input == model.calls[2].input
    assert other.calls[0].system_instructions == model.calls[2].system_instructions
    assert fork.status == "success" and fork.output == "forty" and [s.number for s in fork.steps] == [3]
    # The SDK itself, handed the same items, sends the same request.
    plain = ScriptedModel(answer("plain"))
    asyncio.run(Runner.run(make_agent(plain, []), model.calls[2].input))
    assert plain.calls[0].input == other.calls[0].input


def test_edits_are_in_step_3s_items():
    _agent, model, _calls, record = original()
    other = ScriptedModel(answer("ok"))
    nbagent.fork(record, at_step=3, agent=make_agent(other, []), tool_results={"2:c2": "broken"},
                 message="Check the units.", display=False).wait(20)  # fmt: skip
    sent, before = other.calls[0].input, model.calls[2].input
    assert len(sent) == len(before) + 1 and sent[-1] == {"role": "user", "content": "Check the units."}
    changed = [(a, b) for a, b in zip(sent[:-1], before, strict=True) if a != b]
    assert len(changed) == 1 and changed[0][0]["call_id"] == "c2" and changed[0][0]["output"] == "broken"


def test_a_fork_of_a_fork_and_past_the_last_step():
    _agent, _model, _calls, record = original()
    first = ScriptedModel(answer("forty"))
    fork = nbagent.fork(record, 6, agent=make_agent(first, []), message="Double it.", display=False).wait(20)
    assert first.calls[0].input[-1] == {"role": "user", "content": "Double it."}
    assert fork.steps[0].number == 6
    again = ScriptedModel(answer("eighty"))
    nbagent.fork(fork, 6, agent=make_agent(again, []), display=False).wait(20)
    assert again.calls[0].input == first.calls[0].input


def test_a_stored_run_forks_in_a_fresh_process_with_agent(tmp_path):
    path = tmp_path / "runs.db"
    _agent, model, calls, record = original(store=str(path))
    out = fresh_process(f"""
import json, nbagent
from agents.testing import ScriptedModel
from fork_openai_agents_agents import answer, make_agent
other, calls = ScriptedModel(answer("forty")), []
fork = nbagent.fork({record.run_id!r}, 3, agent=make_agent(other, calls), store={str(path)!r},
                    display=False).wait(20)
print(json.dumps({{"status": fork.status, "calls": calls, "requests": len(other.calls),
                   "sent": other.calls[0].input}}, default=str))
""")
    assert out["status"] == "success" and out["calls"] == [] and out["requests"] == 1
    assert out["sent"] == model.calls[2].input
    assert len(calls) == 4 and len(model.calls) == 5
