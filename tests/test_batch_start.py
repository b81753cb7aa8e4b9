"""Batches that start cleanly: the first batch of a fresh process, awaited, with 32 factory
threads, and a batch on a store it cannot write to."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parent.parent

FRESH_BATCH = """
import asyncio
import nbagent
from nbagent.models import ScriptedModel


def make_agent():
    return nbagent.Agent(ScriptedModel(["done"], tokens_per_s=1e9, first_token_s=0.0))


async def main():
    frame = await nbagent.batch(make_agent, [f"task {i}" for i in range(200)], concurrency=32, display=False)
    failed = frame[frame.status != "success"]
    print(len(failed), *failed.error.head(1))


asyncio.run(main())
"""


def fresh_batch() -> str:
    done = subprocess.run(
        [sys.executable, "-c", FRESH_BATCH],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(Path.home())},
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_first_batch_awaited_in_a_fresh_process_fails_no_task_in_ten_processes():
    with ThreadPoolExecutor(4) as pool:
        outcomes = list(pool.map(lambda _: fresh_batch(), range(10)))
    assert outcomes == ["0"] * 10
