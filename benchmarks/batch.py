"""What a batch costs: its scheduling against a bare ``asyncio.gather``, its live table on the wire,
its Stop, Ray against local, and the store under a hundred concurrent runs.

1. Local. 1,000 tasks of a scripted agent (3 steps of ~20 tokens at 500 tokens/s, first token after
   50 ms: the work is waiting, as on a real model) at concurrency 100, against the same runs under
   ``asyncio.gather`` with a semaphore (``await nbagent.start``), alternated 3 times after a warm-up.
   ``wall_ratio`` is the median of the gather's wall time over the batch's (target >= 0.9). Then the
   same batch with its live table in a real kernel (jupyter_client): the widget messages the kernel
   sends (``comm_msg``/``comm_open``) per second and their bytes (targets <= 40 msgs/s, <= 100
   kB/s). Then Stop all with 100 runs live, 5 times: from ``interrupt()`` to each task's final
   record in the batch (p99 over all, target <= 200 ms) and to the last one.
2. Ray (skipped without Ray): a local cluster on 127.0.0.1 with 2 worker processes; 200 tasks,
   tasks/s against local; Stop with 40 remote runs live: to each record back in the notebook (p99
   target <= 500 ms).
3. Store. 100 concurrent runs of 100 steps (each step reports text, usage and one tool call, as an
   agent's does, with no model latency) writing through one ``RunStore`` (WAL,
   ``synchronous=NORMAL``): steps/s from the first event to the last commit, with grouped commits
   and, as the baseline they replace, one transaction per commit point (``GROUP_LIMIT = 1``; rows
   are still built once per take); beside the same runs without a store, alternated 3 times after
   a warm-up (median; target >= 0.5 of them); the p99 and max delay from a step's end to the
   commit of its row (the worst round; target <= 250 ms), the share of the time the loop lent the
   writer thread its turn (``WriteQueue.lend``), and a check that every run's rows were committed
   before its record was returned. ``--only-store`` runs this part alone.
4. A big batch: 100,000 tasks (10,000 with ``--quick``) at concurrency 100 of an agent that streams
   for minutes, with 100 runs live and the rest queued: the process's RSS (and its growth from
   before the batch), the cost of one table refresh on the runner's loop (median and max of 20,
   against the same with 1,000 tasks; target <= 2 ms whatever the size), Stop all from
   ``interrupt()`` to the batch's end (target <= 1 s), the batch's frame once stopped (what
   ``await batch`` returns; target <= 0.5 s), beside the same frame with the statuses of the
   tasks without a record set cell by cell, as it was built before, and, under ``tracemalloc``,
   the bytes a queued task costs the batch, its row apart (the difference between 1,000 and
   100,000 tasks over the difference in tasks; target <= 1 kB).

    python benchmarks/batch.py [--quick] [--json] [--no-ray] [--no-kernel] [--no-store] [--only-big]
                               [--only-store]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import nbagent
from nbagent.analytics.store import RunStore
from nbagent.analytics.store import commits as store_commits
from nbagent.analytics.store import writer as store_writer
from nbagent.batches import batch
from nbagent.models import ScriptedModel, ToolCall
from nbagent.models.scripted import Reply
from nbagent.runtime.source import Source

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # kernel_support, batch_agents

TEXT = "the agent reads the task and thinks about which tool to call before it answers"


@nbagent.tool
async def echo(x: int) -> int:
    """Echo x.

    Args:
        x: a number.
    """
    return x


def waiting_agent() -> nbagent.Agent:
    """3 steps of ~20 tokens at 500 tokens/s, the first token after 50 ms."""
    text = TEXT
    turns = [
        Reply(text, [ToolCall("echo", {"x": 1})]),
        Reply(text, [ToolCall("echo", {"x": 2})]),
        text + " done.",
    ]
    return nbagent.Agent(
        ScriptedModel(turns, tokens_per_s=500, first_token_s=0.05), tools=[echo], name="bench"
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


# -- 1. local -------------------------------------------------------------------------------------


def gather_wall(tasks: int, concurrency: int) -> float:
    async def main() -> None:
        slots = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            async with slots:
                record = await nbagent.start(waiting_agent(), f"task {i}", display=False)
                assert record.status == "success", record.summary()

        await asyncio.gather(*(one(i) for i in range(tasks)))

    start = time.perf_counter()
    asyncio.run(main())
    return time.perf_counter() - start


def batch_wall(tasks: int, concurrency: int) -> float:
    start = time.perf_counter()
    frame = batch(
        waiting_agent, [f"task {i}" for i in range(tasks)], concurrency=concurrency, display=False
    ).wait()
    wall = time.perf_counter() - start
    assert (frame["status"] == "success").all()
    return wall


def streaming(state) -> bool:
    """Whether a task's run has streamed text (cheap: no copy of its record)."""
    run = state.run
    if hasattr(run, "live_text"):
        return bool(run.live_text(1))
    record = run.record if run is not None and run.run_id else None
    return record is not None and bool(record.steps)


