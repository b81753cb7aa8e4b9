"""Batches on a real local Ray cluster (started once for this module, on 127.0.0.1): tasks spread
over two worker processes, Stop reaches remote runs, a killed worker ends its runs "error"
without a retry, and a resume reruns them."""

from __future__ import annotations

import os
import signal
import sys
import tempfile

import pytest
import ray
from support import TESTS, wait_until

from nbagent.analytics.store import RunStore
from nbagent.batches import batch, run_batch
from nbagent.batches.ray import RayBackend

pytestmark = [
    pytest.mark.needs("ray"),
    pytest.mark.timeout(240),
    pytest.mark.skipif(sys.platform == "win32", reason="Ray on Linux"),
]


def streaming(handle) -> int:
    """How many of the batch's runs have a step under way (their first events came back)."""
    return sum(1 for s in handle.running() if (r := handle.record_of(s.item.key)) is not None and r.steps)


def start_cluster() -> None:
    """``ray.init`` on 127.0.0.1, tried up to three times: on two busy shared cores the raylet
    may miss one of Ray's fixed startup waits (its metrics agent's port file, its registration)."""
    for attempt in (1, 2, 3):
        temp = tempfile.mkdtemp(prefix="nbr", dir="/tmp")  # socket paths cap the temp dir's length
        try:
            ray.init(
                num_cpus=2,
                include_dashboard=False,
                _node_ip_address="127.0.0.1",
                _temp_dir=temp,
                log_to_driver=False,
                configure_logging=False,
                runtime_env={"env_vars": {"PYTHONPATH": str(TESTS)}},
            )
            return
        except Exception as exc:
            ray.shutdown()
            if attempt == 3 or "timed out during startup" not in str(exc):
                raise


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster on 127.0.0.1 whose workers can import the tests' agent factories."""
    start_cluster()
    try:
        yield
    finally:
        ray.shutdown()


def test_a_batch_runs_across_two_worker_processes_and_the_notebook_keeps_the_store(cluster, tmp_path):
    from batch_agents import pid_agent

    store = RunStore(tmp_path / "runs.db")
    backend = RayBackend(workers=2)
    tasks = [{"id": f"t{i}", "task": f"task {i}"} for i in range(8)]
    frame = run_batch(pid_agent, tasks, backend=backend, concurrency=4, store=store, name="ray")
    assert (frame["status"] == "success").all(), frame[["status", "error"]]
    assert frame["output"].tolist() == [f"done t{i}" for i in range(8)]
    pids = {call for call in frame.merge(store.tool_calls(), on="run_id")["result"]}
    assert {int(p) for p in pids} == set(backend.pids) and len(set(backend.pids)) == 2
    assert os.getpid() not in backend.pids
    stored = store.runs()
    assert sorted(stored["run_id"]) == sorted(frame["run_id"]) and (stored["status"] == "success").all()


def test_stop_reaches_remote_runs_and_skips_the_rest(cluster):
    from batch_agents import talker

    tasks = [{"id": f"t{i}", "task": f"talk {i}", "seconds": 30} for i in range(10)]
    handle = batch(talker, tasks, backend=RayBackend(workers=2), concurrency=4)
    wait_until(lambda: streaming(handle) == 4, timeout=120)
    handle.interrupt()
    frame = handle.wait(timeout=60)
    assert frame["status"].value_counts().to_dict() == {"skipped": 6, "interrupted": 4}
    for key in frame.loc[frame.status == "interrupted", "task_key"]:
        record = handle.record_of(key)
        assert record.stop_reason == "user" and record.steps[-1].interrupted
        assert record.steps[-1].model_output.startswith(key)  # the text streamed before the Stop


