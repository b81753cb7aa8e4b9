"""The run store's tables, and how records become rows and rows become records again.

Part of ``nbagent.analytics.store`` (which holds the ``RunStore`` API); kept apart so each file reads in
one sitting. Three rules shape it:

- **A value never makes a write fail.** Tool arguments, results and outputs are untrusted: a
  ``__repr__`` may raise, ``2 ** 20000`` cannot become text, a dict may have keys JSON cannot
  take, a string may hold lone surrogates. ``to_json`` tries plain JSON first (the common case
  costs one encoder call), then a walk that turns each part JSON cannot hold into its
  ``nbagent.text.safe_text`` text, then the whole value's ``safe_text``; it never raises.
  Every parameter of every statement then passes through ``nbagent.analytics.store.file.storable``.
- **Columns are named, not positional,** in every write and read, so a table that grew by
  migration (new columns at the end) and a freshly created one are written the same way, and a
  store of an older schema can be *read* without migrating it: a column it lacks reads as its
  default (``select_list``).
- **No credential is written.** A run's rows are built from its ``Recorder``'s record, whose every
  text was scrubbed as its events were made (``nbagent.events``); a whole record written at once
  (``RunStore.add``, a run's rows written again) may come from anywhere, so its rows' texts are
  scrubbed as they are encoded (``put_whole_run``).
- **Reading never trusts the file either:** a JSON column that does not parse comes back as its
  text.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable
from contextlib import closing
from datetime import datetime, timezone
from typing import Any

from nbagent.records import NodeRecord, RunRecord, StepRecord, ToolCallRecord, ToolProgress
from nbagent.secrets import scrub
from nbagent.text import clean, safe_text

SCHEMA_VERSION = 7

SCHEMA = """
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    task TEXT NOT NULL,
    agent TEXT NOT NULL,
    model TEXT NOT NULL,
    status TEXT NOT NULL,
    started_at TEXT NOT NULL,
    ended_at TEXT,
    duration_s REAL,
    output TEXT,
    error TEXT,
    error_type TEXT,
    cost_usd REAL,
    writer_host TEXT,
    writer_pid INTEGER,
    writer_start TEXT,
    stop_reason TEXT,
    parent_run_id TEXT,
    continues_run_id TEXT,
    queued_s REAL NOT NULL DEFAULT 0,
    queued_after TEXT,
    tags TEXT,
    metadata TEXT,
    model_params TEXT,
    messages TEXT,
    forked_from_run_id TEXT,
    forked_at_step INTEGER,
    fork_data TEXT
);
CREATE INDEX runs_by_start ON runs (started_at);
CREATE TABLE steps (
    run_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    kind TEXT NOT NULL,
    started_at TEXT NOT NULL,
    start_s REAL NOT NULL,
    ended_at TEXT,
    end_s REAL,
    input_tokens INTEGER,
    output_tokens INTEGER,
    usage_source TEXT NOT NULL,
    model_output TEXT NOT NULL,
    error TEXT,
    interrupted INTEGER NOT NULL,
    retries INTEGER NOT NULL DEFAULT 0,
    model_ended_at TEXT,
    fork_point TEXT,
    nodes TEXT,
    PRIMARY KEY (run_id, step)
) WITHOUT ROWID;
CREATE TABLE tool_calls (
    run_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    call_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    arguments TEXT,
    started_at TEXT NOT NULL,
    start_s REAL NOT NULL,
    ended_at TEXT,
    end_s REAL,
    status TEXT,
    result TEXT,
    error TEXT,
    approval TEXT,
    approval_wait_s REAL,
    progress TEXT,
    logs TEXT,
    PRIMARY KEY (run_id, step, seq)
) WITHOUT ROWID;
"""
"""The current schema. Times are ISO 8601 UTC text; values (output, arguments, results, tags,
metadata, model_params, messages) are JSON, with any part JSON cannot hold stored as its text."""

MIGRATIONS: dict[int, str] = {
    # Version 1 had no writer identity (so a dead writer's run could not be told from a live
    # one), no cost and no retry count.
    1: """
        ALTER TABLE runs ADD COLUMN cost_usd REAL;
        ALTER TABLE runs ADD COLUMN writer_host TEXT;
        ALTER TABLE runs ADD COLUMN writer_pid INTEGER;
        ALTER TABLE runs ADD COLUMN writer_start TEXT;
        ALTER TABLE steps ADD COLUMN retries INTEGER NOT NULL DEFAULT 0;
    """,
    # Version 2 did not know why a run stopped, which run started or continued it, how long it
    # waited for its agent, nor its tags, metadata, model settings and conversation.
    2: """
        ALTER TABLE runs ADD COLUMN stop_reason TEXT;
        ALTER TABLE runs ADD COLUMN parent_run_id TEXT;
        ALTER TABLE runs ADD COLUMN continues_run_id TEXT;
        ALTER TABLE runs ADD COLUMN queued_s REAL NOT NULL DEFAULT 0;
        ALTER TABLE runs ADD COLUMN queued_after TEXT;
        ALTER TABLE runs ADD COLUMN tags TEXT;
        ALTER TABLE runs ADD COLUMN metadata TEXT;
        ALTER TABLE runs ADD COLUMN model_params TEXT;
        ALTER TABLE runs ADD COLUMN messages TEXT;
    """,
    # Version 3 did not keep when a step's model call ended, nor the approvals of tool calls.
    3: """
        ALTER TABLE steps ADD COLUMN model_ended_at TEXT;
        ALTER TABLE tool_calls ADD COLUMN approval TEXT;
        ALTER TABLE tool_calls ADD COLUMN approval_wait_s REAL;
    """,
    # Version 4 did not keep a tool call's last progress nor its server's log lines.
    4: """
        ALTER TABLE tool_calls ADD COLUMN progress TEXT;
        ALTER TABLE tool_calls ADD COLUMN logs TEXT;
    """,
    # Version 5 could not fork a run: it kept neither which run a run forks, nor the history
    # (the source's own, as JSON) and each step's place in it that a fork starts from.
    5: """
        ALTER TABLE runs ADD COLUMN forked_from_run_id TEXT;
        ALTER TABLE runs ADD COLUMN forked_at_step INTEGER;
        ALTER TABLE runs ADD COLUMN fork_data TEXT;
        ALTER TABLE steps ADD COLUMN fork_point TEXT;
    """,
    # Version 6 did not keep a step's node lines (graph nodes, sub-agents: not tool calls).
    6: """
        ALTER TABLE steps ADD COLUMN nodes TEXT;
    """,
}
"""``MIGRATIONS[n]`` turns a version ``n`` store into version ``n + 1``."""

TABLES = ("runs", "steps", "tool_calls")

UNFINISHED_ERROR = "the process running it ended before the run finished"
"""The error of a run read back as ``"unfinished"``."""


def _columns() -> dict[str, dict[str, str]]:
    """Each table's columns, in schema order, with what each reads as in an older store that
    lacks it (its SQL default, else NULL): asked of SQLite itself, so they never drift."""
    with closing(sqlite3.connect(":memory:")) as conn:
        conn.executescript(SCHEMA)
        return {
            t: {row[1]: row[4] or "NULL" for row in conn.execute(f"PRAGMA table_info({t})")} for t in TABLES
        }


_COLUMNS = _columns()
RUN_COLUMNS, STEP_COLUMNS, CALL_COLUMNS = (_COLUMNS[t] for t in TABLES)


def _put(table: str, columns: Iterable[str]) -> str:
    names = list(columns)
    return f"INSERT OR REPLACE INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"


PUT_RUN = _put("runs", RUN_COLUMNS)
PUT_STEP = _put("steps", STEP_COLUMNS)
PUT_CALL = _put("tool_calls", CALL_COLUMNS)


def select_list(conn: sqlite3.Connection, table: str, columns: dict[str, str]) -> str:
    """The columns of ``table`` to select, in ``columns`` order, each missing one as its default:
    so one reader serves every schema version, and an old store is read without migrating it."""
    present = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
    return ", ".join(name if name in present else f"{default} AS {name}" for name, default in columns.items())


# -- values ---------------------------------------------------------------------------------------


def _text_of(value: Any) -> str:
    """A part of a value JSON cannot hold (a pydantic model, a dataclass...) as its text, scrubbed
    of credentials: the strings of a run's values were scrubbed as its events were made, but an
    object's ``repr`` is made only here."""
    return scrub(safe_text(value))


