"""A named batch on a store is claimed in the store (a lease row with a heartbeat): two processes
resuming one batch on one SQLite file do not both run it, the second is told who holds it, and a
killed holder loses the name (at once on this host, after its lease expires where its pid
cannot be checked)."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
from contextlib import closing
from pathlib import Path

import pytest
from support import TESTS, wait_until

from nbagent.analytics.store import RunStore, leases
from nbagent.analytics.store.leases import LeaseHeldError
from nbagent.batches import batch, run_batch

pytestmark = [pytest.mark.timeout(120), pytest.mark.skipif(sys.platform == "win32", reason="kill -9")]
REPO = TESTS.parent

RESUMER = """
    import json, sys, time
    from pathlib import Path
    from nbagent.analytics.store import leases
    from nbagent.analytics.store.leases import LeaseHeldError
    from nbagent.batches import run_batch
    from batch_agents import talker

    path, go, seconds, ttl = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
    leases.LEASE_TTL_S = ttl
    print(json.dumps({"ready": True}), flush=True)
    while not go.exists():  # both processes claim the name at the same moment
        time.sleep(0.001)
    tasks = [{"id": f"t{i}", "task": f"task {i}", "seconds": seconds} for i in range(6)]
    try:
        frame = run_batch(talker, tasks, concurrency=3, store=path, name="qa", display=False)
    except LeaseHeldError as exc:
        print(json.dumps({"refused": str(exc), "holder_pid": exc.holder.pid}), flush=True)
    else:
        print(json.dumps({"ran": int((~frame["reused"]).sum())}), flush=True)
