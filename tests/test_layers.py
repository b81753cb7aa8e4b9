"""The layers of docs/architecture.md hold: the runtime and the data it carries (events, records,
the run context, errors) never import the layers above them (views, explore, adapters, batches,
OpenTelemetry, the public API module that composes them).

Two checks, because each catches what the other cannot: every ``import`` statement in a low
module, function-local ones included (a lazy import is still an arrow upward); and a fresh
interpreter that imports each low module without running ``nbagent/__init__.py`` (which composes
everything) and then finds no high module loaded.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT

PACKAGE = ROOT / "nbagent"

LOW = [
    "runtime",
    "events.py",
    "records.py",
    "recorder.py",
    "context.py",
    "errors.py",
    "secrets.py",
    "text.py",
    "agent.py",
    "tools.py",
    "models",
    "guardrails",
    "analytics",
    "config.py",
]
"""Modules (files or folders) below the sinks and sources that compose them."""

HIGH = (
    "nbagent.view",
    "nbagent.explore",
    "nbagent.adapters",
    "nbagent.batches",
    "nbagent.otel",
    "nbagent.api",
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, package: str | None = None) -> list[tuple[str, int]]:
    """Every module ``path`` imports, anywhere in it, as absolute names with their line
    (``package``: the package its relative imports start from, by default its own)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    if package is None:  # a module of the package
        own = module_name(path)
        package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found.append((module, node.lineno))
            found += [(f"{module}.{alias.name}", node.lineno) for alias in node.names]
    return found


def low_files(entries: list[str] = LOW) -> list[Path]:
    files = []
    for entry in entries:
        path = PACKAGE / entry
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return files


def test_no_low_module_imports_a_higher_layer():
    upward = [
        f"{path.relative_to(PACKAGE.parent)}:{line} imports {name}"
        for path in low_files()
        for name, line in imported_modules(path)
        if name.startswith(HIGH)
    ]
    assert not upward, "imports against the layers:\n" + "\n".join(upward)


RUN_SIDE = [e for e in LOW if e not in ("analytics", "config.py")]
"""What runs a run: the runtime, the guardrails, the native agent and the data they carry."""
WRITTEN_BY_RUNS = ("nbagent.analytics.cost", "nbagent.analytics.history")
"""The analytics modules a run writes into as it ends (its price, this process's history): the
only ones the run side may import. The frames, plots and run sources on top read records only."""


def test_the_run_side_imports_no_analytics_but_the_two_it_writes_into():
    sideways = [
        f"{path.relative_to(PACKAGE.parent)}:{line} imports {name}"
        for entry in RUN_SIDE
        for path in (
            sorted((PACKAGE / entry).rglob("*.py")) if (PACKAGE / entry).is_dir() else [PACKAGE / entry]
        )
        for name, line in imported_modules(path)
        if name.startswith("nbagent.analytics")
        and not name.startswith(WRITTEN_BY_RUNS)
        and name != "nbagent.analytics"  # ``from nbagent.analytics import cost``: its names are checked
    ]
    assert not sideways, "\n".join(sideways)
    for name in WRITTEN_BY_RUNS:  # and those two know nothing of the run side or the views
        path = PACKAGE.parent / (name.replace(".", "/") + ".py")
        above = [
            m
            for m, _ in imported_modules(path)
            if m.startswith(("nbagent.runtime", "nbagent.guardrails", *HIGH))
        ]
        assert not above, f"{name} imports {above}"


def test_the_settings_module_is_a_leaf():
    """``nbagent.config`` holds the process's defaults that every layer reads; ``configure``, which
    checks them (and opens a store), is in the public layer."""
    inner = [name for name, _ in imported_modules(PACKAGE / "config.py") if name.startswith("nbagent")]
    assert inner == []


def test_the_check_sees_a_function_local_import(tmp_path):
    module = tmp_path / "probe.py"
    module.write_text("def show():\n    from ..view.html import esc\n    return esc\n")
    found = imported_modules(module, package="nbagent.runtime")
    assert ("nbagent.view.html", 2) in [(name, line) for name, line in found if name.startswith(HIGH)]


IMPORT_ALONE = """
import importlib, sys, types
package = types.ModuleType("nbagent")
package.__path__ = [{path!r}]
sys.modules["nbagent"] = package  # import the module without the package's composing __init__
importlib.import_module({module!r})
print(sorted(name for name in sys.modules if name.startswith({high!r})))
"""


@pytest.mark.parametrize(
    "module",
    [
        "nbagent.runtime.handle",
        "nbagent.runtime.waiting",
        "nbagent.records",
        "nbagent.recorder",
        "nbagent.events",
        "nbagent.agent",
    ],
)
def test_a_low_layer_loads_no_higher_layer_in_a_fresh_interpreter(module):
    code = IMPORT_ALONE.format(path=str(PACKAGE), module=module, high=HIGH)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"importing {module} loaded {done.stdout.strip()}"
