"""Summaries, plots and cost: per agent/model numbers, restylable plots, and NA where cost is unknown."""

from __future__ import annotations

import dataclasses
import re
import statistics
import sys
from datetime import datetime, timezone

import matplotlib
import numpy as np
import pandas as pd
import pytest
from end_states import every_end_state, interrupted_mid_stream, success
from support import wait_until

import nbagent
from nbagent.analytics import analysis, cost, history, plots
from nbagent.analytics.frames import json_columns, runs_frame, steps_frame, tool_calls_frame
from nbagent.extras import install_hint
from nbagent.models import ScriptedModel

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.colors import to_rgb

pytestmark = pytest.mark.needs("plots")


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
        assert row["p50_queued_s"] == row["p95_queued_s"] == 0.0  # none of these runs waited


def test_a_stop_never_counts_as_an_error(records):
    # An older record of a Stop (before Stops left ``error`` empty) has an error text: still a Stop.
    old_style = dataclasses.replace(
        interrupted_mid_stream(), error="interrupted by the user", error_type="AgentInterrupted"
    )
    stops = [r for r in records if r.status == "interrupted"] + [old_style]
    mixed = [*stops, next(r for r in records if r.status == "error"), records[0]]
    by_status = analysis.summary(mixed, by="status")
    assert by_status.loc["interrupted", "error_rate"] == 0
    assert by_status.loc["interrupted", "interrupt_rate"] == 1
    by_agent = analysis.summary(mixed, by="agent")  # the agents of the stopped runs
    assert by_agent.loc[["talker", "waiter"], "error_rate"].eq(0).all()
    assert by_agent.loc[["talker", "waiter"], "interrupt_rate"].eq(1).all()
    overall = analysis.summary(runs_frame(mixed).assign(all="all"), by="all").iloc[0]
    assert overall["runs"] == len(stops) + 2
    assert overall["error_rate"] == pytest.approx(1 / overall["runs"])
    assert overall["interrupt_rate"] == pytest.approx(len(stops) / overall["runs"])


def test_queued_time_is_summed_up_apart_from_durations():
    slow = ScriptedModel(["word " * 2000, "second answer"], tokens_per_s=200, first_token_s=0.0)
    agent = nbagent.Agent(slow, name="busy")
    first = nbagent.start(agent, "talk", display=False)
    wait_until(lambda: first.live_text(1) != "")
    second = nbagent.start(agent, "again", display=False)
    wait_until(lambda: second.record is not None and second.record.queued_after == first.run_id)
    first.interrupt()
    pair = [first.wait(timeout=20), second.wait(timeout=20)]
    assert pair[1].queued_s > 0 and pair[0].queued_s == 0
    row = analysis.summary(pair).iloc[0]
    assert row["p50_queued_s"] == pytest.approx(pair[1].queued_s / 2)
    assert row["p95_queued_s"] == pytest.approx(np.percentile([0, pair[1].queued_s], 95))
    assert row["p50_duration_s"] == pytest.approx(statistics.median(r.duration_s for r in pair))
    older = runs_frame(pair).drop(columns="queued_s")  # a frame saved before the column existed
    assert analysis.summary(older).iloc[0]["p50_queued_s"] is pd.NA


def test_summary_by_tags_counts_a_run_under_each_of_its_tags():
    tagged = [success(tags=["eval", "v2"]), success(tags=["eval"]), success()]
    table = analysis.summary(tagged, by="tags")
    assert table["runs"].tolist() == [2, 1, 1]
    assert table.index[:2].tolist() == ["eval", "v2"] and pd.isna(table.index[2])
    frames = analysis.summary(runs_frame(tagged), steps_frame(tagged), by="tags")
    pd.testing.assert_frame_equal(frames, table)
    first = tagged[0]
    assert table.loc["v2", "tokens_per_step"] == pytest.approx(first.total_tokens / len(first.steps))


def test_summary_by_a_metadata_key(records):
    variants = [success(metadata={"variant": v}) for v in ("a", "b", "b")] + [success()]
    runs = runs_frame(variants)
    table = analysis.summary(runs.join(json_columns(runs["metadata"])), by="metadata.variant")
    assert table["runs"].tolist() == [1, 2, 1]
    assert table.index[:2].tolist() == ["a", "b"] and pd.isna(table.index[2])


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
        with pytest.raises(ImportError, match=re.escape(install_hint("cost"))):
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


