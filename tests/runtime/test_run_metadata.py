"""What a record says about its run besides the steps: queueing, continuation, tags, messages."""

from __future__ import annotations

import threading

import pytest
from support import fast_model, wait_until

import nbagent
from nbagent import events as ev
from nbagent.models import ScriptedModel


def test_runs_of_one_agent_queue_and_each_clock_starts_when_its_turn_comes():
    agent = nbagent.Agent(ScriptedModel(lambda messages: "word " * 20, tokens_per_s=400, first_token_s=0))
    seen: dict[str, list[ev.RunEvent]] = {}

    def sink(event: ev.RunEvent) -> None:
        seen.setdefault(event.run_id, []).append(event)

    runs = [nbagent.start(agent, f"task {i}", sinks=[sink]) for i in range(4)]
    records = [r.wait(timeout=30) for r in runs]
    assert records[0].queued_s == 0.0
    for before, after, run in zip(records, records[1:], runs[1:], strict=False):
        queued = [e for e in seen[run.run_id] if isinstance(e, ev.RunQueued)]
        assert len(queued) == 1 and queued[0].after_run_id is not None
        assert after.queued_s > 0 and after.queued_after is None
        assert after.started_at >= before.ended_at  # its clock started when the previous run ended
        assert after.steps[0].start_s < after.queued_s  # step times count from the real start
    assert records[1].queued_after is None and seen[runs[1].run_id][1].after_run_id == runs[0].run_id


def test_a_run_shows_queued_in_its_live_record_until_its_turn():
    agent = nbagent.Agent(ScriptedModel(["word " * 5000, "second"], first_token_s=0))
    first = nbagent.start(agent, "first")
    second = nbagent.start(agent, "second")
    wait_until(lambda: second.record.queued_after == first.run_id)
    first.interrupt()
    assert second.wait(timeout=20).output == "second"


def test_a_continued_run_names_the_run_it_continues():
    agent = nbagent.Agent(fast_model(["one", "two", "three"]))
    first = nbagent.run(agent, "a")
    second = nbagent.run(agent, "b", reset=False)
    fresh = nbagent.run(agent, "c")
    assert first.continues_run_id is None and fresh.continues_run_id is None
    assert second.continues_run_id == first.run_id


def test_tags_metadata_messages_and_model_params_are_kept():
    model = fast_model(["hello"])
    model.params = {"temperature": 0}
    record = nbagent.run(
        nbagent.Agent(model, instructions="be brief"), "hi", tags=["eval", "v2"], metadata={"row": 3}
    )
    assert record.tags == ["eval", "v2"] and record.metadata == {"row": 3}
    assert record.model_params == {"temperature": 0}
    assert [m["role"] for m in record.messages] == ["system", "user", "assistant"]
    assert record.messages[-1]["content"] == "hello"
    with pytest.raises(TypeError, match="not one string"):
        nbagent.start(nbagent.Agent(fast_model(["x"])), "t", tags="eval")


def test_a_stop_is_not_an_error_and_says_who_stopped_it():
    run = nbagent.start(nbagent.Agent(ScriptedModel(["word " * 5000], first_token_s=0)), "t")
    wait_until(lambda: run.record.steps)
    run.interrupt()
    record = run.wait(timeout=20)
    assert record.status == "interrupted" and record.stop_reason == "user"
    assert record.error is None and record.error_type is None
    with pytest.raises(nbagent.AgentInterrupted):
        record.raise_for_status()


def test_stop_after_step_says_so():
    release = threading.Event()

    @nbagent.tool
    def held() -> str:
        """Returns once released."""
        release.wait(20)
        return "released"

    agent = nbagent.Agent(fast_model([[nbagent.models.ToolCall("held")], "never"]), tools=[held])
    run = nbagent.start(agent, "t")
    wait_until(lambda: run.record.tool_calls)
    run.interrupt("after_step")
    release.set()
    record = run.wait(timeout=20)
    assert record.status == "interrupted" and record.stop_reason == "user_after_step"
    assert record.tool_calls[0].status == "ok" and len(record.steps) == 1


@nbagent.tool
def _add(a: int, b: int) -> int:
    """Adds.

    Args:
        a: one.
        b: two.
    """
    return a + b


def test_a_run_handle_points_to_the_record_for_what_it_does_not_have():
    run = nbagent.start(nbagent.Agent(fast_model(["x"])), "t")
    with pytest.raises(AttributeError, match="record = await run"):
        run.output  # noqa: B018
    record = run.wait(timeout=20)
    assert repr(record).startswith(f"<RunRecord {record.run_id} success") and len(repr(record)) < 200


def test_stop_after_step_ends_a_queued_run_without_waiting_for_its_turn():
    agent = nbagent.Agent(ScriptedModel(["word " * 5000, "second", "third"], first_token_s=0))
    first = nbagent.start(agent, "first")
    second = nbagent.start(agent, "second")
    wait_until(lambda: second.record.queued_after == first.run_id)
    second.interrupt("after_step")
    record = second.wait(timeout=20)
    assert record.status == "interrupted" and record.stop_reason == "user_after_step"
    assert record.steps == [] and not first.done()
    first.interrupt()
    assert first.wait(timeout=20).status == "interrupted"
    assert nbagent.run(agent, "third", reset=False).output == "second"  # the turn was handed on
