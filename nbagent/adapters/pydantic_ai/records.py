"""Reading pydantic-ai messages: shared by the live adapter and ``records_from_pydantic_ai``.

pydantic-ai keeps a run as a list of ``ModelRequest`` / ``ModelResponse`` messages, each stamped
with the run's id and a UTC time. ``records_from_pydantic_ai`` turns them (from a result, a
``RunCancelled``, or a bare list) into ``RunRecord``s, one per run id, so runs made without
nbagent go into the same frames. A step is one model response; its tool calls are answered by the
returns in the request that follows it, and their end is that request's time.

Token usage: pydantic-ai's ``RequestUsage`` is 0 in and 0 out when the provider reported nothing
(an OpenAI stream cut before its last chunk), so that pair is read as unknown, never as zero.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from nbagent.adapters import reported_usage, require
from nbagent.records import RunRecord, StepRecord, ToolCallRecord
from nbagent.text import safe_text


def require_pydantic_ai() -> Any:
    """The pydantic-ai module, or an ImportError that names the extra to install."""
    return require("pydantic_ai", "pydantic-ai", "pydantic-ai")


usage_of = reported_usage


def model_name(model: Any) -> str:
    """The model's name as pydantic-ai reports it (``"openai:gpt-4.1-mini"`` stays a string)."""
    if model is None:
        return "unknown"
    if isinstance(model, str):
        return model
    return safe_text(getattr(model, "model_name", None) or type(model).__name__)


def agent_name(agent: Any) -> str:
    return safe_text(getattr(agent, "name", None) or type(agent).__name__)


def response_text(response: Any) -> str:
    """The text parts of a ``ModelResponse``, joined."""
    return "".join(p.content for p in response.parts if getattr(p, "part_kind", None) == "text")


def tool_calls_of(response: Any) -> list[Any]:
    return [p for p in response.parts if getattr(p, "part_kind", None) == "tool-call"]


def content_text(content: Any) -> str:
    """User content as readable text: its text parts, and a placeholder for each other part
    (``[image: https://...]``, ``[image/png: 2048 bytes]``)."""
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        return " ".join(_part_text(c) for c in content)
    return safe_text(content)


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    kind = getattr(part, "kind", None) or type(part).__name__
    kind = kind.removesuffix("-url") if isinstance(kind, str) else type(part).__name__
    url = getattr(part, "url", None)
    if isinstance(url, str):
        return f"[{kind}: {safe_text(url)}]"
    data = getattr(part, "data", None)
    if isinstance(data, (bytes, bytearray)):
        return f"[{safe_text(getattr(part, 'media_type', kind))}: {len(data)} bytes]"
    return f"[{safe_text(kind)}]"


def chat_messages(messages: list[Any]) -> list[dict[str, Any]]:
    """pydantic-ai messages as plain chat dicts (role, content, tool calls), for ``record.messages``."""
    chat: list[dict[str, Any]] = []
    for message in messages:
        if getattr(message, "kind", None) == "response":
            entry: dict[str, Any] = {"role": "assistant", "content": response_text(message)}
            calls = tool_calls_of(message)
            if calls:
                entry["tool_calls"] = [
                    {"id": c.tool_call_id, "name": c.tool_name, "arguments": c.args} for c in calls
                ]
            chat.append(entry)
            continue
        for part in getattr(message, "parts", ()):
            kind = getattr(part, "part_kind", None)
            if kind == "system-prompt":
                chat.append({"role": "system", "content": part.content})
            elif kind == "user-prompt":
                chat.append({"role": "user", "content": content_text(part.content)})
            elif kind in ("tool-return", "retry-prompt"):
                text = part.model_response() if kind == "retry-prompt" else part.model_response_str()
                chat.append(
                    {
                        "role": "tool",
                        "tool_call_id": part.tool_call_id,
                        "name": part.tool_name,
                        "content": text,
                    }
                )
    return chat


def tool_outcome(part: Any) -> tuple[Any, Any, str | None]:
    """(status, result, error) of a tool's answer: a retry prompt, or a return whose ``outcome``
    is not ``"success"`` (retried, failed, denied, interrupted), is an error the model sees."""
    if getattr(part, "part_kind", None) == "retry-prompt":
        return "error", None, safe_text(part.model_response())
    outcome = getattr(part, "outcome", "success")
    if outcome == "success":
        return "ok", part.content, None
    status = "denied" if outcome == "denied" else "cancelled" if outcome == "interrupted" else "error"
    return status, None, safe_text(f"{outcome}: {content_text(part.content)}")


def _answers(request: Any) -> dict[str, Any]:
    """The tool returns (and retry prompts) in a request, by tool call id."""
    return {
        part.tool_call_id: part
        for part in getattr(request, "parts", ())
        if getattr(part, "part_kind", None) in ("tool-return", "retry-prompt")
    }