def contrast(one, other) -> float:
    """The WCAG contrast ratio of two matplotlib colours (4.5 is the floor for readable text)."""

    def luminance(color) -> float:
        channels = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in to_rgb(color)]
        return 0.2126 * channels[0] + 0.7152 * channels[1] + 0.0722 * channels[2]

    light, dark = sorted((luminance(one), luminance(other)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def behind(ax, text) -> tuple:
    """The colour right behind a text: its own badge, else the bar under its anchor, else the axes."""
    badge = text.get_bbox_patch()
    if badge is not None and badge.get_fill():
        return badge.get_facecolor()
    x, y = text.xy
    for bar in reversed(ax.patches):
        if (
            bar.get_x() <= x <= bar.get_x() + bar.get_width()
            and bar.get_y() <= y < bar.get_y() + bar.get_height()
        ):
            return bar.get_facecolor()
    return ax.get_facecolor()


def test_the_unknown_usage_marker_reads_on_any_bar_and_is_in_the_legend(records):
    ax = plots.tokens(records)  # step 1 mixes runs of known usage (tall bars) and of unknown usage
    markers = [t for t in ax.texts if t.get_text().startswith("?")]
    assert markers
    tops = {round(p.get_x() + p.get_width() / 2): p.get_y() + p.get_height() for p in ax.patches}
    for marker in markers:
        assert contrast(marker.get_color(), behind(ax, marker)) >= 4.5
        assert marker.xy[1] >= tops[round(marker.xy[0])] - 1e-9  # on top of its bar, not inside it
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["input", "output", "?n: runs with usage unknown"]
    cut = next(r for r in records if r.status == "interrupted" and not r.usage_complete)
    one = plots.tokens(records, run_id=cut.run_id)
    assert "usage unknown" in [t.get_text() for t in one.get_legend().get_texts()]
    assert one.get_ylim()[0] == 0  # no negative token axis when nothing is known


@pytest.mark.parametrize("one_run", [False, True])
def test_timeline_labels_and_legend_fit_inside_the_figure(records, one_run, tmp_path):
    cut = next(r for r in records if r.status == "interrupted" and r.tool_calls)
    ax = plots.timeline(records, run_id=cut.run_id if one_run else None)
    figure = ax.figure
    figure.savefig(tmp_path / "timeline.png")  # lays the figure out, as a notebook or a file would
    renderer = figure.canvas.get_renderer()
    inside = figure.bbox.padded(1)
    pieces = [*ax.get_yticklabels(), ax.get_legend(), ax.xaxis.label, ax.title]
    for piece in pieces:
        box = piece.get_window_extent(renderer)
        assert box.width > 0
        assert inside.contains(box.x0, box.y0) and inside.contains(box.x1, box.y1), piece
    assert "cut by a Stop" in [t.get_text() for t in ax.get_legend().get_texts()]


def test_durations_plot_splits_by_status_or_kind(records):
    ax = plots.durations(records)
    labels = {t.get_text() for t in ax.get_legend().get_texts()}
    assert labels == {r.status for r in records}
    assert sum(p.get_height() for p in ax.patches) == len(records)
    ax = plots.durations(records, of="steps")
    assert {t.get_text() for t in ax.get_legend().get_texts()} == {s.kind for r in records for s in r.steps}


def test_plots_without_matplotlib_name_the_extra(records, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match=re.escape(install_hint("plots"))):
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
    from support import fast_model

    assert cost.warm_up(wait=30)  # the runner never loads the price library on its loop
    priced = nbagent.run(nbagent.Agent(fast_model(["answer"], name="gpt-4o")), "task", display=False)
    assert priced.cost_usd is not None and priced.cost_usd > 0
    assert priced.cost_usd == cost.run_cost(priced)
    unknown = nbagent.run(nbagent.Agent(fast_model(["answer"], name="my-own-model")), "task", display=False)
    assert unknown.cost_usd is None
