"""The model interface: what the native ``Agent`` needs from a language model.

A model streams one reply to a chat. ``Model.stream(messages, tools)`` is an async iterator of
parts: ``ModelText`` pieces as they arrive, ``ToolCallDelta`` pieces of tool-call arguments as
they arrive (optional, but token budgets can only cut a reply of arguments that are streamed),
complete ``ToolCall`` requests, ``ModelUsage`` (once or more; the agent adds them up) and
``ModelRetry`` notices while the model backs off before another attempt. Messages and tool
specs use the OpenAI chat format (plain dicts), the lingua franca of local and hosted servers.

Closing the iterator (which a cancelled run does) must abort the call: an HTTP model drops its
connection, the scripted model stops sleeping.
"""

from __future__ import annotations

import abc
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from nbagent.events import UsageSource

Message = dict[str, Any]
"""A chat message in the OpenAI format: ``{"role": ..., "content": ..., "tool_calls": ...}``."""

ToolSpec = dict[str, Any]
"""A tool in the OpenAI format: ``{"type": "function", "function": {...}}``."""

_call_ids = itertools.count(1)


def new_call_id() -> str:
    return f"call_{next(_call_ids):06d}"


@dataclass(frozen=True)
class ToolCall:
    """A model's request to call a tool. ``arguments`` is a dict, or the raw JSON text the model sent."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str = field(default_factory=new_call_id)


@dataclass(frozen=True, slots=True)
class ModelText:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A piece of a tool call's arguments (JSON text) as it streams; the whole call still comes
    as a ``ToolCall`` once complete. Budgets count these pieces like text."""

    arguments: str


@dataclass(frozen=True, slots=True)
class ModelUsage:
    input_tokens: int | None
    output_tokens: int | None
    source: UsageSource = "reported"


@dataclass(frozen=True, slots=True)
class ModelRetry:
    attempt: int
    delay_s: float
    reason: str


ModelPart = ModelText | ToolCallDelta | ToolCall | ModelUsage | ModelRetry


class Model(abc.ABC):
    """Base class of nbagent models. Subclasses implement ``stream``."""

    name: str = "model"

    @abc.abstractmethod
    def stream(self, messages: list[Message], tools: list[ToolSpec]) -> AsyncIterator[ModelPart]:
        """Stream one reply to ``messages``, offering ``tools``."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"
