"""Shared test helpers: waiting on conditions (never fixed sleeps) and small agents."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

import nbagent
from nbagent.models import ScriptedModel


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


@pytest.fixture(autouse=True)
def no_display():
    """Tests run outside a kernel; make that explicit so no view is attached by accident."""
    nbagent.configure(display=False)
    yield
    nbagent.configure(display=None)
