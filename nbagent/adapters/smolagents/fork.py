"""Forks of smolagents runs: the agent's memory steps up to a step, as JSON and back, with edits.

Part of the smolagents adapter (``smolagents.source``). smolagents builds every model request
from the agent's memory (``write_memory_to_messages``: the system prompt, then each memory step's
``to_messages``), so a run's history is its memory steps, and step k's request is made of the
steps there were when step k started (``fork_point``: how many). A fork hands smolagents that
prefix as the agent's memory, as ``agent.run(..., reset=False)`` over it would: the worker lets
``run()`` do its preamble (system prompt, executor state and tools) and sets the memory before the
stream starts. A ``message=`` is the ``TaskStep`` smolagents makes of it, as a new task there.

The JSON keeps exactly what ``to_messages`` reads (text, tool calls, observations, errors,
plans), so a stored run forks in a new process to the same request; smolagents has no loader of
its own (``ActionStep.dict()`` goes one way). A step holding images cannot be kept so: a fork
whose prefix has one, from a store, is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from nbagent.errors import ForkError

if TYPE_CHECKING:
    from nbagent.forks.origins import ForkOrigin


@dataclass
class Memory:
    """A smolagents run's history (``ctx.conversation``): its memory steps and the observation
    smolagents made of each tool call's result (one step's observations are those of all its
    calls, joined, so a fork that edits one call rebuilds them from the others)."""

    steps: list[Any] | None = None
    """The agent's memory steps of the run (the live list; set by the worker once ``run()`` made
    it)."""
    observations: dict[str, str] = field(default_factory=dict)
    """Record call id (``"<step>:<smolagents id>"``) -> its observation text."""


@dataclass(frozen=True)
class ForkMemory:
    """A fork's start (``ctx.fork.input``): the memory steps to hand smolagents, and the message
    that becomes a new ``TaskStep`` after them (``None``: none)."""

    steps: list[Any]
    observations: dict[str, str]
    message: str | None


def memory_json(memory: Memory) -> dict[str, Any] | None:
    """``fork_data``: the memory steps as JSON (what their ``to_messages`` reads)."""
    if memory.steps is None:
        return None
    return {
        "conversation": [_step_json(step) for step in list(memory.steps)],
        "observations": dict(memory.observations),
    }


def fork_memory(origin: ForkOrigin) -> ForkMemory:
    """The memory steps of ``origin.record`` up to step ``at_step``'s request, edited."""
    where = f"run {origin.record.run_id}"
    if origin.conversation is not None:
        steps = list(origin.conversation.steps or [])
        observations = dict(origin.conversation.observations)
    else:
        data = origin.data or {}
        stored = list(data.get("conversation") or [])
        if origin.point is not None:
            stored = stored[: int(origin.point)]
        steps = [_step_from_json(item, where) for item in stored]
        observations = dict(data.get("observations") or {})
    if origin.point is not None:
        steps = steps[: int(origin.point)]
    if origin.tool_results:
        steps[-1:] = [_edited(steps[-1] if steps else None, origin, observations)]
    return ForkMemory(steps, observations, origin.message)


def _edited(step: Any, origin: ForkOrigin, observations: dict[str, str]) -> Any:
    """Step ``at_step - 1``'s memory step with the results of ``tool_results`` in its
    observations, as smolagents joins them (each call's observation, by call id, one a line)."""
    from smolagents.memory import ActionStep

    before = origin.at_step - 1
    if not isinstance(step, ActionStep) or not step.tool_calls:
        raise ForkError(
            f"step {before} of run {origin.record.run_id} holds no tool results in smolagents' "
            "memory to replace"
        )
    names = {f"{before}:{call.id}": call for call in step.tool_calls}
    for key in origin.tool_results:
        if key not in names:
            raise ForkError(
                f"{key} is a call made by step {before}'s code, whose result is part of the code's "
                f"observation: edit the python_interpreter call instead ({', '.join(names)})"
            )
    edits = {key: str(value).strip() for key, value in origin.tool_results.items()}
    if len(names) == 1:
        (key,) = names
        return replace(step, observations=edits[key])
    missing = [key for key in names if key not in edits and key not in observations]
    if missing:
        raise ForkError(
            f"run {origin.record.run_id} kept no observation of {', '.join(missing)}: step {before}'s "
            "observations cannot be rebuilt with one result replaced; replace all of its results"
        )
    observations.update(edits)
    return replace(step, observations="\n".join(observations[key] for key in sorted(names, key=_smol_id)))


