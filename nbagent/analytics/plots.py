"""Plots of runs with matplotlib (the ``plots`` extra): timelines, tokens per step, durations.

Each function draws on ``ax`` (or a new figure) and returns the matplotlib ``Axes``, so titles,
colours, limits and sizes stay yours to change. Each takes run records or the frames built from
them. Unknown values are not drawn as zeros: a step without known usage gets a dark ``?`` on a
white badge above its bar (readable on any bar colour, and named in the legend), a step still
open is hatched up to the last moment the run is known to have reached.

A new figure uses matplotlib's constrained layout, so long lane labels and the legend beside the
axes fit inside the figure (``savefig`` clips whatever is outside it). On an ``ax`` of your own,
give its figure ``layout="constrained"`` for the same.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from nbagent.analytics.frames import Records, as_records, runs_frame, steps_frame, tool_calls_frame
from nbagent.extras import install_hint

KIND_COLORS = {"planning": "#8e7cc3", "action": "#4a86c8", "final": "#3c9d5d"}
CALL_COLORS = {
    "ok": "#f0a030",
    "error": "#d9534f",
    "cancelled": "#9e9e9e",
    "abandoned": "#6d4c41",
    "deferred": "#80cbc4",
}
UNKNOWN_COLOR = "#1f1f1f"
"""The unknown-usage marker: near black on a white badge, a contrast above 15:1 whatever is behind."""
CUT_COLOR = "#d9534f"
"""The edge of a step an interrupt cut short."""
STATUS_COLORS = {
    "success": "#3c9d5d",
    "interrupted": "#f0a030",
    "error": "#d9534f",
    "max_steps": "#8e7cc3",
    "unfinished": "#9e9e9e",
    "running": "#4a86c8",
}


def _pyplot() -> Any:
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(
            f"nbagent's plots need matplotlib, the 'plots' extra: {install_hint('plots')}"
        ) from exc
    return plt


def _axes(ax: Any, size: tuple[float, float]) -> Any:
    if ax is not None:
        return ax
    _, ax = _pyplot().subplots(figsize=size, layout="constrained")
    return ax


def _offsets(frame: pd.DataFrame, origin: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start and end of each row in seconds from its run's origin; open rows end at ``nan``."""
    start = (
        (frame["started_at"] - frame["run_id"].map(origin))
        .dt.total_seconds()
        .to_numpy(float, na_value=np.nan)
    )
    end = (
        (frame["ended_at"] - frame["run_id"].map(origin)).dt.total_seconds().to_numpy(float, na_value=np.nan)
    )
    return start, end, np.isnan(end)


