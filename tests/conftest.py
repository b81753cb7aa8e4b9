"""Shared test helpers: waiting on conditions (never fixed sleeps) and small agents."""

from __future__ import annotations

import ast
import importlib.util
import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


# -- tests of optional extras: skipped, saying why, when their packages are absent -------------

TESTS = Path(__file__).resolve().parent

EXTRA_OF = {
    "smolagents": "smolagents",
    "pydantic_ai": "pydantic-ai",
    "agents": "openai-agents",
    "langgraph": "langgraph",
    "langchain_core": "langgraph",
    "langchain": "langgraph",
    "langchain_openai": "test-all",
    "ray": "ray",
    "opentelemetry": "otel",
    "phoenix": "test-all",
    "playwright": "test-all",
    "itables": "explore",
    "anywidget": "explore",
    "matplotlib": "plots",
    "pyarrow": "parquet",
    "openai": "openai",
    "genai_prices": "cost",
}
"""Which extra brings a top-level package the tests import (the rest are in ``test``)."""


def _imported_tops(path: Path, seen: set[Path]) -> set[str]:
    """Top-level packages ``path`` imports at module level, following the tests' own helper modules."""
    if path in seen:
        return set()
    seen.add(path)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    tops: set[str] = set()
    for name in names:  # a helper module beside the test (tests/adapters/...) or in tests/
        local = next((d / f"{name}.py" for d in (path.parent, TESTS) if (d / f"{name}.py").is_file()), None)
        tops |= _imported_tops(local, seen) if local is not None else {name}
    return tops


def missing_packages(path: Path) -> list[str]:
    """The packages a test module needs at import time that are not installed."""
    return sorted(
        top
        for top in _imported_tops(path, set())
        if top not in sys.stdlib_module_names and importlib.util.find_spec(top) is None
    )


class _NeedsExtra(pytest.Module):
    """A test module whose optional packages are missing: one skipped entry that says which."""

    missing: list[str]

    def collect(self):
        extras = sorted({EXTRA_OF.get(top, "test-all") for top in self.missing})
        pytest.skip(
            f'needs {", ".join(self.missing)}: pip install -e ".[{",".join(extras)}]" '
            "(or .[test-all] for every test)"
        )


def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector):
    missing = missing_packages(Path(module_path))
    if not missing:
        return None
    module = _NeedsExtra.from_parent(parent, path=Path(module_path))
    module.missing = missing
    return module


# -- notebooks whose packages are missing: skipped, saying which extra brings them -------------
# (here, not in notebooks/conftest.py: two conftest modules would shadow each other, and this hook
# sees every collected item, the notebooks' included)

USED_ON_DEMAND = {"plot_": "matplotlib", "to_parquet(": "pyarrow", "read_parquet(": "pyarrow"}
"""Features that import an optional package only when used."""


def notebook_needs(path: Path) -> set[str]:
    """Top-level packages a notebook imports, or uses on demand, beyond the standard library."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    source = "\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "code")
    tree = compile(source, str(path), "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    names |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    tops = {name.split(".")[0] for name in names} - set(sys.stdlib_module_names)
    return tops | {package for usage, package in USED_ON_DEMAND.items() if usage in source}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.path))
        if path.suffix != ".ipynb":
            continue
        missing = sorted(top for top in notebook_needs(path) if importlib.util.find_spec(top) is None)
        if missing:
            reason = f'{path.name} needs {", ".join(missing)}: pip install -e ".[notebook]"'
            item.add_marker(pytest.mark.skip(reason=reason))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Stop whatever runs a test left going, so the script-exit wait (nbagent.runtime.script_exit)
    never holds the test process at its end."""
    nbagent.interrupt_all()
