"""The exceptions nbagent raises, in one hierarchy a caller can catch at the level it cares about.

``AgentError`` is the base. A run handle never raises these on its own: it always produces a
``RunRecord``; ``RunRecord.raise_for_status()`` turns a non-success record into the matching typed
error, so code never has to tell failures apart by their message text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .records import RunRecord


class AgentError(Exception):
    """Base of every error nbagent raises. ``record`` is the run's record when one exists."""

    def __init__(self, message: str, *, record: RunRecord | None = None) -> None:
        super().__init__(message)
        self.record = record


class AgentInterrupted(AgentError):
    """The run was stopped by ``interrupt()``, a Stop click or Jupyter's interrupt."""


class ModelError(AgentError):
    """The model call failed: a dead endpoint, a rejected key, a malformed reply.

    ``status_code`` is the HTTP status when there was one; ``retryable`` says whether trying the
    same request again could succeed (429, 5xx, connection errors).
    """

    def __init__(
        self,
        message: str,
        *,
        record: RunRecord | None = None,
        status_code: int | None = None,
        retryable: bool = False,
    ) -> None:
        super().__init__(message, record=record)
        self.status_code = status_code
        self.retryable = retryable


class ToolError(AgentError):
    """A tool raised, timed out or got arguments it cannot take.

    Inside a run a tool error becomes an observation the model sees; it is raised only by
    ``raise_for_status`` or when a caller uses a tool directly.
    """

    def __init__(self, message: str, *, record: RunRecord | None = None, tool: str | None = None) -> None:
        super().__init__(message, record=record)
        self.tool = tool


class MaxStepsReached(AgentError):
    """The agent used all its steps without a final answer."""


def describe(exc: BaseException) -> str:
    """A one-line, readable description of ``exc``: its type and message."""
    text = str(exc).strip()
    name = type(exc).__name__
    return f"{name}: {text}" if text else name


def error_kind(exc: BaseException) -> str:
    """The nbagent error class name that best fits ``exc`` (stored so records can re-raise it)."""
    for cls in (AgentInterrupted, MaxStepsReached, ModelError, ToolError, AgentError):
        if isinstance(exc, cls):
            return cls.__name__
    return type(exc).__name__


ERROR_TYPES: dict[str, Any] = {
    cls.__name__: cls for cls in (AgentError, AgentInterrupted, ModelError, ToolError, MaxStepsReached)
}