def stop_latencies(handle, live: int, timeout: float = 300) -> tuple[list[float], float]:
    """Wait until ``live`` runs stream, Stop all, and time each task's final record reaching the
    batch (stamped on the runner's loop as the batch takes it, so the timing does not compete with
    a polling thread for the GIL)."""
    deadline = time.monotonic() + timeout
    while sum(streaming(s) for s in handle.running()) < live:
        if time.monotonic() > deadline:
            raise TimeoutError("the runs did not start")
        time.sleep(0.05)
    stamps: list[float] = []
    ended = handle.scheduler._ended

    async def stamped(state, record):
        stamps.append(time.perf_counter())
        await ended(state, record)

    handle.scheduler._ended = stamped
    start = time.perf_counter()
    handle.interrupt()
    handle.wait(timeout=60)
    latencies = [(t - start) * 1000 for t in stamps]
    return latencies, max(latencies)


def slow_agent() -> nbagent.Agent:
    return nbagent.Agent(ScriptedModel(["word " * 5000], tokens_per_s=100, first_token_s=0.0))


def local_stop(live: int, repeats: int) -> dict[str, float]:
    latencies, lasts = [], []
    for _ in range(repeats):
        handle = batch(slow_agent, [f"t{i}" for i in range(live * 2)], concurrency=live, display=False)
        each, last = stop_latencies(handle, live)
        frame = handle.frame()
        assert frame["status"].value_counts().to_dict() == {"interrupted": live, "skipped": live}
        latencies.extend(each)
        lasts.append(last)
    return {
        "stop_p50_ms": percentile(latencies, 50),
        "stop_p99_ms": percentile(latencies, 99),
        "stop_all_ms": max(lasts),
    }


KERNEL_SETUP = """
import sys
sys.path.insert(0, {bench!r})
import nbagent
from nbagent.batches import batch
from batch import waiting_agent
"""


def table_costs(tasks: int, concurrency: int) -> dict[str, float]:
    from kernel_support import KernelDriver

    with KernelDriver.start() as kernel:
        kernel.execute(KERNEL_SETUP.format(bench=str(Path(__file__).resolve().parent)))
        done = kernel.execute(
            f"b = batch(waiting_agent, [f'task {{i}}' for i in range({tasks})], concurrency={concurrency})"
        )
        table = done.widget_view()
        first = len(kernel.widgets.history)
        kernel.wait_for(lambda: "done" in kernel.widgets.text_under(table).split("</b>")[1], timeout=600)
        kernel.pump(0.3)
        updates = kernel.widgets.history[first:]
        span = updates[-1].at - updates[0].at
        out = kernel.execute("frame = await b\nprint((frame.status == 'success').sum())").stdout.strip()
        assert out == str(tasks), out
    return {
        "table_msgs_per_s": len(updates) / span,
        "table_bytes_per_s": sum(u.size for u in updates) / span,
        "table_seconds": span,
    }


