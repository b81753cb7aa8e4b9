"""Every benchmark still runs: each ``benchmarks/*.py`` with ``--quick --json`` in a subprocess.

A smoke test, so no benchmark can rot unnoticed (a renamed column, a moved helper): it checks
that each exits 0 and that its output parses as one JSON object with numbers in it (the same
measurement the plain mode prints for a person; running both would double the suite's time).
It never asserts a timing: speed is the benchmarks' business, and
the machine running the suite is shared. The list is read from the folder, so a new benchmark is
covered the day it is added (and must take ``--quick``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from needs import BENCHMARK_NEEDS
from support import ROOT

BENCHMARKS = ROOT / "benchmarks"
SCRIPTS = sorted(BENCHMARKS.glob("*.py"))
QUICK_TIMEOUT_S = 300
"""The slowest ``--quick`` (the batch benchmark, with its Ray part) takes a few minutes on a busy
machine; a hung one fails here instead of holding the suite."""

pytestmark = pytest.mark.timeout(QUICK_TIMEOUT_S + 60)


def run_quick(script: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run(
        [sys.executable, str(script), "--quick", *extra],
        capture_output=True,
        text=True,
        timeout=QUICK_TIMEOUT_S,
        cwd=BENCHMARKS.parent,
        env=env,
    )


def json_object(output: str) -> Any:
    """The JSON a benchmark printed: all of its output (indented or not), else its last line
    (a library may have printed a line of its own first)."""
    try:
        return json.loads(output)
    except json.JSONDecodeError:
        lines = [line for line in output.splitlines() if line.strip()]
        assert lines, "the benchmark printed nothing"
        return json.loads(lines[-1])


def numbers_in(value: Any) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [value]
    if isinstance(value, dict):
        return [n for v in value.values() for n in numbers_in(v)]
    if isinstance(value, list):
        return [n for v in value for n in numbers_in(v)]
    return []


def test_every_benchmark_is_covered_and_takes_quick_and_json():
    assert len(SCRIPTS) >= 10
    for script in SCRIPTS:
        text = script.read_text(encoding="utf-8")
        assert "--quick" in text and "--json" in text, f"{script.name} lacks --quick or --json"


@pytest.mark.parametrize(
    "script",
    [pytest.param(s, marks=pytest.mark.needs(*BENCHMARK_NEEDS.get(s.stem, ())), id=s.stem) for s in SCRIPTS],
)
def test_benchmark_json_parses_with_quick(script: Path):
    done = run_quick(script, "--json")
    assert done.returncode == 0, f"{script.name} --quick --json failed:\n{done.stderr[-4000:]}"
    figures = json_object(done.stdout)
    assert isinstance(figures, dict) and numbers_in(figures), done.stdout[-2000:]