_ENCODER = json.JSONEncoder(ensure_ascii=False, default=_text_of)
"""One encoder for every value; a part it cannot encode becomes its text (``_text_of``)."""


def _plain(value: Any, ancestors: frozenset[int] = frozenset()) -> Any:
    """``value`` with every part JSON cannot hold replaced by its text (used only after plain
    encoding failed: a huge int, a key JSON refuses, a cycle, nesting deeper than JSON allows)."""
    if value is None or isinstance(value, (str, bool, float)):
        return value
    if isinstance(value, int):
        try:
            str(value)
        except ValueError:  # past the int-to-str digit limit
            return safe_text(value)
        return value
    if not isinstance(value, (dict, list, tuple)) or id(value) in ancestors or len(ancestors) > 64:
        return _text_of(value)  # a cycle shows as [...], as in its repr
    inner = ancestors | {id(value)}
    if isinstance(value, dict):
        return {(k if isinstance(k, str) else safe_text(k)): _plain(v, inner) for k, v in list(value.items())}
    return [_plain(v, inner) for v in list(value)]


def to_json(value: Any) -> str | None:
    """``value`` as JSON text (``None`` stays ``None``); never raises."""
    if value is None:
        return None
    try:
        return clean(_ENCODER.encode(value))
    except Exception:
        pass
    try:
        return clean(_ENCODER.encode(_plain(value)))
    except Exception:
        return clean(_ENCODER.encode(_text_of(value)))


