"""The store's file: opening it (writable or read-only), telling a store from other files, and
waiting out a busy database.

Part of ``nbagent.analytics.store`` (which holds the ``RunStore`` API); its errors are exported there.
What a read-only open must get right, measured with SQLite 3.40 on Linux:

- ``mode=ro`` reads a WAL database whose ``-wal`` and ``-shm`` files exist (even read-only ones,
  so a reader sees what a live writer has committed), and one in a writable folder.
- In a read-only folder without those files, ``mode=ro`` fails with "attempt to write a
  readonly database" (SQLite cannot create the ``-shm`` file); ``immutable=1`` reads it, and is
  safe there because no write-ahead log holds commits it would skip.
- With a non-empty ``-wal`` but no ``-shm`` in a read-only folder nothing can read those commits:
  an immutable read would silently miss them (even tables), so that case is an error that says
  what to do.

A file that is not a store fails on its first read with SQLITE_NOTADB (random bytes) or
SQLITE_CORRUPT (a truncated or damaged database); both become ``NotAStoreError`` naming the
file, as does an SQLite database without the store's tables.

Every parameter of every write passes through ``storable``: text becomes valid UTF-8
(``nbagent.text.clean``), anything SQLite cannot bind (a huge int, a foreign number, an object)
a value it can, so no value fails a write.
"""

from __future__ import annotations

import decimal
import numbers
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from nbagent.analytics.store.schema import MIGRATIONS, SCHEMA, SCHEMA_VERSION, TABLES
from nbagent.errors import NbagentError
from nbagent.text import clean, safe_text

_RETRIES = 4


class StoreError(NbagentError):
    """Base of the errors a ``RunStore`` raises about its file."""


class NotAStoreError(StoreError, ValueError):
    """The file is not an nbagent run store: not SQLite, truncated or damaged, or another
    program's SQLite database."""


class StoreVersionError(StoreError, RuntimeError):
    """The store was written by a newer nbagent (its schema version is unknown here)."""


class ReadOnlyStoreError(StoreError):
    """A write (``sink()``, ``add()``) to a store opened read-only."""


def sqlite_code(exc: sqlite3.Error) -> int | None:
    """The primary SQLite result code of ``exc`` (Python >= 3.11), else ``None``."""
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