def timeline(
    data: Records | pd.DataFrame,
    tool_calls: pd.DataFrame | None = None,
    *,
    run_id: str | None = None,
    ax: Any = None,
) -> Any:
    """A Gantt chart of steps (coloured by kind) and, inside them, tool calls (coloured by status).

    With ``run_id`` (or a single run) each step gets its own lane; otherwise each run does, and
    every run is drawn from its own start, so runs line up for comparison. An interrupted step
    has a red edge; a step or call still open is hatched.

    Args:
        data: run records, or a steps frame (then pass its ``tool_calls`` frame too).
        tool_calls: the tool-calls frame when ``data`` is a frame.
        run_id: draw only this run.
        ax: the matplotlib Axes to draw on; a new figure by default.
    """
    status: dict[str, str] = {}
    if isinstance(data, pd.DataFrame):
        steps, calls = data, tool_calls if tool_calls is not None else tool_calls_frame([])
        origin = steps.groupby("run_id")["started_at"].min()  # the first step's start stands in
    else:
        records = as_records(data)
        steps, calls = steps_frame(records), tool_calls_frame(records)
        status = {r.run_id: str(r.status) for r in records}
        origin = pd.Series(
            pd.to_datetime([r.started_at for r in records], utc=True), index=[r.run_id for r in records]
        )
    if run_id is not None:
        steps, calls = steps[steps["run_id"] == run_id], calls[calls["run_id"] == run_id]
        if steps.empty:
            raise KeyError(f"no steps for run {run_id!r}")
    run_ids = list(dict.fromkeys(steps["run_id"].tolist()))
    per_step = len(run_ids) == 1
    lanes = len(steps) if per_step else len(run_ids)
    ax = _axes(ax, (9, max(2.4, 1.2 + 0.35 * lanes)))
    if steps.empty:
        ax.set_title("no steps to show")
        return ax

    start, end, open_ = _offsets(steps, origin)
    reached = pd.Series(np.fmax(start, np.nan_to_num(end, nan=-np.inf)), index=steps.index)
    last = reached.groupby(steps["run_id"].to_numpy()).max()
    end = np.where(open_, steps["run_id"].map(last).to_numpy(float), end)
    if per_step:
        lane = np.arange(len(steps))
        labels = [f"{n} {k}" for n, k in zip(steps["step"].tolist(), steps["kind"].tolist(), strict=True)]
    else:
        lane_of = {r: i for i, r in enumerate(run_ids)}
        lane = steps["run_id"].map(lane_of).to_numpy(int)
        labels = [f"{r[:8]} {status.get(r, '')}".strip() for r in run_ids]

    kinds = steps["kind"].fillna("action").tolist()
    interrupted = steps["interrupted"].fillna(False).to_numpy(bool)
    ax.barh(
        lane,
        end - start,
        left=start,
        height=0.6,
        color=[KIND_COLORS.get(k, "#777777") for k in kinds],
        edgecolor=np.where(interrupted, CUT_COLOR, "white").tolist(),
        linewidth=np.where(interrupted, 2.0, 0.5).tolist(),
    )
    if open_.any():
        ax.barh(lane[open_], (end - start)[open_], left=start[open_], height=0.6, fill=False, hatch="//")

    if not calls.empty:
        calls = calls[calls["run_id"].isin(run_ids)]
        c_start, c_end, c_open = _offsets(calls, origin)
        c_end = np.where(c_open, calls["run_id"].map(last).to_numpy(float), c_end)
        if per_step:
            row_of = {(r, n): i for i, (r, n) in enumerate(zip(steps["run_id"], steps["step"], strict=True))}
            c_lane = np.array(
                [row_of.get(key, -1) for key in zip(calls["run_id"], calls["step"], strict=True)]
            )
        else:
            c_lane = calls["run_id"].map(lane_of).to_numpy(int)
        c_status = calls["status"].fillna("cancelled").tolist()
        ax.barh(
            c_lane,
            c_end - c_start,
            left=c_start,
            height=0.25,
            color=[CALL_COLORS.get(s, "#777777") for s in c_status],
        )

    ax.set_yticks(range(lanes), labels)
    ax.invert_yaxis()
    if np.isfinite(start).any():  # the axis starts at the run's start (0), or earlier if a step does
        ax.set_xlim(left=min(0.0, float(np.nanmin(start))))
    ax.set_xlabel("seconds since the run started")
    ax.set_title(f"run {run_ids[0]}" if per_step else f"{len(run_ids)} runs")
    handles = [_patch(color, kind) for kind, color in KIND_COLORS.items() if kind in set(kinds)]
    if interrupted.any():
        handles.append(_patch("white", "cut by a Stop", edgecolor=CUT_COLOR, linewidth=2.0))
    if open_.any():
        handles.append(_patch("white", "still open", edgecolor="black", hatch="//"))
    if not calls.empty:
        handles += [_patch(color, f"tool {s}") for s, color in CALL_COLORS.items() if s in set(c_status)]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small", frameon=False)
    ax.grid(axis="x", alpha=0.3)
    return ax


def _patch(color: str, label: str, **style: Any) -> Any:
    from matplotlib.patches import Patch

    return Patch(facecolor=color, label=label, **style)


def _integer_ticks() -> Any:
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True)


def _unknown_marker(ax: Any, x: float, top: float, text: str) -> None:
    """``text`` on a white badge just above a bar, so it reads the same over any colour."""
    ax.annotate(
        text,
        (x, top),
        xytext=(0, 3),
        textcoords="offset points",
        ha="center",
        va="bottom",
        color=UNKNOWN_COLOR,
        fontweight="bold",
        bbox={
            "boxstyle": "round,pad=0.2",
            "facecolor": "white",
            "edgecolor": UNKNOWN_COLOR,
            "linewidth": 0.8,
        },
    )