def from_json(text: Any) -> Any:
    """A JSON column's value; text that is not JSON (a foreign writer, a damaged row) as it is."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except (TypeError, ValueError, RecursionError):
        return text


def iso(at: datetime | None) -> str | None:
    """One fixed UTC format, so text order is time order (a naive time is taken as UTC)."""
    if at is None:
        return None
    if at.tzinfo is not timezone.utc:  # a record's times are UTC already: no copy for them
        at = at.replace(tzinfo=timezone.utc) if at.tzinfo is None else at.astimezone(timezone.utc)
    return at.isoformat(timespec="microseconds")


def _fork_data(value: Any) -> dict[str, Any] | None:
    """A stored ``fork_data``: a dict, or ``None`` for anything else (a damaged row)."""
    return value if isinstance(value, dict) else None


def _time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


# -- records to rows ------------------------------------------------------------------------------

Writer = tuple[str | None, int | None, str | None]
"""Host, pid and process start of a run's writer (all ``None`` for a run stored with ``add``)."""


def run_row(record: RunRecord, writer: Writer | None) -> tuple[Any, ...]:
    host, pid, start = writer if writer is not None else (None, None, None)
    return (
        record.run_id,
        record.task,
        record.agent,
        record.model,
        record.status,
        iso(record.started_at),
        iso(record.ended_at),
        record.duration_s,
        to_json(record.output),
        record.error,
        record.error_type,
        record.cost_usd,
        host,
        pid,
        start,
        record.stop_reason,
        record.parent_run_id,
        record.continues_run_id,
        record.queued_s or 0.0,
        record.queued_after,
        to_json(record.tags or []),
        to_json(record.metadata or {}),
        to_json(record.model_params or {}),
        to_json(record.messages),
        record.forked_from_run_id,
        record.forked_at_step,
        to_json(record.fork_data),
    )


def step_row(run_id: str, step: StepRecord) -> tuple[Any, ...]:
    return (
        run_id,
        step.number,
        step.kind,
        iso(step.started_at),
        step.start_s,
        iso(step.ended_at),
        step.end_s,
        step.input_tokens,
        step.output_tokens,
        step.usage_source,
        step.model_output or "",
        step.error,
        int(step.interrupted),
        step.retries,
        iso(step.model_ended_at),
        to_json(step.fork_point),
        _nodes_json(step.nodes),
    )


