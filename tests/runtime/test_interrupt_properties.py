"""Property: interrupting at random moments never breaks a run's invariants."""

from __future__ import annotations

import asyncio
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import run_threads, wait_until

import nbagent
from nbagent import events as ev
from nbagent.models import Reply, ScriptedModel, ToolCall


@nbagent.tool
def sync_work(ms: int) -> int:
    """Sleeps on its worker thread, checking for a Stop."""
    end = time.monotonic() + ms / 1000
    while time.monotonic() < end:
        nbagent.check_interrupt()
        time.sleep(0.001)
    return ms


@nbagent.tool
async def async_work(ms: int) -> int:
    """Sleeps on the loop."""
    await asyncio.sleep(ms / 1000)
    return ms


@nbagent.tool
def failing(ms: int) -> int:
    """Always raises."""
    raise ValueError("planned failure")


tool_calls = st.lists(
    st.builds(
        ToolCall,
        st.sampled_from(["sync_work", "async_work", "failing", "missing_tool"]),
        st.fixed_dictionaries({"ms": st.integers(0, 15)}),
    ),
    min_size=1,
    max_size=3,
)
turns = st.lists(st.builds(Reply, st.text("ab ", max_size=30), tool_calls), max_size=4).flatmap(
    lambda steps: st.just([*steps, "final answer"])
)


def loop_tasks() -> int:
    async def count() -> int:
        return len(asyncio.all_tasks()) - 1

    return asyncio.run_coroutine_threadsafe(count(), nbagent.runtime.loop.runner_loop()).result(5)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    script=turns,
    tokens_per_s=st.floats(500, 20000),
    delay_s=st.one_of(st.none(), st.floats(0, 0.06)),
    mode=st.sampled_from(["now", "after_step"]),
    max_steps=st.integers(1, 6),
)
def test_random_interrupts_keep_the_invariants(script, tokens_per_s, delay_s, mode, max_steps):
    events: list[ev.RunEvent] = []
    model = ScriptedModel(script, tokens_per_s=tokens_per_s, first_token_s=0.0)
    agent = nbagent.Agent(model, tools=[sync_work, async_work, failing], max_steps=max_steps)
    run = nbagent.start(agent, "task", sinks=[events.append])
    accepted = None
    if delay_s is not None:
        time.sleep(delay_s)  # the random moment under test, not a wait for a condition
        accepted = run.interrupt(mode)
    record = run.wait(timeout=30)

    finished = [e for e in events if isinstance(e, ev.RunFinished)]
    assert len(finished) == 1 and finished[0].status == record.status
    assert record.status in {"success", "interrupted", "max_steps"}
    if accepted and mode == "now":
        assert record.status == "interrupted"
    if record.status == "success":
        assert record.output == "final answer"
    started = [e.step for e in events if isinstance(e, ev.StepStarted)]
    assert [s.number for s in record.steps] == started
    assert all(s.end_s is not None and s.ended_at is not None for s in record.steps)
    assert sum(s.interrupted for s in record.steps) <= 1
    assert all(c.status in {"ok", "error", "cancelled", "abandoned"} for c in record.tool_calls)
    known_in = [s.input_tokens for s in record.steps if s.input_tokens is not None]
    assert record.input_tokens == (sum(known_in) if known_in else None)
    known_out = [s.output_tokens for s in record.steps if s.output_tokens is not None]
    assert record.output_tokens == (sum(known_out) if known_out else None)
    assert record.usage_complete == (len(known_in) == len(record.steps) == len(known_out))
    assert nbagent.runtime.handle.live_runs() == []
    wait_until(lambda: not run_threads())
    assert loop_tasks() == 0
