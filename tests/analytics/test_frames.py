"""Runs, steps and tool calls as DataFrames: documented columns, real dtypes, NA for what is unknown."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest
from end_states import every_end_state
from support import fast_model, wait_until

import nbagent
from nbagent.analytics.frames import (
    RUN_COLUMNS,
    STEP_COLUMNS,
    TOOL_CALL_COLUMNS,
    json_columns,
    runs_frame,
    steps_frame,
    tool_calls_frame,
)
from nbagent.models import ScriptedModel, ToolCall
from nbagent.records import RunRecord, StepRecord, ToolCallRecord

DOCUMENTED = {
    "runs": "run_id task agent model status stop_reason started_at ended_at duration_s queued_s wait_s "
    "n_steps input_tokens output_tokens total_tokens usage_complete cost_usd output error error_type "
    "parent_run_id continues_run_id forked_from_run_id forked_at_step tags metadata model_params",
    "steps": "run_id step kind started_at ended_at duration_s input_tokens output_tokens total_tokens "
    "usage_source model_ended_at wait_s n_tool_calls interrupted error model_output",
    "tool_calls": "run_id step call_id tool arguments started_at ended_at duration_s status result error "
    "approval approval_wait_s",
}
BUILDERS = {"runs": runs_frame, "steps": steps_frame, "tool_calls": tool_calls_frame}
DTYPES = {"runs": RUN_COLUMNS, "steps": STEP_COLUMNS, "tool_calls": TOOL_CALL_COLUMNS}


@pytest.fixture(scope="module")
def records() -> dict[str, RunRecord]:
    nbagent.configure(display=False)
    return every_end_state(tags=["nightly", "v2"], metadata={"variant": "b", "seed": 7})


@pytest.fixture(params=[pytest.param("pyarrow", marks=pytest.mark.needs("parquet")), "python"])
def string_storage(request):
    """Both ways pandas may back the "string" dtype (pandas 2.2 defaults to python)."""
    with pd.option_context("mode.string_storage", request.param):
        yield request.param


def na(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def same(value, expected) -> bool:
    if expected is None:
        return na(value)
    if isinstance(expected, float):
        return not na(value) and math.isclose(value, expected, rel_tol=1e-9, abs_tol=1e-9)
    return value == expected


@pytest.mark.parametrize("kind", ["runs", "steps", "tool_calls"])
def test_frames_have_the_documented_columns_and_dtypes(records, kind, string_storage):
    for frame in (BUILDERS[kind](records.values()), BUILDERS[kind]([])):
        assert list(frame.columns) == DOCUMENTED[kind].split()
        assert {c: str(t) for c, t in frame.dtypes.items()} == DTYPES[kind]
        assert frame["run_id"].dtype.storage == string_storage


@pytest.mark.parametrize("kind", ["runs", "steps", "tool_calls"])
def test_dtypes_are_the_promised_ones(records, kind):
    frame = BUILDERS[kind](records.values())
    for column, dtype in frame.dtypes.items():
        if column.endswith("_at"):
            assert isinstance(dtype, pd.DatetimeTZDtype) and dtype.unit == "ns" and str(dtype.tz) == "UTC"
        elif column.endswith("tokens") or column in ("n_steps", "n_tool_calls", "step", "forked_at_step"):
            assert dtype == pd.Int64Dtype()
        elif column in ("duration_s", "queued_s", "cost_usd", "wait_s", "approval_wait_s"):
            assert dtype == pd.Float64Dtype()
        elif column in ("usage_complete", "interrupted"):
            assert dtype == pd.BooleanDtype()
        elif column == "tags":
            assert dtype == np.dtype(object) and all(isinstance(t, list) for t in frame[column])
        else:
            assert isinstance(dtype, pd.StringDtype) and dtype.na_value is pd.NA, column


def test_runs_frame_agrees_with_the_records_in_every_end_state(records):
    frame = runs_frame(records.values()).set_index("run_id")
    assert len(frame) == len(records)
    for record in records.values():
        row = frame.loc[record.run_id]
        for column in ("task", "agent", "model", "status", "stop_reason", "error", "error_type"):
            assert same(row[column], getattr(record, column)), (record.status, column)
        for column in ("duration_s", "queued_s", "usage_complete", "parent_run_id", "continues_run_id"):
            assert same(row[column], getattr(record, column)), (record.status, column)
        for column in ("input_tokens", "output_tokens", "total_tokens"):
            assert same(row[column], getattr(record, column)), (record.status, column)
        assert same(row["output"], record.output), record.status  # the answer is text already
        assert row["n_steps"] == len(record.steps)
        assert row["started_at"] == pd.Timestamp(record.started_at)
        assert row["ended_at"] == pd.Timestamp(record.ended_at)
        assert row["tags"] == record.tags == ["nightly", "v2"]
        assert json.loads(row["metadata"]) == record.metadata == {"variant": "b", "seed": 7}
        assert json.loads(row["model_params"]) == record.model_params
    statuses = frame["status"].to_dict()
    assert statuses[records["success"].run_id] == "success"
    assert frame.loc[records["success"].run_id, "output"] == "The sum is 5."


def test_steps_frame_agrees_with_the_records_in_every_end_state(records):
    frame = steps_frame(records.values())
    expected = [(r.run_id, s) for r in records.values() for s in r.steps]
    assert len(frame) == len(expected)
    for (run_id, step), row in zip(expected, frame.itertuples(index=False), strict=True):
        assert row.run_id == run_id
        assert row.step == step.number and row.kind == step.kind
        assert row.started_at == pd.Timestamp(step.started_at)
        assert row.ended_at == pd.Timestamp(step.ended_at)
        assert same(row.duration_s, step.duration_s)
        assert same(row.input_tokens, step.input_tokens)
        assert same(row.output_tokens, step.output_tokens)
        assert same(row.total_tokens, step.total_tokens)
        assert row.usage_source == step.usage_source
        assert row.n_tool_calls == len(step.tool_calls)
        assert row.interrupted == step.interrupted
        assert same(row.error, step.error)
        assert row.model_output == step.model_output
    assert "The sum is 5." in frame["model_output"].tolist()
    cut = steps_frame(records["interrupted_mid_stream"]).iloc[0]
    assert cut["model_output"].startswith("word")  # the text streamed before the Stop


def test_tool_calls_frame_agrees_with_the_records_in_every_end_state(records):
    frame = tool_calls_frame(records.values())
    expected = [(r.run_id, s.number, c) for r in records.values() for s in r.steps for c in s.tool_calls]
    assert len(frame) == len(expected)
    for (run_id, number, call), row in zip(expected, frame.itertuples(index=False), strict=True):
        assert (row.run_id, row.step, row.call_id, row.tool) == (run_id, number, call.call_id, call.tool)
        assert json.loads(row.arguments) == call.arguments
        assert row.started_at == pd.Timestamp(call.started_at)
        assert row.ended_at == pd.Timestamp(call.ended_at)
        assert same(row.duration_s, call.duration_s)
        assert row.status == call.status
        assert same(row.result, None if call.result is None else str(call.result))
        assert same(row.error, call.error)
    assert frame["result"].iloc[0] == "5"  # add(2, 3)
    assert frame.loc[frame["status"] == "cancelled", "result"].isna().all()


def test_interrupted_runs_and_their_cut_step_are_rows_like_any_other(records):
    mid_stream, mid_tool = records["interrupted_mid_stream"], records["interrupted_mid_tool"]
    steps = steps_frame([mid_stream, mid_tool])
    cut = steps[steps["interrupted"]]
    assert len(cut) == 2
    assert cut["ended_at"].notna().all() and cut["duration_s"].notna().all()
    calls = tool_calls_frame(mid_tool)
    assert calls["status"].tolist() == ["ok", "cancelled"]
    assert runs_frame([mid_stream, mid_tool])["status"].tolist() == ["interrupted", "interrupted"]


def test_unknown_token_counts_are_na_never_zero(records):
    cut = records["interrupted_mid_stream"]
    assert cut.steps[0].input_tokens is None  # the stream was cut before its usage chunk
    step = steps_frame(cut).iloc[0]
    assert step["input_tokens"] is pd.NA and step["output_tokens"] is pd.NA and step["total_tokens"] is pd.NA
    assert step["usage_source"] == "unknown"
    run = runs_frame(cut).iloc[0]
    assert run["input_tokens"] is pd.NA and run["total_tokens"] is pd.NA
    assert not run["usage_complete"]
    assert steps_frame(records.values())["input_tokens"].min() > 0


def test_run_totals_sum_the_known_steps_and_say_when_partial(records):
    failed = records["error"]  # step 1 reported usage, step 2 failed before any
    run = runs_frame(failed).iloc[0]
    steps = steps_frame(failed)
    assert steps["input_tokens"].isna().tolist() == [False, True]
    assert run["input_tokens"] == steps["input_tokens"].sum()
    assert not run["usage_complete"]


def test_a_step_total_is_known_only_when_both_parts_are():
    t0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
    record = RunRecord("r", "t", "a", "m", t0, status="success")
    record.steps = [
        StepRecord(1, "action", t0, 0.0, t0, 0.0, input_tokens=10, output_tokens=None),
        StepRecord(2, "final", t0, 0.0, t0, 0.0, input_tokens=7, output_tokens=3),
    ]
    steps = steps_frame(record)
    assert steps["total_tokens"].isna().tolist() == [True, False]
    assert steps["total_tokens"].iloc[1] == 10
    run = runs_frame(record).iloc[0]
    assert (run["input_tokens"], run["output_tokens"], run["total_tokens"]) == (17, 3, 20)
    assert not run["usage_complete"]


def test_times_are_utc_whatever_zone_they_came_in():
    plus_two = timezone(timedelta(hours=2))
    noon_utc = datetime(2025, 1, 1, 12, tzinfo=timezone.utc)
    record = RunRecord("r", "t", "a", "m", noon_utc.astimezone(plus_two), status="running")
    record.steps = [StepRecord(1, "action", datetime(2025, 1, 1, 12, 0, 1), 1.0)]  # naive: taken as UTC
    run = runs_frame(record).iloc[0]
    assert run["started_at"] == pd.Timestamp("2025-01-01 12:00", tz="UTC")
    assert run["ended_at"] is pd.NaT and run["duration_s"] is pd.NA and run["status"] == "running"
    step = steps_frame(record).iloc[0]
    assert step["started_at"] == pd.Timestamp("2025-01-01 12:00:01", tz="UTC")
    assert step["ended_at"] is pd.NaT and step["duration_s"] is pd.NA


def test_arguments_are_json_text_and_raw_text_stays_as_sent():
    t0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
    record = RunRecord("r", "t", "a", "m", t0)
    step = StepRecord(1, "action", t0, 0.0)
    step.tool_calls = [
        ToolCallRecord("c1", "search", {"query": "café", "n": 3}, t0, 0.0),
        ToolCallRecord("c2", "search", '{"query": broken', t0, 0.0),
    ]
    record.steps = [step]
    calls = tool_calls_frame(record)
    assert json.loads(calls["arguments"].iloc[0]) == {"query": "café", "n": 3}
    assert calls["arguments"].iloc[1] == '{"query": broken'
    spread = json_columns(calls["arguments"])  # raw text is not an object: no keys, <NA>
    assert spread.columns.tolist() == ["arguments.query", "arguments.n"]
    assert spread["arguments.query"].tolist() == ["café", pd.NA]
    assert spread["arguments.n"].tolist() == [3, pd.NA] and str(spread["arguments.n"].dtype) == "Int64"
    assert calls["status"].isna().all()  # still in flight
    assert calls["ended_at"].isna().all() and calls["duration_s"].isna().all()


def test_a_live_snapshot_is_a_running_row(records):
    snapshot = RunRecord("live", "t", "a", "m", datetime.now(timezone.utc))
    frame = runs_frame([*records.values(), snapshot])
    assert frame["status"].iloc[-1] == "running"
    assert frame["n_steps"].iloc[-1] == 0
    assert frame["usage_complete"].iloc[-1]  # nothing is unknown about zero steps
    assert frame["total_tokens"].iloc[-1] is pd.NA


@pytest.mark.needs("parquet")
def test_frames_round_trip_through_parquet(records, tmp_path):
    for name, builder in BUILDERS.items():
        frame = builder(records.values())
        path = tmp_path / f"{name}.parquet"
        frame.to_parquet(path)
        back = pd.read_parquet(path)
        pd.testing.assert_frame_equal(back, frame)  # compares the tags lists element by element
    tags = pd.read_parquet(tmp_path / "runs.parquet")["tags"]
    assert all("nightly" in t and "v" not in t for t in tags)  # read back as arrays, still matched whole


def test_a_stop_is_not_an_error(records):
    runs = runs_frame(records.values())
    failed = runs[runs["error"].notna()]
    assert sorted(failed["status"]) == ["error", "max_steps"]
    assert sorted(failed["error_type"]) == ["MaxStepsReached", "ModelError"]
    stopped = runs[runs["status"] == "interrupted"]
    assert len(stopped) == 2
    assert stopped["stop_reason"].tolist() == ["user", "user"]
    assert stopped["error"].isna().all() and stopped["error_type"].isna().all()
    assert runs.loc[runs["status"] == "success", "stop_reason"].isna().all()


def test_tags_are_matched_whole_and_metadata_is_json_text():
    agent = nbagent.Agent(fast_model(["one", "two", "three"]), name="tagged")
    runs = runs_frame(
        [
            nbagent.run(agent, "a", tags=["eval", "v1"], metadata={"variant": "a", "seed": 1}),
            nbagent.run(
                agent, "b", tags=["eval-old"], metadata={"variant": "b", "when": datetime(2025, 1, 1)}
            ),
            nbagent.run(agent, "c"),
        ]
    )
    assert runs[runs["tags"].map(lambda t: "eval" in t)]["task"].tolist() == ["a"]
    per_tag = runs.explode("tags")
    assert per_tag["tags"].tolist()[:3] == ["eval", "v1", "eval-old"] and pd.isna(per_tag["tags"].iloc[3])
    metadata = [json.loads(text) for text in runs["metadata"]]
    assert metadata == [{"variant": "a", "seed": 1}, {"variant": "b", "when": "2025-01-01 00:00:00"}, {}]
    wide = runs.join(json_columns(runs["metadata"]))
    assert wide["metadata.variant"].tolist() == ["a", "b", pd.NA]
    assert str(wide["metadata.seed"].dtype) == "Int64" and wide["metadata.seed"].isna().tolist() == [
        False,
        True,
        True,
    ]


def test_a_continued_run_and_a_child_run_name_the_runs_they_belong_to():
    agent = nbagent.Agent(fast_model(["first", "second"]), name="memory")
    first = nbagent.run(agent, "one")
    fresh_start = nbagent.run(nbagent.Agent(fast_model(["x"])), "two")
    continued = nbagent.run(agent, "go on", reset=False)
    child_agent = nbagent.Agent(fast_model(["child answer"]), name="child")

    @nbagent.tool
    async def ask_child(question: str) -> str:
        """Ask the child agent.

        Args:
            question: what to ask.
        """
        return (await nbagent.start(child_agent, question)).output

    parent_agent = nbagent.Agent(
        fast_model([[ToolCall("ask_child", {"question": "hi"})], "done"]), tools=[ask_child], name="parent"
    )
    parent = nbagent.run(parent_agent, "delegate")
    child = next(r for r in reversed(nbagent.history.records()) if r.agent == "child")
    runs = runs_frame([first, fresh_start, continued, parent, child]).set_index("run_id")
    assert runs["continues_run_id"].isna().tolist() == [True, True, False, True, True]
    assert runs.loc[continued.run_id, "continues_run_id"] == first.run_id
    assert runs["parent_run_id"].isna().tolist() == [True, True, True, True, False]
    assert runs.loc[child.run_id, "parent_run_id"] == parent.run_id
    assert tool_calls_frame(parent)["result"].tolist() == ["child answer"]


def test_a_queued_run_shows_its_wait_apart_from_its_duration():
    slow = ScriptedModel(["word " * 2000, "second answer"], tokens_per_s=200, first_token_s=0.0)
    agent = nbagent.Agent(slow, name="busy")
    first = nbagent.start(agent, "talk", display=False)
    wait_until(lambda: first.live_text(1) != "")
    second = nbagent.start(agent, "again", display=False)
    wait_until(lambda: second.record is not None and second.record.queued_after == first.run_id)
    first.interrupt()
    record = second.wait(timeout=20)
    runs = runs_frame([first.wait(timeout=20), record])
    assert runs["queued_s"].iloc[0] == 0.0
    assert runs["queued_s"].iloc[1] == record.queued_s > 0
    assert runs["started_at"].iloc[1] == pd.Timestamp(record.started_at)  # the real start
    assert runs["duration_s"].iloc[1] == record.duration_s


class Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")

    __str__ = __repr__


@nbagent.tool
def hostile(kind: str, note: str = "") -> object:
    """Return a value that resists becoming text.

    Args:
        kind: unprintable, huge or surrogate.
        note: ignored.
    """
    return {"unprintable": Unprintable(), "huge": 2**20000, "surrogate": "bad \ud800"}[kind]


@nbagent.tool
def refuse(reason: str) -> str:
    """Fail with the reason given.

    Args:
        reason: the error message.
    """
    raise ValueError(reason)


def assert_every_text_is_clean(*frames: pd.DataFrame) -> None:
    for frame in frames:
        for column in frame.columns[frame.dtypes == "string"]:
            for value in frame[column].dropna():
                value.encode("utf-8")  # raises for a lone surrogate


@pytest.mark.needs("parquet")
def test_no_value_makes_a_frame_raise_in_a_real_run(tmp_path):
    calls = [
        ToolCall("hostile", {"kind": "unprintable"}),
        ToolCall("hostile", {"kind": "huge"}),
        ToolCall("hostile", {"kind": "surrogate", "note": "\udfff"}),
        ToolCall("refuse", {"reason": "no \ud83d"}),
    ]
    agent = nbagent.Agent(fast_model([calls, "answer \ud800"]), tools=[hostile, refuse], name="hostile")
    record = nbagent.run(agent, "task \ud800", tags=["t\ud800"], metadata={"k\udc00": 2**20000})
    assert record.status == "success"
    runs, steps, calls = runs_frame(record), steps_frame(record), tool_calls_frame(record)
    assert_every_text_is_clean(runs, steps, calls)
    assert runs["task"].iloc[0] == "task \\ud800" and runs["output"].iloc[0] == "answer \\ud800"
    assert runs["tags"].iloc[0] == ["t\\ud800"]
    assert runs["metadata"].iloc[0].startswith("<unprintable dict: ValueError")  # past the int-to-str limit
    assert steps["model_output"].iloc[-1] == "answer \\ud800"
    results = calls["result"].tolist()
    assert results[0] == "<unprintable Unprintable: RuntimeError: no repr>"
    assert results[1].startswith("<unprintable int: ValueError: Exceeds the limit")
    assert results[2] == "bad \\ud800" and pd.isna(results[3])
    assert json.loads(calls["arguments"].iloc[2]) == {"kind": "surrogate", "note": "\\udfff"}
    assert calls["status"].tolist() == ["ok", "ok", "ok", "error"] and "no \\ud83d" in calls["error"].iloc[3]
    for name, frame in {"runs": runs, "steps": steps, "calls": calls}.items():
        frame.to_parquet(tmp_path / f"{name}.parquet")  # pyarrow refuses lone surrogates


@pytest.mark.needs("parquet")
def test_no_value_makes_a_frame_raise_in_a_hand_built_record(tmp_path, string_storage):
    t0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
    record = RunRecord("r\ud800", "task \ud800", "agent é", None, t0, status="error")  # type: ignore[arg-type]
    record.output, record.error, record.error_type = Unprintable(), "bad \udfff", 42  # type: ignore[assignment]
    record.tags = ["ok", "\ud800", 3]  # type: ignore[list-item]
    record.metadata = {"k": Unprintable()}
    record.model_params = {"temperature": float("nan"), ("tuple", "key"): 1}
    record.queued_s = "soon"  # type: ignore[assignment]
    step = StepRecord(1, "action", t0, 0.0, "yesterday", end_s=2**20000, input_tokens=2**20000)  # type: ignore[arg-type]
    step.model_output, step.error = "thought \ud800", Unprintable()  # type: ignore[assignment]
    step.tool_calls = [
        ToolCallRecord("c1", "t\ud800", {"x": 2**20000}, t0, 0.0, status="ok", result=2**20000),
        ToolCallRecord("c2", "t", "raw \ud800", t0, 0.0, status="ok", result=b"\xff"),
        ToolCallRecord("c3", "t", Unprintable(), t0, 0.0, status="error", error="\udfff"),
    ]
    record.steps = [step]
    runs, steps, calls = runs_frame(record), steps_frame(record), tool_calls_frame(record)
    assert_every_text_is_clean(runs, steps, calls)
    run = runs.iloc[0]
    assert (run["run_id"], run["task"], run["agent"]) == ("r\\ud800", "task \\ud800", "agent é")
    assert run["model"] is pd.NA and run["error"] == "bad \\udfff" and run["error_type"] == "42"
    assert run["output"] == "<unprintable Unprintable: RuntimeError: no repr>"
    assert run["tags"] == ["ok", "\\ud800", "3"]
    assert run["metadata"] == "<unprintable dict: RuntimeError: no repr>"
    assert run["model_params"] == "{'temperature': nan, ('tuple', 'key'): 1}"
    assert run["queued_s"] is pd.NA  # not a number: unknown
    row = steps.iloc[0]
    assert row["ended_at"] is pd.NaT and row["duration_s"] is pd.NA and row["input_tokens"] is pd.NA
    assert row["model_output"] == "thought \\ud800" and row["error"].startswith("<unprintable Unprintable")
    assert calls["tool"].tolist() == ["t\\ud800", "t", "t"]
    assert calls["arguments"].iloc[0].startswith("<unprintable dict: ValueError")
    assert calls["arguments"].iloc[1] == "raw \\ud800"
    assert calls["arguments"].iloc[2] == "<unprintable Unprintable: RuntimeError: no repr>"
    assert calls["result"].iloc[0].startswith("<unprintable int: ValueError")
    assert calls["result"].iloc[1] == "b'\\xff'" and calls["error"].iloc[2] == "\\udfff"
    assert runs["task"].dtype.storage == string_storage
    for name, frame in {"runs": runs, "steps": steps, "calls": calls}.items():
        frame.to_parquet(tmp_path / f"{name}.parquet")
