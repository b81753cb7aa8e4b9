"""nbagent: run LLM agents in Jupyter with live steps, a Stop button that stops now, and run analytics."""

from __future__ import annotations

from . import history
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

__all__ = [
    "Agent",
    "AgentError",
    "AgentInterrupted",
    "MaxStepsReached",
    "ModelError",
    "Run",
    "RunRecord",
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
    "run",
    "start",
    "tool",
]
