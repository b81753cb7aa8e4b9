"""The runs of this process, in the order they ended."""

from __future__ import annotations

import threading

from .records import RunRecord

_records: list[RunRecord] = []
_lock = threading.Lock()


def add(record: RunRecord) -> None:
    with _lock:
        _records.append(record)


def records() -> list[RunRecord]:
    """Every finished run of this process, oldest first."""
    with _lock:
        return list(_records)


def clear() -> None:
    """Forget the runs of this process (a store keeps what it stored)."""
    with _lock:
        _records.clear()
