"""Leases: a name in a store that one process at a time may hold (a named batch, while it runs).

Part of ``nbagent.analytics.store``. Two processes resuming one named batch on one store would both run
every task; a lease row in the store lets only one of them. A lease is a row of the
``batch_leases`` table: the name, the holder (host, pid, when it took the lease), a token, and
the time of its last heartbeat. The holder's ``Lease`` thread writes a heartbeat every
``ttl_s / 3``; a lease whose heartbeat is older than ``ttl_s`` has lapsed and the next claim takes
it over, so a holder that died (``kill -9``, a dead kernel, a lost host) blocks the name for at
most ``ttl_s``. A holder on this host whose process is gone loses it at once (a kernel that died
is resumed without a wait): the row has its pid, the process's boot id and start time (a reused
pid is told apart) and its pid namespace; in another namespace, or on another machine (even one
with the same host name: the boot ids differ), a pid says nothing, and a wrong guess would run
the batch twice, so only the heartbeat counts there.

Times are the holders' wall clocks (``time.time()``): hosts sharing a store on a network folder
must keep their clocks within a fraction of ``ttl_s``.

The table is created on first use, outside the versioned schema: it holds no run data, a store
without it reads as before, and an older nbagent opening the file ignores it.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import sys
import threading
import time
import uuid
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from nbagent.analytics.store.file import StoreError
from nbagent.analytics.store.identity import on_this_machine, pid_alive, process_start, this_writer
from nbagent.errors import NbagentError

if TYPE_CHECKING:
    from nbagent.analytics.store import RunStore

logger = logging.getLogger("nbagent")

LEASE_TTL_S = 30.0
"""Seconds without a heartbeat after which a lease lapses (its holder is taken to be gone)."""

_TABLE = """CREATE TABLE IF NOT EXISTS batch_leases (
    name TEXT PRIMARY KEY,
    token TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    start TEXT,
    pidns TEXT,
    since TEXT NOT NULL,
    heartbeat REAL NOT NULL,
    ttl_s REAL NOT NULL
)"""

_HOLDER = "host, pid, since, heartbeat, ttl_s, start, pidns"
"""The columns of a ``Holder``, in its order."""


class LeaseHeldError(NbagentError, RuntimeError):
    """The name is leased by another live holder; ``holder`` says who (host, pid, since)."""

    def __init__(self, message: str, holder: Holder) -> None:
        super().__init__(message)
        self.holder = holder


@dataclass(frozen=True)
class Holder:
    """Who holds a lease: ``host``, ``pid``, ``since`` (ISO UTC), the last ``heartbeat``
    (``time.time()``) and the ``ttl_s`` after which it lapses."""

    host: str
    pid: int
    since: str
    heartbeat: float
    ttl_s: float

    start: str | None = None
    pidns: str | None = None

    def lapsed(self, now: float) -> bool:
        """No heartbeat for ``ttl_s``, or a holder on this host whose process is gone."""
        return now - self.heartbeat > self.ttl_s or self.gone()

    def gone(self) -> bool:
        if self.pidns is None or self.pidns != pid_namespace() or not on_this_machine(self.host, self.start):
            return False  # its pid cannot be checked from here
        if not pid_alive(self.pid):
            return True
        return self.start is not None and process_start(self.pid) not in (None, self.start)


def pid_namespace() -> str | None:
    """This process's pid namespace (Linux: ``pid:[4026531836]``); ``None`` where there is none
    to read, and then pids are checked on the same host only when both sides have none."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return "" if sys.platform != "linux" else None


_ours_lock = threading.Lock()
_ours: dict[str, Lease] = {}
"""This process's leases by token, until their rows are deleted."""


