"""Models for the native ``Agent``: the interface, an offline scripted model, and HTTP clients."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nbagent.lazy import lazy_attributes
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

# The openai client is an optional extra: import it only when asked for.
__getattr__, __dir__ = lazy_attributes(__name__, {"OpenAIChatModel": "openai"})