# -- 2. Ray ---------------------------------------------------------------------------------------


def ray_part(tasks: int, live: int) -> dict[str, float]:
    import ray

    from nbagent.batches.ray import RayBackend

    temp = tempfile.mkdtemp(prefix="nbr", dir="/tmp")
    started = time.perf_counter()
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        _temp_dir=temp,
        log_to_driver=False,
        configure_logging=False,
        runtime_env={"env_vars": {"PYTHONPATH": f"{HERE}:{HERE.parent / 'tests'}"}},
    )
    init_s = time.perf_counter() - started
    try:
        from batch import waiting_agent as remote_agent  # importable by the workers (PYTHONPATH)

        names = [f"task {i}" for i in range(tasks)]
        start = time.perf_counter()
        frame = batch(
            remote_agent, names, concurrency=100, backend=RayBackend(workers=2), display=False
        ).wait()
        ray_s = time.perf_counter() - start
        assert (frame["status"] == "success").all(), frame["error"].dropna().head()
        local_s = batch_wall(tasks, 100)
        from batch_agents import talker

        rows = [{"id": f"t{i}", "task": f"talk {i}", "seconds": 60} for i in range(live * 2)]
        handle = batch(talker, rows, concurrency=live, backend=RayBackend(workers=2), display=False)
        latencies, last = stop_latencies(handle, live)
    finally:
        ray.shutdown()
    return {
        "ray_init_s": init_s,
        "ray_tasks_per_s": tasks / ray_s,
        "local_tasks_per_s": tasks / local_s,
        "ray_vs_local": local_s / ray_s,
        "ray_stop_p50_ms": percentile(latencies, 50),
        "ray_stop_p99_ms": percentile(latencies, 99),
        "ray_stop_all_ms": last,
    }


# -- 3. the store ---------------------------------------------------------------------------------


class StepSource(Source):
    """A run of ``steps`` steps, each as an agent's step reports it (its text, usage, a tool call),
    yielding to the loop between steps as a real run waits for its model: the store's load
    without the agent loop's own per-step cost."""

    name = "steps"
    model_name = "instant"

    def __init__(self, steps: int) -> None:
        self.steps = steps

    async def drive(self, task: str, ctx, reset: bool = True) -> str:
        for n in range(self.steps):
            ctx.start_step("action")
            ctx.text(f"step {n}: calling echo")
            ctx.usage(120, 12, "reported")
            ctx.tool_started(f"c{n}", "echo", {"x": n})
            ctx.tool_finished(f"c{n}", "ok", n)
            ctx.finish_step()
            await asyncio.sleep(0)
        return "done"


class CommitClock:
    """Times, per run's sink, each commit point queued and each one committed."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.queued: dict[int, int] = {}
        self.committed: dict[int, int] = {}
        self.step_ends: list[tuple[int, int, float]] = []  # sink, job number, time of the step's end
        self.commit_times: dict[tuple[int, int], float] = {}
        self.first_event: float | None = None
        self.behind_at_return: int = 0

    def install(self):
        clock = self
        call, written, put = (
            store_writer.RunWriter.__call__,
            store_writer.RunWriter._written,
            store_commits.WriteQueue.put,
        )

        def timed_put(queue, job):
            if type(job) is store_commits.RowsJob:
                with clock.lock:
                    clock.queued[id(job.sink)] = clock.queued.get(id(job.sink), 0) + 1
            put(queue, job)

        def timed_call(sink, event):
            now = time.perf_counter()
            if clock.first_event is None:
                clock.first_event = now
            call(sink, event)
            if type(event) is nbagent.events.StepFinished:  # its commit point is the sink's latest job
                with clock.lock:
                    clock.step_ends.append((id(sink), clock.queued.get(id(sink), 0), now))

        def timed_written(sink, last):
            now = time.perf_counter()
            with clock.lock:
                n = clock.committed.get(id(sink), 0) + 1
                clock.committed[id(sink)] = n
                clock.commit_times[(id(sink), n)] = now
            written(sink, last)

        store_writer.RunWriter.__call__ = timed_call
        store_writer.RunWriter._written = timed_written
        store_commits.WriteQueue.put = timed_put
        return call, written, put

    @staticmethod
    def uninstall(saved) -> None:
        store_writer.RunWriter.__call__, store_writer.RunWriter._written, store_commits.WriteQueue.put = saved


def runner_rate(runs: int, steps: int) -> float:
    """Steps/s of the same runs without a store: the ceiling the store's rate is bounded by here."""

    async def main() -> None:
        await asyncio.gather(*(nbagent.start(StepSource(steps), f"r{n}", display=False) for n in range(runs)))

    start = time.perf_counter()
    asyncio.run(main())
    return runs * steps / (time.perf_counter() - start)


