"""nbagent: run LLM agents in Jupyter with live steps, a Stop button that stops now, and run analytics.

Start here::

    import nbagent
    agent = nbagent.demo_agent()                 # offline; or nbagent.Agent(model, tools=[...])
    run = nbagent.start(agent, "What is 17 * 23?")   # returns at once: live view with ■ Stop
    record = await run                           # a RunRecord, however the run ended

The root holds what a notebook types; the rest lives in the package that owns it:

- ``start(agent, task)`` → ``Run`` (``interrupt()``, ``record``, ``await run``); ``run(...)`` blocks;
  ``record = await start(...)``; ``interrupt_all()``. ``agent`` is an ``nbagent.Agent`` or an agent of
  smolagents, pydantic-ai, the OpenAI Agents SDK or LangGraph (``nbagent.adapters.records_from_*``
  read their plain runs).
- ``batch(make_agent, tasks)`` → ``Batch``: many tasks, one live table, one Stop, resume from a store;
  ``run_batch`` blocks; ``nbagent.batches.RayBackend`` scales out.
- Guardrails: ``start(..., limits=Limits(...))`` ends a run ``"limit"``; ``@tool(requires_approval=True)``
  or ``approve=`` makes calls wait for Approve / Deny (``run.approve``, ``run.deny``).
- Explore: ``show(run_id)``, ``browse(store)``, ``compare(a, b)``, ``record.to_html(path)``; more in
  ``nbagent.explore``; ``nbagent.otel`` exports runs as OpenTelemetry spans.
- ``fork(run, at_step=k, agent=, tool_results=, message=)`` → ``Run``: step k again, from the
  conversation the model saw then, with edits; ``compare(run, fork)`` shows the two paths.
- ``Agent(model, tools)``, ``@tool``, ``check_interrupt()``; models in ``nbagent.models``.
- ``RunRecord`` / ``StepRecord`` / ``ToolCallRecord``: the account of a run in every end state.
- ``history``: this process's runs as DataFrames (``runs()``, ``steps()``, ``tool_calls()``,
  ``summary()``, plots); ``RunStore``: the same, persisted in SQLite; ``nbagent.analytics`` has the
  frames of any records (``runs_frame``...), ``cost``, ``analysis`` and ``plots``.
- ``configure(store=, display=, limits=, quiet_smolagents=, history_limit=)``: process-wide defaults.
- Errors: ``NbagentError`` > ``AgentError`` > ``AgentInterrupted``, ``ModelError``, ``ToolError``,
  ``MaxStepsReached``, ``LimitExceeded``; ``NbagentError`` > ``StoreError`` (a store's file),
  ``LeaseHeldError`` (a batch name held elsewhere); ``StoppedByKeyboard`` (a ``KeyboardInterrupt``)
  after Ctrl-C stopped what you waited on.

Names that moved from the root (``nbagent.runs_frame``, ``nbagent.RayBackend``...) still work, with
a ``DeprecationWarning`` that gives the new spelling.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from nbagent.agent import Agent
from nbagent.analytics import history
from nbagent.api import configure, interrupt_all, run, start
from nbagent.batches import Batch, batch, run_batch
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
from nbagent.guardrails import Limits
from nbagent.lazy import lazy_attributes
from nbagent.records import RunRecord, StepRecord, ToolCallRecord
from nbagent.runtime.cancel import check_interrupt
from nbagent.runtime.handle import Run
from nbagent.tools import Tool, tool

__version__ = "0.1.0"

if TYPE_CHECKING:  # what the lazy names are, for type checkers and editors
    from nbagent import explore, otel  # noqa: F401
    from nbagent.analytics.store import RunStore
    from nbagent.explore.browser import browse
    from nbagent.explore.comparison import compare
    from nbagent.explore.lookup import show
    from nbagent.forks.start import fork

# Analytics, explore and the framework adapters load on first use, so ``import nbagent``
# imports neither pandas nor any framework.
_LAZY = {
    "RunStore": "analytics.store",
    "show": "explore.lookup",
    "browse": "explore.browser",
    "compare": "explore.comparison",
    "fork": "forks.start",
}
_SUBMODULES = ("adapters", "analytics", "batches", "explore", "forks", "guardrails", "models", "otel")
_served, _listed = lazy_attributes(__name__, _LAZY, submodules=_SUBMODULES)
_MOVED = {
    # name at the root: (its home, True for a module). Still served, with a DeprecationWarning.
    "ApprovalCall": ("nbagent.guardrails", False),
    "PendingApproval": ("nbagent.guardrails", False),
    "BatchStoppedByKeyboard": ("nbagent.batches", False),
    "LocalBackend": ("nbagent.batches", False),
    "RayBackend": ("nbagent.batches", False),
    "ToolCall": ("nbagent.models", False),
    "compare_frame": ("nbagent.explore", False),
    "runs_frame": ("nbagent.analytics", False),
    "steps_frame": ("nbagent.analytics", False),
    "tool_calls_frame": ("nbagent.analytics", False),
    "records_from_smolagents": ("nbagent.adapters", False),
    "records_from_pydantic_ai": ("nbagent.adapters", False),
    "records_from_openai_agents": ("nbagent.adapters", False),
    "analysis": ("nbagent.analytics", True),
    "cost": ("nbagent.analytics", True),
    "frames": ("nbagent.analytics", True),
    "plots": ("nbagent.analytics", True),
    "store": ("nbagent.analytics", True),
}


def __getattr__(name: str) -> Any:
    if name == "arun":  # deprecated: ``nbagent.api.arun`` warns when called
        from nbagent.api import arun

        return arun
    if name in _MOVED:
        home, is_module = _MOVED[name]
        warnings.warn(
            f"nbagent.{name} has moved: use `from {home} import {name}` "
            "(the old spelling goes in the next release)",
            DeprecationWarning,
            stacklevel=2,
        )
        if is_module:
            return importlib.import_module(f"{home}.{name}")
        return getattr(importlib.import_module(home), name)
    value = _served(name)
    globals()[name] = value
    return value


__all__ = [
    "Agent",
    "AgentError",
    "AgentInterrupted",
    "Batch",
    "LimitExceeded",
    "Limits",
    "MaxStepsReached",
    "ModelError",
    "NbagentError",
    "Run",
    "RunRecord",
    "RunStore",
    "StepRecord",
    "StoppedByKeyboard",
    "Tool",
    "ToolCallRecord",
    "ToolError",
    "batch",
    "browse",
    "check_interrupt",
    "compare",
    "configure",
    "demo_agent",
    "fork",
    "history",
    "interrupt_all",
    "run",
    "run_batch",
    "show",
    "start",
    "tool",
]


def __dir__() -> list[str]:
    return sorted({*_listed(), "__version__"})
