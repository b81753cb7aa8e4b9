"""One streamed chat-completions reply, assembled from its chunks (``OpenAIChatModel`` reads it).

Each chunk becomes the parts the runner shows at once (``ModelText``, ``ToolCallDelta``) while tool
calls are put together from their pieces by index, and usage is taken from the last chunk that
carries it (servers send it once at the end, early, or as running totals on every chunk). A chunk
that parses as JSON but is no chat-completion chunk raises ``MalformedChunk``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nbagent.errors import NbagentError
from nbagent.models.base import ModelText, ToolCall, ToolCallDelta, new_call_id


class MalformedChunk(NbagentError):
    """A chunk that parses as JSON but is not a chat-completion chunk."""


def _field(obj: Any, name: str) -> Any:
    """``obj.name`` or ``obj[name]``: chunks arrive as client objects, sometimes as plain dicts.

    Raises ``MalformedChunk`` when ``obj`` is a scalar or a list where an object belongs.
    """
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    if isinstance(obj, (str, bytes, int, float, list, tuple)):
        raise MalformedChunk(f"expected an object with {name!r}, got {type(obj).__name__}")
    return getattr(obj, name, None)


def _text(content: Any) -> str:
    """A delta's text: a string, or (some servers) a list of parts with ``text``."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(t for t in (_field(part, "text") for part in content) if isinstance(t, str))
    raise MalformedChunk(f"'content' is a {type(content).__name__}, not text")


def characters(count: int) -> str:
    return f" after {count} character{'s' if count != 1 else ''} of reply" if count else ""


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


@dataclass
class PartialCall:
    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def complete(self) -> ToolCall:
        text = "".join(self.arguments)
        arguments: dict[str, Any] | str = text
        if not text.strip():
            arguments = {}
        else:
            try:
                parsed = json.loads(text)
            except json.JSONDecodeError:
                parsed = None  # the agent turns the raw text into an observation the model sees
            if isinstance(parsed, dict):
                arguments = parsed
        return ToolCall(self.name, arguments, self.id or new_call_id())


class ReplyAssembly:
    """Folds the chunks of one streamed reply: text pieces out, tool calls and usage kept."""

    def __init__(self) -> None:
        self.chars = 0
        self.usage: tuple[int | None, int | None] | None = None
        self._calls: dict[Any, PartialCall] = {}

    def feed(self, chunk: Any) -> list[ModelText | ToolCallDelta]:
        """Take one chunk; return its text pieces and pieces of tool-call arguments, in order."""
        if not isinstance(chunk, Mapping) and not hasattr(chunk, "choices"):
            raise MalformedChunk(f"expected a JSON object, got {type(chunk).__name__}")
        usage = _field(chunk, "usage")
        if usage is not None:  # running totals or the final count: the last known count wins
            before = self.usage or (None, None)
            prompt, completion = (
                _count(_field(usage, "prompt_tokens")),
                _count(_field(usage, "completion_tokens")),
            )
            self.usage = (
                prompt if prompt is not None else before[0],
                completion if completion is not None else before[1],
            )
        choices = _field(chunk, "choices") or []
        if not isinstance(choices, list):
            raise MalformedChunk("'choices' is not a list")
        parts: list[ModelText | ToolCallDelta] = []
        for choice in choices:
            if _field(choice, "index") not in (0, None):
                continue  # only the first choice (n=1 is what the agent asks for)
            delta = _field(choice, "delta")
            if delta is None:
                continue
            content = _field(delta, "content")
            text = _text(content) if content else ""
            if text:
                parts.append(ModelText(text))
                self.chars += len(text)
            for call in _field(delta, "tool_calls") or ():
                arguments = self._call_delta(call)
                if arguments:
                    parts.append(ToolCallDelta(arguments))
        return parts

    def _call_delta(self, delta: Any) -> str | None:
        """Fold one tool-call delta in; return its piece of arguments (text), if any."""
        index, call_id = _field(delta, "index"), _field(delta, "id")
        if not isinstance(index, int):
            # Servers that omit the index: a known id continues its call, a new id starts one,
            # and a piece without an id continues the last call.
            known = next((key for key, c in self._calls.items() if call_id and c.id == call_id), None)
            last = next(reversed(self._calls), None)
            same = last is not None and (not call_id or self._calls[last].id is None)
            index = known if known is not None else last if same else f"call-{len(self._calls)}"
        call = self._calls.setdefault(index, PartialCall())
        if call_id and not call.id:
            call.id = str(call_id)
        function = _field(delta, "function") or {}
        name, arguments = _field(function, "name"), _field(function, "arguments")
        if name and name != call.name:
            if not isinstance(name, str):
                raise MalformedChunk("a tool call's name is not a string")
            call.name = name if not call.name else call.name + name
        if not arguments:
            return None
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)  # a few servers send the arguments as an object
        call.arguments.append(arguments)
        return arguments

    def tool_calls(self) -> list[ToolCall]:
        return [call.complete() for call in self._calls.values()]