"""


def resumer(path: Path, go: Path, seconds: float = 0.5, ttl: float = 30.0) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(RESUMER), str(path), str(go), str(seconds), str(ttl)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(REPO)])},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert json.loads(proc.stdout.readline()) == {"ready": True}, proc.stderr.read()
    return proc


def finish(proc: subprocess.Popen[str]) -> dict:
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def held(path: Path, name: str = "batch:qa") -> leases.Holder | None:
    if not path.exists():
        return None
    return leases.holder(RunStore(path, readonly=True), name)


def test_two_processes_resuming_one_named_batch_on_one_store_run_it_once(tmp_path):
    path, go = tmp_path / "evals.db", tmp_path / "go"
    RunStore(path).close()  # the file exists before both open it
    first, second = resumer(path, go, seconds=2), resumer(path, go, seconds=2)
    go.touch()
    results = [finish(first), finish(second)]
    ran = [r for r in results if "ran" in r]
    refused = [r for r in results if "refused" in r]
    assert len(ran) == 1 and len(refused) == 1, results
    assert ran[0]["ran"] == 6
    winner = first if results[0] is ran[0] else second
    message = refused[0]["refused"]
    assert refused[0]["holder_pid"] == winner.pid
    assert f"batch 'qa' is already running on {path}, in another process" in message
    assert f"host {socket.gethostname()}, pid {winner.pid}, since 20" in message
    assert len(RunStore(path).records()) == 6  # 6 tasks, 6 runs: nobody ran them twice
    assert held(path) is None  # the winner gave the name back


def test_a_second_process_is_refused_while_the_holder_runs_and_gets_the_name_once_it_is_killed(tmp_path):
    path, go = tmp_path / "evals.db", tmp_path / "go"
    go.touch()
    holder = resumer(path, go, seconds=60)
    try:
        wait_until(lambda: held(path) is not None, timeout=60, interval=0.02)
        with pytest.raises(LeaseHeldError) as refused:
            batch(lambda: None, ["a"], store=path, name="qa", display=False)
        assert refused.value.holder.pid == holder.pid
        assert f"pid {holder.pid}, since " in str(refused.value)
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.communicate(timeout=30)
    from batch_agents import talker

    tasks = [{"id": f"t{i}", "task": f"task {i}", "seconds": 0.05} for i in range(6)]
    frame = run_batch(talker, tasks, store=path, name="qa", display=False)  # at once: its pid is gone
    assert (frame["status"] == "success").all()


def test_a_killed_holder_whose_pid_cannot_be_checked_loses_the_name_when_its_lease_expires(
    tmp_path, monkeypatch
):
    path, go = tmp_path / "evals.db", tmp_path / "go"
    go.touch()
    holder = resumer(path, go, seconds=60, ttl=4.0)
    try:
        wait_until(lambda: held(path) is not None, timeout=60, interval=0.02)
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.communicate(timeout=30)
    # As seen from another pid namespace (a container sharing the file): only the heartbeat counts.
    monkeypatch.setattr(leases, "pid_namespace", lambda: "pid:[elsewhere]")
    lease = held(path)
    assert lease is not None and lease.pid == holder.pid and lease.ttl_s == 4.0
    assert time.time() - lease.heartbeat < 3  # a heartbeat every 1.3 s until the kill
    with pytest.raises(LeaseHeldError, match=f"pid {holder.pid}"):  # inside the lease: refused
        batch(lambda: None, ["a"], store=path, name="qa", display=False)
    wait_until(lambda: time.time() - lease.heartbeat > lease.ttl_s, timeout=10, interval=0.05)
    from batch_agents import talker

    tasks = [{"id": "t0", "task": "x", "seconds": 0.05}]
    frame = run_batch(talker, tasks, store=path, name="qa", display=False)
    assert frame["status"].tolist() == ["success"]


def test_a_live_holder_keeps_its_lease_past_its_ttl_by_its_heartbeats(tmp_path, monkeypatch):
    store = RunStore(tmp_path / "runs.db")
    lease = leases.claim(store, "batch:x", ttl_s=0.6)
    first = leases.holder(store, "batch:x")
    assert first is not None and first.pid == os.getpid()
    wait_until(lambda: time.time() - first.heartbeat > 1.5, timeout=10, interval=0.05)
    monkeypatch.setattr(leases, "pid_namespace", lambda: "pid:[elsewhere]")  # as another process sees it
    with pytest.raises(LeaseHeldError):
        leases.claim(store, "batch:x", ttl_s=0.6)
    assert leases.holder(store, "batch:x").heartbeat > first.heartbeat
    lease.release()
    assert lease.join(timeout=10) and leases.holder(store, "batch:x") is None
    assert not lease.lost


def test_a_name_released_in_this_process_is_claimed_again_at_once(tmp_path):
    store = RunStore(tmp_path / "runs.db")
    for _ in range(20):  # whether or not the released row is deleted yet
        leases.claim(store, "batch:y").release()
    last = leases.claim(store, "batch:y")
    last.release()
    assert last.join(timeout=10) and leases.holder(store, "batch:y") is None


def test_a_lease_released_as_its_store_is_closed_still_gives_the_name_back(tmp_path):
    store = RunStore(tmp_path / "runs.db")
    lease = leases.claim(store, "batch:z")
    store.close()  # as a script does right after its batch
    lease.release()
    assert lease.join(timeout=10)
    assert leases.holder(RunStore(tmp_path / "runs.db"), "batch:z") is None


def a_dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def lease_row(path: Path, name: str, pid: int, start: str) -> None:
    """A fresh lease row as a holder with this host name, pid namespace and ``start`` writes it."""
    RunStore(path).close()
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(leases._TABLE)
        conn.execute(
            "INSERT INTO batch_leases (name, token, host, pid, start, pidns, since, heartbeat, ttl_s) "
            "VALUES (?, 'theirs', ?, ?, ?, ?, '2026-01-01T00:00:00Z', ?, 30)",
            (name, socket.gethostname(), pid, start, leases.pid_namespace(), time.time()),
        )


@pytest.mark.skipif(not Path("/proc/sys/kernel/random/boot_id").exists(), reason="boot ids are Linux's")
def test_a_fresh_lease_of_another_machine_with_the_same_host_name_is_not_taken_over(tmp_path):
    """Hosts may share a name (containers, cloned VMs, ``localhost``): a pid that is not running
    here says nothing about a holder whose boot id is another machine's."""
    path, dead = tmp_path / "evals.db", a_dead_pid()
    lease_row(path, "batch:elsewhere", dead, "a-boot-id-of-another-machine:12345")
    with pytest.raises(LeaseHeldError, match=f"pid {dead}"):
        leases.claim(RunStore(path), "batch:elsewhere")

    own_boot = leases.this_writer()[2].partition(":")[0]  # the same row from this machine: gone
    lease_row(tmp_path / "here.db", "batch:here", dead, f"{own_boot}:12345")
    leases.claim(RunStore(tmp_path / "here.db"), "batch:here").release()
