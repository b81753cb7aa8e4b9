"""Run records as tidy pandas DataFrames: one row per run, per step, per tool call.

Frames are built column by column: each column is pulled from the records into one list, then
turned into a typed pandas array in one go (by pyarrow when it backs the ``"string"`` dtype).
That is faster than a DataFrame from per-row dicts, and every column has its real dtype:

- times are ``datetime64[ns, UTC]`` (``NaT`` while a step or call has not ended);
- token counts are nullable ``Int64``: ``<NA>`` means unknown, never 0;
- durations are ``Float64`` seconds and cost is ``Float64`` US dollars, ``<NA>`` when unknown;
- text is the pandas ``"string"`` dtype and flags are ``"boolean"``;
- a run's output and a tool's result are text as the views show them (strings as they are,
  other values their ``repr``), ``<NA>`` when there is none;
- structured values (tool arguments, a run's ``metadata`` and ``model_params``) are JSON text:
  ``json.loads`` gives them back, ``json_columns`` spreads them into columns, and unlike dicts
  they survive ``to_parquet`` (pyarrow cannot write an empty dict, nor a key whose type varies);
- ``tags`` holds lists of strings, because a tag is matched whole:
  ``runs[runs.tags.map(lambda t: "eval" in t)]``; ``runs.explode("tags")`` gives a row per tag and
  ``summary(..., by="tags")`` sums up per tag. A comma-joined string would make ``"eval"`` match
  ``"eval-old"``. Read back from parquet the lists are numpy arrays (``"eval" in t`` still works).

No value makes a frame raise. Text goes through ``nbagent.text``: lone surrogates are escaped
(pyarrow refuses them) and a value that cannot become text (a ``__repr__`` that raises,
``2 ** 20000``) becomes an ``<unprintable ...>`` note; a number or time that is not one is
``<NA>``/``NaT``. The checks cost next to nothing when every value is a plain string.

A Stop is not an error: its run has ``status == "interrupted"``, a ``stop_reason`` and no
``error``; the step it cut is a row like any other. Works with pandas 2.2 and 3.x.

``runs_frame`` columns:
    run_id, task, agent, model; status (success / interrupted / error / max_steps / limit,
    ``running`` for a live snapshot, ``unfinished`` when read from a store whose writer died);
    stop_reason (an ``nbagent.events.StopReason``: user / user_after_step / keyboard / parent /
    max_steps / error..., or the tripped limit such as max_cost_usd; ``<NA>`` for a success;
    ``nbagent.events.stop_text`` gives its words); started_at, ended_at, duration_s (from
    the real start); queued_s (seconds spent waiting for an earlier run of the same agent);
    wait_s (seconds tool calls waited for approval); n_steps; input_tokens, output_tokens, total_tokens (sums
    of the known counts, ``<NA>`` when no step's usage is known); usage_complete (every step's
    usage is known); cost_usd (the record's, else computed with the ``cost`` extra when the
    model has a price); output (the final answer, also of a max-steps run that forced one);
    error, error_type (the ``AgentError`` class name); parent_run_id (the run whose tool started
    this one); continues_run_id (the run a ``reset=False`` run continues); forked_from_run_id,
    forked_at_step (the run and step a fork starts from, ``nbagent.fork``); tags; metadata,
    model_params (JSON text).

``steps_frame`` columns:
    run_id, step (1-based number), kind (planning / action / final), started_at, ended_at,
    duration_s, input_tokens, output_tokens, total_tokens (``<NA>`` unless both are known),
    usage_source (reported / estimated / unknown), model_ended_at (when the step's model call
    had its whole reply; ``NaT`` when unknown), wait_s (approval waits), n_tool_calls,
    interrupted, error,
    model_output (the model's text in the step, ``""`` when it wrote none).

``tool_calls_frame`` columns:
    run_id, step, call_id, tool, arguments (JSON text; raw text kept as the model sent it),
    started_at (after its approval), ended_at, duration_s, status (ok / error / cancelled /
    abandoned / denied / deferred; ``<NA>`` while in flight), result (``<NA>`` when the call returned
    none), error (a denial's reason), approval (approved / denied / timed_out; ``<NA>`` when
    none was needed), approval_wait_s.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from datetime import datetime
from itertools import chain
from operator import attrgetter
from typing import Any

import numpy as np
import pandas as pd

from nbagent.records import RunRecord, StepRecord, ToolCallRecord
from nbagent.text import clean, safe_text

UTC_NS = "datetime64[ns, UTC]"

RUN_COLUMNS: dict[str, str] = {
    "run_id": "string",
    "task": "string",
    "agent": "string",
    "model": "string",
    "status": "string",
    "stop_reason": "string",
    "started_at": UTC_NS,
    "ended_at": UTC_NS,
    "duration_s": "Float64",
    "queued_s": "Float64",
    "wait_s": "Float64",
    "n_steps": "Int64",
    "input_tokens": "Int64",
    "output_tokens": "Int64",
    "total_tokens": "Int64",
    "usage_complete": "boolean",
    "cost_usd": "Float64",
    "output": "string",
    "error": "string",
    "error_type": "string",
    "parent_run_id": "string",
    "continues_run_id": "string",
    "forked_from_run_id": "string",
    "forked_at_step": "Int64",
    "tags": "object",
    "metadata": "string",
    "model_params": "string",
}
"""The columns of ``runs_frame`` and their dtypes."""

STEP_COLUMNS: dict[str, str] = {
    "run_id": "string",
    "step": "Int64",
    "kind": "string",
    "started_at": UTC_NS,
    "ended_at": UTC_NS,
    "duration_s": "Float64",
    "input_tokens": "Int64",
    "output_tokens": "Int64",
    "total_tokens": "Int64",
    "usage_source": "string",
    "model_ended_at": UTC_NS,
    "wait_s": "Float64",
    "n_tool_calls": "Int64",
    "interrupted": "boolean",
    "error": "string",
    "model_output": "string",
}
"""The columns of ``steps_frame`` and their dtypes."""

TOOL_CALL_COLUMNS: dict[str, str] = {
    "run_id": "string",
    "step": "Int64",
    "call_id": "string",
    "tool": "string",
    "arguments": "string",
    "started_at": UTC_NS,
    "ended_at": UTC_NS,
    "duration_s": "Float64",
    "status": "string",
    "result": "string",
    "error": "string",
    "approval": "string",
    "approval_wait_s": "Float64",
}
"""The columns of ``tool_calls_frame`` and their dtypes."""

Records = Iterable[RunRecord] | RunRecord


def as_records(records: Records) -> list[RunRecord]:
    """A list of records from one record or any iterable of them."""
    return [records] if isinstance(records, RunRecord) else list(records)


# -- values as text ------------------------------------------------------------------------------

_JSON = json.JSONEncoder(ensure_ascii=False, default=str)
"""One encoder for every value: ``json.dumps`` with options would build a new one each time."""


def json_text(value: Any) -> str | None:
    """A structured value as JSON text (raw text stays as it is, ``None`` stays missing); a value
    JSON cannot hold becomes its ``repr``. Never raises."""
    if value is None:
        return None
    if isinstance(value, str):
        return clean(value)
    try:
        return clean(_JSON.encode(value))
    except KeyboardInterrupt:
        raise
    except BaseException:  # a key JSON cannot hold, a cycle, an int past the limit, a raising repr...
        return safe_text(value)


def value_text(value: Any) -> str | None:
    """A run's output or a tool's result as the views show it: ``None`` stays missing, strings
    are themselves, other values their ``repr``. Never raises."""
    return None if value is None else safe_text(value)


def json_columns(column: pd.Series, prefix: str | None = None) -> pd.DataFrame:
    """One column per key of a JSON-text column (``metadata``, ``model_params``, ``arguments``),
    on the same index, so ``runs.join(json_columns(runs["metadata"]))`` adds ``metadata.variant``
    and the like, ready for ``summary(..., by="metadata.variant")``.

    A key missing from a row is ``<NA>``; a row that is not a JSON object (``<NA>``, raw text, a
    list) has no keys. Column names are ``prefix`` (default: the column's name and a dot) + key.
    Parsing each row here, rather than ``column.map(json.loads)``, keeps every row's own dict:
    pandas 3 may turn mapped dicts into an Arrow struct that gives every row every key.
    """
    if prefix is None:
        prefix = f"{column.name}." if column.name is not None else ""
    rows = list(map(_json_object, column.tolist()))
    table = pd.DataFrame.from_records(rows, index=column.index) if rows else pd.DataFrame(index=column.index)
    return table.rename(columns=lambda key: f"{prefix}{key}").convert_dtypes()


def _json_object(text: Any) -> dict[str, Any]:
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _tag_list(tags: Any) -> list[str]:
    if tags is None:
        return []
    if isinstance(tags, str):
        return [clean(tags)]
    try:
        return [safe_text(tag) for tag in tags]
    except Exception:  # not iterable, or its iterator failed
        return [safe_text(tags)]


# -- typed columns from plain lists --------------------------------------------------------------


def _float(value: Any) -> float:
    try:
        return math.nan if value is None else float(value)
    except Exception:
        return math.nan


def _floats(values: Sequence[Any]) -> np.ndarray:
    """float64 with NaN for None (numpy converts None itself, in C); NaN for anything not a number."""
    if not len(values):
        return np.empty(0, dtype=np.float64)
    try:
        return np.array(values, dtype=np.float64)
    except Exception:  # pd.NA, an int too big for a float, a non-number: one value at a time
        return np.fromiter(map(_float, values), dtype=np.float64, count=len(values))


def _counts(floats: np.ndarray) -> pd.arrays.IntegerArray:
    """Nullable Int64 from float64 counts, NaN meaning unknown (exact for counts below 2**53)."""
    mask = ~np.isfinite(floats) | (np.abs(floats) >= 2.0**63)
    return pd.arrays.IntegerArray(np.where(mask, 0, floats).astype(np.int64), mask)


def _ints(values: Sequence[Any]) -> pd.arrays.IntegerArray:
    try:
        data = np.array(values, dtype=np.int64) if len(values) else np.empty(0, dtype=np.int64)
    except Exception:
        return _counts(_floats(values))
    return pd.arrays.IntegerArray(data, np.zeros(len(data), dtype=bool))


def _measures(floats: np.ndarray) -> pd.arrays.FloatingArray:
    """Nullable Float64: NaN (unknown) becomes <NA>."""
    mask = np.isnan(floats)
    return pd.arrays.FloatingArray(np.where(mask, 0.0, floats), mask)


def _text(value: Any) -> str | None:
    missing = value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))
    return None if missing else safe_text(value)


def _texts(values: Sequence[Any]) -> Any:
    """The ``"string"`` dtype, None as <NA>. When every value is a valid string or None, as it
    nearly always is, the check runs in C (pyarrow's own, when it backs the dtype: several times
    faster than ``pd.array`` on a list); otherwise each value is made clean text."""
    try:
        if pd.StringDtype().storage == "pyarrow":
            import pyarrow as pa

            return pd.array(pa.array(values, type=pa.string()), dtype="string")
        if all(map(str.isascii, filter(None, values))):  # TypeError for a non-string
            return pd.array(values, dtype="string")
    except Exception:
        pass
    return pd.array([_text(v) for v in values], dtype="string")


def _flags(values: Sequence[Any]) -> Any:
    try:
        data = np.array(values, dtype=bool)
    except Exception:  # a value with no truth value (pd.NA): unknown
        return pd.array([v if isinstance(v, (bool, np.bool_)) else None for v in values], dtype="boolean")
    return pd.array(data, dtype="boolean")


def _time(value: Any) -> Any:
    try:
        stamp = pd.Timestamp(value)
        stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
        return stamp.as_unit("ns")
    except Exception:
        return pd.NaT


def _times(values: Sequence[datetime | None]) -> Any:
    """datetime64[ns, UTC]; None becomes NaT, aware times are converted to UTC, naive ones taken as
    UTC, anything that is not a time (or is out of the ns range) NaT."""
    try:
        index = pd.DatetimeIndex(values)
        index = index.tz_localize("UTC") if index.tz is None else index.tz_convert("UTC")
        return index.as_unit("ns").array
    except Exception:  # time zones of several kinds in one column, or odd values: one at a time
        return pd.array([_time(v) for v in values], dtype=UTC_NS)


def _durations(start: Sequence[float], end: Sequence[float | None]) -> pd.arrays.FloatingArray:
    return _measures(_floats(end) - _floats(start))


def _repeat(run_ids: list[str], counts: list[int]) -> Any:
    """The run id of every child row: build the run-level strings once, then take by position."""
    return _texts(run_ids).take(np.repeat(np.arange(len(run_ids)), counts))


def _pull(items: Sequence[Any], name: str) -> list[Any]:
    return list(map(attrgetter(name), items))


def _objects(values: Iterable[Any], size: int) -> np.ndarray:
    """An object array holding each value as it is (``np.array`` would try to nest lists)."""
    out = np.empty(size, dtype=object)
    for i, value in enumerate(values):
        out[i] = value
    return out


def _costs(runs: list[RunRecord]) -> list[float | None]:
    from nbagent.analytics.cost import record_cost

    def cost(record: RunRecord) -> float | None:
        try:
            return record_cost(record)
        except Exception:  # a hand-made record the pricing cannot read: its cost is unknown
            return None

    return list(map(cost, runs))


# -- the frames ---------------------------------------------------------------------------------


def runs_frame(records: Records) -> pd.DataFrame:
    """One row per run (see the module docstring for the columns)."""
    runs = as_records(records)
    columns: dict[str, Any] = {
        "run_id": _texts(_pull(runs, "run_id")),
        "task": _texts(_pull(runs, "task")),
        "agent": _texts(_pull(runs, "agent")),
        "model": _texts(_pull(runs, "model")),
        "status": _texts(_pull(runs, "status")),
        "stop_reason": _texts(_pull(runs, "stop_reason")),
        "started_at": _times(_pull(runs, "started_at")),
        "ended_at": _times(_pull(runs, "ended_at")),
        "duration_s": _measures(_floats(_pull(runs, "duration_s"))),
        "queued_s": _measures(_floats(_pull(runs, "queued_s"))),
        "wait_s": _measures(_floats(_pull(runs, "wait_s"))),
        "n_steps": _ints([len(r.steps) for r in runs]),
        "input_tokens": _counts(_floats(_pull(runs, "input_tokens"))),
        "output_tokens": _counts(_floats(_pull(runs, "output_tokens"))),
        "total_tokens": _counts(_floats(_pull(runs, "total_tokens"))),
        "usage_complete": _flags(_pull(runs, "usage_complete")),
        "cost_usd": _measures(_floats(_costs(runs))),
        "output": _texts(list(map(value_text, _pull(runs, "output")))),
        "error": _texts(_pull(runs, "error")),
        "error_type": _texts(_pull(runs, "error_type")),
        "parent_run_id": _texts(_pull(runs, "parent_run_id")),
        "continues_run_id": _texts(_pull(runs, "continues_run_id")),
        "forked_from_run_id": _texts(_pull(runs, "forked_from_run_id")),
        "forked_at_step": _ints(_pull(runs, "forked_at_step")),
        "tags": _objects(map(_tag_list, _pull(runs, "tags")), len(runs)),
        "metadata": _texts(list(map(json_text, _pull(runs, "metadata")))),
        "model_params": _texts(list(map(json_text, _pull(runs, "model_params")))),
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
        "model_ended_at": _times(_pull(steps, "model_ended_at")),
        "wait_s": _measures(_floats(_pull(steps, "wait_s"))),
        "n_tool_calls": _ints(list(map(len, _pull(steps, "tool_calls")))),
        "interrupted": _flags(_pull(steps, "interrupted")),
        "error": _texts(_pull(steps, "error")),
        "model_output": _texts(_pull(steps, "model_output")),
    }
    return pd.DataFrame(columns, copy=False)


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
        "step": _ints(_pull(steps, "number")).take(np.repeat(np.arange(len(steps)), per_step)),
        "call_id": _texts(_pull(calls, "call_id")),
        "tool": _texts(_pull(calls, "tool")),
        "arguments": _texts(list(map(json_text, _pull(calls, "arguments")))),
        "started_at": _times(_pull(calls, "started_at")),
        "ended_at": _times(_pull(calls, "ended_at")),
        "duration_s": _durations(_pull(calls, "start_s"), _pull(calls, "end_s")),
        "status": _texts(_pull(calls, "status")),
        "result": _texts(list(map(value_text, _pull(calls, "result")))),
        "error": _texts(_pull(calls, "error")),
        "approval": _texts(_pull(calls, "approval")),
        "approval_wait_s": _measures(_floats(_pull(calls, "approval_wait_s"))),
    }
    return pd.DataFrame(columns, copy=False)
