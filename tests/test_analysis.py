"""Summaries, plots and cost: per agent/model numbers, restylable plots, and NA where cost is unknown."""

from __future__ import annotations

import dataclasses
import statistics
import sys
from datetime import datetime, timezone

import matplotlib
import numpy as np
import pandas as pd
import pytest
from end_states import every_end_state, interrupted_mid_stream, success

import nbagent
from nbagent import analysis, cost, history, plots
from nbagent.frames import runs_frame, steps_frame, tool_calls_frame

matplotlib.use("Agg")
import matplotlib.pyplot as plt


@pytest.fixture(scope="module")
def records():
    nbagent.configure(display=False)
    states = list(every_end_state().values())
    priced = [success(agent_name="adder", model="gpt-4o") for _ in range(3)]
    return [*states, *priced, interrupted_mid_stream(model="gpt-4o")]


@pytest.fixture(autouse=True)
def no_user_prices():
    cost.clear_prices()
    yield
    cost.clear_prices()
    plt.close("all")


def test_summary_has_one_row_per_agent_and_model_with_rates_and_percentiles(records):
    table = analysis.summary(records)
    assert list(table.columns) == list(analysis.SUMMARY_COLUMNS)
    assert {c: str(t) for c, t in table.dtypes.items()} == analysis.SUMMARY_COLUMNS
    groups = {(r.agent, r.model) for r in records}
    assert set(table.index) == groups
    for (agent, model), row in table.iterrows():
        mine = [r for r in records if (r.agent, r.model) == (agent, model)]
        statuses = [r.status for r in mine]
        durations = [r.duration_s for r in mine]
        assert row["runs"] == len(mine)
        assert row["success_rate"] == pytest.approx(statuses.count("success") / len(mine))
        assert row["interrupt_rate"] == pytest.approx(statuses.count("interrupted") / len(mine))
        failed = sum(s in ("error", "max_steps") for s in statuses)
        assert row["error_rate"] == pytest.approx(failed / len(mine))
        assert row["p50_duration_s"] == pytest.approx(statistics.median(durations))
        assert row["p95_duration_s"] == pytest.approx(np.percentile(durations, 95))
        assert row["steps_per_run"] == pytest.approx(statistics.mean(len(r.steps) for r in mine))


def test_tokens_per_step_counts_only_steps_whose_usage_is_known(records):
    table = analysis.summary(records)
    for (agent, model), row in table.iterrows():
        known = [
            s.total_tokens
            for r in records
            if (r.agent, r.model) == (agent, model)
            for s in r.steps
            if s.total_tokens is not None
        ]
        if known:
            assert row["tokens_per_step"] == pytest.approx(statistics.mean(known))
        else:
            assert row["tokens_per_step"] is pd.NA  # not 0: nothing is known
            assert row["total_tokens"] is pd.NA


def test_summary_from_frames_matches_summary_from_records(records):
    from_records = analysis.summary(records)
    from_frames = analysis.summary(runs_frame(records), steps_frame(records))
    pd.testing.assert_frame_equal(from_frames, from_records)
    # Without the steps frame, tokens per step come from the runs whose usage is complete: exact
    # for groups where every run's usage is known.
    runs_only = analysis.summary(runs_frame(records))
    pd.testing.assert_series_equal(runs_only["runs"], from_records["runs"])
    complete = {(r.agent, r.model) for r in records} - {
        (r.agent, r.model) for r in records if not r.usage_complete
    }
    assert complete
    for group in complete:
        assert runs_only.loc[group, "tokens_per_step"] == pytest.approx(
            from_records.loc[group, "tokens_per_step"]
        )


def test_summary_groups_by_any_runs_column(records):
    by_status = analysis.summary(records, by="status")
    assert by_status["runs"].to_dict() == pd.Series([r.status for r in records]).value_counts().to_dict()
    with pytest.raises(KeyError, match="not columns"):
        analysis.summary(records, by="colour")


