"""Summaries of many runs: how often each agent and model succeeds, how long it takes, what it costs.

``summary`` takes records (or the frames built from them) and returns a plain DataFrame, one row
per group, that a user can sort, filter, restyle or export like any other. Unknown values stay
unknown: durations and tokens are taken over the runs and steps where they are known, a cost sum
is NA when no run's cost is known, and ``cost_complete`` says whether every run's whole cost was.

The end state comes from ``status`` alone, never from ``error``: a Stop (``status ==
"interrupted"``, whatever its ``stop_reason``) counts in ``interrupt_rate`` and never in
``error_rate``, even for a record made before Stops stopped filling ``error``. A queued run's wait
is reported apart (``p50_queued_s``, ``p95_queued_s``); its duration counts from its real start.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from nbagent.analytics.frames import Records, as_records, runs_frame, steps_frame

SUMMARY_COLUMNS: dict[str, str] = {
    "runs": "Int64",
    "success_rate": "Float64",
    "interrupt_rate": "Float64",
    "error_rate": "Float64",
    "p50_duration_s": "Float64",
    "p95_duration_s": "Float64",
    "p50_queued_s": "Float64",
    "p95_queued_s": "Float64",
    "steps_per_run": "Float64",
    "tokens_per_step": "Float64",
    "total_tokens": "Int64",
    "cost_usd": "Float64",
    "cost_complete": "boolean",
}
"""The columns of ``summary`` and their dtypes (the index is the ``by`` columns)."""

_FAILED = ("error", "max_steps", "limit", "unfinished")


def summary(
    data: Records | pd.DataFrame,
    steps: pd.DataFrame | None = None,
    *,
    by: str | Sequence[str] = ("agent", "model"),
) -> pd.DataFrame:
    """One row per group of runs (by default per agent and model).

    Args:
        data: run records, or a runs frame (``runs_frame``, ``RunStore.runs()``).
        steps: the steps frame of those runs, when ``data`` is a frame; it makes ``tokens_per_step``
            exact. Without it, tokens per step come from the runs whose usage is complete.
        by: the runs-frame column(s) to group by. ``"tags"`` groups per tag: a run with two tags
            counts in both groups, a run without tags in the ``<NA>`` group. For a key of the
            metadata, join ``nbagent.analytics.frames.json_columns(runs["metadata"])`` to the runs frame and
            group by ``"metadata.<key>"``.

    Columns: ``runs``; ``success_rate``, ``interrupt_rate`` (stopped: status ``interrupted``) and
    ``error_rate`` (status error, max_steps, limit (a budget ran out) or unfinished), as
    fractions of the group's runs;
    ``p50_duration_s`` and ``p95_duration_s`` over the runs that ended, from their real start;
    ``p50_queued_s`` and ``p95_queued_s``, the seconds runs waited for an earlier run of the
    same agent (0 for a run that did not wait); ``steps_per_run``; ``tokens_per_step`` (mean
    total tokens of the steps whose usage is known); ``total_tokens`` (sum of the known counts);
    ``cost_usd`` (sum of the known costs, NA when none is known) and ``cost_complete`` (every
    run's cost is known, and so is all of its usage: the sum is the whole cost).
    """
    keys = [by] if isinstance(by, str) else list(by)
    if isinstance(data, pd.DataFrame):
        runs = data
    else:
        records = as_records(data)
        runs, steps = runs_frame(records), steps_frame(records)
    missing = [k for k in keys if k not in runs.columns]
    if missing:
        raise KeyError(f"cannot group by {missing}: not columns of the runs frame")
    if "tags" in keys and runs["tags"].map(_is_list).any():
        runs = runs.explode("tags")  # one row per tag; a run without tags gets one <NA> row

    status = runs["status"]
    table = pd.DataFrame(
        {
            **{k: runs[k] for k in keys},
            "success": (status == "success").astype("Float64"),
            "interrupted": (status == "interrupted").astype("Float64"),
            "failed": status.isin(_FAILED).astype("Float64"),
            "duration_s": runs["duration_s"].astype("Float64"),
            "queued_s": _column(runs, "queued_s"),
            "n_steps": runs["n_steps"].astype("Float64"),
            "total_tokens": runs["total_tokens"],
            "cost_usd": runs["cost_usd"],
            # A run's cost is whole when it is known and so is all of its usage.
            "cost_known": runs["cost_usd"].notna() & runs["usage_complete"].fillna(False),
        }
    )
    groups = table.groupby(keys, dropna=False, sort=True)
    result = pd.DataFrame(
        {
            "runs": groups.size(),
            "success_rate": groups["success"].mean(),
            "interrupt_rate": groups["interrupted"].mean(),
            "error_rate": groups["failed"].mean(),
            "p50_duration_s": groups["duration_s"].quantile(0.5),
            "p95_duration_s": groups["duration_s"].quantile(0.95),
            "p50_queued_s": groups["queued_s"].quantile(0.5),
            "p95_queued_s": groups["queued_s"].quantile(0.95),
            "steps_per_run": groups["n_steps"].mean(),
            "tokens_per_step": _tokens_per_step(runs, steps, keys),
            "total_tokens": groups["total_tokens"].sum(min_count=1),
            "cost_usd": groups["cost_usd"].sum(min_count=1),
            "cost_complete": groups["cost_known"].all(),
        }
    )
    return result.astype(SUMMARY_COLUMNS)


def _is_list(value: object) -> bool:
    return isinstance(value, (list, tuple, np.ndarray))  # parquet gives tags back as arrays


def _column(runs: pd.DataFrame, name: str) -> pd.Series:
    """A Float64 column, all <NA> when the frame predates it (an older saved frame)."""
    if name in runs.columns:
        return runs[name].astype("Float64")
    return pd.Series(pd.NA, index=runs.index, dtype="Float64")


def _tokens_per_step(runs: pd.DataFrame, steps: pd.DataFrame | None, keys: list[str]) -> pd.Series:
    if steps is not None:
        labels = runs.set_index("run_id")[keys]
        known = steps.loc[steps["total_tokens"].notna(), ["run_id", "total_tokens"]]
        table = known.join(labels, on="run_id")
        return table.groupby(keys, dropna=False)["total_tokens"].mean().astype("Float64")
    complete = runs[runs["usage_complete"].fillna(False).astype(bool)]
    sums = complete.groupby(keys, dropna=False)[["total_tokens", "n_steps"]].sum(min_count=1)
    ratio = sums["total_tokens"].astype("Float64") / sums["n_steps"].astype("Float64")
    return ratio.replace([np.inf, -np.inf], pd.NA)