def test_a_killed_worker_ends_its_runs_as_errors_and_a_resume_reruns_them(cluster, tmp_path):
    from batch_agents import talker

    store = RunStore(tmp_path / "runs.db")
    backend = RayBackend(workers=2)
    tasks = [{"id": f"t{i}", "task": f"talk {i}", "seconds": 4} for i in range(4)]
    handle = batch(talker, tasks, backend=backend, concurrency=4, store=store, name="lost")
    wait_until(lambda: streaming(handle) == 4, timeout=120)
    os.kill(backend.pids[0], signal.SIGKILL)
    frame = handle.wait(timeout=120)
    counts = frame["status"].value_counts().to_dict()
    assert counts == {"error": 2, "success": 2}, frame[["status", "error"]]
    lost = frame[frame.status == "error"]
    assert lost["error"].str.startswith("worker lost").all() and (lost["error_type"] == "WorkerLost").all()
    assert all(handle.record_of(k).steps for k in lost["task_key"])  # what came back before the loss

    again = run_batch(talker, tasks, backend=RayBackend(workers=2), concurrency=4, store=store, name="lost")
    assert (again["status"] == "success").all()
    assert set(again.loc[~again.reused, "task_key"]) == set(lost["task_key"])  # only the lost ones reran


def test_a_lost_worker_fails_only_its_own_runs_and_the_other_tasks_go_to_live_workers(cluster, tmp_path):
    from batch_agents import talker

    store = RunStore(tmp_path / "runs.db")
    backend = RayBackend(workers=2)
    tasks = [{"id": f"t{i}", "task": f"talk {i}", "seconds": 3} for i in range(12)]
    handle = batch(talker, tasks, backend=backend, concurrency=4, store=store, name="lost12", display=False)
    wait_until(lambda: streaming(handle) == 4, timeout=120)
    victim = backend.pids[0]
    on_victim = {s.item.key for s in handle.running() if s.run.worker_pid == victim}
    os.kill(victim, signal.SIGKILL)
    frame = handle.wait(timeout=180)
    lost = frame[frame.status == "error"]
    assert set(lost["task_key"]) == on_victim and len(on_victim) == 2, frame[["task_key", "status", "error"]]
    assert (lost["error_type"] == "WorkerLost").all() and lost["error"].str.startswith("worker lost").all()
    assert (frame.loc[frame.status != "error", "status"] == "success").all()
    assert backend.lost_pids == [victim]
    for key in frame.loc[frame.status == "success", "task_key"]:
        if key not in on_victim:
            assert handle.run_of(key).worker_pid in set(backend.pids) - {victim}
    assert store.records_where("batch.name", "lost12") and len(store.runs()) == 12

    again = run_batch(talker, tasks, backend=RayBackend(workers=2), concurrency=4, store=store, name="lost12")
    assert (again["status"] == "success").all()
    assert set(again.loc[~again.reused, "task_key"]) == on_victim  # a resume reruns only the lost ones


def test_remote_approvals_show_in_the_notebook_and_the_decisions_reach_the_worker(cluster):
    from batch_ray_agents import mailer

    backend = RayBackend(workers=2)
    handle = batch(mailer, [{"id": "a", "task": "mail a"}, {"id": "b", "task": "mail b"}],
                   backend=backend, display=False)  # fmt: skip

    def pending(key: str) -> list[str]:
        run = handle.run_of(key)
        return [] if run is None else [p.call_id for p in run.pending_approvals]

    wait_until(lambda: pending("a") == ["call-a"] and pending("b") == ["call-b"], timeout=120)
    call = handle.record_of("a").tool_calls[0]
    assert (call.tool, call.arguments, call.approval) == ("send", {"to": "a"}, "pending")
    assert handle.run_of("a").approve("call-a") and not handle.run_of("a").approve("call-a")
    assert handle.run_of("b").deny("call-b", "not this one")
    frame = handle.wait(timeout=120)
    assert frame["status"].tolist() == ["success", "success"], frame[["status", "error"]]
    sent, refused = handle.record_of("a").tool_calls[0], handle.record_of("b").tool_calls[0]
    assert (sent.status, sent.approval) == ("ok", "approved")
    assert sent.result.startswith("sent to a by ") and int(sent.result.rsplit(" ", 1)[1]) in backend.pids
    assert (refused.status, refused.approval, refused.result) == ("denied", "denied", None)