def test_cost_is_na_for_unpriced_models_and_summed_for_priced_ones(records):
    table = analysis.summary(records)
    assert table.loc[("adder", "scripted"), "cost_usd"] is pd.NA  # the scripted model has no price
    assert not table.loc[("adder", "scripted"), "cost_complete"]
    priced = [r for r in records if r.model == "gpt-4o" and r.status == "success"]
    expected = sum(cost.run_cost(r) for r in priced)
    assert expected > 0
    assert table.loc[("adder", "gpt-4o"), "cost_usd"] == pytest.approx(expected)
    assert table.loc[("adder", "gpt-4o"), "cost_complete"]
    # The gpt-4o run cut mid-stream has no known usage at all: its cost is NA, not 0.
    cut = [r for r in records if r.model == "gpt-4o" and r.status == "interrupted"]
    assert cost.run_cost(cut[0]) is None
    assert table.loc[("talker", "gpt-4o"), "cost_usd"] is pd.NA


def test_a_run_costs_the_sum_of_its_steps_with_known_usage(records):
    failed = next(r for r in records if r.status == "error")  # step 2 has no usage
    cost.set_price(failed.model, input_per_mtok=3.0, output_per_mtok=15.0)
    step = failed.steps[0]
    assert failed.steps[1].input_tokens is None
    expected = (step.input_tokens * 3.0 + step.output_tokens * 15.0) / 1e6
    assert cost.run_cost(failed) == pytest.approx(expected)
    assert runs_frame(failed)["cost_usd"].iloc[0] == pytest.approx(expected)
    row = analysis.summary([failed]).iloc[0]
    assert row["cost_usd"] == pytest.approx(expected)
    assert not row["cost_complete"]  # a lower bound: step 2's usage is unknown


def test_genai_prices_scale_with_tokens_and_know_hosted_models():
    at = datetime(2025, 6, 1, tzinfo=timezone.utc)
    one = cost.step_cost("gpt-4o", 1_000, 500, at)
    assert one is not None and one > 0
    assert cost.step_cost("gpt-4o", 2_000, 1_000, at) == pytest.approx(2 * one)
    assert cost.step_cost("gpt-4o", None, None, at) is None
    assert cost.step_cost("no-such-model-anywhere", 1_000, 500, at) is None


@pytest.mark.parametrize("model", ["qwen3:8b", "llama3.2:latest", "ollama/gpt-oss", "hosted_vllm/gpt-4o"])
def test_local_models_cost_na_unless_the_user_prices_them(model):
    assert cost.is_local(model)
    assert cost.step_cost(model, 1_000, 1_000) is None
    cost.set_price(model, input_per_mtok=0.5, output_per_mtok=1.5)
    assert cost.step_cost(model, 1_000, 1_000) == pytest.approx((500 + 1_500) / 1e6)


def test_mark_local_keeps_a_hosted_name_from_being_billed():
    assert cost.step_cost("gpt-4o", 1_000, 1_000) is not None
    cost.mark_local("gpt-4o")
    assert cost.step_cost("gpt-4o", 1_000, 1_000) is None
    cost.clear_prices()
    assert not cost.is_local("gpt-4o")


def test_without_the_cost_extra_pricing_names_it_and_frames_show_na(records, monkeypatch):
    monkeypatch.setitem(sys.modules, "genai_prices", None)
    cost._library_cost.cache_clear()
    try:
        with pytest.raises(ImportError, match=r"nbagent\[cost\]"):
            cost.step_cost("gpt-4o", 10, 10)
        # Records of runs made without the extra carry no cost of their own.
        priced = [dataclasses.replace(r, cost_usd=None) for r in records if r.model == "gpt-4o"]
        assert runs_frame(priced)["cost_usd"].isna().all()
    finally:
        cost._library_cost.cache_clear()


def test_a_record_with_its_own_cost_keeps_it(records):
    record = records[0]
    original = record.cost_usd
    record.cost_usd = 0.25
    try:
        assert runs_frame(record)["cost_usd"].iloc[0] == 0.25
    finally:
        record.cost_usd = original