_BUSY = (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED
_DAMAGED = (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB
_CANNOT_OPEN = (8, 14)  # SQLITE_READONLY (a read-only folder), SQLITE_CANTOPEN


def why_not_writable(path: Path) -> str | None:
    """Why this process cannot write the existing store at ``path`` (``None``: it can, or there
    is no file yet and creating it will tell)."""
    if not path.exists():
        return None
    if not os.access(path, os.W_OK):
        return "the file is not writable"
    if not os.access(path.parent, os.W_OK):
        return "its folder is not writable"
    return None


def connect(path: Path, *, readonly: bool, timeout: float, synchronous: str) -> sqlite3.Connection:
    """A connection to ``path``. ``isolation_level=None``: transactions are explicit (``BEGIN
    IMMEDIATE ... COMMIT``), so a writer takes the write lock up front and never fails half-way
    on a lock upgrade."""
    if readonly:
        return _connect_readonly(path, timeout)
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA synchronous={synchronous}")  # reads the header: fails on a foreign file
    except BaseException:
        conn.close()
        raise
    return conn


def _connect_readonly(path: Path, timeout: float) -> sqlite3.Connection:
    uri = path.resolve().as_uri()

    def open_with(query: str) -> sqlite3.Connection:
        return sqlite3.connect(
            f"{uri}?{query}", uri=True, timeout=timeout, isolation_level=None, check_same_thread=False
        )

    conn = open_with("mode=ro")
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.Error as exc:
        conn.close()
        if not isinstance(exc, sqlite3.OperationalError) or sqlite_code(exc) not in (None, *_CANNOT_OPEN):
            raise
        wal = Path(f"{path}-wal")
        try:
            logged = wal.stat().st_size > 0
        except FileNotFoundError:
            logged = False
        if logged:
            raise StoreError(
                f"cannot read {path} read-only ({exc}): its write-ahead log {wal.name} holds commits "
                f"SQLite reads only with write access to the folder or with its {path.name}-shm "
                "file; open the store once where it is writable, or copy its files to a writable folder"
            ) from exc
        return open_with("mode=ro&immutable=1")


@contextmanager
def file_errors(path: Path) -> Iterator[None]:
    """SQLite's errors about a file that is no store, as ``NotAStoreError`` naming the file."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        code = sqlite_code(exc)
        if type(exc) is sqlite3.DatabaseError if code is None else code in _DAMAGED:
            raise NotAStoreError(f"{path} is not an nbagent store (or it is damaged): {exc}") from exc
        raise


def inspect(conn: sqlite3.Connection, path: Path) -> int:
    """The schema version of the file, after checking that it is a store this nbagent reads
    (0: an empty file, a new store)."""
    with file_errors(path):
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if version > SCHEMA_VERSION:
            raise StoreVersionError(
                f"{path} has store schema {version}; this nbagent reads up to {SCHEMA_VERSION}: "
                "upgrade nbagent"
            )
        if version == 0 and not tables:
            return 0
        missing = [t for t in TABLES if t not in tables]
        if missing:
            others = ", ".join(sorted(tables)[:5]) or "none"
            raise NotAStoreError(
                f"{path} is not an nbagent store: an SQLite database without its tables "
                f"({', '.join(missing)} missing; it has: {others})"
            )
        for table in TABLES:  # reads each table's first page: most truncations show here
            conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchall()
    return version


def migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Create the schema in an empty file, or bring an older store to this version. Call it in a
    write transaction: it checks the version again, as another process may have migrated it."""
    version = inspect(conn, path)
    script = [SCHEMA] if version == 0 else [MIGRATIONS[old] for old in range(version, SCHEMA_VERSION)]
    for part in script:
        for statement in part.split(";"):
            if statement.strip():
                conn.execute(statement)
    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")


def retrying(conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], Any], *, begin: str = "") -> Any:
    """Run ``work`` (in a transaction opened with ``begin``), retrying when the database is busy.

    ``BEGIN IMMEDIATE`` takes the write lock up front, so a writer never fails half-way on a
    lock upgrade; a plain ``BEGIN`` gives a read one consistent snapshot. The busy timeout
    already waits for other writers; a retry covers what it cannot (a lock held longer than the
    timeout). Other errors, and the last busy one, are raised.
    """
    attempt = 0
    while True:
        try:
            if begin:
                conn.execute(begin)
            try:
                result = work(conn)
                if begin:
                    conn.execute("COMMIT")
                return result
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as exc:
            attempt += 1
            if attempt == _RETRIES or sqlite_code(exc) not in (None, *_BUSY):
                raise
            time.sleep(0.05 * 2**attempt)


_INT64 = range(-(2**63), 2**63)


def storable(value: Any) -> Any:
    """``value`` as something SQLite binds: valid UTF-8 text, a 64-bit int, a float, bytes or
    ``None``; anything else becomes a number when it is one, else its text. Never raises."""
    kind = type(value)
    if kind is str:
        return clean(value)
    if kind is int:
        return value if value in _INT64 else _big(value)
    if value is None or kind is float or kind is bytes:
        return value
    try:
        if isinstance(value, str):
            return clean(str.__str__(value))
        if isinstance(value, numbers.Integral):
            number = int(value)
            return number if number in _INT64 else _big(number)
        if isinstance(value, (numbers.Real, decimal.Decimal)):
            return float(value)
    except (ArithmeticError, TypeError, ValueError):
        pass
    return safe_text(value)


def _big(number: int) -> float | str:
    """An int past SQLite's 64 bits: as a float, or as text past a float's range."""
    try:
        return float(number)
    except OverflowError:
        return safe_text(number)


class CleaningConnection:
    """A connection whose statements get every parameter through ``storable``."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, statement: str, params: Iterable[Any] = ()) -> sqlite3.Cursor:
        return self._conn.execute(statement, tuple(map(storable, params)))

    def executemany(self, statement: str, rows: Iterable[Iterable[Any]]) -> sqlite3.Cursor:
        return self._conn.executemany(statement, (tuple(map(storable, row)) for row in rows))
