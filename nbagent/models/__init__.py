"""Models for the native ``Agent``: the interface, an offline scripted model, and HTTP clients."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nbagent.models.base import (
    Message,
    Model,
    ModelPart,
    ModelRetry,
    ModelText,
    ModelUsage,
    ToolCall,
    ToolCallDelta,
    ToolSpec,
)
from nbagent.models.scripted import Reply, ScriptedModel

if TYPE_CHECKING:
    from nbagent.models.openai import OpenAIChatModel

__all__ = [
    "Message",
    "Model",
    "ModelPart",
    "ModelRetry",
    "ModelText",
    "ModelUsage",
    "OpenAIChatModel",
    "Reply",
    "ScriptedModel",
    "ToolCall",
    "ToolCallDelta",
    "ToolSpec",
]


def __getattr__(name: str) -> Any:
    # The openai client is an optional extra: import it only when asked for.
    if name == "OpenAIChatModel":
        from nbagent.models.openai import OpenAIChatModel

        return OpenAIChatModel
    raise AttributeError(f"module 'nbagent.models' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
