"""An error's install hint is a command that works where nbagent came from: a checkout or a wheel."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from needs import ROOT, pyproject

from nbagent.adapters import require
from nbagent.extras import install_hint


def test_from_a_checkout_the_hint_installs_the_extra_from_that_checkout():
    assert install_hint("plots") == f"pip install -e '{ROOT}[plots]'"


def test_from_an_installed_copy_the_hint_names_the_distribution(tmp_path: Path):
    site = tmp_path / "site-packages"  # an installed copy: the package without the checkout around it
    shutil.copytree(ROOT / "nbagent", site / "nbagent", ignore=shutil.ignore_patterns("__pycache__"))
    code = "import nbagent.extras as e; print(e.__file__); print(e.install_hint('plots'))"
    result = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(site)!r}); {code}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    where, hint = result.stdout.splitlines()
    assert where.startswith(str(site))
    assert hint == "pip install 'nbagent-jupyter[plots]'"


def test_a_missing_framework_names_the_extra_in_the_hint():
    with pytest.raises(ImportError, match="Frame is not installed: pip install -e ") as caught:
        require("nbagent_no_such_framework", "smolagents", "Frame")
    assert str(caught.value).endswith(install_hint("smolagents"))


def test_every_hint_in_nbagent_names_an_extra_pyproject_has():
    extras = pyproject()["project"]["optional-dependencies"]
    named = {}
    for path in (ROOT / "nbagent").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "install_hint" and node.args:
                argument = node.args[0]
                if isinstance(argument, ast.Constant):
                    named[f"{path.relative_to(ROOT)}:{node.lineno}"] = argument.value
    assert len(named) >= 7, f"the hints moved: {named}"
    assert {where: extra for where, extra in named.items() if extra not in extras} == {}
