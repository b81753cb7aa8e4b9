"""Reading LangGraph state and LangChain messages: shared by the live adapter and
``records_from_langgraph``.

A LangGraph run leaves its work in the graph's state: the ``messages`` channel of an agent graph
holds every model reply (an ``AIMessage`` with its ``tool_calls`` and ``usage_metadata``) and every
tool result (a ``ToolMessage`` naming the call it answers, ``status="error"`` when the tool
failed). ``records_from_langgraph`` turns a final state, a ``StateSnapshot``, or a thread's
checkpoint history into a ``RunRecord`` with the same steps the live adapter reports: one step per
model reply, its tool calls answered by the tool messages that follow it.

Usage: an ``AIMessage`` without ``usage_metadata`` (or with 0 and 0) is unknown, never zero.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from nbagent.adapters import require
from nbagent.records import RunRecord, StepRecord, ToolCallRecord
from nbagent.text import safe_text, shorten


def require_langgraph() -> Any:
    """The LangGraph module, or an ImportError that names the extra to install."""
    return require("langgraph", "langgraph", "LangGraph")


def content_text(content: Any) -> str:
    """The text of a LangChain message's ``content`` (a string, or a list of content blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
        return "".join(parts)
    return "" if content is None else safe_text(content)


def message_type(message: Any) -> str | None:
    """``"ai"``, ``"human"``, ``"tool"``, ``"system"``... for a LangChain message, else None."""
    kind = getattr(message, "type", None)
    if isinstance(kind, str) and hasattr(message, "content"):
        return _CHUNK_TYPES.get(kind, kind)
    return None


_CHUNK_TYPES = {
    "AIMessageChunk": "ai",
    "HumanMessageChunk": "human",
    "ToolMessageChunk": "tool",
    "SystemMessageChunk": "system",
}


def usage_of(message: Any) -> tuple[int | None, int | None]:
    """(input, output) tokens of an ``AIMessage``; ``(None, None)`` when it reported none."""
    usage = getattr(message, "usage_metadata", None) or {}
    tokens_in, tokens_out = usage.get("input_tokens"), usage.get("output_tokens")
    if not tokens_in and not tokens_out:
        return None, None
    return tokens_in, tokens_out


def tool_outcome(message: Any) -> tuple[str, Any, str | None]:
    """(status, result, error) of a ``ToolMessage``: ``error`` when the tool failed."""
    text = content_text(message.content) if isinstance(message.content, (str, list)) else message.content
    if getattr(message, "status", "success") == "error":
        return "error", None, safe_text(text)
    return "ok", text, None


def messages_of(state: Any) -> list[Any]:
    """The ``messages`` channel of a state (a dict, or a snapshot's ``values``), else ``[]``."""
    values = _values(state)
    messages = values.get("messages") if isinstance(values, dict) else None
    return list(messages) if isinstance(messages, (list, tuple)) else []


def _values(state: Any) -> Any:
    """A state's values: the dict itself, or a ``StateSnapshot``'s ``values``."""
    return state if isinstance(state, dict) else getattr(state, "values", state)


def output_of(values: Any) -> Any:
    """What a run of a graph answered: its ``structured_response`` when it has one, else the text
    of the last message when it is the model's, else the final state itself."""
    if not isinstance(values, dict):
        return values
    if values.get("structured_response") is not None:
        return values["structured_response"]
    messages = messages_of(values)
    if messages and message_type(messages[-1]) == "ai":
        return content_text(messages[-1].content)
    return values


def chat_messages(messages: Iterable[Any]) -> list[dict[str, Any]]:
    """LangChain messages as plain chat dicts (role, content, tool calls), for ``record.messages``."""
    roles = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}
    chat: list[dict[str, Any]] = []
    for message in messages:
        kind = message_type(message)
        if kind is None:
            continue
        entry: dict[str, Any] = {"role": roles.get(kind, kind), "content": content_text(message.content)}
        calls = getattr(message, "tool_calls", None)
        if kind == "ai" and calls:
            entry["tool_calls"] = [{"id": c["id"], "name": c["name"], "arguments": c["args"]} for c in calls]
        if kind == "tool":
            entry["tool_call_id"] = message.tool_call_id
        chat.append(entry)
    return chat


def compact(value: Any, limit: int = 300) -> str:
    """A node's update, shortened for a one-line view."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=lambda v: type(v).__name__)
    except Exception:
        text = safe_text(value)
    return shorten(text, limit)


def records_from_langgraph(
    state: Any, *, task: str = "", agent: str = "LangGraph", model: str = "unknown"
) -> list[RunRecord]:
    """``RunRecord``s for a LangGraph run made without nbagent.

    ``state`` is a graph's final state (the dict ``graph.invoke`` returns), a ``StateSnapshot``
    (``graph.get_state(config)``), or a thread's checkpoint history (``graph.get_state_history``,
    newest first): the record is built from the newest state's ``messages``. One record per call,
    as a list, like the other ``records_from_*`` functions. Times are not kept in a state, so
    steps have none; usage comes from each reply's ``usage_metadata`` (unknown stays unknown).
    """
    if not isinstance(state, dict) and not hasattr(state, "next"):  # not a snapshot: a history
        history = list(state)
        if not history:
            return []
        state = history[0]
    messages = messages_of(state)
    if not task:
        humans = [m for m in messages if message_type(m) == "human"]
        task = content_text(humans[0].content) if humans else ""
    now = datetime.now(timezone.utc)
    record = RunRecord(run_id="langgraph", task=safe_text(task), agent=agent, model=model, started_at=now)
    calls: dict[str, ToolCallRecord] = {}
    for message in messages:
        kind = message_type(message)
        if kind == "ai":
            tokens_in, tokens_out = usage_of(message)
            step = StepRecord(
                number=len(record.steps) + 1,
                kind="action" if message.tool_calls else "final",
                started_at=now,
                start_s=0.0,
                ended_at=now,
                end_s=0.0,
                input_tokens=tokens_in,
                output_tokens=tokens_out,
                usage_source="unknown" if tokens_in is None else "reported",
                model_output=content_text(message.content),
            )
            for call in message.tool_calls:
                entry = ToolCallRecord(call["id"], call["name"], call["args"], now, 0.0, status="cancelled")
                calls[call["id"]] = entry
                step.tool_calls.append(entry)
            record.steps.append(step)
        elif kind == "tool" and message.tool_call_id in calls:
            entry = calls[message.tool_call_id]
            entry.status, entry.result, entry.error = tool_outcome(message)  # type: ignore[assignment]
            entry.ended_at, entry.end_s = now, 0.0
    values = _values(state)
    pending = getattr(state, "interrupts", None) or (
        values.get("__interrupt__") if isinstance(values, dict) else None
    )
    record.status = "interrupted" if pending else "success"
    record.stop_reason = "interrupt" if pending else None
    record.output = None if pending else output_of(values)
    record.messages = chat_messages(messages)
    record.ended_at, record.duration_s = now, 0.0
    return [record]