def tokens(data: Records | pd.DataFrame, *, run_id: str | None = None, ax: Any = None) -> Any:
    """Input and output tokens per step, stacked: one run's steps, or the mean by step number.

    Steps whose usage is unknown are left out of the means and marked with ``?`` above their bar
    (``?2``: two runs' usage unknown at that step), an entry of the legend.

    Args:
        data: run records or a steps frame.
        run_id: draw only this run (each step its own bar).
        ax: the matplotlib Axes to draw on; a new figure by default.
    """
    steps = data if isinstance(data, pd.DataFrame) else steps_frame(as_records(data))
    if run_id is not None:
        steps = steps[steps["run_id"] == run_id]
        if steps.empty:
            raise KeyError(f"no steps for run {run_id!r}")
    ax = _axes(ax, (9, 4))
    if steps.empty:
        ax.set_title("no steps to show")
        return ax
    single = steps["run_id"].nunique() == 1
    by_step = steps.groupby("step")
    inputs = by_step["input_tokens"].mean().astype("Float64")
    outputs = by_step["output_tokens"].mean().astype("Float64")
    unknown = by_step["total_tokens"].apply(lambda s: s.isna().sum())
    x = inputs.index.to_numpy(int)
    bottom = inputs.to_numpy(float, na_value=0.0)
    heights = outputs.to_numpy(float, na_value=0.0)
    ax.bar(x, bottom, color="#4a86c8", label="input")
    ax.bar(x, heights, bottom=bottom, color="#f0a030", label="output")
    top = pd.Series(bottom + heights, index=inputs.index)
    for step, count in unknown[unknown > 0].items():
        _unknown_marker(ax, step, top[step], "?" if single else f"?{count}")
    handles, _ = ax.get_legend_handles_labels()
    if (unknown > 0).any():
        from matplotlib.lines import Line2D

        label = "usage unknown" if single else "?n: runs with usage unknown"
        handles.append(
            Line2D([], [], linestyle="none", marker="$?$", markersize=9, color=UNKNOWN_COLOR, label=label)
        )
    ax.set_ylim(bottom=0, top=max(float(top.max()), 1.0) * 1.15)  # room for the markers; never below 0
    ax.yaxis.set_major_locator(_integer_ticks())
    ax.set_xlabel("step")
    ax.set_ylabel("tokens" if single else "mean tokens")
    ax.set_title(
        f"tokens per step, run {steps['run_id'].iloc[0]}" if single else "tokens per step (mean over runs)"
    )
    ax.set_xticks(x)
    ax.legend(handles=handles, fontsize="small")
    return ax


def durations(
    data: Records | pd.DataFrame,
    *,
    of: str = "runs",
    by: str | None = None,
    bins: int = 20,
    ax: Any = None,
) -> Any:
    """A histogram of durations, one colour per group.

    Args:
        data: run records, or a runs, steps or tool-calls frame (any frame with ``duration_s``).
        of: with records, what to measure: ``"runs"``, ``"steps"`` or ``"tool_calls"``.
        by: the column to split by; by default the status (runs, calls) or the kind (steps).
        bins: histogram bins, shared by every group.
        ax: the matplotlib Axes to draw on; a new figure by default.
    """
    if isinstance(data, pd.DataFrame):
        frame = data
    else:
        builders = {"runs": runs_frame, "steps": steps_frame, "tool_calls": tool_calls_frame}
        if of not in builders:
            raise ValueError(f"of must be one of {sorted(builders)}")
        frame = builders[of](as_records(data))
    if by is None:
        by = "kind" if "kind" in frame.columns else "status"
    ax = _axes(ax, (8, 4))
    known = frame[frame["duration_s"].notna()]
    if known.empty:
        ax.set_title("no durations to show")
        return ax
    values = known["duration_s"].to_numpy(float)
    edges = np.histogram_bin_edges(values, bins=bins)
    palettes = {"kind": KIND_COLORS, "status": {**STATUS_COLORS, **CALL_COLORS}}
    palette = palettes.get(by, {})
    for name, group in known.groupby(by, dropna=False):
        label = "unknown" if pd.isna(name) else str(name)
        ax.hist(
            group["duration_s"].to_numpy(float), bins=edges, alpha=0.7, label=label, color=palette.get(label)
        )
    ax.set_xlabel("duration (s)")
    ax.set_ylabel("count")
    ax.yaxis.set_major_locator(_integer_ticks())  # counts: no 1.75 ticks
    ax.set_title(f"durations by {by}")
    ax.legend(fontsize="small")
    return ax
