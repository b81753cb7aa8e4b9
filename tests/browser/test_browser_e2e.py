"""End to end in a real browser: JupyterLab, headless Debian Chromium, the quickstart, a Stop click.

The server runs on 127.0.0.1 with a token and a temporary root holding a copy of the quickstart;
playwright drives ``/usr/bin/chromium`` (never a downloaded browser). The test runs the notebook
cell by cell, clicks the live view's Stop button while the agent works, and checks the page says
"interrupted"; then it runs the rest of the notebook and checks the continued run ends as static
HTML without buttons (the final state a saved notebook keeps). Screenshots of the running and the
interrupted view go to the test's temporary directory and, when ``NBAGENT_SCREENSHOT_DIR`` is set,
there too.
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
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import CHROMIUM, CHROMIUM_ARGS, ROOT

QUICKSTART = ROOT / "notebooks" / "quickstart.ipynb"

pytestmark = [
    pytest.mark.needs("test-all"),
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"),
    pytest.mark.timeout(300),
]


@dataclass
class Lab:
    url: str
    token: str
    root: Path
    log: Path

    def api(self, method: str, path: str) -> object:
        request = urllib.request.Request(
            f"{self.url}{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(QUICKSTART, root / QUICKSTART.name)
    settings = tmp_path / "lab-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    # No "get notified about Jupyter news?" toast over the page.
    (settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    env = dict(
        os.environ,
        JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "lab-settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"),
    )
    port, token = _free_port(), secrets.token_hex(16)
    log = tmp_path / "jupyterlab.log"
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--allow-root",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
    ]
    with log.open("w") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=root)
    handle = Lab(f"http://127.0.0.1:{port}", token, root, log)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                handle.api("GET", "/api/status")
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"JupyterLab did not start:\n{log.read_text()[-3000:]}") from None
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


def _save(page_element, name: str, tmp_path: Path) -> None:
    path = tmp_path / name
    page_element.screenshot(path=str(path))
    target = os.environ.get("NBAGENT_SCREENSHOT_DIR")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(target) / name)


def test_stop_click_in_jupyterlab_interrupts_the_quickstart_run(lab: Lab, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 1000}, device_scale_factor=1)
            page.goto(f"{lab.url}/doc/tree/{QUICKSTART.name}?token={lab.token}")
            # Keys pressed before the kernel is idle are silently lost.
            expect(page.get_by_text("| Idle").first).to_be_visible(timeout=90_000)
            cells = page.locator(".jp-Notebook .jp-Cell")
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
            expect(cells.nth(5).locator(".jp-OutputArea-output")).to_contain_text(
                "'interrupted'", timeout=60_000
            )
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
            expect(
                page.locator(".jp-OutputArea-output .jp-RenderedText[data-mime-type*=error]")
            ).to_have_count(0)
        finally:
            browser.close()
