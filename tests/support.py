"""What tests share: where things are (``ROOT``, ``TESTS``), waiting on a condition (never a
fixed sleep), a scripted model without delays, a tool, the run's threads. Tests import it as
``from support import ...`` from any folder (``tests/`` is on the path: its ``conftest.py`` is
there); fixtures and collection hooks stay in ``conftest.py``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import nbagent
from nbagent.models import ScriptedModel

TESTS = Path(__file__).resolve().parent
"""The tests folder: the support modules the kernel and worker processes import are here."""
ROOT = TESTS.parent
"""The repository: README, notebooks, docs, benchmarks."""

CHROMIUM = Path("/usr/bin/chromium")
"""Debian's Chromium, which the browser tests drive through playwright (it cannot download one here)."""
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
]


def browser_marks(timeout_s: int | None = 300) -> list[pytest.MarkDecorator]:
    """The marks of a module of tests that drive JupyterLab or Notebook 7 in headless Chromium:
    the full install, the ``browser`` marker, a skip without Debian's Chromium, and a timeout
    (``None``: the suite's own)."""
    marks = [
        pytest.mark.needs("test-all"),
        pytest.mark.browser,
        pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"),
    ]
    if timeout_s is not None:
        marks.append(pytest.mark.timeout(timeout_s))
    return marks


HANG_S = 3600.0
"""A wait no test lets run to its end: only a Stop ends it."""


@nbagent.tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first.
        b: the second.
    """
    return a + b


def wait_until(condition: Callable[[], object], timeout: float = 20.0, interval: float = 0.002) -> None:
    """Poll ``condition`` until it is true; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s: {condition}")
        time.sleep(interval)


def fast_model(turns, **options) -> ScriptedModel:
    """A scripted model without delays."""
    options.setdefault("tokens_per_s", 1e9)
    options.setdefault("first_token_s", 0.0)
    return ScriptedModel(turns, **options)


def run_threads() -> set[threading.Thread]:
    """Threads an nbagent run may own, besides the runner's own loop thread."""
    return {t for t in threading.enumerate() if t.name.startswith("nbagent-") and t.name != "nbagent-loop"}
