"""End to end in a real browser: JupyterLab, headless Debian Chromium, the quickstart, a Stop click.

The server runs on 127.0.0.1 with a token and a temporary root holding a copy of the quickstart;
playwright drives ``/usr/bin/chromium`` (never a downloaded browser). The test runs the notebook
cell by cell, clicks the live view's Stop button while the agent works, and checks the page says
"interrupted"; then it runs the rest of the notebook and checks the continued run ends as static
HTML without buttons (the final state a saved notebook keeps). Screenshots of the running and the
interrupted view go to the test's temporary directory and, when ``NBAGENT_SCREENSHOT_DIR`` is set,
there too.

The browser tests share what is here: ``jupyter_server`` (JupyterLab or Notebook 7), the ``lab``
fixture, ``write_notebook``, ``open_notebook`` (Chromium on a notebook whose kernel is ready) and
``_save`` (a screenshot).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from support import CHROMIUM, CHROMIUM_ARGS, ROOT, browser_marks

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

QUICKSTART = ROOT / "notebooks" / "quickstart.ipynb"

pytestmark = browser_marks()


SERVERS = {"lab": "jupyterlab", "notebook": "notebook"}
"""The front ends a test opens notebooks in, by kind: the module that serves each (``python -m``)."""

KERNEL_READY = """() => {
    const kernel = window.jupyterapp?.shell.currentWidget?.sessionContext?.session?.kernel;
    return kernel?.connectionStatus === "connected" && kernel.status === "idle";
}"""
"""Whether the page's notebook has its kernel connected and idle: what JupyterLab's status bar says
as "| Idle". Notebook 7 has no status bar, and its toolbar's indicator says "idle" before the kernel
has even started, so the test asks the app (exposed as ``window.jupyterapp``, see ``jupyter_server``)."""


@dataclass
class Lab:
    """A running Jupyter server on 127.0.0.1: JupyterLab (``kind`` "lab") or Notebook 7 ("notebook")."""

    url: str
    token: str
    root: Path
    log: Path
    kind: str = "lab"

    def api(self, method: str, path: str) -> object:
        request = urllib.request.Request(
            f"{self.url}{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def page_url(self, name: str, prefix: str | None = None) -> str:
        """The page of the root's notebook ``name``: JupyterLab's single-document view, Notebook 7's
        notebook page, or under ``prefix`` (``"lab/tree"``: JupyterLab with its file browser)."""
        prefix = prefix or ("notebooks" if self.kind == "notebook" else "doc/tree")
        return f"{self.url}/{prefix}/{name}?token={self.token}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def jupyter_server(tmp_path: Path, kind: str = "lab") -> Iterator[Lab]:
    """``jupyter lab`` or ``jupyter notebook`` (``kind``) with a token and an empty root in
    ``tmp_path``, once it answers; at the end its kernels are shut down and it is stopped."""
    root = tmp_path / "root"
    root.mkdir()
    settings = tmp_path / "lab-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    # No "get notified about Jupyter news?" toast over the page (Notebook 7 reads the same settings).
    (settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    env = dict(
        os.environ,
        JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "lab-settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"),
    )
    port, token = _free_port(), secrets.token_hex(16)
    log = tmp_path / f"jupyter-{kind}.log"
    command = [
        sys.executable,
        "-m",
        SERVERS[kind],
        "--no-browser",
        "--allow-root",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
    ]
    if kind == "notebook":
        command.append("--JupyterNotebookApp.expose_app_in_browser=True")  # for KERNEL_READY
    with log.open("w") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=root)
    handle = Lab(f"http://127.0.0.1:{port}", token, root, log, kind)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                handle.api("GET", "/api/status")
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"jupyter {kind} did not start:\n{log.read_text()[-3000:]}") from None
                time.sleep(0.2)
        yield handle
    finally:
        try:
            for kernel in handle.api("GET", "/api/kernels") or []:  # type: ignore[union-attr]
                handle.api("DELETE", f"/api/kernels/{kernel['id']}")
        except OSError:
            pass
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    """A JupyterLab server whose root holds a copy of the quickstart."""
    with jupyter_server(tmp_path, "lab") as handle:
        shutil.copy(QUICKSTART, handle.root / QUICKSTART.name)
        yield handle


def write_notebook(path: Path, sources: list[str]) -> None:
    """A notebook of code cells with these sources, none run yet, for the Python 3 kernel."""
    cells = [
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": source}
        | {"id": f"c{i}"}
        for i, source in enumerate(sources)
    ]
    metadata = {
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    path.write_text(json.dumps({"cells": cells, "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}))


@contextmanager
def open_notebook(
    server: Lab, name: str, width: int = 1000, height: int = 1000, prefix: str | None = None
) -> Iterator[tuple[Page, Locator]]:
    """Open the root's notebook ``name`` in headless Debian Chromium (a ``width`` x ``height`` page,
    ``prefix`` as in ``Lab.page_url``) and wait until its kernel is idle: the page and its cells.
    The browser is closed at the end."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height}, device_scale_factor=1)
            page.goto(server.page_url(name, prefix))
            # Keys pressed before the kernel is connected and idle are silently lost.
            if server.kind == "notebook":
                page.wait_for_function(KERNEL_READY, timeout=90_000)
            else:
                expect(page.get_by_text("| Idle").first).to_be_visible(timeout=90_000)
            yield page, page.locator(".jp-Notebook .jp-Cell")
        finally:
            browser.close()


