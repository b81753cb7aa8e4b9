"""Runs, steps and tool calls as DataFrames: documented columns, real dtypes, NA for what is unknown."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta, timezone

import pandas as pd
import pytest
from end_states import every_end_state

import nbagent
from nbagent.frames import (
    RUN_COLUMNS,
    STEP_COLUMNS,
    TOOL_CALL_COLUMNS,
    runs_frame,
    steps_frame,
    tool_calls_frame,
)
from nbagent.records import RunRecord, StepRecord, ToolCallRecord

DOCUMENTED = {
    "runs": "run_id task agent model status started_at ended_at duration_s n_steps input_tokens "
    "output_tokens total_tokens usage_complete cost_usd error",
    "steps": "run_id step kind started_at ended_at duration_s input_tokens output_tokens total_tokens "
    "usage_source n_tool_calls interrupted error",
    "tool_calls": "run_id step call_id tool arguments started_at ended_at duration_s status error",
}
BUILDERS = {"runs": runs_frame, "steps": steps_frame, "tool_calls": tool_calls_frame}
DTYPES = {"runs": RUN_COLUMNS, "steps": STEP_COLUMNS, "tool_calls": TOOL_CALL_COLUMNS}


@pytest.fixture(scope="module")
def records() -> dict[str, RunRecord]:
    nbagent.configure(display=False)
    return every_end_state()


def na(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def same(value, expected) -> bool:
    if expected is None:
        return na(value)
    if isinstance(expected, float):
        return not na(value) and math.isclose(value, expected, rel_tol=1e-9, abs_tol=1e-9)
    return value == expected


@pytest.mark.parametrize("kind", ["runs", "steps", "tool_calls"])
def test_frames_have_the_documented_columns_and_dtypes(records, kind):
    for frame in (BUILDERS[kind](records.values()), BUILDERS[kind]([])):
        assert list(frame.columns) == DOCUMENTED[kind].split()
        assert {c: str(t) for c, t in frame.dtypes.items()} == DTYPES[kind]


@pytest.mark.parametrize("kind", ["runs", "steps", "tool_calls"])
def test_dtypes_are_the_promised_ones(records, kind):
    frame = BUILDERS[kind](records.values())
    for column, dtype in frame.dtypes.items():
        if column.endswith("_at"):
            assert isinstance(dtype, pd.DatetimeTZDtype) and dtype.unit == "ns" and str(dtype.tz) == "UTC"
        elif column.endswith("tokens") or column in ("n_steps", "n_tool_calls", "step"):
            assert dtype == pd.Int64Dtype()
        elif column in ("duration_s", "cost_usd"):
            assert dtype == pd.Float64Dtype()
        elif column in ("usage_complete", "interrupted"):
            assert dtype == pd.BooleanDtype()
        else:
            assert isinstance(dtype, pd.StringDtype) and dtype.na_value is pd.NA, column


def test_runs_frame_agrees_with_the_records_in_every_end_state(records):
    frame = runs_frame(records.values()).set_index("run_id")
    assert len(frame) == len(records)
    for record in records.values():
        row = frame.loc[record.run_id]
        for column in ("task", "agent", "model", "status", "error", "duration_s", "usage_complete"):
            assert same(row[column], getattr(record, column)), (record.status, column)
        for column in ("input_tokens", "output_tokens", "total_tokens"):
            assert same(row[column], getattr(record, column)), (record.status, column)
        assert row["n_steps"] == len(record.steps)
        assert row["started_at"] == pd.Timestamp(record.started_at)
        assert row["ended_at"] == pd.Timestamp(record.ended_at)


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
        assert same(row.error, call.error)


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
    assert calls["status"].isna().all()  # still in flight
    assert calls["ended_at"].isna().all() and calls["duration_s"].isna().all()


def test_a_live_snapshot_is_a_running_row(records):
    snapshot = RunRecord("live", "t", "a", "m", datetime.now(timezone.utc))
    frame = runs_frame([*records.values(), snapshot])
    assert frame["status"].iloc[-1] == "running"
    assert frame["n_steps"].iloc[-1] == 0
    assert frame["usage_complete"].iloc[-1]  # nothing is unknown about zero steps
    assert frame["total_tokens"].iloc[-1] is pd.NA


def test_frames_round_trip_through_parquet(records, tmp_path):
    for name, builder in BUILDERS.items():
        frame = builder(records.values())
        path = tmp_path / f"{name}.parquet"
        frame.to_parquet(path)
        back = pd.read_parquet(path)
        pd.testing.assert_frame_equal(back, frame)
