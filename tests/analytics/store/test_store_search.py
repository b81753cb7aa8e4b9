"""Text search answers alike in a store (SQL) and in history (pandas), for any text: quotes,
backslashes, newlines, tabs, NULs, ``%`` and ``_`` (``LIKE``'s wildcards) and letters whose case
folds past ASCII, in the task, the output (text or any JSON-like value), the error and the run id."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbagent.analytics.frames import value_text
from nbagent.analytics.runs import RecordRuns, RunQuery
from nbagent.analytics.store import RunStore
from nbagent.records import RunRecord

TRICKY = "aAzZ09 \"'\\\n\t\r\x00%_[]*?éÉßẞKİıſﬃΣσς😀"
"""Characters SQL, JSON or case folding treat specially (Kelvin sign, dotted I, long s, a ligature,
final sigma...)."""

texts = st.text(alphabet=st.sampled_from(TRICKY) | st.characters(exclude_categories=("Cs",)), max_size=10)
outputs = st.one_of(
    st.none(),
    texts,
    st.integers(),
    st.floats(),
    st.booleans(),
    st.lists(texts, max_size=2),
    st.dictionaries(texts, texts | st.integers(), max_size=2),
)
START = datetime(2026, 3, 1, tzinfo=timezone.utc)


@st.composite
def runs(draw) -> list[RunRecord]:
    records = []
    for i in range(draw(st.integers(1, 5))):
        failed = draw(st.booleans())
        records.append(
            RunRecord(
                run_id=f"run-{i}{draw(texts)}",
                task=draw(texts),
                agent="agent",
                model="model",
                started_at=START + timedelta(seconds=i),
                status="error" if failed else "success",
                output=draw(outputs),
                error=draw(texts) if failed else None,
                ended_at=START + timedelta(seconds=i + 1),
                duration_s=1.0,
            )
        )
    return records


@st.composite
def needles(draw, records: list[RunRecord]) -> str:
    """Random text, or a piece of a field as the frames show it, in any case."""
    fields = [text for r in records for text in (r.task, value_text(r.output), r.error, r.run_id) if text]
    if not fields or draw(st.booleans()):
        return draw(texts.filter(bool))
    field = draw(st.sampled_from(fields))
    start = draw(st.integers(0, len(field) - 1))
    piece = field[start : draw(st.integers(start + 1, len(field)))]
    return draw(st.sampled_from([piece, piece.upper(), piece.lower(), piece.swapcase()])) or piece


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    with RunStore(tmp_path_factory.mktemp("search") / "runs.db") as store:
        yield store


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_store_and_history_find_the_same_runs_for_any_text(store, data):
    records = data.draw(runs())
    needle = data.draw(needles(records))
    query = RunQuery(text=needle, page_size=100)
    with closing(sqlite3.connect(store.path)) as conn, conn:
        conn.execute("DELETE FROM runs")
    for record in records:
        store.add(record)
    in_sql = store.page(query)
    in_pandas = RecordRuns(records).page(query)
    for column in ("run_id", "task", "status"):
        assert in_sql.rows[column].tolist() == in_pandas.rows[column].tolist()
    assert in_sql.total == in_pandas.total


def test_text_with_a_quote_a_backslash_a_newline_or_a_tab_is_found_in_the_output(tmp_path):
    outputs = ['say "hi"', "C:\\temp", "line one\nline two", "a\tb", {"key": 'it\'s "quoted"'}]
    store = RunStore(tmp_path / "runs.db")
    for i, output in enumerate(outputs):
        store.add(
            RunRecord(f"r{i}", "task", "agent", "model", START + timedelta(seconds=i), "success", output)
        )
    for i, needle in enumerate(['"hi"', "C:\\temp", "one\nline", "a\tb", "'it\\'s \"quoted\"'"]):
        assert store.page(RunQuery(text=needle)).rows["run_id"].tolist() == [f"r{i}"], needle
