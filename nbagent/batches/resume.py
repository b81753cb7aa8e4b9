"""Resume: what a batch knows about its earlier attempts, and which tasks it skips.

A batch with a ``name`` marks each of its runs with ``metadata["batch"] = {"name", "key",
"index", "row"}`` (and the tag ``batch:<name>``); the store persists metadata as JSON, so a later
batch of the same name finds every earlier attempt in one SQL query
(``RunStore.records_where("batch.name", name)``), whichever process wrote them and however that
process ended. A run whose writer was killed reads back as ``"unfinished"``, so it is rerun.
A task is skipped when its latest attempt ended in one of the ``skip`` statuses (``success`` by
default); the frame then shows that attempt, with ``reused`` set. An attempt counts for a task
only when both its key and its task text are the task's: a stored run of another task (a list
edited since, or keys given by an older release, where ``["a", "a", "a#2"]`` keyed two tasks
``a#2``) is never reported as this task's answer.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from nbagent.batches.tasks import TaskItem
from nbagent.records import RunRecord

if TYPE_CHECKING:
    from nbagent.analytics.store import RunStore

BATCH_KEY = "batch"
DEFAULT_SKIP = ("success",)
SKIPPABLE = frozenset({"success", "error", "max_steps", "interrupted", "limit"})


def check_skip(skip: Iterable[str] | str) -> frozenset[str]:
    statuses = frozenset([skip] if isinstance(skip, str) else skip)
    unknown = statuses - SKIPPABLE
    if unknown:
        raise ValueError(
            f"skip takes end states of runs ({', '.join(sorted(SKIPPABLE))}), "
            f"not {', '.join(sorted(unknown))}"
        )
    return statuses


def batch_metadata(name: str | None, item: TaskItem) -> dict[str, Any]:
    """What a run of ``item`` carries so a resume finds it: ``metadata["batch"]``."""
    row = {k: v for k, v in item.row.items() if k != "task"}
    return {"name": name, "key": item.key, "index": item.index, "row": row}


def batch_tags(name: str | None) -> list[str]:
    return [] if name is None else [f"batch:{name}"]


def key_of(record: RunRecord) -> str | None:
    marks = record.metadata.get(BATCH_KEY) if isinstance(record.metadata, dict) else None
    key = marks.get("key") if isinstance(marks, dict) else None
    return key if isinstance(key, str) else None


def earlier_attempts(store: RunStore, name: str) -> list[RunRecord]:
    """Every stored run of the batch ``name``, oldest first."""
    return [r for r in store.records_where(f"{BATCH_KEY}.name", name) if key_of(r) is not None]


def attempts_by_task(
    records: Iterable[RunRecord],
) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], RunRecord]]:
    """How many attempts each task made, and its latest, by ``(key, task text)`` (records oldest
    first, as a store returns them)."""
    counts: dict[tuple[str, str], int] = {}
    latest: dict[tuple[str, str], RunRecord] = {}
    for record in records:
        key = key_of(record)
        if key is not None:
            mark = (key, record.task)
            counts[mark] = counts.get(mark, 0) + 1
            latest[mark] = record
    return counts, latest


def finished_before(record: RunRecord | None, skip: frozenset[str]) -> bool:
    """Whether a task whose latest attempt is ``record`` is skipped by a resume."""
    return record is not None and record.status in skip