def call_row(run_id: str, step: int, seq: int, call: ToolCallRecord) -> tuple[Any, ...]:
    return (
        run_id,
        step,
        seq,
        call.call_id,
        call.tool,
        to_json(call.arguments),
        iso(call.started_at),
        call.start_s,
        iso(call.ended_at),
        call.end_s,
        call.status,
        to_json(call.result),
        call.error,
        call.approval,
        call.approval_wait_s,
        _progress_json(call.progress),
        to_json({"lines": call.logs, "dropped": call.logs_dropped}) if call.logs else None,
    )


def _nodes_json(nodes: list[NodeRecord]) -> str | None:
    """A step's node lines as one JSON list (``None`` for a step without any: most steps)."""
    if not nodes:
        return None
    return to_json(
        [
            {
                "node_id": n.node_id,
                "name": n.name,
                "started_at": iso(n.started_at),
                "start_s": n.start_s,
                "status": n.status,
                "output": n.output,
                "error": n.error,
                "ended_at": iso(n.ended_at),
                "end_s": n.end_s,
            }
            for n in nodes
        ]
    )


def _nodes_of(text: Any) -> list[NodeRecord]:
    """A ``nodes`` column back as node lines; what is not one (a foreign writer, damage) is left out."""
    value = from_json(text)
    nodes = []
    for item in value if isinstance(value, list) else ():
        started = _stamp(item.get("started_at")) if isinstance(item, dict) else None
        if started is None or not isinstance(item.get("start_s"), (int, float)):
            continue
        nodes.append(
            NodeRecord(
                node_id=str(item.get("node_id")),
                name=str(item.get("name")),
                started_at=started,
                start_s=item["start_s"],
                status=item.get("status"),
                output=item.get("output"),
                error=item.get("error"),
                ended_at=_stamp(item.get("ended_at")),
                end_s=item.get("end_s"),
            )
        )
    return nodes


def _stamp(value: Any) -> datetime | None:
    """An ISO time inside a JSON column, or ``None`` for anything else."""
    try:
        return datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _progress_json(progress: ToolProgress | None) -> str | None:
    if progress is None:
        return None
    return to_json({"progress": progress.progress, "total": progress.total, "message": progress.message})


def _progress_of(text: Any) -> ToolProgress | None:
    """A ``progress`` column back as a ``ToolProgress`` (``None`` for anything else: a foreign
    writer's or a damaged row must not fail the read)."""
    value = from_json(text)
    if not isinstance(value, dict):
        return None
    amount, total, message = value.get("progress"), value.get("total"), value.get("message")
    if not isinstance(amount, (int, float)) or isinstance(amount, bool):
        return None
    total = float(total) if isinstance(total, (int, float)) and not isinstance(total, bool) else None
    return ToolProgress(float(amount), total, message if isinstance(message, str) else None)


def _logs_of(text: Any) -> tuple[list[str], int]:
    """A ``logs`` column back as the kept lines and the count of those dropped."""
    value = from_json(text)
    if not isinstance(value, dict):
        return [], 0
    lines, dropped = value.get("lines"), value.get("dropped")
    lines = [line for line in lines if isinstance(line, str)] if isinstance(lines, list) else []
    return lines, dropped if isinstance(dropped, int) and not isinstance(dropped, bool) else 0


