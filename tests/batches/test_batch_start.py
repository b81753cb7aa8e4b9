"""Batches that start cleanly: the first batch of a fresh process, awaited, with 32 factory
threads, and a batch on a store it cannot write to."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support import ROOT

import nbagent
from nbagent.analytics.store import ReadOnlyStoreError, RunStore
from nbagent.batches import batch
from nbagent.models import ScriptedModel

pytestmark = pytest.mark.timeout(300)

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


@pytest.mark.parametrize(
    ("given", "named"), [("store=", "(store=)"), ("configure(store=)", "(the configure(store=) default)")]
)
def test_a_batch_on_a_read_only_store_is_refused_at_once_naming_the_store_not_the_factory(
    tmp_path, given, named
):
    RunStore(tmp_path / "runs.db").close()  # the file exists, as a store to read
    store = RunStore(tmp_path / "runs.db", readonly=True)
    built = []

    def make_agent():
        built.append(1)
        return nbagent.Agent(ScriptedModel(["done"]))

    with contextlib.ExitStack() as undo:
        if given == "store=":
            options = {"store": store}
        else:
            nbagent.configure(store=store)
            undo.callback(nbagent.configure, store=None)
            options = {}
        with pytest.raises(ReadOnlyStoreError) as refused:
            batch(make_agent, ["a", "b"], name="evals", display=False, **options)
    message = str(refused.value)
    assert named in message and str(tmp_path / "runs.db") in message
    assert "read-only (opened with readonly=True)" in message
    assert "factory" not in message
    assert built == []
    again = batch(make_agent, ["a"], name="evals", store=tmp_path / "other.db", display=False).wait()
    assert again.status.tolist() == ["success"]  # the name was never held
