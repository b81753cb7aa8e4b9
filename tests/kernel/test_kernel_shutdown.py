"""A kernel that ends mid-run, in a real ipykernel: shut down (Kernel > Restart sends a shutdown
request first), its runs are stopped like a Stop and stored ``interrupted``; killed outright, they
read back ``unfinished``. Never ``error``: neither is the run's fault."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from kernel_support import KernelDriver, html_text

import nbagent

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(180)]

SETUP = """
import nbagent
from nbagent.models import ScriptedModel

talker = nbagent.Agent(ScriptedModel(["word " * 5000], tokens_per_s=150, first_token_s=0.0))
"""


def last_update(kernel: KernelDriver, display_id: str) -> dict:
    """The bundle of the last update of ``display_id``."""
    updates = [
        r.content["data"]
        for r in kernel.received
        if r.type == "update_display_data" and r.content.get("transient", {}).get("display_id") == display_id
    ]
    assert updates, f"no update for display {display_id}"
    return updates[-1]


def start_talking(kernel: KernelDriver, store: Path) -> tuple[str, str, str]:
    """Start a long run in ``kernel`` with ``store``; once it streams, its run id, view and display id."""
    kernel.execute(SETUP + f"nbagent.configure(store={str(store)!r})")
    execution = kernel.execute("run = nbagent.start(talker, 'talk')\nprint(run.run_id)")
    view = execution.widget_view()
    kernel.wait_for(lambda: "word word" in kernel.shown(view), what="streamed words")
    return execution.stdout.strip(), view, execution.display_id() or ""


def test_a_kernel_restart_mid_run_stores_it_interrupted_by_the_shutdown_and_its_view_shows_the_end(
    tmp_path: Path,
) -> None:
    store = tmp_path / "runs.db"
    with KernelDriver.start(cwd=str(tmp_path)) as kernel:
        run_id, view, display_id = start_talking(kernel, store)
        kernel.kc.shutdown(restart=True)  # what Kernel > Restart sends before it starts a new one
        kernel.wait_for(lambda: not kernel.km.is_alive(), what="the kernel to exit by itself")
        kernel.pump(0.2)
        stop = kernel.widgets.find_under(view, "ButtonModel", description="Stop")
        assert kernel.widgets.states[stop]["disabled"] is True
        assert "■ interrupted" in kernel.shown(view)
        final = html_text(kernel.last_update(display_id)["text/html"])  # static HTML, no widget
        assert "■ interrupted" in final and "Stop" not in final
    record = nbagent.RunStore(store).record(run_id)
    assert (record.status, record.stop_reason, record.error) == ("interrupted", "shutdown", None)
    assert record.steps[-1].interrupted and "word word" in record.steps[-1].model_output


def test_a_kernel_killed_mid_run_leaves_it_unfinished(tmp_path: Path) -> None:
    store = tmp_path / "runs.db"
    with KernelDriver.start(cwd=str(tmp_path)) as kernel:
        run_id, _, _ = start_talking(kernel, store)
        pid = int(kernel.execute("import os; print(os.getpid())").stdout)
        os.kill(pid, signal.SIGKILL)
        kernel.wait_for(lambda: not kernel.km.is_alive(), what="the kernel to die")
    record = nbagent.RunStore(store).record(run_id)
    assert record.status == "unfinished" and record.stop_reason != "error"
