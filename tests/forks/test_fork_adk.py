"""``nbagent.fork`` of an ADK run: a new session holding the original's events up to the step."""

from __future__ import annotations

import asyncio

import pytest
from fork_support import fresh_process

pytestmark = pytest.mark.needs("adk")

from adk_fakes import Turn  # noqa: E402
from fork_adk_agents import five_steps, make_agent, sent  # noqa: E402

import nbagent  # noqa: E402
from nbagent.forks.origins import kept_run  # noqa: E402

TASK = "Add 1+1, 2+2, 3+3 and 4+4."


def original(**options):
    calls = []
    agent = make_agent(five_steps(), calls)
    run = nbagent.start(agent, TASK, display=False, **options)
    record = run.wait(20)
    assert record.status == "success" and len(record.steps) == 5 and len(calls) == 4, record.error
    return agent, calls, record, run.result


def session_events(runner, result):
    async def get():
        return await runner.session_service.get_session(
            app_name=runner.app_name, user_id=result.user_id, session_id=result.session_id
        )

    return list(asyncio.run(get()).events)


def test_a_fork_at_step_3_sends_step_3s_request_and_makes_no_earlier_call():
    agent, calls, record, result = original()
    other_calls = []
    other = make_agent([Turn("forty")], other_calls)
    run = nbagent.fork(record, at_step=3, agent=other, display=False)
    fork = run.wait(20)
    assert fork.status == "success" and fork.output == "forty ", fork.error
    assert len(sent(other)) == 1 and other_calls == [] and len(sent(agent)) == 5 and len(calls) == 4
    assert sent(other)[0] == sent(agent)[2]
    assert [s.number for s in fork.steps] == [3] and (fork.forked_from_run_id, fork.forked_at_step) == (
        record.run_id,
        3,
    )
    # a session of its own; the original's is as it was
    assert run.result.session_id != result.session_id
    kept = kept_run(record.run_id).conversation
    assert fork.steps[0].fork_point == record.steps[2].fork_point and len(kept) == 10
    # ADK itself, over a session holding the same events, sends the same request and answers the same
    from google.adk.runners import InMemoryRunner

    plain = make_agent([Turn("forty")], [])
    runner = InMemoryRunner(agent=plain)

    async def plainly():
        session = await runner.session_service.create_session(app_name=runner.app_name, user_id="u")
        for event in kept[: record.steps[2].fork_point]:
            await runner.session_service.append_event(session=session, event=event.model_copy(deep=True))
        texts = []
        async for event in runner.run_async(user_id="u", session_id=session.id):
            if event.is_final_response() and event.content and event.content.parts:
                texts.append(event.content.parts[0].text)
        return texts

    assert asyncio.run(plainly()) == ["forty "] and sent(plain) == sent(other)


def test_edits_are_in_step_3s_request():
    agent, _calls, record, _result = original()
    step2 = record.steps[1].tool_calls[0].call_id
    other = make_agent([Turn("ok")], [])
    nbagent.fork(record, 3, agent=other, tool_results={step2: "broken"}, message="Check the units.",
                 display=False).wait(20)  # fmt: skip
    (request,) = sent(other)
    expected = sent(agent)[2]
    assert request[:-2] == expected[:-1]
    assert expected[-1]["parts"][0]["function_response"]["response"] == {"result": 4}
    assert request[-2]["parts"][0]["function_response"]["response"] == {"result": "broken"}
    assert request[-1] == {"role": "user", "parts": [{"text": "Check the units."}]}


def test_a_stored_run_forks_in_a_fresh_process_with_agent(tmp_path):
    path = tmp_path / "runs.db"
    agent, calls, record, _result = original(store=str(path))
    out = fresh_process(f"""
import json, nbagent
from adk_fakes import Turn
from fork_adk_agents import make_agent, sent
calls = []
other = make_agent([Turn("forty")], calls)
try:
    nbagent.fork({record.run_id!r}, 3, store={str(path)!r}, display=False)
except nbagent.errors.ForkError as exc:
    refused = str(exc)
fork = nbagent.fork({record.run_id!r}, 3, agent=other, store={str(path)!r}, display=False).wait(20)
print(json.dumps({{"refused": refused, "status": fork.status, "output": fork.output, "calls": calls,
                   "sent": sent(other)}}))
""")
    assert "pass agent=" in out["refused"]
    assert out["status"] == "success" and out["output"] == "forty " and out["calls"] == []
    assert out["sent"] == [sent(agent)[2]] and len(calls) == 4


def test_a_native_agent_is_refused_for_an_adk_run():
    _agent, _calls, record, _result = original()
    with pytest.raises(nbagent.errors.ForkError, match="ran on adk: agent= must be an agent of adk"):
        nbagent.fork(record, 3, agent=nbagent.demo_agent(), display=False)