def test_timeline_draws_steps_and_tool_calls_of_one_run(records):
    record = next(r for r in records if r.status == "interrupted" and r.tool_calls)
    ax = plots.timeline(records, run_id=record.run_id)
    assert isinstance(ax, plt.Axes)
    assert len(ax.patches) == len(record.steps) + len(record.tool_calls)
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"{s.number} {s.kind}" for s in record.steps]
    cut = ax.patches[len(record.steps) - 1]
    assert cut.get_linewidth() == 2.0  # the interrupted step is outlined
    ax.set_title("mine")  # the caller restyles it
    assert ax.get_title() == "mine"


def test_timeline_of_many_runs_has_a_lane_per_run_on_a_given_axes(records):
    _, ax = plt.subplots()
    returned = plots.timeline(iter(records), ax=ax)  # any iterable, even a one-shot one
    assert returned is ax
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == [f"{r.run_id[:8]} {r.status}" for r in records]
    assert len(ax.patches) == sum(len(r.steps) + len(r.tool_calls) for r in records)


def test_timeline_accepts_frames(records):
    ax = plots.timeline(steps_frame(records), tool_calls_frame(records))
    assert len(ax.patches) == sum(len(r.steps) + len(r.tool_calls) for r in records)


def test_tokens_plot_stacks_input_and_output_and_marks_unknown_usage(records):
    cut = next(r for r in records if r.status == "interrupted" and not r.usage_complete)
    ax = plots.tokens(records, run_id=cut.run_id)
    assert "?" in [t.get_text() for t in ax.texts]
    ok = records[0]
    ax = plots.tokens(records, run_id=ok.run_id)
    heights = [p.get_height() for p in ax.patches]
    assert heights == [s.input_tokens for s in ok.steps] + [s.output_tokens for s in ok.steps]
    ax = plots.tokens(steps_frame(records))
    assert ax.get_ylabel() == "mean tokens"


def test_durations_plot_splits_by_status_or_kind(records):
    ax = plots.durations(records)
    labels = {t.get_text() for t in ax.get_legend().get_texts()}
    assert labels == {r.status for r in records}
    assert sum(p.get_height() for p in ax.patches) == len(records)
    ax = plots.durations(records, of="steps")
    assert {t.get_text() for t in ax.get_legend().get_texts()} == {s.kind for r in records for s in r.steps}


def test_plots_without_matplotlib_name_the_extra(records, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match=r"nbagent\[plots\]"):
        plots.durations(records)


def test_history_gives_this_sessions_runs_as_frames_summaries_and_plots(records, monkeypatch):
    monkeypatch.setattr(history, "_records", [])
    record = success(agent_name="historian")
    assert history.last() is record
    assert history.runs()["run_id"].tolist() == [record.run_id]
    assert len(history.steps()) == len(record.steps)
    assert len(history.tool_calls()) == len(record.tool_calls)
    assert history.summary().index.tolist() == [("historian", "scripted")]
    assert len(history.plot_timeline(record.run_id).patches) == len(record.steps) + len(record.tool_calls)
    assert isinstance(history.plot_tokens(), plt.Axes)
    assert isinstance(history.plot_durations(of="tool_calls"), plt.Axes)
    history.clear()
    assert history.runs().empty
    assert list(history.runs().columns) == list(runs_frame([]).columns)


def test_the_runner_prices_a_finished_run_and_leaves_unknown_models_na():
    from conftest import fast_model

    priced = nbagent.run(nbagent.Agent(fast_model(["answer"], name="gpt-4o")), "task", display=False)
    assert priced.cost_usd is not None and priced.cost_usd > 0
    assert priced.cost_usd == cost.run_cost(priced)
    unknown = nbagent.run(nbagent.Agent(fast_model(["answer"], name="my-own-model")), "task", display=False)
    assert unknown.cost_usd is None
