"""What a batch runs: the user's tasks (a list of strings, of dicts, or a DataFrame) as ``TaskItem``s.

Each item keeps the task text, the row it came from (its other columns: an id, the expected
answer) and the key a resume finds it by. The key is the ``key`` column when there is one (an
``id`` column by default), else the task text; the same text again gets ``text#2`` (``#3``...),
a suffix no task's own text has, so each occurrence is its own task and no two keys are one (the
tasks ``["a", "a", "a#2"]`` are keyed ``a``, ``a#3``, ``a#2``). Bad input fails here, before
anything runs, naming the row.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

TASK_COLUMN = "task"
DEFAULT_KEY = "id"


@dataclass(frozen=True, slots=True)
class TaskItem:
    """One task of a batch."""

    index: int
    """Its position in the batch (0-based)."""
    key: str
    """What a resume knows it by."""
    task: str
    row: dict[str, Any] = field(default_factory=dict)
    """The task's own columns (the ``task`` column included), as given."""


def _rows(tasks: Any) -> list[dict[str, Any]]:
    if hasattr(tasks, "columns") and hasattr(tasks, "to_dict"):  # a DataFrame, without importing pandas
        columns = [str(c) for c in tasks.columns]
        if TASK_COLUMN not in columns:
            raise ValueError(
                f"a DataFrame of tasks needs a {TASK_COLUMN!r} column; it has: {', '.join(columns) or 'none'}"
            )
        return [{str(k): v for k, v in row.items()} for row in tasks.to_dict("records")]
    if isinstance(tasks, (str, bytes)) or not isinstance(tasks, Iterable):
        raise TypeError(
            f"tasks must be a list of strings, a list of dicts or a DataFrame with a {TASK_COLUMN!r} "
            f"column, not {type(tasks).__name__}"
        )
    rows = []
    for index, task in enumerate(tasks):
        if isinstance(task, str):
            rows.append({TASK_COLUMN: task})
        elif isinstance(task, dict):
            if TASK_COLUMN not in task:
                raise ValueError(f"task {index} is a dict without a {TASK_COLUMN!r} key: {sorted(task)}")
            rows.append({str(k): v for k, v in task.items()})
        else:
            raise TypeError(f"task {index} is a {type(task).__name__}; tasks are strings or dicts")
    return rows


def _missing(value: Any) -> bool:
    try:
        return value is None or bool(value != value)  # NaN, NA, NaT
    except (TypeError, ValueError):
        return False


def _fresh_key(text: str, seen: dict[str, int], texts: set[str]) -> str:
    """``text#n`` for the next ``n`` that is neither a task's own text nor a key given already."""
    count = seen[text]
    while True:
        count += 1
        name = f"{text}#{count}"
        if name not in texts and name not in seen:
            seen[text] = count
            seen[name] = seen.get(name, 1)
            return name


def task_items(tasks: Any, *, key: str | None = None) -> list[TaskItem]:
    """``tasks`` as items. ``key`` names the column that identifies a task (default: ``id`` when
    every row has one); a key given twice is an error, as a resume could not tell the two apart."""
    rows = _rows(tasks)
    if key is None and rows and all(DEFAULT_KEY in row for row in rows):
        key = DEFAULT_KEY
    items: list[TaskItem] = []
    seen: dict[str, int] = {}
    texts = (
        set() if key is not None else {row[TASK_COLUMN] for row in rows if isinstance(row[TASK_COLUMN], str)}
    )
    for index, row in enumerate(rows):
        text = row[TASK_COLUMN]
        if not isinstance(text, str):
            raise TypeError(
                f"task {index}: the {TASK_COLUMN!r} value must be a str, not {type(text).__name__}"
            )
        if key is not None:
            if key not in row or _missing(row[key]):
                raise ValueError(f"task {index} has no {key!r} value to key it by")
            name = str(row[key])
            if name in seen:
                raise ValueError(f"tasks {seen[name]} and {index} have the same {key!r}: {name!r}")
            seen[name] = index
        elif text not in seen:
            seen[text] = 1
            name = text
        else:
            name = _fresh_key(text, seen, texts)
        items.append(TaskItem(index, name, text, row))
    return items