def store_rate(runs: int, steps: int, grouped: bool) -> dict[str, float]:
    clock = CommitClock()
    saved = clock.install()
    limit = store_commits.GROUP_LIMIT
    store_commits.GROUP_LIMIT = limit if grouped else 1
    try:
        with tempfile.TemporaryDirectory() as folder:
            store = RunStore(Path(folder) / "bench.db")

            async def main() -> None:
                async def one(n: int) -> None:
                    run = nbagent.start(StepSource(steps), f"run {n}", store=store, display=False)
                    record = await run
                    assert record.status == "success", record.summary()
                    sink = next(s for s in run._sinks if isinstance(s, store_writer.RunWriter))
                    with clock.lock:  # every commit point of the run is committed when its record returns
                        clock.behind_at_return += clock.queued.get(id(sink), 0) - clock.committed.get(
                            id(sink), 0
                        )

                await asyncio.gather(*(one(n) for n in range(runs)))

            asyncio.run(main())
            store.flush()
            last_commit = max(clock.commit_times.values())
            stored = len(store.steps())
            commits, jobs, lent_s = store._queue.commits, store._queue.jobs, store._queue.lent_s
            store.close()
    finally:
        CommitClock.uninstall(saved)
        store_commits.GROUP_LIMIT = limit
    assert stored == runs * steps, (stored, runs * steps)
    delays = [(clock.commit_times[(sink, n)] - end) * 1000 for sink, n, end in clock.step_ends]
    assert clock.first_event is not None
    return {
        "steps_per_s": runs * steps / (last_commit - clock.first_event),
        "commit_delay_p99_ms": percentile(delays, 99),
        "commit_delay_max_ms": max(delays),
        "commit_points_per_commit": jobs / commits,
        "loop_lent_share": lent_s / (last_commit - clock.first_event),
        "rows_uncommitted_at_return": clock.behind_at_return,
    }


