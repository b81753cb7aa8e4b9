"""The package root: what a notebook types, and the names that moved from it to their packages."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import warnings

import pytest
from kernel_support import KernelDriver

import nbagent

ROOT = {
    "Agent", "AgentError", "AgentInterrupted", "Batch", "LimitExceeded", "Limits", "MaxStepsReached",
    "ModelError", "NbagentError", "Run", "RunRecord", "RunStore", "StepRecord", "StoppedByKeyboard",
    "Tool", "ToolCallRecord", "ToolError", "batch", "browse", "check_interrupt", "compare",
    "configure", "demo_agent", "fork",
    "history", "interrupt_all", "run", "run_batch", "show", "start", "tool",
}  # fmt: skip

MOVED = {
    "ApprovalCall": "nbagent.guardrails",
    "PendingApproval": "nbagent.guardrails",
    "BatchStoppedByKeyboard": "nbagent.batches",
    "LocalBackend": "nbagent.batches",
    "RayBackend": "nbagent.batches",
    "ToolCall": "nbagent.models",
    "compare_frame": "nbagent.explore",
    "runs_frame": "nbagent.analytics",
    "steps_frame": "nbagent.analytics",
    "tool_calls_frame": "nbagent.analytics",
    "records_from_smolagents": "nbagent.adapters",
    "records_from_pydantic_ai": "nbagent.adapters",
    "records_from_openai_agents": "nbagent.adapters",
}
MOVED_MODULES = ("analysis", "cost", "frames", "plots", "store")


def test_the_root_offers_what_a_notebook_types_and_each_name_loads_without_a_warning() -> None:
    assert set(nbagent.__all__) == ROOT
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in ROOT:
            assert getattr(nbagent, name) is not None


@pytest.mark.parametrize("name", sorted(MOVED))
def test_a_moved_name_still_works_and_its_warning_gives_the_new_spelling(name: str) -> None:
    with pytest.warns(DeprecationWarning, match=f"from {MOVED[name]} import {name}"):
        value = getattr(nbagent, name)
    assert value is getattr(importlib.import_module(MOVED[name]), name)


@pytest.mark.parametrize("name", MOVED_MODULES)
def test_a_moved_module_alias_still_works(name: str) -> None:
    with pytest.warns(DeprecationWarning, match=f"from nbagent.analytics import {name}"):
        module = getattr(nbagent, name)
    assert module is importlib.import_module(f"nbagent.analytics.{name}")
    assert getattr(nbagent.analytics, name) is module


def test_the_new_homes_load_lazily_and_an_unknown_name_is_an_attribute_error() -> None:
    code = (
        "import sys, nbagent\n"
        "assert 'pandas' not in sys.modules\n"
        "nbagent.adapters.records_from_langgraph, nbagent.batches.RayBackend\n"
        "nbagent.adapters.records_from_adk\n"
        "assert 'pandas' not in sys.modules and 'ray' not in sys.modules and 'langgraph' not in sys.modules\n"
        "assert 'google.adk' not in sys.modules\n"
        "nbagent.analytics.runs_frame\n"
        "assert 'pandas' in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        nbagent.nope  # noqa: B018


LAZY_PACKAGES = {
    "nbagent": ROOT,
    "nbagent.adapters": {
        "records_from_smolagents", "records_from_pydantic_ai", "records_from_openai_agents",
        "records_from_langgraph", "records_from_adk",
    },
    "nbagent.analytics": {"RunStore", "runs_frame", "steps_frame", "tool_calls_frame", "frames", "store"},
    "nbagent.batches": {"RayBackend"},
    "nbagent.explore": {
        "browse", "compare", "compare_frame", "find_record", "html_document", "show", "to_html",
    },
    "nbagent.models": {"OpenAIChatModel"},
    "nbagent.otel": {"OTelSink", "export", "otlp_provider", "run_spans"},
}  # fmt: skip
"""Names each package serves on first use, which tab completion must offer before that use."""


def test_every_name_a_package_serves_on_first_use_is_in_its_dir_before_that_use() -> None:
    code = (
        "import importlib, json\n"
        f"wanted = {LAZY_PACKAGES!r}\n"
        "missing = {p: sorted(set(n) - set(dir(importlib.import_module(p)))) for p, n in wanted.items()}\n"
        "print(json.dumps(missing))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {package: [] for package in LAZY_PACKAGES}


@pytest.mark.kernel
@pytest.mark.timeout(120)
def test_tab_completes_a_lazy_name_in_a_fresh_kernel() -> None:
    with KernelDriver.start() as kernel:
        kernel.execute("import nbagent")
        matches = kernel.complete("nbagent.analytics.steps_f")
    assert "nbagent.analytics.steps_frame" in matches or "steps_frame" in matches, matches


def test_arun_still_works_and_its_warning_gives_the_one_spelling_left() -> None:
    import asyncio

    agent = nbagent.Agent(nbagent.models.ScriptedModel(["done"], first_token_s=0.0))
    with pytest.warns(DeprecationWarning, match=r"await nbagent\.start\(agent, task\)"):
        record = asyncio.run(nbagent.arun(agent, "go", display=False))
    assert record.status == "success" and "arun" not in nbagent.__all__
