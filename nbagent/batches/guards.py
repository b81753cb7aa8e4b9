"""What a batch refuses while it runs: a second live batch of the same name and store in this
process (both would run every task), and one agent object handed to two live runs (agents keep
memory, and the runs would queue behind each other on it).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

_lock = threading.Lock()
_live_names: dict[tuple[str, Any], object] = {}


def _store_id(store: Any) -> Any:
    path = getattr(store, "path", None)
    if isinstance(path, (str, Path)):
        try:
            return str(Path(path).resolve())
        except OSError:
            return str(path)
    return id(store)


def claim_name(owner: object, name: str | None, store: Any) -> tuple[str, Any] | None:
    """Mark the batch ``name`` in ``store`` live in this process; the claim to ``release_name``.
    ``None`` (nothing claimed) for a batch without a name or a store, which has no resume.
    Raises ``RuntimeError`` when a live batch holds that name and store."""
    if name is None or store is None:
        return None
    claim = (name, _store_id(store))
    with _lock:
        if claim in _live_names:
            raise RuntimeError(
                f"batch {name!r} is already running in this process: interrupt it or await it first"
            )
        _live_names[claim] = owner
    return claim


def release_name(owner: object, claim: tuple[str, Any] | None) -> None:
    if claim is None:
        return
    with _lock:
        if _live_names.get(claim) is owner:
            del _live_names[claim]


class AgentClaims:
    """The agent objects of a batch's live runs, by identity (the agents are held, so no id is
    reused while its run lives)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_id: dict[int, tuple[Any, str]] = {}
        self._by_key: dict[str, int] = {}

    def claim(self, agent: Any, key: str) -> None:
        """Give ``agent`` to the task ``key``; ``ValueError`` if a live task of the batch has it."""
        with self._lock:
            held = self._by_id.get(id(agent))
            if held is not None and held[0] is agent and held[1] != key:
                raise ValueError(
                    f"make_agent returned the same agent object as task {held[1]!r}: "
                    "it must build a fresh agent per task"
                )
            self._by_id[id(agent)] = (agent, key)
            self._by_key[key] = id(agent)

    def release(self, key: str) -> None:
        with self._lock:
            ident = self._by_key.pop(key, None)
            if ident is not None:
                self._by_id.pop(ident, None)
