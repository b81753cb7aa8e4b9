"""Every python sample of the README and of docs/ runs as notebook cells in a real kernel, too.

``test_readme`` runs each sample as a script does (top-level ``await`` on a fresh event loop); a
reader pastes it into a notebook, where IPython's own loop is already running: ``asyncio.run``
then fails, a blocking wait can deadlock the kernel, a name can clash with IPython's. So each
page's samples run here in one kernel, one block per cell, in order, with ``%reset -f`` between
samples (each sample starts from a fresh namespace, as in ``test_readme``). The network models are
answered offline the same way (``doc_samples``), views are off (``nbagent.configure(display=
False)``: a sample that holds a call for an Approve click would wait for a person otherwise), and
every run a sample leaves must have ended ``"success"``.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from doc_samples import OFFLINE_ANSWER
from kernel_support import KernelDriver
from needs import missing_extras, skip_reason
from openai_server import OpenAIServer, Stream
from support import ROOT, TESTS
from test_readme import SAMPLES, Block

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(600)]

PAGES: dict[Path, list[list[Block]]] = collections.defaultdict(list)
for _sample in SAMPLES:
    PAGES[_sample[0].path].append(_sample)

SETUP = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
import nbagent
nbagent.configure(display=False)
import importlib.util
if importlib.util.find_spec("smolagents") is not None:
    import smolagents
    from doc_samples import offline_smolagents
    smolagents.InferenceClientModel, smolagents.WebSearchTool = offline_smolagents()
"""

FAILED_RUNS = """
from doc_samples import outcomes as __outcomes
print(json.dumps({name: [r.status, r.error] for name, r in __outcomes(dict(globals())).items()
                  if r.status != "success"}))
"""


@pytest.fixture
def kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[KernelDriver]:
    """A kernel in a scratch folder whose OpenAI models reach an offline server."""
    with OpenAIServer(default=Stream(text=OFFLINE_ANSWER)) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-offline-docs-kernel-test")
        monkeypatch.setenv("MPLBACKEND", "Agg")
        with KernelDriver.start(cwd=str(tmp_path)) as driver:
            yield driver


def run_sample(kernel: KernelDriver, sample: list[Block]) -> None:
    kernel.execute("%reset -f")
    kernel.execute(SETUP)
    for block in sample:
        cell = kernel.execute(block.code, timeout=240, allow_errors=True)
        if cell.reply["status"] != "ok":
            pytest.fail(
                f"the sample at {block.where} fails as a notebook cell: "
                f"{cell.reply.get('ename')}: {cell.reply.get('evalue')}",
                pytrace=False,
            )
    report = kernel.execute("import json\n" + FAILED_RUNS, timeout=180)
    failed = json.loads(report.stdout.strip().splitlines()[-1])
    assert not failed, f"runs of the sample at {sample[0].where}, run as cells, did not succeed: {failed}"


@pytest.mark.parametrize("page", sorted(PAGES), ids=[str(p.relative_to(ROOT)) for p in sorted(PAGES)])
def test_every_sample_of_a_page_runs_as_notebook_cells(page: Path, kernel: KernelDriver) -> None:
    ran = 0
    for sample in PAGES[page]:
        if missing_extras(sample[0].needs):
            continue  # test_readme names the extras it skips for
        run_sample(kernel, sample)
        ran += 1
    if not ran:
        pytest.skip(skip_reason(f"the samples of {page.name}", missing_extras(PAGES[page][0][0].needs)))


def test_a_sample_that_only_a_script_can_run_fails_here(kernel: KernelDriver) -> None:
    """The check can fail: ``asyncio.run`` in a cell is the classic notebook trap."""
    sample = [Block("python", "import asyncio\nasyncio.run(asyncio.sleep(0))\n", 1)]
    with pytest.raises(pytest.fail.Exception, match=r"asyncio\.run\(\) cannot be called"):
        run_sample(kernel, sample)

