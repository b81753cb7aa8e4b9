"""Reading smolagents memory steps: shared by the live adapter and ``records_from_smolagents``.

``records_from_smolagents(agent)`` turns the memory of an agent that ran *without* nbagent into
``RunRecord``s, one per task (a ``reset=False`` run adds a task to the same memory), so existing
runs can go into the same frames as nbagent's own. smolagents keeps less than nbagent records: tool
calls carry their step's times and the step's observations, and a run that raised leaves no end
state, so such a run is ``"error"`` ("ended without a final answer"). A record's ``output`` is what
``agent.run`` returned (see ``_final_output`` for how a ToolCallingAgent's answer is recovered),
also for a run that hit max steps.

Token usage: smolagents reports ``TokenUsage(0, 0)`` when the model reported nothing (planning
steps and streamed steps add up whatever the deltas carried), so 0 in and 0 out is read as unknown.
"""

from __future__ import annotations

import functools
import hashlib
from datetime import datetime, timezone
from typing import Any

from nbagent.adapters import reported_usage, require
from nbagent.errors import describe
from nbagent.records import RunRecord, StepRecord, ToolCallRecord


def require_smolagents() -> Any:
    """The smolagents module, or an ImportError that names the extra to install."""
    return require("smolagents", "smolagents", "smolagents")


def usage_of(step: Any) -> tuple[int | None, int | None]:
    """A memory step's (input, output) tokens; ``(None, None)`` when unknown."""
    return reported_usage(getattr(step, "token_usage", None))


