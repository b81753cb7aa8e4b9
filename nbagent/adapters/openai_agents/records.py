"""Reading OpenAI Agents SDK results: shared by the live adapter and ``records_from_openai_agents``.

A run of the Agents SDK is a sequence of turns: one model response (``result.raw_responses``)
and the items it led to (``result.new_items``: tool calls and their outputs, handoffs, messages).
``records_from_openai_agents(result)`` turns a result made without nbagent into a ``RunRecord``
with one step per turn, so it goes into the same frames as nbagent's own runs. The SDK keeps no
times, so such a record's step and call times are unknown (``None``), never invented.

Token usage: the SDK's ``Usage`` is 0 in and 0 out when the provider reported nothing (a test
model, a stream without usage), so that pair is read as unknown, never as zero.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timezone
from typing import Any

from nbagent.adapters import reported_usage, require
from nbagent.records import RunRecord, StepRecord, ToolCallRecord
from nbagent.text import safe_text


def require_openai_agents() -> Any:
    """The the OpenAI Agents SDK module, or an ImportError that names the extra to install."""
    return require("agents", "openai-agents", "the OpenAI Agents SDK")


usage_of = reported_usage


def model_name(agent: Any, run_config: Any = None) -> str:
    """The name of the model a run of ``agent`` uses (the run config's model wins, as in the SDK)."""
    model = getattr(run_config, "model", None) or getattr(agent, "model", None)
    if model is None:  # the SDK's default model (OPENAI_DEFAULT_MODEL, else its built-in one)
        try:
            from agents.models import get_default_model
        except ImportError:
            return "default"
        return get_default_model()
    if isinstance(model, str):
        return model
    return safe_text(getattr(model, "model", None) or type(model).__name__)


def arguments_of(text: Any) -> Any:
    """A function call's arguments: the JSON object they hold, or the raw text if it is not JSON."""
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text) if text else {}
    except ValueError:
        return text


def raw_field(raw: Any, name: str) -> Any:
    """A field of a raw SDK item, which is a pydantic model or (for inputs) a plain dict."""
    return raw.get(name) if isinstance(raw, dict) else getattr(raw, name, None)


def message_text(item: Any) -> str:
    """The text of a ``MessageOutputItem``."""
    from agents.items import ItemHelpers

    return ItemHelpers.text_message_output(item)


HANDED_BACK = "deferred: waits for the caller's approval (result.interruptions, then resume its RunState)"
"""Why a call is ``"deferred"``: the run paused for its approval and no one in it could decide."""


def records_from_openai_agents(result: Any) -> list[RunRecord]:
    """A ``RunRecord`` (in a list, like the other ``records_from_*``) for a run made with the
    Agents SDK alone: ``Runner.run``'s ``RunResult`` or a consumed ``Runner.run_streamed`` result.

    One step per model response, with its usage and the tool calls and handoffs it asked for. The
    run is ``"success"`` when it has a final output or paused for approvals (its paused calls
    ``"deferred"``), ``"interrupted"`` when a streamed run was cancelled, else ``"error"``. A
    handoff whose ``input_filter`` dropped its items from the result is still a handoff (``"ok"``,
    to the agent that answered next), as in a run through nbagent.
    """
    require_openai_agents()
    if not hasattr(result, "raw_responses") or not hasattr(result, "new_items"):
        raise TypeError(
            f"records_from_openai_agents takes a RunResult or RunResultStreaming, not {type(result).__name__}"
        )
    started = datetime.now(timezone.utc)
    # each item names the agent that made it; the first one's is where the run started
    first_agent = getattr(result.new_items[0], "agent", None) if result.new_items else None
    first_agent = first_agent or getattr(result, "last_agent", None)
    record = RunRecord(
        run_id=safe_text((getattr(result, "trace", None) and result.trace.trace_id) or id(result)),
        task=safe_text(result.input if isinstance(result.input, str) else last_user_text(result.input)),
        agent=safe_text(getattr(first_agent, "name", None) or "openai-agents"),
        model=model_name(first_agent),
        started_at=started,
    )
    paused = {raw_field(item.raw_item, "call_id") for item in getattr(result, "interruptions", None) or ()}
    outputs: dict[Any, Any] = {}
    for item in result.new_items:
        if getattr(item, "type", None) in ("tool_call_output_item", "handoff_output_item"):
            outputs[raw_field(item.raw_item, "call_id")] = item
    responses = list(result.raw_responses)
    acting = _acting_agents(result, responses)
    agents = _known_agents(result)
    for number, response in enumerate(responses):
        tokens_in, tokens_out = usage_of(response.usage)
        went_on = number + 1 < len(responses)
        next_agent = acting[number + 1] if went_on else None
        step = StepRecord(
            number=len(record.steps) + 1,
            kind="action",
            started_at=started,
            start_s=0.0,
            ended_at=started,  # the SDK keeps no times: a step is closed, of no known length
            end_s=0.0,
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            usage_source="unknown" if tokens_in is None else "reported",
        )
        texts = []
        for output in response.output:
            kind = raw_field(output, "type")
            if kind == "function_call":
                answer = outputs.get(raw_field(output, "call_id"))
                handed_to = _handoff_target(output, agents, next_agent) if went_on else None
                call = _tool_call(output, answer, started, handed_to)
                if answer is None and raw_field(output, "call_id") in paused:
                    call.status, call.error = "deferred", HANDED_BACK
                step.tool_calls.append(call)
            elif kind == "message":
                texts.extend(
                    raw_field(c, "text") or ""
                    for c in raw_field(output, "content") or []
                    if raw_field(c, "text")
                )
        step.model_output = safe_text("".join(texts))
        step.kind = "action" if step.tool_calls else "final"
        record.steps.append(step)
    _add_usage_outside_turns(record, getattr(getattr(result, "context_wrapper", None), "usage", None))
    if getattr(result, "final_output", None) is not None:
        record.status, record.output = "success", result.final_output
    elif paused:  # it waits for the caller's decisions: it did what it could
        record.status = "success"
    elif getattr(result, "_cancel_mode", "none") != "none":
        record.status, record.stop_reason = "interrupted", "user"
    else:
        record.status, record.stop_reason = "error", "error"
        record.error = "the run ended without a final output"
    return [record]


