"""The store keeps up with a runner whose loop never idles (many runs with no model latency): its
writer thread, starved of the GIL by such a loop, is lent the loop's turn at a commit point; a
database held up by another writer is not waited for again and again."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time

import pytest

import nbagent
from nbagent.analytics.store import RunStore, commits
from nbagent.runtime.source import Source

pytestmark = pytest.mark.timeout(180)

BUSY_S = 3.0
"""How long the runs keep the loop busy."""


class BusySteps(Source):
    """Steps as fast as the loop goes (no awaits but ``sleep(0)``), for ``BUSY_S``. The first of
    the runs reads the store file every 0.1 s, from the loop, and notes how old the oldest of its
    finished steps not in the file yet is."""

    name = "busy"
    model_name = "instant"

    def __init__(self, path: str | None = None) -> None:
        self.path = path
        self.lags: list[float] = []
        self.steps = 0

    async def drive(self, task: str, ctx, reset: bool = True) -> str:
        ended: list[float] = []
        until = time.monotonic() + BUSY_S
        next_read = time.monotonic() + 0.1
        conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True) if self.path else None
        try:
            while time.monotonic() < until:
                ctx.start_step("action")
                ctx.text("calling echo")
                ctx.usage(120, 12, "reported")
                ctx.tool_started(f"c{len(ended)}", "echo", {"x": 1})
                ctx.tool_finished(f"c{len(ended)}", "ok", 1)
                ctx.finish_step()
                ended.append(time.monotonic())
                if conn is not None and time.monotonic() >= next_read:
                    (stored,) = conn.execute(
                        "SELECT count(*) FROM steps WHERE run_id = ? AND ended_at IS NOT NULL", (ctx.run_id,)
                    ).fetchone()
                    if stored < len(ended):
                        self.lags.append(time.monotonic() - ended[stored])
                    next_read = time.monotonic() + 0.1
                await asyncio.sleep(0)
        finally:
            if conn is not None:
                conn.close()
        self.steps = len(ended)
        return "done"


def test_the_store_keeps_up_with_a_runner_whose_loop_never_idles(tmp_path):
    """Without the lend, the writer waits hundreds of milliseconds for each SQLite call and the
    file falls seconds behind the runs; with it, a finished step is in the file within a few
    tenths of a second (1 s allowed)."""
    path = tmp_path / "busy.db"
    store = RunStore(path)
    watched = BusySteps(str(path))

    async def main() -> list[nbagent.RunRecord]:
        runs = [nbagent.start(watched, "watched", store=store, display=False)]
        runs += [nbagent.start(BusySteps(), f"busy {n}", store=store, display=False) for n in range(20)]
        return list(await asyncio.gather(*runs))

    records = asyncio.run(main())
    assert all(r.status == "success" for r in records), [r.summary() for r in records]
    assert len(watched.lags) >= 10, "the run read the file too seldom to tell"
    assert max(watched.lags) < 1.0, f"a finished step waited {max(watched.lags):.2f} s for the file"
    steps = store.steps()
    assert (steps["run_id"] == records[0].run_id).sum() == watched.steps  # and nothing was lost
    store.close()


class StuckWrite:
    """A job the writer thread runs that blocks until released (a database locked elsewhere)."""

    def __init__(self) -> None:
        self.running = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> None:
        self.running.set()
        self.release.wait(30)


def test_a_lend_waits_for_the_writers_round_and_a_writer_inside_sqlite_is_not_waited_for(monkeypatch):
    queue = commits.WriteQueue()
    stuck = StuckWrite()
    queue.put(stuck)
    assert stuck.running.wait(10)
    later = threading.Event()
    queue.put(later.set)  # waits behind the stuck write
    monkeypatch.setattr(commits, "LEND_AFTER_S", 0.0)

    queue.lend()  # the writer does not move: inside SQLite, not starved; the lend ends at once
    first = queue.lent_s
    assert commits.LEND_PROBE_S * 0.9 <= first < commits.LEND_MAX_S
    queue.lend()
    assert queue.lent_s == first, "a writer held up by the database was waited for again"
    assert not later.is_set()

    stuck.release.set()
    assert later.wait(10)
    queue.drained().result(10)

    # a writer that moves: the lend goes on until the round holding the waiting job is written
    wrote = threading.Event()
    for _ in range(20):
        queue.put(lambda: time.sleep(0.002))
    queue.put(wrote.set)
    queue.lend()
    assert wrote.is_set(), "the lend returned before the waiting job was written"
    queue.drained().result(10)


def test_a_lend_without_waiting_jobs_costs_nothing():
    queue = commits.WriteQueue()
    began = time.monotonic()
    for _ in range(1000):
        queue.lend()
    assert queue.lent_s == 0.0
    assert time.monotonic() - began < 1.0