def _save(page_element, name: str, tmp_path: Path) -> None:
    path = tmp_path / name
    page_element.screenshot(path=str(path))
    target = os.environ.get("NBAGENT_SCREENSHOT_DIR")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(target) / name)


def test_stop_click_in_jupyterlab_interrupts_the_quickstart_run(lab: Lab, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    with open_notebook(lab, QUICKSTART.name) as (page, cells):
        cells.nth(1).locator(".jp-InputArea-editor").click()
        for _ in range(3):  # the import cell, a markdown cell, the start() cell
            page.keyboard.press("Shift+Enter")

        start_cell = cells.nth(3)
        view = start_cell.locator(".nbagent-run")
        # Step 3 looks a fact up (a tool that takes 0.8 s): stop the run while it works.
        expect(view.get_by_text("lookup_fact")).to_be_visible(timeout=60_000)
        expect(view).to_contain_text("● running")
        _save(start_cell, "live-view-running.png", tmp_path)

        stop = view.locator("button.nbagent-stop")
        stop.click()
        expect(view).to_contain_text("■ interrupted", timeout=30_000)
        expect(view).to_contain_text("stopped here")
        # Nothing clickable is left: the widget's buttons are disabled, and the static HTML that
        # replaces the widget at the end has none.
        expect(view.locator("button:enabled")).to_have_count(0)
        cells.nth(4).click()  # select the next cell, as after Shift+Enter, for a like-for-like picture
        _save(start_cell, "live-view-interrupted.png", tmp_path)

        # The rest of the notebook: the stop cell (a no-op now), continue, the record.
        cells.nth(5).locator(".jp-InputArea-editor").click()
        for _ in range(len(cells.all()) - 5):
            page.keyboard.press("Shift+Enter")
        expect(cells.nth(5).locator(".jp-OutputArea-output")).to_contain_text("'interrupted'", timeout=60_000)
        continued = cells.nth(7).locator(".jp-OutputArea-output").first
        summaries = cells.nth(11).locator(".jp-OutputArea-output")
        expect(summaries).to_contain_text(re.compile(r"success: \d+ steps?"), timeout=90_000)
        expect(summaries).to_contain_text("interrupted: ")
        # The continued run was awaited in its own cell, so its live widget gave way to static
        # HTML of the final state (what a saved notebook keeps).
        expect(continued.locator(".nbagent-run")).to_contain_text("✓ success")
        expect(continued.locator(".jupyter-widgets")).to_have_count(0)
        expect(continued.locator("button")).to_have_count(0)  # a saved view shows no dead buttons
        expect(page.locator('[data-mime-type="application/vnd.jupyter.stderr"]')).to_have_count(0)
        expect(page.locator(".jp-OutputArea-output .jp-RenderedText[data-mime-type*=error]")).to_have_count(0)