def text_of(content: Any) -> str | None:
    """Message content as text: a string as is, content blocks joined, anything else via ``str``."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(block.get("text", "")) if isinstance(block, dict) else str(block) for block in content
        )
    return str(content)


def error_of(step: Any) -> str | None:
    error = getattr(step, "error", None)
    return None if error is None else describe(error)


def utc(epoch_s: float) -> datetime:
    return datetime.fromtimestamp(epoch_s, tz=timezone.utc)


@functools.cache
def interrupted_step_error_type() -> type[Exception]:
    """The error nbagent leaves on the memory step its Stop cut short (a smolagents ``AgentError``).

    It tells the model, when the run is continued, that the step was interrupted; and it tells
    ``records_from_smolagents`` the run ended interrupted, without reading any message text.
    """
    from smolagents.utils import AgentError

    class StepInterrupted(AgentError):
        """nbagent stopped this step mid-call (a Stop click or ``interrupt()``)."""

    return StepInterrupted


def interrupted_step_error(detail: str = "") -> Exception:
    from smolagents.monitoring import AgentLogger, LogLevel

    message = "Interrupted by the user before this step finished."
    return interrupted_step_error_type()(f"{message} {detail}".strip(), AgentLogger(level=LogLevel.OFF))


def agent_name(agent: Any) -> str:
    return getattr(agent, "name", None) or type(agent).__name__


def model_name(model: Any) -> str:
    return getattr(model, "model_id", None) or type(model).__name__


def is_max_steps_step(step: Any) -> bool:
    from smolagents.utils import AgentMaxStepsError

    return isinstance(getattr(step, "error", None), AgentMaxStepsError)


def records_from_smolagents(agent: Any) -> list[RunRecord]:
    """The runs in a smolagents agent's memory, as ``RunRecord``s (oldest first).

    For agents that ran without nbagent (``agent.run(...)``); each task in the memory is one
    record. A task with no recorded step (interrupted before its first step ended) is skipped.
    """
    smolagents = require_smolagents()
    memory = smolagents.memory
    segments: list[tuple[str, list[Any]]] = []
    for step in agent.memory.steps:
        if isinstance(step, memory.TaskStep):
            segments.append((step.task, []))
        elif segments and isinstance(step, (memory.ActionStep, memory.PlanningStep)):
            segments[-1][1].append(step)
    records = []
    for index, (task, steps) in enumerate(segments):
        if steps:
            last = index == len(segments) - 1
            records.append(_record(agent, task, steps, last_task=last))
    return records


def _record(agent: Any, task: str, steps: list[Any], last_task: bool) -> RunRecord:
    from smolagents.memory import PlanningStep

    t0 = steps[0].timing.start_time
    run_id = hashlib.sha1(f"{agent_name(agent)}|{task}|{t0!r}".encode()).hexdigest()[:16]
    record = RunRecord(
        run_id=run_id, task=task, agent=agent_name(agent), model=model_name(agent.model), started_at=utc(t0)
    )
    end = t0
    for number, step in enumerate(steps, start=1):
        start = step.timing.start_time
        stop = step.timing.end_time if step.timing.end_time is not None else start
        end = max(end, stop)
        tokens_in, tokens_out = usage_of(step)
        if isinstance(step, PlanningStep):
            kind, output = "planning", text_of(step.model_output_message.content) or step.plan
        elif is_max_steps_step(step):
            kind, output = "final", text_of(step.action_output)
        else:
            kind = "final" if step.is_final_answer else "action"
            output = text_of(step.model_output)
        record.steps.append(
            StepRecord(
                number=number,
                kind=kind,
                started_at=utc(start),
                start_s=start - t0,
                ended_at=utc(stop),
                end_s=stop - t0,
                input_tokens=tokens_in,
                output_tokens=tokens_out,
                usage_source="unknown" if tokens_in is None else "reported",
                tool_calls=_tool_calls(step, start - t0, stop - t0),
                model_output=output or "",
                error=None if kind == "final" and is_max_steps_step(step) else error_of(step),
                interrupted=isinstance(getattr(step, "error", None), interrupted_step_error_type()),
            )
        )
    record.ended_at, record.duration_s = utc(end), end - t0
    _set_end_state(record, agent, steps[-1], last_task)
    return record


def _tool_calls(step: Any, start_s: float, end_s: float) -> list[ToolCallRecord]:
    calls = getattr(step, "tool_calls", None) or []
    error = error_of(step)
    records = []
    for call in calls:
        records.append(
            ToolCallRecord(
                call_id=str(call.id),
                tool=call.name,
                arguments=call.arguments,
                started_at=utc(step.timing.start_time),
                start_s=start_s,
                status="error" if error else "ok",
                result=step.observations if len(calls) == 1 and not error else None,
                error=error,
                ended_at=utc(step.timing.end_time or step.timing.start_time),
                end_s=end_s,
            )
        )
    return records


def _set_end_state(record: RunRecord, agent: Any, last: Any, last_task: bool) -> None:
    from smolagents.memory import ActionStep

    if is_max_steps_step(last):
        actions = sum(1 for s in record.steps if s.kind in ("action", "final")) - 1
        record.status, record.error_type = "max_steps", "MaxStepsReached"
        record.error = f"MaxStepsReached: no final answer after {actions} steps"
        record.output = _as_run_returns(last.action_output)
    elif isinstance(last, ActionStep) and last.is_final_answer:
        record.status, record.output = "success", _final_output(agent, last)
    elif record.steps[-1].interrupted or (last_task and getattr(agent, "interrupt_switch", False)):
        record.status, record.error, record.error_type = (
            "interrupted",
            "interrupted by the user",
            "AgentInterrupted",
        )
    else:
        record.status, record.error_type = "error", "AgentError"
        record.error = record.steps[-1].error or "the run ended without a final answer"


def _as_run_returns(answer: Any) -> Any:
    """The answer as ``agent.run`` returns it (text as ``AgentText``, an image as ``AgentImage``)."""
    from smolagents.agent_types import handle_agent_output_types

    return handle_agent_output_types(answer)


_STORED = {"Stored 'image.png' in memory.": "image.png", "Stored 'audio.mp3' in memory.": "audio.mp3"}
"""What a ToolCallingAgent observes when a tool returns an image or audio: it keeps it in its state."""


def _final_output(agent: Any, step: Any) -> Any:
    """A final step's answer, as ``agent.run`` returned it.

    A CodeAgent keeps it (``action_output``). A ToolCallingAgent keeps only the ``final_answer``
    call and its observation (the result as text): smolagents' own ``FinalAnswerTool`` returns its
    ``answer`` argument (a name in the agent's state stands for that value, as in the run); an
    image or audio result is the one smolagents stored in the agent's state; any other result of a
    custom ``final_answer`` tool is read back from its text by the tool's ``output_type`` (text
    stays text, numbers, lists and dicts are parsed back), as the text is all smolagents kept.
    """
    if step.action_output is not None:
        return _as_run_returns(step.action_output)
    call = next((c for c in step.tool_calls or () if c.name == "final_answer"), None)
    if call is None:
        return None
    state = getattr(agent, "state", {}) or {}
    tool = getattr(agent, "tools", {}).get("final_answer")
    if _is_plain_final_answer_tool(tool):
        arguments = call.arguments
        answer = arguments.get("answer", arguments) if isinstance(arguments, dict) else arguments
        if isinstance(answer, str) and answer in state:
            answer = state[answer]
        return _as_run_returns(answer)
    observation = step.observations
    if observation in _STORED and _STORED[observation] in state:
        return _as_run_returns(state[_STORED[observation]])
    return _read_back(observation, getattr(tool, "output_type", None))


def _is_plain_final_answer_tool(tool: Any) -> bool:
    from smolagents.default_tools import FinalAnswerTool

    return tool is None or (
        isinstance(tool, FinalAnswerTool)
        and type(tool).forward is FinalAnswerTool.forward
        and set(getattr(tool, "inputs", {})) == {"answer"}
    )


def _read_back(text: Any, output_type: str | None) -> Any:
    import ast

    if isinstance(text, str) and output_type not in (None, "string", "any"):
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            pass
    return _as_run_returns(text)
