"""Pricing on the runner's loop never waits on an import or on disk (cost.record_cost_if_ready).

Each test runs in a fresh interpreter, where genai-prices is not imported yet. A meta-path finder
holds its import until the test lets it go, as a busy machine would for seconds: a pricing call
that waited on the import would hang there, one that does not returns in microseconds. An audit
hook lists every import and file open on the calling thread (it stands for the runner's loop).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from support import ROOT

PRELUDE = r"""
import json, sys, threading, time
from datetime import datetime, timezone

release = threading.Event()
asked = threading.Event()


class HeldImport:
    def find_spec(self, name, path=None, target=None):
        if name == "genai_prices":
            asked.set()
            release.wait(120)
        return None


sys.meta_path.insert(0, HeldImport())

from nbagent.analytics import cost
from nbagent.records import RunRecord, StepRecord

caller = threading.get_ident()
watching = False
touched = []


def audit(event, args):
    if watching and event in ("import", "open") and threading.get_ident() == caller:
        touched.append(f"{event} {args[0]}")


sys.addaudithook(audit)
now = datetime.now(timezone.utc)


def record(model, steps=3, base=1000, cost_usd=None):
    return RunRecord(
        "r", "task", "agent", model, now, cost_usd=cost_usd,
        steps=[
            StepRecord(i, "action", now, 0.0, input_tokens=base + i, output_tokens=50 + i,
                       usage_source="reported")
            for i in range(steps)
        ],
    )


def timed(rec):
    global watching
    watching = True
    start = time.perf_counter()
    try:
        return cost.record_cost_if_ready(rec), time.perf_counter() - start
    finally:
        watching = False


def wait_until(condition, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met"
        time.sleep(0.002)


out = {"imported_at_start": "genai_prices" in sys.modules}
"""


def run_script(body: str) -> dict:
    """Run PRELUDE + ``body`` in a fresh interpreter; return the JSON it prints last."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", PRELUDE + body + "\nprint(json.dumps(out))"],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.needs("cost")
def test_pricing_before_the_library_is_loaded_returns_at_once_then_prices_after_the_warm_up():
    out = run_script(
        r"""
gpt = record("gpt-4o")
out["cold"], out["cold_s"] = timed(gpt)
out["asked"] = asked.wait(30)  # the call itself started the background import
again = [timed(gpt) for _ in range(100)]
out["again"] = sorted({value for value, _ in again}, key=str)
out["again_max_s"] = max(seconds for _, seconds in again)
out["warmup_threads"] = sum(t.name == "nbagent-warmup" for t in threading.enumerate())
out["imported_while_held"] = "genai_prices" in sys.modules
out["touched_cold"] = list(touched)

release.set()
wait_until(lambda: cost.record_cost_if_ready(gpt) is not None)
touched.clear()
fresh = record("gpt-4o", steps=10, base=70_000)  # token counts nothing has priced yet
out["warm"], out["warm_s"] = timed(fresh)
out["warm_again"], out["warm_again_s"] = timed(fresh)
out["expected"] = cost.record_cost(fresh)
out["unknown"], _ = timed(record("no-such-model-anywhere"))
out["touched_warm"] = list(touched)
"""
    )
    assert not out["imported_at_start"]
    assert out["cold"] is None
    assert out["cold_s"] < 0.05, out  # a held import would have held this call for 120 s
    assert out["asked"]
    assert out["again"] == [None]
    assert out["again_max_s"] < 0.05, out
    assert out["warmup_threads"] == 1  # one background import, however many calls asked
    assert not out["imported_while_held"]
    assert out["touched_cold"] == []
    assert out["warm"] is not None and out["warm"] > 0
    assert out["warm"] == out["warm_again"] == out["expected"]
    assert out["warm_s"] < 0.05, out
    assert out["unknown"] is None
    assert out["touched_warm"] == []  # the price data was loaded by the warm-up, not by the call


def test_user_prices_and_local_models_need_no_library_at_all():
    out = run_script(
        r"""
cost.set_price("my-model", input_per_mtok=2.0, output_per_mtok=6.0)
out["mine"], out["mine_s"] = timed(record("my-model", steps=2, base=1_000_000))
out["local"], _ = timed(record("qwen3:8b"))
out["own"], _ = timed(record("gpt-4o", cost_usd=0.5))
out["asked"] = asked.is_set()
out["touched"] = list(touched)
"""
    )
    # Steps of (1_000_000, 50) and (1_000_001, 51) tokens at $2 / $6 per million.
    assert out["mine"] == (2_000_001 * 2.0 + 101 * 6.0) / 1e6
    assert out["mine_s"] < 0.05
    assert out["local"] is None
    assert out["own"] == 0.5
    assert not out["asked"]  # nothing here needed genai-prices, so nothing imported it
    assert out["touched"] == []


@pytest.mark.needs("cost")
def test_warm_up_starts_one_background_import_and_returns_at_once():
    out = run_script(
        r"""
start = time.perf_counter()
out["first"] = cost.warm_up()
out["second"] = cost.warm_up()
out["warm_up_s"] = time.perf_counter() - start
out["asked"] = asked.wait(30)
out["threads"] = sum(t.name == "nbagent-warmup" for t in threading.enumerate())
out["not_yet"] = cost.warm_up(wait=0.01)  # the import is still held
release.set()
out["loaded"] = cost.warm_up(wait=60)
out["priced"], _ = timed(record("gpt-4o"))
wait_until(lambda: not any(t.name == "nbagent-warmup" for t in threading.enumerate()))
out["again"] = cost.warm_up()  # nothing left to do: no thread
out["threads_after"] = sum(t.name == "nbagent-warmup" for t in threading.enumerate())
"""
    )
    assert out["first"] is out["second"] is False
    assert out["warm_up_s"] < 0.05
    assert out["asked"]
    assert out["threads"] == 1
    assert out["not_yet"] is False
    assert out["loaded"] is True
    assert out["priced"] is not None and out["priced"] > 0
    assert out["again"] is True
    assert out["threads_after"] == 0


def test_without_the_cost_extra_the_warm_up_ends_and_runs_stay_unpriced():
    out = run_script(
        r"""
sys.modules["genai_prices"] = None  # what a missing extra looks like to an import
release.set()
out["loaded"] = cost.warm_up(wait=60)
out["priced"], out["seconds"] = timed(record("gpt-4o"))
"""
    )
    assert out["loaded"] is False
    assert out["priced"] is None
    assert out["seconds"] < 0.05


def test_interpreter_exit_waits_for_the_pricing_warm_up(tmp_path) -> None:
    # A daemon thread still inside genai-prices' compiled code when the interpreter finalizes
    # aborted short scripts ("FATAL: exception not rethrown", 2 in 120): exit waits for it.
    done = tmp_path / "warm-up finished"
    script = f"""
import time
import nbagent.analytics.cost as cost

def slow_load():
    time.sleep(1.0)
    open({str(done)!r}, "w").close()

cost._genai_prices = slow_load
cost.warm_up()
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert done.exists()