class Lease:
    """A held lease: a thread renews it until ``release()``, which then deletes its row.

    ``release`` never waits on the database (it may be called on the runner's loop); the row
    goes a moment later, on the lease's own thread. ``lost`` is True once a heartbeat found the
    row taken over by another holder (this process was silent for longer than ``ttl_s``).
    """

    def __init__(self, store: RunStore, name: str, token: str, ttl_s: float) -> None:
        self.store = store
        self.name = name
        self.token = token
        self.ttl_s = ttl_s
        self.lost = False
        self._released = threading.Event()
        with _ours_lock:
            _ours[token] = self
        self._thread = threading.Thread(target=self._beat, name="nbagent-lease", daemon=True)
        self._thread.start()

    def __repr__(self) -> str:
        return f"<Lease {self.name!r} in {self.store.path}>"

    def release(self) -> None:
        """Give the name up (idempotent, any thread, never blocks)."""
        self._released.set()

    def join(self, timeout: float | None = None) -> bool:
        """Wait until the row is gone (after ``release``); False if ``timeout`` passed first."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _beat(self) -> None:
        while not self._released.wait(self.ttl_s / 3):
            try:
                if not _renew(self.store, self.name, self.token) and not self.lost:
                    self.lost = True
                    logger.warning(
                        "nbagent: the lease on %r in %s was taken over by another process after "
                        "%.0f s without a heartbeat from this one: both may now run it",
                        self.name,
                        self.store.path,
                        self.ttl_s,
                    )
            except Exception as exc:  # a busy or closed store: the next beat tries again
                logger.warning("nbagent: the lease on %r could not be renewed: %s", self.name, exc)
        try:
            self._delete()
        except Exception as exc:  # it lapses by itself after ttl_s
            logger.warning("nbagent: the lease on %r could not be released: %s", self.name, exc)
        finally:
            with _ours_lock:
                _ours.pop(self.token, None)

    def _delete(self) -> None:
        statement, values = "DELETE FROM batch_leases WHERE name = ? AND token = ?", (self.name, self.token)
        try:
            self.store._write(lambda conn: conn.execute(statement, values))
        except StoreError:  # the store was closed as the batch ended: the row goes all the same
            if not self.store.closed:
                raise
            with closing(sqlite3.connect(self.store.path, timeout=10)) as conn, conn:
                conn.execute(statement, values)


def _renew(store: RunStore, name: str, token: str) -> bool:
    renewed: list[bool] = []

    def work(conn: Any) -> None:
        cursor = conn.execute(
            "UPDATE batch_leases SET heartbeat = ? WHERE name = ? AND token = ?",
            (time.time(), name, token),
        )
        renewed.append(cursor.rowcount == 1)

    store._write(work)
    return renewed[0]


def holder_text(holder: Holder, now: float) -> str:
    ago = max(0.0, now - holder.heartbeat)
    return (
        f"host {holder.host}, pid {holder.pid}, since {holder.since} "
        f"(last heartbeat {ago:.0f} s ago; a claim lapses {holder.ttl_s:.0f} s after its last heartbeat)"
    )


def _released_here(token: str) -> bool:
    """A lease of this process that was released, whose row is about to go."""
    with _ours_lock:
        lease = _ours.get(token)
    return lease is not None and lease._released.is_set()


def claim(store: RunStore, name: str, *, ttl_s: float | None = None) -> Lease:
    """Take the lease on ``name`` in ``store``, or raise ``LeaseHeldError`` naming its holder.

    A lapsed lease is taken over, and so is one this process released whose row is not deleted
    yet (a batch resumed as soon as the last one ended). ``ttl_s``: default ``LEASE_TTL_S``."""
    ttl_s = LEASE_TTL_S if ttl_s is None else ttl_s
    if not ttl_s > 0:
        raise ValueError(f"ttl_s must be positive, not {ttl_s!r}")
    host, pid, start = this_writer()
    pidns = pid_namespace()
    token = uuid.uuid4().hex
    held: list[Holder] = []

    def work(conn: Any) -> None:
        conn.execute(_TABLE)
        row = conn.execute(f"SELECT {_HOLDER}, token FROM batch_leases WHERE name = ?", (name,)).fetchone()
        now = time.time()
        if row is not None:
            holder = Holder(*row[:-1])
            if not holder.lapsed(now) and not _released_here(row[-1]):
                held.append(holder)
                return
        since = datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
        conn.execute(
            "INSERT OR REPLACE INTO batch_leases (name, token, host, pid, start, pidns, since, "
            "heartbeat, ttl_s) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (name, token, host, pid, start, pidns, since, now, ttl_s),
        )

    store._write(work)
    if held:
        text = holder_text(held[0], time.time())
        raise LeaseHeldError(f"{name!r} in {store.path} is held by {text}", held[0])
    return Lease(store, name, token, ttl_s)


def holder(store: RunStore, name: str) -> Holder | None:
    """Who holds ``name`` in ``store`` now (a lapsed lease included), or ``None``."""
    with store._reader() as conn:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'batch_leases'").fetchone() is None:
            return None
        row = conn.execute(f"SELECT {_HOLDER} FROM batch_leases WHERE name = ?", (name,)).fetchone()
    return None if row is None else Holder(*row)
