"""nbagent: run LLM agents in Jupyter with live steps, a Stop button that stops now, and run analytics.

Start here::

    import nbagent
    agent = nbagent.demo_agent()                 # offline; or nbagent.Agent(model, tools=[...])
    run = nbagent.start(agent, "What is 17 * 23?")   # returns at once: live view with ■ Stop
    record = await run                           # a RunRecord, however the run ended

The calls:

- ``start(agent, task)`` → ``Run`` (``interrupt()``, ``record``, ``await run``); ``run(...)`` blocks;
  ``await arun(...)``; ``interrupt_all()``. ``agent`` is an ``nbagent.Agent`` or an agent of
  smolagents, pydantic-ai, the OpenAI Agents SDK or LangGraph (``records_from_*`` read plain runs).
- ``batch(make_agent, tasks)`` → ``Batch``: many tasks, one live table, one Stop, resume from a store;
  ``run_batch`` blocks; ``RayBackend`` scales out.
- Guardrails: ``start(..., limits=Limits(...))`` ends a run ``"limit"``; ``@tool(requires_approval=True)``
  or ``approve=`` makes calls wait for Approve / Deny (``run.approve``, ``run.deny``).
- Explore: ``show(run_id)``, ``browse(store)``, ``compare(a, b)``, ``compare_frame``,
  ``record.to_html(path)``; ``nbagent.otel`` exports runs as OpenTelemetry spans.
- ``Agent(model, tools)``, ``@tool``, ``check_interrupt()``; models in ``nbagent.models``.
- ``RunRecord`` / ``StepRecord`` / ``ToolCallRecord``: the account of a run in every end state.
- ``history``: this process's runs as DataFrames (``runs()``, ``steps()``, ``tool_calls()``,
  ``summary()``, plots); ``RunStore``: the same, persisted in SQLite; ``runs_frame`` /
  ``steps_frame`` / ``tool_calls_frame`` from any records.
- ``configure(store=, display=, limits=, quiet_smolagents=, history_limit=)``: process-wide defaults.
- Errors: ``NbagentError`` > ``AgentError`` > ``AgentInterrupted``, ``ModelError``, ``ToolError``,
  ``MaxStepsReached``, ``LimitExceeded``; ``NbagentError`` > ``StoreError`` (a store's file),
  ``LeaseHeldError`` (a batch name held elsewhere); ``StoppedByKeyboard`` (a ``KeyboardInterrupt``,
  ``BatchStoppedByKeyboard`` its batch form) after Ctrl-C stopped what you waited on.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from nbagent.agent import Agent
from nbagent.analytics import history
from nbagent.api import arun, interrupt_all, run, start
from nbagent.batches import Batch, BatchStoppedByKeyboard, LocalBackend, batch, run_batch
from nbagent.config import configure
from nbagent.demo import demo_agent
from nbagent.errors import (
    AgentError,
    AgentInterrupted,
    LimitExceeded,
    MaxStepsReached,
    ModelError,
    NbagentError,
    StoppedByKeyboard,
    ToolError,
)
from nbagent.guardrails import ApprovalCall, Limits, PendingApproval
from nbagent.models.base import ToolCall
from nbagent.records import RunRecord, StepRecord, ToolCallRecord
from nbagent.runtime.cancel import check_interrupt
from nbagent.runtime.handle import Run
from nbagent.tools import Tool, tool

__version__ = "0.1.0"

if TYPE_CHECKING:  # what the lazy names are, for type checkers and editors
    from nbagent import explore, otel  # noqa: F401
    from nbagent.adapters.openai_agents_records import records_from_openai_agents
    from nbagent.adapters.pydantic_ai_records import records_from_pydantic_ai
    from nbagent.adapters.smolagents_memory import records_from_smolagents
    from nbagent.analytics import analysis, cost, frames, plots, store  # noqa: F401
    from nbagent.analytics.frames import runs_frame, steps_frame, tool_calls_frame
    from nbagent.analytics.store import RunStore
    from nbagent.batches.ray import RayBackend
    from nbagent.explore.browser import browse
    from nbagent.explore.comparison import compare, compare_frame
    from nbagent.explore.lookup import show

# Analytics, explore, Ray and the framework adapters load on first use, so ``import nbagent``
# imports neither pandas nor any framework.
_LAZY = {
    "RunStore": "analytics.store",
    "runs_frame": "analytics.frames",
    "steps_frame": "analytics.frames",
    "tool_calls_frame": "analytics.frames",
    "RayBackend": "batches.ray",
    "show": "explore.lookup",
    "browse": "explore.browser",
    "compare": "explore.comparison",
    "compare_frame": "explore.comparison",
    "records_from_pydantic_ai": "adapters.pydantic_ai_records",
    "records_from_smolagents": "adapters.smolagents_memory",
    "records_from_openai_agents": "adapters.openai_agents_records",
}
_SUBMODULES = {
    "analysis": "analytics.analysis",
    "cost": "analytics.cost",
    "frames": "analytics.frames",
    "explore": "explore",
    "models": "models",
    "otel": "otel",
    "plots": "analytics.plots",
    "store": "analytics.store",
}


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f".{_SUBMODULES[name]}", __name__)
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'nbagent' has no attribute {name!r}")


__all__ = [
    "Agent",
    "AgentError",
    "AgentInterrupted",
    "ApprovalCall",
    "Batch",
    "BatchStoppedByKeyboard",
    "LimitExceeded",
    "Limits",
    "LocalBackend",
    "MaxStepsReached",
    "ModelError",
    "NbagentError",
    "PendingApproval",
    "RayBackend",
    "Run",
    "RunRecord",
    "RunStore",
    "StepRecord",
    "StoppedByKeyboard",
    "Tool",
    "ToolCall",
    "ToolCallRecord",
    "ToolError",
    "arun",
    "batch",
    "browse",
    "check_interrupt",
    "compare",
    "compare_frame",
    "configure",
    "demo_agent",
    "history",
    "interrupt_all",
    "models",
    "records_from_openai_agents",
    "records_from_pydantic_ai",
    "records_from_smolagents",
    "run",
    "run_batch",
    "runs_frame",
    "show",
    "start",
    "steps_frame",
    "tool",
    "tool_calls_frame",
]


def __dir__() -> list[str]:
    return sorted({*__all__, *_SUBMODULES, "__version__"})
