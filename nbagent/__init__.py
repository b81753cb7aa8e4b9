"""nbagent: run LLM agents in Jupyter with live steps, a Stop button that stops now, and run analytics."""

from __future__ import annotations

import importlib
from typing import Any

from . import history
from .adapters.smolagents import records_from_smolagents
from .agent import Agent
from .cancel import check_interrupt
from .config import configure
from .demo import demo_agent
from .errors import AgentError, AgentInterrupted, MaxStepsReached, ModelError, ToolError
from .models.base import ToolCall
from .records import RunRecord, StepRecord, ToolCallRecord
from .runner import Run, arun, interrupt_all, run, start
from .tools import Tool, tool

__version__ = "0.1.0"

# Analytics load on first use, so ``import nbagent`` does not import pandas.
_LAZY = {"RunStore": "store", "runs_frame": "frames", "steps_frame": "frames", "tool_calls_frame": "frames"}
_SUBMODULES = {"analysis", "cost", "frames", "plots", "store"}


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'nbagent' has no attribute {name!r}")


__all__ = [
    "Agent",
    "AgentError",
    "AgentInterrupted",
    "MaxStepsReached",
    "ModelError",
    "Run",
    "RunRecord",
    "RunStore",
    "StepRecord",
    "Tool",
    "ToolCall",
    "ToolCallRecord",
    "ToolError",
    "arun",
    "check_interrupt",
    "configure",
    "demo_agent",
    "history",
    "interrupt_all",
    "records_from_smolagents",
    "run",
    "runs_frame",
    "start",
    "steps_frame",
    "tool",
    "tool_calls_frame",
]