def last_user_text(items: Any) -> str:
    """The text of the last user message in a list of input items ("" if there is none)."""
    for item in reversed(list(items or [])):
        if raw_field(item, "role") == "user":
            content = raw_field(item, "content")
            if isinstance(content, str):
                return content
            texts = [raw_field(part, "text") for part in content or []]
            return safe_text(" ".join(t for t in texts if isinstance(t, str)))
    return ""


def _add_usage_outside_turns(record: RunRecord, usage: Any) -> None:
    """Usage the SDK counted in no response of this run (an agent used as a tool) goes to the
    last step, as nbagent's own record of such a run has it, so the totals are the SDK's."""
    total_in, total_out = usage_of(usage)
    if total_in is None or not record.steps or record.input_tokens is None:
        return
    extra_in, extra_out = total_in - record.input_tokens, (total_out or 0) - (record.output_tokens or 0)
    last = record.steps[-1]
    if (extra_in > 0 or extra_out > 0) and last.input_tokens is not None:
        last.input_tokens += max(extra_in, 0)
        last.output_tokens = (last.output_tokens or 0) + max(extra_out, 0)


def _acting_agents(result: Any, responses: list[Any]) -> list[str | None]:
    """The name of the agent that made each response, where the result's items tell (an item
    names its agent; a response is matched to its items by output ids that only one item has:
    chat-completions models give every item the same placeholder id)."""
    ids = [raw_field(item.raw_item, "id") for item in result.new_items]
    seen = Counter(ids)
    by_id = {
        i: getattr(getattr(item, "agent", None), "name", None)
        for i, item in zip(ids, result.new_items, strict=True)
        if i is not None and seen[i] == 1
    }
    return [
        next((by_id[i] for o in response.output if (i := raw_field(o, "id")) in by_id), None)
        for response in responses
    ]


def _known_agents(result: Any) -> list[Any]:
    """The agents the result names (its items', its last agent) and those their handoffs reach."""
    found: list[Any] = []
    todo = [getattr(item, "agent", None) for item in result.new_items]
    todo.append(getattr(result, "last_agent", None))
    while todo:
        agent = todo.pop()
        if agent is None or any(agent is known for known in found):
            continue
        found.append(agent)
        todo.extend(h for h in getattr(agent, "handoffs", None) or () if not hasattr(h, "tool_name"))
    return found


def _handoff_target(call: Any, agents: list[Any], next_agent: str | None) -> str | None:
    """For a call the run went on past without an answer: the agent it handed off to, or None
    when it is no handoff call (a function tool of an agent the result names). A handoff of an
    agent the result no longer names (its ``input_filter`` dropped its items) is known by the
    SDK's default tool name, ``transfer_to_<agent>``."""
    from agents import handoff as as_handoff

    name = raw_field(call, "name") or ""
    for agent in agents:
        for target in getattr(agent, "handoffs", None) or ():
            described = target if hasattr(target, "tool_name") else as_handoff(target)
            if described.tool_name == name:
                return str(described.agent_name)
        if any(getattr(tool, "name", None) == name for tool in getattr(agent, "tools", None) or ()):
            return None
    if name.startswith("transfer_to_"):
        return next_agent or name.removeprefix("transfer_to_")
    return None


def _tool_call(call: Any, answer: Any, started: datetime, handed_to: str | None = None) -> ToolCallRecord:
    record = ToolCallRecord(
        call_id=safe_text(raw_field(call, "call_id")),
        tool=safe_text(raw_field(call, "name")),
        arguments=arguments_of(raw_field(call, "arguments")),
        started_at=started,
        start_s=0.0,
    )
    if answer is not None or handed_to is not None:
        record.ended_at, record.end_s = started, 0.0
    if answer is None and handed_to is not None:  # its items were dropped by the handoff's filter
        record.status, record.result = "ok", f"handoff to {handed_to}"
    elif answer is None:
        record.status = "cancelled"
    elif getattr(answer, "type", None) == "handoff_output_item":
        record.status, record.result = "ok", f"handoff to {answer.target_agent.name}"
    elif answer.output == _failure_text():
        record.status, record.result = "error", answer.output
        record.error = "the tool raised; the SDK answered the model with its failure text"
    else:
        record.status, record.result = "ok", answer.output
    return record


def _failure_text() -> str:
    """What the SDK answers the model when a function tool raises and no failure function of the
    user's says otherwise: a fixed text, the one sign of the failure left in its items."""
    from agents.tool import default_tool_error_function

    return default_tool_error_function(None, RuntimeError())  # type: ignore[arg-type]