def _scrubbed(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(scrub(value) if isinstance(value, str) else value for value in row)


def put_whole_run(conn: Any, record: RunRecord, writer: Writer | None) -> None:
    """Replace every row of ``record``'s run with the record as it stands, every text of it (JSON
    included) scrubbed of credentials: the record may have been made anywhere (``RunStore.add``)."""
    conn.execute("DELETE FROM steps WHERE run_id = ?", (record.run_id,))
    conn.execute("DELETE FROM tool_calls WHERE run_id = ?", (record.run_id,))
    conn.execute(PUT_RUN, _scrubbed(run_row(record, writer)))
    conn.executemany(PUT_STEP, [_scrubbed(step_row(record.run_id, s)) for s in record.steps])
    conn.executemany(
        PUT_CALL,
        [
            _scrubbed(call_row(record.run_id, s.number, seq, call))
            for s in record.steps
            for seq, call in enumerate(s.tool_calls)
        ],
    )


# -- rows to records ------------------------------------------------------------------------------


def read_records(
    conn: sqlite3.Connection, run_ids: list[str] | None, ended_unseen: Callable[[str, Writer], bool]
) -> list[RunRecord]:
    """The stored runs (all, or those in ``run_ids``), oldest first. Call it inside one read
    transaction, so runs, steps and calls come from the same moment. ``ended_unseen(run_id,
    writer)`` says whether a run still marked running has lost its writer (it reads as
    ``"unfinished"``)."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'runs'").fetchone() is None:
        return []  # an empty file, opened read-only: a store nothing was written to yet
    where, params = "", ()
    if run_ids is not None:
        where, params = " WHERE run_id IN (SELECT value FROM json_each(?))", (json.dumps(run_ids),)
    runs: dict[str, RunRecord] = {}
    steps: dict[tuple[str, int], StepRecord] = {}
    columns = select_list(conn, "runs", RUN_COLUMNS)
    for row in conn.execute(f"SELECT {columns} FROM runs{where} ORDER BY started_at, run_id", params):
        tags, metadata, model_params = from_json(row[20]), from_json(row[21]), from_json(row[22])
        record = RunRecord(
            run_id=row[0],
            task=row[1],
            agent=row[2],
            model=row[3],
            started_at=_time(row[5]),  # type: ignore[arg-type]
            status=row[4],
            output=from_json(row[8]),
            error=row[9],
            error_type=row[10],
            ended_at=_time(row[6]),
            duration_s=row[7],
            cost_usd=row[11],
            stop_reason=row[15],
            parent_run_id=row[16],
            continues_run_id=row[17],
            queued_s=row[18] or 0.0,
            queued_after=row[19],
            tags=tags if isinstance(tags, list) else [],
            metadata=metadata if isinstance(metadata, dict) else {},
            model_params=model_params if isinstance(model_params, dict) else {},
            messages=from_json(row[23]),
            forked_from_run_id=row[24],
            forked_at_step=row[25],
            fork_data=_fork_data(from_json(row[26])),
        )
        if record.status == "running" and ended_unseen(record.run_id, (row[12], row[13], row[14])):
            record.status, record.error = "unfinished", UNFINISHED_ERROR
        runs[record.run_id] = record
    columns = select_list(conn, "steps", STEP_COLUMNS)
    for row in conn.execute(f"SELECT {columns} FROM steps{where} ORDER BY run_id, step", params):
        run = runs.get(row[0])
        if run is None:
            continue
        step = StepRecord(
            number=row[1],
            kind=row[2],
            started_at=_time(row[3]),  # type: ignore[arg-type]
            start_s=row[4],
            ended_at=_time(row[5]),
            end_s=row[6],
            input_tokens=row[7],
            output_tokens=row[8],
            usage_source=row[9],
            model_output=row[10],
            error=row[11],
            interrupted=bool(row[12]),
            retries=row[13],
            model_ended_at=_time(row[14]),
            fork_point=from_json(row[15]),
            nodes=_nodes_of(row[16]),
        )
        run.steps.append(step)
        steps[(row[0], row[1])] = step
    columns = select_list(conn, "tool_calls", CALL_COLUMNS)
    for row in conn.execute(f"SELECT {columns} FROM tool_calls{where} ORDER BY run_id, step, seq", params):
        owner = steps.get((row[0], row[1]))
        if owner is None:
            continue
        logs, dropped = _logs_of(row[16])
        owner.tool_calls.append(
            ToolCallRecord(
                call_id=row[3],
                tool=row[4],
                arguments=from_json(row[5]),
                started_at=_time(row[6]),  # type: ignore[arg-type]
                start_s=row[7],
                status=row[10],
                result=from_json(row[11]),
                error=row[12],
                ended_at=_time(row[8]),
                end_s=row[9],
                approval=row[13],
                approval_wait_s=row[14],
                progress=_progress_of(row[15]),
                logs=logs,
                logs_dropped=dropped,
            )
        )
    return list(runs.values())