def store_part(runs: int, steps: int, rounds: int) -> dict[str, float]:
    """Part 3: after a warm-up, the store's runs and the same runs without a store, alternated
    ``rounds`` times (medians; the delays' worst round), and once with one transaction per commit
    point."""
    store_rate(runs, max(1, steps // 5), True)  # warm up: the schema, the statements, the thread
    grouped, bare = [], []
    for _ in range(rounds):
        grouped.append(store_rate(runs, steps, True))
        bare.append(runner_rate(runs, steps))
    single = store_rate(runs, steps, False)
    result = {f"store_{k}": statistics.median(g[k] for g in grouped) for k in grouped[0]}
    result["store_commit_delay_p99_ms"] = max(g["commit_delay_p99_ms"] for g in grouped)
    result["store_commit_delay_max_ms"] = max(g["commit_delay_max_ms"] for g in grouped)
    result["store_rows_uncommitted_at_return"] = sum(g["rows_uncommitted_at_return"] for g in grouped)
    result |= {f"store_per_commit_point_{k}": v for k, v in single.items()}
    result["store_ratio"] = result["store_steps_per_s"] / single["steps_per_s"]
    result["runs_without_store_steps_per_s"] = statistics.median(bare)
    result["store_vs_no_store"] = statistics.median(
        g["steps_per_s"] / b for g, b in zip(grouped, bare, strict=True)
    )
    return result


def store_lines(r: dict[str, float], runs: int, steps: int) -> list[str]:
    return [
        f"3. store: {runs} concurrent runs x {steps} steps through one RunStore",
        f"   grouped commits {r['store_steps_per_s']:,.0f} steps/s (>= 20,000; "
        f"{r['store_commit_points_per_commit']:.1f} commit points per transaction), "
        f"one transaction per commit point {r['store_per_commit_point_steps_per_s']:,.0f} steps/s: "
        f"ratio {r['store_ratio']:.2f}",
        f"   the same runs without a store (the ceiling on this machine): "
        f"{r['runs_without_store_steps_per_s']:,.0f} steps/s; with the store "
        f"{r['store_vs_no_store']:.2f} of it (>= 0.5); the loop lent the writer "
        f"{100 * r['store_loop_lent_share']:.0f} % of the time",
        f"   step end -> committed: p99 {r['store_commit_delay_p99_ms']:.1f} ms, max "
        f"{r['store_commit_delay_max_ms']:.1f} ms (<= 250, the worst round); commit points not "
        f"committed when a record returned: {r['store_rows_uncommitted_at_return']}",
    ]


def rounded(result: dict[str, float | str]) -> dict[str, float | str]:
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()}


# -- 4. a big batch -------------------------------------------------------------------------------


def rss_mb() -> float:
    """This process's resident memory (Linux ``/proc``; elsewhere the peak, from ``resource``)."""
    try:
        with open("/proc/self/statm") as statm:
            import os

            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6
    except OSError:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3


def long_agent() -> nbagent.Agent:
    """Streams for about ten minutes: every run of a big batch is still live when it is stopped.
    (A short reply, slowly: the script's own tokens are not what is measured.)"""
    return nbagent.Agent(ScriptedModel(["word " * 3000], tokens_per_s=5, first_token_s=0.0))


def started_big(tasks: int, live: int):
    """A batch of ``tasks`` with ``live`` runs streaming and the rest queued."""
    names = [f"task {i}" for i in range(tasks)]
    handle = batch(long_agent, names, concurrency=live, display=False)
    deadline = time.monotonic() + 300
    while sum(streaming(s) for s in handle.running()) < live:
        if time.monotonic() > deadline:
            raise TimeoutError("the runs did not start")
        time.sleep(0.05)
    return handle


def refresh_ms(handle, times: int = 20) -> list[float]:
    """What one refresh of the batch's widget table costs the runner's loop, ``times`` over."""
    from nbagent.batches.table import BatchTable
    from nbagent.runtime.loop import runner_loop

    table = BatchTable(handle)

    async def timed() -> list[float]:
        costs = []
        for _ in range(times):
            start = time.perf_counter()
            table.refresh()
            costs.append((time.perf_counter() - start) * 1000)
            await asyncio.sleep(0.02)  # the runs go on between two refreshes, as under the ticker
        return costs

    return asyncio.run_coroutine_threadsafe(timed(), runner_loop()).result(timeout=120)


def stop_all_ms(handle) -> float:
    start = time.perf_counter()
    handle.interrupt()
    handle.completion.result(timeout=300)
    return (time.perf_counter() - start) * 1000


def frame_seconds(handle) -> tuple[float, float]:
    """Seconds to build the frame of a stopped batch, and to build it as before (the statuses of
    the tasks without a record set cell by cell); the two frames must be equal."""
    import pandas as pd

    start = time.perf_counter()
    frame = handle.frame()
    column_wise = time.perf_counter() - start
    start = time.perf_counter()
    before = handle.frame()
    missing = before["run_id"].isna().to_numpy()
    status = before["status"].where(~missing)
    for position in missing.nonzero()[0]:
        status.iat[position] = handle.tasks[position].phase
    before["status"] = status
    row_wise = time.perf_counter() - start
    pd.testing.assert_frame_equal(frame, before)
    return column_wise, row_wise


def traced_bytes(tasks: int, live: int) -> float:
    """The bytes the batch holds with ``live`` runs streaming and the rest queued (``tracemalloc``)."""
    import gc
    import tracemalloc

    names = [f"task {i}" for i in range(tasks)]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        handle = batch(long_agent, names, concurrency=live, display=False)
        deadline = time.monotonic() + 300
        while sum(streaming(s) for s in handle.running()) < live:
            if time.monotonic() > deadline:
                raise TimeoutError("the runs did not start")
            time.sleep(0.05)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    handle.interrupt()
    handle.wait(timeout=300)
    return held


def big_part(tasks: int, live: int = 100) -> dict[str, float]:
    import gc

    small = started_big(1000, live)
    small_refresh = refresh_ms(small)
    small_stop = stop_all_ms(small)
    del small
    gc.collect()
    rss_before = rss_mb()
    handle = started_big(tasks, live)
    rss_live = rss_mb()
    big_refresh = refresh_ms(handle)
    stop = stop_all_ms(handle)
    frame_s, frame_rowwise_s = frame_seconds(handle)
    frame = handle.frame()
    counts = frame["status"].value_counts().to_dict()
    assert counts == {"interrupted": live, "skipped": tasks - live}, counts
    del handle, frame
    gc.collect()
    row = sys.getsizeof({"task": "task 99999"})
    per_task = (traced_bytes(tasks, live) - traced_bytes(1000, live)) / (tasks - 1000)
    return {
        "big_tasks": tasks,
        "big_live": live,
        "big_rss_mb": rss_live,
        "big_rss_growth_mb": rss_live - rss_before,
        "big_refresh_p50_ms": statistics.median(big_refresh),
        "big_refresh_max_ms": max(big_refresh),
        "small_refresh_p50_ms": statistics.median(small_refresh),
        "small_refresh_max_ms": max(small_refresh),
        "big_stop_all_ms": stop,
        "small_stop_all_ms": small_stop,
        "big_frame_s": frame_s,
        "big_frame_rowwise_s": frame_rowwise_s,
        "big_bytes_per_queued_task": per_task - row,
        "big_row_bytes": row,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smaller runs of the same measurements")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--no-kernel", action="store_true")
    parser.add_argument("--no-store", action="store_true")
    parser.add_argument("--only-big", action="store_true", help="part 4 only (with the 1,000-task ratio)")
    parser.add_argument("--only-store", action="store_true", help="part 3 only")
    args = parser.parse_args()
    if args.only_store:
        runs, steps = (100, 20) if args.quick else (100, 100)
        result = store_part(runs, steps, 1 if args.quick else 3)
        print(json.dumps(rounded(result)) if args.json else "\n".join(store_lines(result, runs, steps)))
        return
    nbagent.configure(display=False)
    tasks = 200 if args.quick else 1000
    result: dict[str, float | str] = {"tasks": tasks, "concurrency": 100}

    gather_wall(50, 10), batch_wall(50, 10)  # warm up: imports, the loop, the thread pool
    gather_s, batch_s = [], []
    for _ in range(1 if args.quick else 3):  # alternate, so both see the same machine
        gather_s.append(gather_wall(tasks, 100))
        batch_s.append(batch_wall(tasks, 100))
    ratios = [g / b for g, b in zip(gather_s, batch_s, strict=True)]
    result |= {
        "gather_s": statistics.median(gather_s),
        "batch_s": statistics.median(batch_s),
        "wall_ratio": statistics.median(ratios),
    }
    if not args.no_kernel and not args.only_big:
        result |= table_costs(tasks, 100)
    if not args.only_big:
        result |= local_stop(100, 2 if args.quick else 5)

    try:
        import ray  # noqa: F401

        has_ray = True
    except ImportError:
        has_ray = False
    if args.only_big:
        result["ray"] = "skipped (--only-big)"
    elif has_ray and not args.no_ray:
        result |= ray_part(100 if args.quick else 200, 40)
    else:
        result["ray"] = "skipped (--no-ray)" if has_ray else "skipped (Ray is not installed)"

    runs, steps = (100, 20) if args.quick else (100, 100)
    if not (args.no_store or args.only_big):
        result |= store_part(runs, steps, 1 if args.quick else 3)
    result |= big_part(10_000, live=20) if args.quick else big_part(100_000)

    if args.json:
        print(json.dumps(rounded(result)))
        return
    r = result
    print(f"1. local: {tasks} tasks (3 steps, 50 ms to first token, 500 tokens/s) at concurrency 100")
    print(f"   asyncio.gather + semaphore {r['gather_s']:.2f} s, batch {r['batch_s']:.2f} s, ratio "
          f"{r['wall_ratio']:.2f} (target >= 0.9)")  # fmt: skip
    if "table_msgs_per_s" in r:
        print(f"   live table in a kernel: {r['table_msgs_per_s']:.1f} comm msgs/s (<= 40), "
              f"{r['table_bytes_per_s'] / 1000:.1f} kB/s (<= 100)")  # fmt: skip
    if "stop_p50_ms" in r:
        print(f"   Stop all, 100 live runs (x5): to each record p50 {r['stop_p50_ms']:.1f} ms, "
              f"p99 {r['stop_p99_ms']:.1f} ms (<= 200), all in {r['stop_all_ms']:.1f} ms")  # fmt: skip
    if "ray_tasks_per_s" in r:
        print(f"2. Ray, 2 local workers (cluster start {r['ray_init_s']:.1f} s): "
              f"{r['ray_tasks_per_s']:.0f} tasks/s vs local {r['local_tasks_per_s']:.0f} tasks/s "
              f"(ratio {r['ray_vs_local']:.2f})")  # fmt: skip
        print(f"   Stop, 40 remote runs: to each record p50 {r['ray_stop_p50_ms']:.1f} ms, "
              f"p99 {r['ray_stop_p99_ms']:.1f} ms (<= 500), all {r['ray_stop_all_ms']:.1f} ms")  # fmt: skip
    else:
        print(f"2. Ray: {r['ray']}")
    if "store_steps_per_s" in r:
        print("\n".join(store_lines(r, runs, steps)))
    else:
        print("3. store: skipped")
    print(f"4. big: {r['big_tasks']:,} tasks, {r['big_live']} live, the rest queued: "
          f"RSS {r['big_rss_mb']:.0f} MB "
          f"(+{r['big_rss_growth_mb']:.0f} MB for the batch), {r['big_bytes_per_queued_task']:.0f} bytes "
          f"per queued task beyond its row of {r['big_row_bytes']} (<= 1,000)")  # fmt: skip
    print(f"   table refresh p50 {r['big_refresh_p50_ms']:.2f} ms, max {r['big_refresh_max_ms']:.2f} ms "
          f"(1,000 tasks: {r['small_refresh_p50_ms']:.2f} / {r['small_refresh_max_ms']:.2f} ms; <= 2); "
          f"Stop all {r['big_stop_all_ms']:.0f} ms (1,000 tasks: {r['small_stop_all_ms']:.0f} ms; "
          f"<= 1,000)")  # fmt: skip
    print(f"   its frame once stopped {r['big_frame_s']:.2f} s (<= 0.5), "
          f"with the statuses set cell by cell as before {r['big_frame_rowwise_s']:.2f} s")  # fmt: skip


if __name__ == "__main__":
    main()
