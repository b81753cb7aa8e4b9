"""The run browser reads any store ``RunStore`` reads, and searches text the same way in a store
as in history: a store in a read-only folder is browsed (as ``RunStore(readonly=True)`` reads
it), and a case-insensitive search finds "école" with "ÉCOLE" (and "straße" with "STRASSE") in
SQL exactly as pandas finds it in history."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
from support import ROOT, fast_model

import nbagent
from nbagent.analytics.runs import RecordRuns, RunQuery
from nbagent.analytics.store import RunStore

REPO = ROOT

BROWSING_READER = """
    import json, sys
    from pathlib import Path
    from nbagent.explore import browse

    path = Path(sys.argv[1])
    try:
        open(path.parent / "probe", "ab").close()
    except PermissionError:
        pass
    else:
        sys.exit("this child can write the folder: the test would prove nothing")
    browser = browse(path, table="select")
    page = browser.filter(text="HELLO")
    browser.pick([page.rows["run_id"][0]])
    print(json.dumps({
        "total": page.total,
        "statuses": browser.source.choices()["status"],
        "shown": "Task" in browser.shown_html,
    }))
"""


@pytest.fixture
def permissions_restored(tmp_path):
    yield
    for path in [tmp_path, *tmp_path.rglob("*")]:
        path.chmod(0o700 if path.is_dir() else 0o600)


def run_as_reader(code: str, *args: str) -> dict:
    """Run ``code`` in a child that obeys file permissions (as root: without its bypass)."""
    command = [sys.executable, "-c", textwrap.dedent(code), *args]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("as root this test needs setpriv (util-linux) to drop root's permission bypass")
        command = [setpriv, "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search", *command]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def ran(task: str, answer: str = "done", **options) -> nbagent.RunRecord:
    return nbagent.run(nbagent.Agent(fast_model([answer])), task, display=False, **options)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_browse_reads_a_store_in_a_read_only_folder(tmp_path, permissions_restored):
    folder = tmp_path / "shared"
    store = RunStore(folder / "runs.db")
    for task in ("say hello", "say goodbye", "hello again"):
        ran(task, store=store)
    store.close()  # the last connection folds the log into the file and removes it
    assert sorted(p.name for p in folder.iterdir()) == ["runs.db"]
    before = (folder / "runs.db").read_bytes()
    folder.chmod(0o500)
    seen = run_as_reader(BROWSING_READER, str(folder / "runs.db"))
    assert seen == {"total": 2, "statuses": ["success"], "shown": True}
    assert sorted(p.name for p in folder.iterdir()) == ["runs.db"]
    assert (folder / "runs.db").read_bytes() == before


TASKS = ("Va à l'école", "ÉCOLE PRIMAIRE", "ecole sans accent", "Die Straße", "STRASSE 5", "plain text")
SEARCHES = {
    "école": {"Va à l'école", "ÉCOLE PRIMAIRE"},
    "ÉCOLE": {"Va à l'école", "ÉCOLE PRIMAIRE"},
    "Ecole": {"ecole sans accent"},
    "straße": {"Die Straße", "STRASSE 5"},
    "STRASSE": {"Die Straße", "STRASSE 5"},
    "PLAIN": {"plain text"},
    "%": set(),
    "_": set(),
}


def test_case_insensitive_search_agrees_between_a_store_and_history(tmp_path):
    store = RunStore(tmp_path / "runs.db")
    records = [ran(task, store=store) for task in TASKS]
    store.flush(timeout=30)
    in_store, in_history = store, RecordRuns(records)
    for text, expected in SEARCHES.items():
        query = RunQuery(text=text, page_size=50)
        found_in_store = set(in_store.page(query).rows["task"])
        found_in_history = set(in_history.page(query).rows["task"])
        assert found_in_store == found_in_history == expected, text
        assert in_store.page(query).total == len(expected), text
