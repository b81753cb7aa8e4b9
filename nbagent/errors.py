"""The exceptions nbagent raises, in one hierarchy a caller can catch at the level it cares about.

A run handle never raises these on its own: it always produces a ``RunRecord``;
``RunRecord.raise_for_status()`` turns a non-success record into the matching typed error, so code
never has to tell failures apart by their message text. Every exception one module raises and
another catches sits under ``NbagentError``::

    NbagentError
    ├── AgentError                  about a run (``record`` is its record)
    │   ├── AgentInterrupted        stopped by interrupt(), a Stop click, Jupyter's interrupt
    │   ├── ModelError              the model call failed (``status_code``, ``retryable``)
    │   ├── ToolError               a tool raised, timed out or got arguments it cannot take
    │   ├── MaxStepsReached         steps used up without a final answer
    │   └── LimitExceeded           a budget of ``Limits`` tripped
    ├── StoreError                  a store's file (nbagent.analytics.store): NotAStoreError,
    │                               StoreVersionError, ReadOnlyStoreError
    ├── LeaseHeldError              a batch's name is held elsewhere (nbagent.batches)
    ├── ForkError                   a run cannot be forked as asked (nbagent.forks); a ValueError
    ├── ThreadPausedError           a LangGraph thread waits for an interrupt()'s answer
    ├── ToolAbandoned               a cancelled sync tool did not stop in time (nbagent.tools)
    ├── ToolFinishedWhileStopping   a cancelled tool returned its result anyway (nbagent.tools)
    ├── MalformedChunk              a streamed chunk that is no chat-completion chunk
    └── RemoteFailure, NotAccepted  a Ray worker's failure, a task it never took (nbagent.batches)

    KeyboardInterrupt
    └── StoppedByKeyboard           Ctrl-C stopped what a caller waited on (raised after the record)

Signals private to one module stay outside the tree: ``smolagents.stop.RunStopped`` is a
``BaseException`` raised into a smolagents worker thread so that the user's ``except Exception``
cannot swallow a Stop; the batch's own ``Abandoned`` and ``RaisedInThread`` never leave their
module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nbagent.records import RunRecord


class NbagentError(Exception):
    """Base of every error nbagent raises: about a run (``AgentError``), a store's file
    (``nbagent.analytics.store.StoreError``), a batch's name held elsewhere (``LeaseHeldError``)."""


class AgentError(NbagentError):
    """Base of the errors about a run. ``record`` is the run's record when one exists."""

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
    """The agent used all its steps without a final answer.

    ``output`` is the answer the agent was forced to give at the end, when it gives one
    (smolagents does); the record keeps it, with the status ``"max_steps"``.
    """

    def __init__(self, message: str, *, record: RunRecord | None = None, output: Any = None) -> None:
        super().__init__(message, record=record)
        self.output = output


class LimitExceeded(AgentError):
    """A budget of the run's ``Limits`` tripped (tokens, cost, time, tool calls, steps, wait).

    The run stopped as a Stop does and its record is as complete; its status is ``"limit"`` and
    ``stop_reason`` (also ``limit`` here) names the limit, e.g. ``"max_cost_usd"``.
    """

    def __init__(self, message: str, *, record: RunRecord | None = None, limit: str | None = None) -> None:
        super().__init__(message, record=record)
        self.limit = limit if limit is not None else getattr(record, "stop_reason", None)


class ForkError(NbagentError, ValueError):
    """``nbagent.fork`` cannot fork the run as asked: no such run, a step out of range or still
    running, an agent of another framework, an unknown tool call, no history to start from, no
    agent. Raised before anything runs, so nothing is written anywhere. A ``ValueError`` too: the
    arguments were wrong, not the run."""


class StoppedByKeyboard(KeyboardInterrupt):
    """Ctrl-C (or Jupyter's interrupt) stopped a run (or a batch: ``BatchStoppedByKeyboard``) that
    a blocking call or an ``await`` waited on.

    Raised *after* the run's interrupted record is complete (and stored), so a script's loop, a
    cell and "Run All" stop instead of starting the next run. ``record`` is that record (also
    ``nbagent.history.last()``).
    """

    def __init__(self, record: RunRecord) -> None:
        super().__init__(
            f"run {record.run_id} was stopped by the keyboard interrupt; "
            "its record is nbagent.history.last() (and this exception's .record)"
        )
        self.record = record


def scrub_secrets(text: str) -> str:
    """``text`` without credentials: anything of a shape in ``nbagent.secrets.SHAPES`` (provider
    keys, JWTs, PEM private keys, bearer and Basic credentials, ``"password"`` fields, ``api_key=``
    parameters, ``user:password@`` in URLs...) and the values of credential-named environment
    variables. It is the one scrub: events, records, the store, HTML and spans all go through it
    (``nbagent.secrets`` says where)."""
    from nbagent.secrets import scrub

    return scrub(text)


def describe(exc: BaseException) -> str:
    """A one-line, readable description of ``exc``: its type and message (the type once, even when
    the message already starts with it), scrubbed of credentials (``scrub_secrets``): it is how an
    exception becomes text anywhere in nbagent. Never raises, whatever ``str(exc)`` does."""
    from nbagent.text import safe_text

    name = type(exc).__name__
    try:
        text = str(exc).strip()
    except Exception:
        text = safe_text(exc.args)
    text = scrub_secrets(safe_text(text))
    if not text:
        return name
    return text if text.startswith(f"{name}: ") else f"{name}: {text}"


def error_kind(exc: BaseException) -> str:
    """The nbagent error class name that best fits ``exc`` (stored so records can re-raise it)."""
    for cls in (AgentInterrupted, MaxStepsReached, LimitExceeded, ModelError, ToolError, AgentError):
        if isinstance(exc, cls):
            return cls.__name__
    return type(exc).__name__


ERROR_TYPES: dict[str, Any] = {
    cls.__name__: cls
    for cls in (AgentError, AgentInterrupted, ModelError, ToolError, MaxStepsReached, LimitExceeded)
}
