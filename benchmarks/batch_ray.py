"""A lost Ray worker: how many tasks it takes down, and what it costs the batch to finish.

A local Ray cluster on 127.0.0.1 with 2 worker processes runs a batch of ``tasks`` tasks (each an
agent that streams for ``seconds``) at concurrency 4. Once 4 runs stream, one worker process is
killed (``kill -9``). Measured:

- ``in_flight_on_lost``: the runs the killed worker had at that moment; ``errors``: the tasks
  that ended ``"error"``; ``only_lost_failed``: whether those are exactly the killed worker's runs
  (the target: ``errors == in_flight_on_lost``, every other task ``"success"``);
- ``batch_s``: the batch from start to its last record, and ``after_kill_s`` from the kill; the
  same batch without a kill (``baseline_s``) in the same run, and ``ratio`` (kill over baseline);
- ``replacement_s``: from the kill until the replacement worker is up (NaN: the batch ended
  first). ``batch_s`` includes starting the two workers.

    python benchmarks/batch_ray.py [--quick] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def talker(row: dict):
    """Streams for ``row["seconds"]`` seconds (100 words a second), then ends."""
    import nbagent
    from nbagent.models import ScriptedModel

    words = int(100 * row["seconds"])
    return nbagent.Agent(
        ScriptedModel([f"{row['id']} " + "word " * words], tokens_per_s=100, first_token_s=0.0)
    )


def streaming(handle) -> int:
    return sum(1 for s in handle.running() if (r := handle.record_of(s.item.key)) is not None and r.steps)


def one_batch(tasks: int, seconds: float, kill: bool) -> dict[str, float]:
    from nbagent.batches import batch
    from nbagent.batches.ray import RayBackend

    backend = RayBackend(workers=2)
    rows = [{"id": f"t{i}", "task": f"talk {i}", "seconds": seconds} for i in range(tasks)]
    started = time.perf_counter()
    handle = batch(talker, rows, backend=backend, concurrency=4, display=False)
    result: dict[str, float] = {}
    if kill:
        deadline = time.monotonic() + 120
        while streaming(handle) < 4:
            if time.monotonic() > deadline:
                raise RuntimeError("the batch did not start 4 runs within 120 s")
            time.sleep(0.005)
        victim = backend.pids[0]
        on_victim = {s.item.key for s in handle.running() if s.run.worker_pid == victim}
        killed = time.perf_counter()
        os.kill(victim, signal.SIGKILL)
        while len(backend.pids) < 3 and not handle.done():
            time.sleep(0.005)
        replaced = time.perf_counter() if len(backend.pids) >= 3 else float("nan")
    frame = handle.wait(timeout=600)
    ended = time.perf_counter()
    result["batch_s"] = ended - started
    if kill:
        errors = set(frame.loc[frame.status == "error", "task_key"])
        others_ok = bool((frame.loc[frame.status != "error", "status"] == "success").all())
        result |= {
            "in_flight_on_lost": len(on_victim),
            "errors": len(errors),
            "only_lost_failed": errors == on_victim and others_ok,
            "after_kill_s": ended - killed,
            "replacement_s": replaced - killed,
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer and shorter tasks")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    try:
        import ray
    except ImportError:
        print(json.dumps({"ray": "skipped (Ray is not installed)"}) if args.json else "Ray is not installed")
        return
    import nbagent

    nbagent.configure(display=False)
    tasks, seconds = (8, 0.5) if args.quick else (24, 2.0)
    for attempt in (1, 2, 3):  # two busy shared cores may make the raylet miss a startup wait
        try:
            ray.init(
                num_cpus=2,
                include_dashboard=False,
                _node_ip_address="127.0.0.1",
                _temp_dir=tempfile.mkdtemp(prefix="nbr", dir="/tmp"),
                log_to_driver=False,
                configure_logging=False,
                runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parent)])}},
            )
            break
        except Exception as exc:
            ray.shutdown()
            if attempt == 3 or "timed out during startup" not in str(exc):
                raise
    try:
        baseline = one_batch(tasks, seconds, kill=False)
        lost = one_batch(tasks, seconds, kill=True)
    finally:
        ray.shutdown()
    result = {"tasks": tasks, "seconds_per_task": seconds, "workers": 2, "concurrency": 4}
    result |= {"baseline_s": baseline["batch_s"], **lost, "ratio": lost["batch_s"] / baseline["batch_s"]}
    if args.json:
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()}))
        return
    r = result
    print(
        f"{tasks} tasks of {seconds} s on 2 Ray workers at concurrency 4; one worker killed with 4 runs live"
    )
    print(f"  in flight on the killed worker: {r['in_flight_on_lost']}, tasks ended error: {r['errors']} "
          f"(only the lost worker's: {r['only_lost_failed']})")  # fmt: skip
    print(f"  batch {r['batch_s']:.2f} s ({r['after_kill_s']:.2f} s after the kill) vs "
          f"{r['baseline_s']:.2f} s without a kill (ratio {r['ratio']:.2f})")  # fmt: skip
    up = r["replacement_s"]
    print(f"  replacement worker up {up:.2f} s after the kill" if up == up else "  the batch ended first")


if __name__ == "__main__":
    sys.exit(main())
