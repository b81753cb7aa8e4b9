"""Run records as tidy pandas DataFrames: one row per run, per step, per tool call.

Frames are built column by column: each column is pulled from the records into one list, then
turned into a typed pandas array in one go. That is several times faster than a DataFrame from a
list of per-row dicts, and it gives every column its real dtype instead of ``object``:

- times are ``datetime64[ns, UTC]`` (``NaT`` while a step or call has not ended);
- token counts are nullable ``Int64``: ``<NA>`` means unknown, never 0;
- durations are ``Float64`` seconds and cost is ``Float64`` US dollars, ``<NA>`` when unknown;
- text is the pandas ``"string"`` dtype and flags are ``"boolean"``.

Interrupted runs, and the step an interrupt cut short, are rows like any other. Works with
pandas 2.2 and 3.x.

``runs_frame`` columns:
    run_id, task, agent, model; status (success / interrupted / error / max_steps, ``running``
    for a live snapshot, ``unfinished`` when read from a store whose writer died);
    started_at, ended_at, duration_s; n_steps; input_tokens, output_tokens, total_tokens (sums
    of the known counts, ``<NA>`` when no step's usage is known); usage_complete (every step's
    usage is known, so the sums are the whole truth); cost_usd (the record's cost, else
    computed with the ``cost`` extra when it is installed and the model has a price); error.

``steps_frame`` columns:
    run_id, step (1-based number), kind (planning / action / final), started_at, ended_at,
    duration_s, input_tokens, output_tokens, total_tokens (``<NA>`` unless both are known),
    usage_source (reported / estimated / unknown), n_tool_calls, interrupted, error.

``tool_calls_frame`` columns:
    run_id, step, call_id, tool, arguments (JSON text; raw text kept as the model sent it),
    started_at, ended_at, duration_s, status (ok / error / cancelled / abandoned; ``<NA>``
    while in flight), error.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from itertools import chain
from operator import attrgetter
from typing import Any

import numpy as np
import pandas as pd

from .records import RunRecord, StepRecord, ToolCallRecord

RUN_COLUMNS: dict[str, str] = {
    "run_id": "string",
    "task": "string",
    "agent": "string",
    "model": "string",
    "status": "string",
    "started_at": "datetime64[ns, UTC]",
    "ended_at": "datetime64[ns, UTC]",
    "duration_s": "Float64",
    "n_steps": "Int64",
    "input_tokens": "Int64",
    "output_tokens": "Int64",
    "total_tokens": "Int64",
    "usage_complete": "boolean",
    "cost_usd": "Float64",
    "error": "string",
}
"""The columns of ``runs_frame`` and their dtypes."""

STEP_COLUMNS: dict[str, str] = {
    "run_id": "string",
    "step": "Int64",
    "kind": "string",
    "started_at": "datetime64[ns, UTC]",
    "ended_at": "datetime64[ns, UTC]",
    "duration_s": "Float64",
    "input_tokens": "Int64",
    "output_tokens": "Int64",
    "total_tokens": "Int64",
    "usage_source": "string",
    "n_tool_calls": "Int64",
    "interrupted": "boolean",
    "error": "string",
}
"""The columns of ``steps_frame`` and their dtypes."""

TOOL_CALL_COLUMNS: dict[str, str] = {
    "run_id": "string",
    "step": "Int64",
    "call_id": "string",
    "tool": "string",
    "arguments": "string",
    "started_at": "datetime64[ns, UTC]",
    "ended_at": "datetime64[ns, UTC]",
    "duration_s": "Float64",
    "status": "string",
    "error": "string",
}
"""The columns of ``tool_calls_frame`` and their dtypes."""

Records = Iterable[RunRecord] | RunRecord


def as_records(records: Records) -> list[RunRecord]:
    """A list of records from one record or any iterable of them."""
    return [records] if isinstance(records, RunRecord) else list(records)


# -- typed columns from plain lists --------------------------------------------------------------


def _floats(values: Sequence[float | None]) -> np.ndarray:
    """float64 with NaN for None (numpy converts None itself, in C)."""
    return np.array(values, dtype=np.float64) if len(values) else np.empty(0, dtype=np.float64)


def _counts(floats: np.ndarray) -> pd.arrays.IntegerArray:
    """Nullable Int64 from float64 counts, NaN meaning unknown (exact for counts below 2**53)."""
    mask = np.isnan(floats)
    return pd.arrays.IntegerArray(np.where(mask, 0, floats).astype(np.int64), mask)


def _ints(values: Sequence[int]) -> pd.arrays.IntegerArray:
    data = np.array(values, dtype=np.int64) if len(values) else np.empty(0, dtype=np.int64)
    return pd.arrays.IntegerArray(data, np.zeros(len(data), dtype=bool))


def _measures(floats: np.ndarray) -> pd.arrays.FloatingArray:
    """Nullable Float64: NaN (unknown) becomes <NA>."""
    mask = np.isnan(floats)
    return pd.arrays.FloatingArray(np.where(mask, 0.0, floats), mask)


def _texts(values: Sequence[str | None]) -> Any:
    return pd.array(values, dtype="string")


def _flags(values: Sequence[bool]) -> Any:
    return pd.array(np.array(values, dtype=bool), dtype="boolean")


def _times(values: Sequence[datetime | None]) -> Any:
    """datetime64[ns, UTC]; None becomes NaT, aware times are converted to UTC, naive ones taken as UTC."""
    try:
        index = pd.DatetimeIndex(values)
    except (TypeError, ValueError):  # time zones of several kinds in one column: the slower, general path
        return pd.array(values, dtype="datetime64[ns, UTC]")
    index = index.tz_localize("UTC") if index.tz is None else index.tz_convert("UTC")
    return index.as_unit("ns").array


def _durations(start: Sequence[float], end: Sequence[float | None]) -> pd.arrays.FloatingArray:
    return _measures(_floats(end) - _floats(start))


def _repeat(run_ids: list[str], counts: list[int]) -> Any:
    """The run id of every child row: build the run-level strings once, then take by position."""
    return _texts(run_ids).take(np.repeat(np.arange(len(run_ids)), counts))


def _pull(items: Sequence[Any], name: str) -> list[Any]:
    return list(map(attrgetter(name), items))


# -- the frames ---------------------------------------------------------------------------------


def runs_frame(records: Records) -> pd.DataFrame:
    """One row per run (see the module docstring for the columns)."""
    runs = as_records(records)
    from .cost import record_cost

    columns: dict[str, Any] = {
        "run_id": _texts(_pull(runs, "run_id")),
        "task": _texts(_pull(runs, "task")),
        "agent": _texts(_pull(runs, "agent")),
        "model": _texts(_pull(runs, "model")),
        "status": _texts(_pull(runs, "status")),
        "started_at": _times(_pull(runs, "started_at")),
        "ended_at": _times(_pull(runs, "ended_at")),
        "duration_s": _measures(_floats(_pull(runs, "duration_s"))),
        "n_steps": _ints([len(r.steps) for r in runs]),
        "input_tokens": _counts(_floats(_pull(runs, "input_tokens"))),
        "output_tokens": _counts(_floats(_pull(runs, "output_tokens"))),
        "total_tokens": _counts(_floats(_pull(runs, "total_tokens"))),
        "usage_complete": _flags(_pull(runs, "usage_complete")),
        "cost_usd": _measures(_floats([record_cost(r) for r in runs])),
        "error": _texts(_pull(runs, "error")),
    }
    return pd.DataFrame(columns, copy=False)


def steps_frame(records: Records) -> pd.DataFrame:
    """One row per step of every run (see the module docstring for the columns)."""
    runs = as_records(records)
    counts = [len(r.steps) for r in runs]
    steps: list[StepRecord] = [step for run in runs for step in run.steps]
    input_tokens = _floats(_pull(steps, "input_tokens"))
    output_tokens = _floats(_pull(steps, "output_tokens"))
    columns: dict[str, Any] = {
        "run_id": _repeat(_pull(runs, "run_id"), counts),
        "step": _ints(_pull(steps, "number")),
        "kind": _texts(_pull(steps, "kind")),
        "started_at": _times(_pull(steps, "started_at")),
        "ended_at": _times(_pull(steps, "ended_at")),
        "duration_s": _durations(_pull(steps, "start_s"), _pull(steps, "end_s")),
        "input_tokens": _counts(input_tokens),
        "output_tokens": _counts(output_tokens),
        # Known only when both parts are (NaN propagates), as StepRecord.total_tokens says.
        "total_tokens": _counts(input_tokens + output_tokens),
        "usage_source": _texts(_pull(steps, "usage_source")),
        "n_tool_calls": _ints(list(map(len, _pull(steps, "tool_calls")))),
        "interrupted": _flags(_pull(steps, "interrupted")),
        "error": _texts(_pull(steps, "error")),
    }
    return pd.DataFrame(columns, copy=False)


_ARGUMENTS = json.JSONEncoder(ensure_ascii=False, default=str)
"""One encoder for every call: ``json.dumps`` with options would build a new one each time."""


def arguments_text(arguments: Any) -> str | None:
    """A tool call's arguments as text: JSON for structured values, raw text as the model sent it."""
    if arguments is None or isinstance(arguments, str):
        return arguments
    try:
        return _ARGUMENTS.encode(arguments)
    except (TypeError, ValueError):
        return repr(arguments)


