"""Stores of old schemas, as SQL: version 1, and what version 2 added, for the tests of the
store's migrations and of reading old stores (``nbagent.analytics.store.schema.MIGRATIONS``)."""

VERSION_1 = """
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY, task TEXT NOT NULL, agent TEXT NOT NULL, model TEXT NOT NULL,
    status TEXT NOT NULL, started_at TEXT NOT NULL, ended_at TEXT, duration_s REAL, output TEXT,
    error TEXT, error_type TEXT
);
CREATE INDEX runs_by_start ON runs (started_at);
CREATE TABLE steps (
    run_id TEXT NOT NULL, step INTEGER NOT NULL, kind TEXT NOT NULL, started_at TEXT NOT NULL,
    start_s REAL NOT NULL, ended_at TEXT, end_s REAL, input_tokens INTEGER, output_tokens INTEGER,
    usage_source TEXT NOT NULL, model_output TEXT NOT NULL, error TEXT, interrupted INTEGER NOT NULL,
    PRIMARY KEY (run_id, step)
) WITHOUT ROWID;
CREATE TABLE tool_calls (
    run_id TEXT NOT NULL, step INTEGER NOT NULL, seq INTEGER NOT NULL, call_id TEXT NOT NULL,
    tool TEXT NOT NULL, arguments TEXT, started_at TEXT NOT NULL, start_s REAL NOT NULL, ended_at TEXT,
    end_s REAL, status TEXT, result TEXT, error TEXT,
    PRIMARY KEY (run_id, step, seq)
) WITHOUT ROWID;
INSERT INTO runs VALUES ('old1', 'add', 'adder', 'scripted', 'success', '2024-05-01T10:00:00.000000+00:00',
    '2024-05-01T10:00:02.500000+00:00', 2.5, '"The sum is 5."', NULL, NULL);
INSERT INTO steps VALUES ('old1', 1, 'action', '2024-05-01T10:00:00.100000+00:00', 0.1,
    '2024-05-01T10:00:01.000000+00:00', 1.0, 12, 8, 'reported', 'adding', NULL, 0);
INSERT INTO steps VALUES ('old1', 2, 'final', '2024-05-01T10:00:01.000000+00:00', 1.0,
    '2024-05-01T10:00:02.500000+00:00', 2.5, 30, 5, 'reported', 'The sum is 5.', NULL, 0);
INSERT INTO tool_calls VALUES ('old1', 1, 0, 'call_1', 'add', '{"a": 2, "b": 3}',
    '2024-05-01T10:00:00.500000+00:00', 0.5, '2024-05-01T10:00:00.600000+00:00', 0.6, 'ok', '5', NULL);
INSERT INTO runs VALUES ('old2', 'crash', 'adder', 'scripted', 'running', '2024-05-02T10:00:00.000000+00:00',
    NULL, NULL, NULL, NULL, NULL);
PRAGMA user_version = 1;
"""


VERSION_2_CHANGES = """
ALTER TABLE runs ADD COLUMN cost_usd REAL;
ALTER TABLE runs ADD COLUMN writer_host TEXT;
ALTER TABLE runs ADD COLUMN writer_pid INTEGER;
ALTER TABLE runs ADD COLUMN writer_start TEXT;
ALTER TABLE steps ADD COLUMN retries INTEGER NOT NULL DEFAULT 0;
UPDATE runs SET cost_usd = 0.25 WHERE run_id = 'old1';
UPDATE runs SET error = 'interrupted by the user', status = 'interrupted', ended_at = started_at,
    duration_s = 0 WHERE run_id = 'old2';
PRAGMA user_version = 2;
"""
