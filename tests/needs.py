"""What a test needs beyond the ``test`` extra, declared one way: by the names of nbagent's extras.

A test, class or module says ``@pytest.mark.needs("plots", "cost")`` (a module:
``pytestmark = pytest.mark.needs("openai")``, read before the module is imported, so it may import
those packages at the top); a parameter says ``pytest.param(..., marks=pytest.mark.needs("parquet"))``.
A notebook says it in its metadata (``"nbagent": {"needs": ["plots"]}``), a docs sample in an HTML
comment just above its fence (``<!-- needs: smolagents -->``), a benchmark in ``BENCHMARK_NEEDS``.

An extra counts as installed when every distribution pyproject.toml lists for it is installed
(extras that name other extras are followed), so the answer comes from the same file pip reads and
cannot drift from it; no import name is listed anywhere. When one is missing the test is skipped,
saying which extras to install.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest itself depends on tomli before Python 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]

BENCHMARK_NEEDS: dict[str, tuple[str, ...]] = {
    "adapters_interrupt": ("pydantic-ai", "openai-agents"),
    "adk": ("adk",),
    "batch_ray": ("ray",),
    "explore": ("otel",),
    "http_interrupt": ("openai",),
    "langgraph_interrupt": ("langgraph", "test-all"),
    "mcp_interrupt": ("mcp", "pydantic-ai", "openai-agents", "langgraph", "smolagents"),
    "smolagents_interrupt": ("smolagents",),
}
"""The extras each script in benchmarks/ needs, by its name without ``.py`` (absent: none)."""


@functools.cache
def pyproject() -> dict[str, Any]:
    """This project's pyproject.toml."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def distribution() -> str:
    """This project's name on a package registry (``[project] name``)."""
    return pyproject()["project"]["name"]


def requirements_of(extras: Iterable[str]) -> list[Requirement]:
    """The requirements ``pip install .[extras]`` adds to the core ones, self-references followed."""
    optional = pyproject()["project"]["optional-dependencies"]
    unknown = sorted(set(extras) - set(optional))
    if unknown:
        raise ValueError(f"pyproject.toml has no extra {unknown}; it has {sorted(optional)}")
    found: list[Requirement] = []
    wanted, seen = list(extras), set()
    while wanted:
        extra = wanted.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for line in optional[extra]:
            requirement = Requirement(line)
            if requirement.name == distribution():
                wanted += sorted(requirement.extras)
            else:
                found.append(requirement)
    return found


def _installed(requirement: Requirement) -> bool:
    if requirement.marker is not None and not requirement.marker.evaluate():
        return True
    try:
        importlib.metadata.distribution(requirement.name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


@functools.cache
def extra_installed(extra: str) -> bool:
    """Whether every distribution the extra brings is installed."""
    return all(_installed(requirement) for requirement in requirements_of([extra]))


def missing_extras(extras: Iterable[str]) -> list[str]:
    """The extras among ``extras`` that are not installed, in order, each once."""
    return [extra for extra in dict.fromkeys(extras) if not extra_installed(extra)]


def skip_reason(what: str, missing: list[str]) -> str:
    """Why ``what`` is skipped: the extras it needs, and the command that installs them."""
    noun = "extra" if len(missing) == 1 else "extras"
    return f"{what} needs the {', '.join(missing)} {noun}: pip install -e '.[{','.join(missing)}]'"


def notebook_needs(path: Path) -> list[str]:
    """The extras a notebook names in its metadata (``"nbagent": {"needs": [...]}``)."""
    metadata = json.loads(path.read_text(encoding="utf-8"))["metadata"]
    return list(metadata.get("nbagent", {}).get("needs", []))
