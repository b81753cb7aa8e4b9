"""``store=`` takes a path (str, ``Path``, ``~``) as well as a ``RunStore``, in ``start``/``run``/
``await start``, ``batch``/``run_batch`` and ``configure``; one ``RunStore`` per resolved path, and any
other type is a ``TypeError`` at once, naming the type."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from support import fast_model

import nbagent
from nbagent.analytics import history
from nbagent.analytics.store import RunStore, open_store
from nbagent.batches import batch, run_batch
from nbagent.config import settings

pytestmark = pytest.mark.timeout(60)


def agent() -> nbagent.Agent:
    return nbagent.Agent(fast_model(["hello"]))


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


@pytest.fixture
def no_default_store():
    before = settings.store
    yield
    settings.store = before


def test_run_start_and_await_start_take_a_str_a_path_and_a_home_path(tmp_path, home):
    as_str = nbagent.run(agent(), "a", store=str(tmp_path / "a.db"), display=False)
    as_path = nbagent.start(agent(), "b", store=tmp_path / "b.db", display=False).wait()

    async def awaited():
        return await nbagent.start(agent(), "c", store="~/c.db", display=False)

    in_home = asyncio.run(awaited())
    for record, name in ((as_str, "a.db"), (as_path, "b.db"), (in_home, "c.db")):
        assert record.status == "success"
        assert RunStore(tmp_path / name).record(record.run_id).output == "hello"
    assert not (Path.cwd() / "~").exists()


def test_runs_given_one_path_share_one_store(tmp_path):
    path = tmp_path / "shared.db"
    first = open_store(path)
    assert open_store(str(path)) is first
    assert open_store(tmp_path / "sub" / ".." / "shared.db") is first
    records = [nbagent.run(agent(), f"t{i}", store=str(path), display=False) for i in range(3)]
    assert {r.run_id for r in first.records()} == {r.run_id for r in records}
    mine = RunStore(tmp_path / "own.db")
    assert open_store(mine) is mine  # a RunStore is used as it is
    first.close()
    assert open_store(path) is not first and not open_store(path).closed  # a closed one is reopened


@pytest.mark.parametrize("bad", [42, b"runs.db", object(), ["runs.db"]])
def test_any_other_store_is_a_type_error_at_once_naming_its_type(bad, no_default_store):
    ran = len(history.records())
    name = type(bad).__name__
    with pytest.raises(TypeError, match=f"store must be a RunStore or a path to one .*not {name}$"):
        nbagent.start(agent(), "x", store=bad, display=False)
    with pytest.raises(TypeError, match=f"not {name}$"):
        nbagent.run(agent(), "x", store=bad, display=False)
    with pytest.raises(TypeError, match=f"not {name}$"):
        batch(agent, ["x"], store=bad, name="n", display=False)
    with pytest.raises(TypeError, match=f"not {name}$"):
        nbagent.configure(store=bad)
    assert settings.store is None and len(history.records()) == ran  # nothing ran, nothing changed


def test_a_batch_takes_a_path_and_resumes_from_it(tmp_path, home):
    frame = run_batch(agent, ["a", "b"], store="~/evals.db", name="qa", display=False)
    assert (frame["status"] == "success").all()
    assert frame["error"].isna().all()
    again = run_batch(agent, ["a", "b", "c"], store=Path(home) / "evals.db", name="qa", display=False)
    assert again["reused"].tolist() == [True, True, False]
    assert len(RunStore(home / "evals.db").runs()) == 3


def test_configure_takes_a_path(tmp_path, no_default_store):
    settings_ = nbagent.configure(store=tmp_path / "default.db")
    assert isinstance(settings_.store, RunStore) and settings_.store is open_store(tmp_path / "default.db")
    record = nbagent.run(agent(), "x", display=False)
    assert settings_.store.record(record.run_id).status == "success"
