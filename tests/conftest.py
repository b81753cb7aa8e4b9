"""Fixtures and collection hooks (the skip of a test whose extras are missing). What tests share
besides is in ``support``."""

from __future__ import annotations

import ast
import signal
from pathlib import Path
from typing import Any

import pytest
from needs import missing_extras, notebook_needs, skip_reason

import nbagent


def pytest_configure(config: pytest.Config) -> None:
    # A test run started in the background by a shell without job control (``cmd &`` in a
    # script) inherits SIGINT ignored, as POSIX says, and Python keeps it so: every Ctrl-C test
    # would then wait for a KeyboardInterrupt that never comes. They test what a terminal's
    # Ctrl-C does, so they get Python's own handler back.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def views(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """``start(..., display=True)`` attaches an undisplayed LiveView, as in a kernel."""
    from nbagent.view import display
    from nbagent.view.live import LiveView

    built: list[LiveView] = []

    def show_run(run: Any) -> None:
        view = LiveView(run)
        run.add_sink(view)
        built.append(view)

    monkeypatch.setattr(display, "show_run", show_run)
    monkeypatch.setattr(display, "in_kernel", lambda: True)
    return built


@pytest.fixture
def spans():
    """An in-memory OpenTelemetry exporter; its ``provider`` is the tracer provider to pass."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    exporter.provider = provider  # type: ignore[attr-defined]
    yield exporter
    provider.shutdown()


@pytest.fixture(autouse=True)
def no_display():
    """Tests run outside a kernel; make that explicit so no view is attached by accident."""
    nbagent.configure(display=False)
    yield
    nbagent.configure(display=None)


# -- what a test needs beyond the `test` extra: declared as `pytest.mark.needs(extra, ...)` --------
# (tests/needs.py says how; the notebooks are here too, not in notebooks/conftest.py: two conftest
# modules would shadow each other, and this hook sees every collected item, the notebooks' included)


def _declared_needs(path: Path) -> list[str]:
    """The extras a test module's ``pytestmark`` names in ``pytest.mark.needs(...)``, read without
    importing the module (it may import those packages at the top)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    assigned = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets)
    ]
    return [
        argument.value
        for value in assigned
        for call in ast.walk(value)
        if isinstance(call, ast.Call) and getattr(call.func, "attr", None) == "needs"
        for argument in call.args
        if isinstance(argument, ast.Constant)
    ]


class _NeedsExtra(pytest.Module):
    """A test module whose extras are missing: one skipped entry that says which, never imported."""

    reason: str

    def collect(self):
        pytest.skip(self.reason)


def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector):
    missing = missing_extras(_declared_needs(Path(module_path)))
    if not missing:
        return None
    module = _NeedsExtra.from_parent(parent, path=Path(module_path))
    module.reason = skip_reason(Path(module_path).name, missing)
    return module


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.path))
        if path.suffix == ".ipynb":
            needs = notebook_needs(path)
        else:
            needs = [extra for marker in item.iter_markers("needs") for extra in marker.args]
        missing = missing_extras(needs)
        if missing:
            item.add_marker(pytest.mark.skip(reason=skip_reason(item.name, missing)))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Stop whatever runs a test left going, so the script-exit wait (nbagent.runtime.script_exit)
    never holds the test process at its end."""
    nbagent.interrupt_all()