def records_from_pydantic_ai(result_or_messages: Any) -> list[RunRecord]:
    """``RunRecord``s for runs made with pydantic-ai alone, one per run in the messages.

    Accepts a run's result (``agent.run`` / ``run_sync``'s ``AgentRunResult``, a finished
    ``StreamedRunResult``), a ``RunCancelled`` error, or a list of ``ModelMessage``s
    (``result.all_messages()``, a stored history). The last run of a result ends ``"success"`` with
    its output; of a ``RunCancelled``, ``"interrupted"``; of a bare list, ``"success"`` when it ends
    in a reply without pending tool calls, else ``"interrupted"`` (a cut reply) or ``"error"``.
    The calls a run's ``DeferredToolRequests`` output hands back to its caller are ``"deferred"``.
    """
    require_pydantic_ai()
    from pydantic_ai.exceptions import RunCancelled

    ending: tuple[str, Any] | None = None
    if isinstance(result_or_messages, RunCancelled):
        messages, ending = result_or_messages.all_messages(), ("interrupted", None)
    elif isinstance(result_or_messages, (list, tuple)):
        messages = list(result_or_messages)
    elif callable(getattr(result_or_messages, "all_messages", None)):
        messages = result_or_messages.all_messages()
        if hasattr(result_or_messages, "output"):
            ending = ("success", result_or_messages.output)
    else:
        raise TypeError(
            "records_from_pydantic_ai takes a pydantic-ai result, a RunCancelled or a list of messages, "
            f"not {type(result_or_messages).__name__}"
        )
    groups: dict[Any, list[Any]] = {}
    for message in messages:
        groups.setdefault(getattr(message, "run_id", None), []).append(message)
    records = []
    for index, (run_id, group) in enumerate(groups.items()):
        last = index == len(groups) - 1
        records.append(_record(run_id, group, ending if last else None))
    return records


def _utc(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)
    return datetime.now(timezone.utc)


def _record(run_id: Any, messages: list[Any], ending: tuple[str, Any] | None) -> RunRecord:
    started = _utc(messages[0].timestamp)
    task = ""
    for part in getattr(messages[0], "parts", ()):
        if getattr(part, "part_kind", None) == "user-prompt":
            task = content_text(part.content)
    responses = [m for m in messages if getattr(m, "kind", None) == "response"]
    record = RunRecord(
        run_id=safe_text(run_id or "pydantic-ai"),
        task=safe_text(task),
        agent="pydantic-ai",
        model=safe_text(responses[0].model_name if responses else "unknown"),
        started_at=started,
    )

    def offset(at: datetime) -> float:
        return max(0.0, (at - started).total_seconds())

    deferred = _deferred_ids(ending[1] if ending is not None else None)

    previous_at = started
    for i, message in enumerate(messages):
        if getattr(message, "kind", None) != "response":
            previous_at = _utc(message.timestamp)
            continue
        follow = messages[i + 1] if i + 1 < len(messages) else None
        answered_at = _utc(follow.timestamp) if follow is not None else _utc(message.timestamp)
        tokens_in, tokens_out = usage_of(message.usage)
        calls = tool_calls_of(message)
        # as the live record says: the step that ended the run, or one without calls, is "final"
        ends_run = message is responses[-1] and _ends_with_answer(responses, ending)
        step = StepRecord(
            number=len(record.steps) + 1,
            kind="final" if ends_run or not calls else "action",
            started_at=previous_at,
            start_s=offset(previous_at),
            ended_at=answered_at,
            end_s=offset(answered_at),
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            usage_source="unknown" if tokens_in is None else "reported",
            model_output=safe_text(response_text(message)),
            interrupted=getattr(message, "state", "complete") == "interrupted",
        )
        answers = _answers(follow) if follow is not None else {}
        for call in calls:
            call_record = _tool_call(call, answers.get(call.tool_call_id), message, offset)
            if call_record.status == "cancelled" and call.tool_call_id in deferred:
                call_record.status = "deferred"
            step.tool_calls.append(call_record)
        record.steps.append(step)
    _set_end_state(record, responses, ending)
    return record


def _tool_call(call: Any, answer: Any, response: Any, offset: Any) -> ToolCallRecord:
    at = _utc(response.timestamp)
    arguments = call.args_as_dict() if hasattr(call, "args_as_dict") else call.args
    record = ToolCallRecord(
        call_id=safe_text(call.tool_call_id), tool=safe_text(call.tool_name), arguments=arguments,
        started_at=at, start_s=offset(at),
    )  # fmt: skip
    if answer is None:
        record.status = "cancelled"
        record.ended_at, record.end_s = at, offset(at)
        return record
    end = _utc(answer.timestamp)
    record.ended_at, record.end_s = end, offset(end)
    record.status, record.result, record.error = tool_outcome(answer)
    return record


def _deferred_ids(output: Any) -> set[str]:
    """The tool call ids a ``DeferredToolRequests`` output hands back to the run's caller."""
    from pydantic_ai.tools import DeferredToolRequests

    if not isinstance(output, DeferredToolRequests):
        return set()
    return {part.tool_call_id for part in [*output.calls, *output.approvals]}


def _ends_with_answer(responses: list[Any], ending: tuple[str, Any] | None) -> bool:
    """True when the run's last response gave its answer (the run succeeded)."""
    if ending is not None:
        return ending[0] == "success"
    last = responses[-1]
    return getattr(last, "state", "complete") != "interrupted" and not tool_calls_of(last)


def _set_end_state(record: RunRecord, responses: list[Any], ending: tuple[str, Any] | None) -> None:
    record.ended_at = record.steps[-1].ended_at if record.steps else record.started_at
    record.duration_s = record.steps[-1].end_s if record.steps else 0.0
    last = responses[-1] if responses else None
    if ending is not None:
        record.status, record.output = ending
    elif last is not None and getattr(last, "state", "complete") == "interrupted":
        record.status = "interrupted"
    elif last is not None and not tool_calls_of(last):
        record.status, record.output = "success", response_text(last)
    else:
        record.status, record.error = "error", "the run ended without a final answer"
    if record.status == "interrupted":
        record.stop_reason = "user"
        if record.steps:
            record.steps[-1].interrupted = True
    elif record.status == "error":
        record.stop_reason = "error"