def tool_calls_frame(records: Records) -> pd.DataFrame:
    """One row per tool call of every step of every run (see the module docstring for the columns)."""
    runs = as_records(records)
    steps: list[StepRecord] = [step for run in runs for step in run.steps]
    lists: list[list[ToolCallRecord]] = _pull(steps, "tool_calls")
    per_step = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
    calls: list[ToolCallRecord] = list(chain.from_iterable(lists))
    run_of_step = np.repeat(np.arange(len(runs)), [len(r.steps) for r in runs])
    columns: dict[str, Any] = {
        "run_id": _texts(_pull(runs, "run_id")).take(np.repeat(run_of_step, per_step)),
        "step": _ints(np.repeat(np.array(_pull(steps, "number"), dtype=np.int64), per_step)),
        "call_id": _texts(_pull(calls, "call_id")),
        "tool": _texts(_pull(calls, "tool")),
        "arguments": _texts(list(map(arguments_text, _pull(calls, "arguments")))),
        "started_at": _times(_pull(calls, "started_at")),
        "ended_at": _times(_pull(calls, "ended_at")),
        "duration_s": _durations(_pull(calls, "start_s"), _pull(calls, "end_s")),
        "status": _texts(_pull(calls, "status")),
        "error": _texts(_pull(calls, "error")),
    }
    return pd.DataFrame(columns, copy=False)