def _smol_id(key: str) -> str:
    return key.partition(":")[2]


def _json(value: Any) -> Any:
    from smolagents.utils import make_json_serializable

    return make_json_serializable(value)


def _message_json(message: Any) -> Any:
    if message is None:
        return None
    from smolagents.models import get_dict_from_nested_dataclasses

    return _json(get_dict_from_nested_dataclasses(message, ignore_key="raw"))


def _usage_json(usage: Any) -> Any:
    return None if usage is None else [usage.input_tokens, usage.output_tokens]


def _step_json(step: Any) -> dict[str, Any]:
    from smolagents.memory import ActionStep, PlanningStep, TaskStep

    if isinstance(step, TaskStep):
        return {"type": "task", "task": step.task, "images": bool(step.task_images)}
    if isinstance(step, PlanningStep):
        return {
            "type": "planning",
            "plan": step.plan,
            "model_output_message": _message_json(step.model_output_message),
            "timing": [step.timing.start_time, step.timing.end_time],
            "token_usage": _usage_json(step.token_usage),
        }
    if isinstance(step, ActionStep):
        error = step.error
        return {
            "type": "action",
            "step_number": step.step_number,
            "timing": [step.timing.start_time, step.timing.end_time],
            "tool_calls": None
            if step.tool_calls is None
            else [{"id": c.id, "name": c.name, "arguments": _json(c.arguments)} for c in step.tool_calls],
            "error": None if error is None else {"type": type(error).__name__, "message": str(error)},
            "model_output_message": _message_json(step.model_output_message),
            "model_output": _json(step.model_output),
            "code_action": step.code_action,
            "observations": step.observations,
            "images": bool(step.observations_images),
            "action_output": _json(step.action_output),
            "token_usage": _usage_json(step.token_usage),
            "is_final_answer": step.is_final_answer,
        }
    return {"type": type(step).__name__}


def _step_from_json(data: dict[str, Any], where: str) -> Any:
    """A memory step made again from ``_step_json``'s data (``where`` names the run for errors)."""
    from smolagents.memory import ActionStep, PlanningStep, TaskStep, ToolCall
    from smolagents.models import ChatMessage
    from smolagents.monitoring import Timing, TokenUsage

    kind = data.get("type")
    if data.get("images"):
        raise ForkError(
            f"{where} has images in smolagents' memory, which its stored history cannot keep: fork "
            "it in the process that ran it"
        )

    def usage(value: Any) -> Any:
        return None if value is None else TokenUsage(*value)

    def message(value: Any) -> Any:
        return None if value is None else ChatMessage.from_dict(dict(value))

    if kind == "task":
        return TaskStep(task=data["task"])
    if kind == "planning":
        return PlanningStep(
            model_input_messages=[],
            model_output_message=message(data["model_output_message"]),
            plan=data["plan"],
            timing=Timing(*data["timing"]),
            token_usage=usage(data["token_usage"]),
        )
    if kind == "action":
        calls = data["tool_calls"]
        tool_calls = None if calls is None else [ToolCall(c["name"], c["arguments"], c["id"]) for c in calls]
        return ActionStep(
            step_number=data["step_number"],
            timing=Timing(*data["timing"]),
            tool_calls=tool_calls,
            error=None if data["error"] is None else _error(data["error"]),
            model_output_message=message(data["model_output_message"]),
            model_output=data["model_output"],
            code_action=data["code_action"],
            observations=data["observations"],
            action_output=data["action_output"],
            token_usage=usage(data["token_usage"]),
            is_final_answer=data["is_final_answer"],
        )
    raise ForkError(f"{where} has a {kind} in smolagents' memory, which nbagent cannot make again")


def _error(data: dict[str, str]) -> Exception:
    """The step's error again, of its smolagents type, with its text (what the model is shown),
    made without logging it again (smolagents' ``AgentError`` logs as it is made)."""
    import smolagents.utils

    from nbagent.adapters.smolagents.records import interrupted_step_error_type

    cls = getattr(smolagents.utils, data["type"], None)
    if data["type"] == interrupted_step_error_type().__name__:
        cls = interrupted_step_error_type()
    if not (isinstance(cls, type) and issubclass(cls, smolagents.utils.AgentError)):
        cls = smolagents.utils.AgentError
    error = cls.__new__(cls)
    Exception.__init__(error, data["message"])
    error.message = data["message"]
    return error
