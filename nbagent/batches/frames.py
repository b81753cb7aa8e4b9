"""A batch as DataFrames: one row per task, every attempt, and steps and tool calls with task keys.

Built from records with the ordinary frames (``nbagent.analytics.frames``), so a batch's columns
and dtypes are the runs frame's; the task's own columns are joined in front. pandas is imported
here only, on use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from nbagent.batches.resume import key_of
from nbagent.records import RunRecord

if TYPE_CHECKING:
    import pandas as pd

    from nbagent.batches.handle import Batch


def batch_frame(batch: Batch) -> pd.DataFrame:
    """One row per task, in task order: ``task_key``, the task's own columns, then its latest
    attempt's runs-frame columns (``status`` is ``"skipped"`` for a task that never started,
    ``"queued"``/``"running"`` while the batch runs), ``attempts``, ``reused``, and
    ``score``/``score_error`` when the batch has a score (``score`` is NA for a run cut short,
    which the scorer is not asked about, and where the scorer failed). A task column that clashes with a runs
    column or one of these is kept with a ``_task`` suffix."""
    import pandas as pd

    from nbagent.analytics.frames import runs_frame

    states = list(batch.tasks)
    records: list[RunRecord] = []
    where: list[int] = []
    for position, state in enumerate(states):
        if state.record is None and state.run is None:
            continue  # never started: the common case of a stopped batch, so no call per task
        record = batch.record_of(position)
        if record is not None:
            records.append(record)
            where.append(position)
    runs = runs_frame(records)
    runs.index = pd.Index(where)
    runs = runs.reindex(range(len(states)))
    # Column-wise: a task without a record says where it is. (Set cell by cell, the statuses of
    # 100,000 stopped tasks took 11 s: each cell of an arrow-backed column is a copy.)
    phases = pd.Series([s.phase for s in states], dtype="string")
    runs["status"] = runs["status"].astype("string").where(runs["run_id"].notna(), phases)
    own = pd.DataFrame([s.item.row for s in states], index=range(len(states)))
    ours = {"task_key", "attempts", "reused"} | (
        {"score", "score_error"} if batch.score is not None else set()
    )
    taken = (set(runs.columns) - {"task"}) | ours
    own = own.rename(columns={c: f"{c}_task" for c in own.columns if c in taken})
    frame = pd.concat([own, runs.drop(columns=["task"])], axis=1)
    frame.insert(0, "task_key", pd.array([s.item.key for s in states], dtype="string"))
    frame["attempts"] = pd.array([s.attempts + (s.phase == "ended") for s in states], dtype="Int64")
    frame["reused"] = pd.array([s.phase == "reused" for s in states], dtype="boolean")
    if batch.score is not None:
        frame["score"] = score_column([s.score for s in states])
        frame["score_error"] = pd.array([s.score_error for s in states], dtype="string")
    return frame.reset_index(drop=True)


def score_column(scores: list[object]) -> object:
    """The scores as a column with NA where there is none (a run cut short, a scorer that
    failed): ``boolean``, ``Int64`` or ``Float64`` when the scores are all of one such kind, so
    ``frame.score.mean()`` skips the NAs; else objects."""
    import pandas as pd

    values = [pd.NA if score is None else score for score in scores]
    try:
        column = pd.array(values)
    except (TypeError, ValueError):
        return values
    if column.dtype == object:
        return values
    return column


def attempts_frame(records: list[RunRecord]) -> pd.DataFrame:
    """The runs frame of ``records`` (oldest first, each run once) with ``task_key`` and
    ``attempt`` (1, 2, ... per task)."""
    import pandas as pd

    from nbagent.analytics.frames import runs_frame

    unique = list({r.run_id: r for r in records}.values())
    frame = runs_frame(unique)
    frame.insert(0, "task_key", pd.array([key_of(r) for r in unique], dtype="string"))
    frame["attempt"] = pd.array(frame.groupby("task_key").cumcount().to_numpy() + 1, dtype="Int64")
    return frame


def keyed(build: Callable[[list[RunRecord]], pd.DataFrame], records: list[RunRecord]) -> pd.DataFrame:
    """``build(records)`` with a ``task_key`` column first."""
    import pandas as pd

    keys = {r.run_id: key_of(r) for r in records}
    frame = build(records)
    frame.insert(0, "task_key", pd.array(frame["run_id"].map(keys), dtype="string"))
    return frame
