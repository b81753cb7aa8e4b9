"""Notebooks whose packages are not installed are skipped, saying which extra brings them.

With the small ``test`` install only the notebooks of nbagent's core run; ``.[test-all]`` (CI)
runs them all.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import sys
from pathlib import Path

import pytest

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
            reason = f"{path.name} needs {', '.join(missing)}: pip install -e \".[notebook]\""
            item.add_marker(pytest.mark.skip(reason=reason))
