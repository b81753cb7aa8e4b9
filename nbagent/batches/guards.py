"""What a batch refuses while it runs: a second live batch of the same name and store (both
would run every task), in this process or in any other process sharing the store, and one agent
object handed to two live runs (agents keep memory, and the runs would queue behind each other
on it).

A named batch on a store holds two claims while it runs: this process's (a dict, so a second
batch here gets a plain "already running in this process") and the store's lease on the name
(``nbagent.analytics.store.leases``: a row with a heartbeat), which a batch of another process,
or of another host sharing the file, finds and is refused with the holder's host, pid and start.
A holder that died loses its lease ``LEASE_TTL_S`` after its last heartbeat.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_lock = threading.Lock()
_live_names: dict[tuple[str, Any], object] = {}


@dataclass
class NameClaim:
    """What ``claim_name`` holds: the process's key, and the store's lease (``None`` for a store
    that cannot hold one, not being a ``RunStore``)."""

    key: tuple[str, Any]
    lease: Any = None


def batch_store(store: Any, *, configured: bool = False) -> Any:
    """The batch's ``RunStore`` for ``store=`` (a path or a ``RunStore``; ``None``: none);
    ``TypeError`` at once for anything else, and ``ReadOnlyStoreError`` for a store open
    read-only: every run of a batch is stored, so each task would fail as it starts, under the
    name of its factory. ``configured``: the store is the ``configure(store=)`` default."""
    if store is None:
        return None
    from nbagent.analytics.store import ReadOnlyStoreError, open_store
    from nbagent.analytics.store.file import why_not_writable

    opened = open_store(store)
    if opened.readonly:
        why = why_not_writable(opened.path) or "opened with readonly=True"
        given = "the configure(store=) default" if configured else "store="
        raise ReadOnlyStoreError(
            f"the batch's store ({given}) {opened.path} is read-only ({why}), and a batch stores "
            "every run: give it a writable store; no task was started"
        )
    return opened


def _store_id(store: Any) -> Any:
    path = getattr(store, "path", None)
    if isinstance(path, (str, Path)):
        try:
            return str(Path(path).resolve())
        except OSError:
            return str(path)
    return id(store)


def claim_name(owner: object, name: str | None, store: Any) -> NameClaim | None:
    """Mark the batch ``name`` in ``store`` live, here and in the store; the claim to
    ``release_name``. ``None`` (nothing claimed) for a batch without a name or a store, which
    has no resume. Raises ``RuntimeError`` when a live batch holds that name and store: in this
    process, or in another (``LeaseHeldError``, naming its host, pid and start)."""
    if name is None or store is None:
        return None
    key = (name, _store_id(store))
    with _lock:
        if key in _live_names:
            raise RuntimeError(
                f"batch {name!r} is already running in this process: interrupt it or await it first"
            )
        _live_names[key] = owner
    claim = NameClaim(key)
    try:
        claim.lease = _lease(name, store)
    except BaseException:
        release_name(owner, claim)
        raise
    return claim


def _lease(name: str, store: Any) -> Any:
    """The store's lease on the batch ``name``; ``LeaseHeldError`` naming the holder."""
    import time

    from nbagent.analytics.store import RunStore
    from nbagent.analytics.store.leases import LeaseHeldError, claim, holder_text

    if not isinstance(store, RunStore):
        return None
    try:
        return claim(store, f"batch:{name}")
    except LeaseHeldError as exc:
        raise LeaseHeldError(
            f"batch {name!r} is already running on {store.path}, in another process: "
            f"{holder_text(exc.holder, time.time())}. Wait for it there, or resume once it ended",
            exc.holder,
        ) from None


def release_name(owner: object, claim: NameClaim | None) -> None:
    """Give up ``claim`` (never waits on the store: the lease's row goes on its own thread)."""
    if claim is None:
        return
    if claim.lease is not None:
        claim.lease.release()
        claim.lease = None
    with _lock:
        if _live_names.get(claim.key) is owner:
            del _live_names[claim.key]


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
