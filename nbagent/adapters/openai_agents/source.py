"""Run OpenAI Agents SDK agents (``agents.Agent``, handoffs included) under nbagent.

``nbagent.start(agent, task)`` on an Agents SDK agent gets the same live view, Stop button and
records as a native agent, and the same answer, usage, history and errors as ``Runner.run``. The
run is the real ``Runner.run_streamed(agent, task, ...)`` on the runner's loop; its stream is read
by ``nbagent.adapters.openai_agents.stream``. The task is what the SDK takes: a string, a list of
input items, or a ``RunState`` to resume. Every keyword of ``Runner.run_streamed`` passes through
as given (``max_turns=None`` included); the set is read from the installed SDK. Nothing on the
agent is wrapped or swapped; the run's ``hooks`` are nbagent's, which note each tool the SDK
begins and pass every callback on to the ``hooks=`` you gave.

How a Stop lands. ``interrupt("now")`` cancels the run's task; ``drive`` then calls the SDK's own
``result.cancel(mode="immediate")``, which cancels the SDK's run task, its model stream (an HTTP
model drops its connection) and its tools. The SDK's cancel forgets the turn in flight, usage
included; nbagent does not: a turn whose ``response.completed`` had arrived keeps its usage, its
finished tool calls and its text, and a turn cut mid-stream keeps its text with usage unknown.
``interrupt("after_step")`` is the SDK's own ``cancel(mode="after_turn")``.

Errors are not Stops. Only a Stop (the run's cancel scope) ends a run ``"interrupted"``; anything
the SDK raises ends it ``"error"`` with the SDK's exception (type and message: a guardrail's
tripwire, a ``UserError``, a tool's error when its errors are not returned to the model), its open
call whose tool raised ``"error"`` and the calls the SDK cancelled with it ``"cancelled"``, and
the history kept is the SDK's own (``result.to_input_list()``), with no made-up answers.
``max_turns`` reached is ``"max_steps"``. A model API error (``openai.APIError``) is
``ModelError`` (as in nbagent's other adapters) whose text is the model's name, then the SDK's
exception type and message as ``Runner.run`` raises them: ``ModelError: test-model:
APIConnectionError: Connection error.`` (``model_error``).
Usage the SDK counted that no turn's stream reported (a turn cut by an input guardrail's
tripwire, an agent used as a tool, the earlier turns of a resumed ``RunState``) is added to the
last turn before the run ends or pauses for approval, so the record's totals are the SDK's.

Approvals. A tool with ``needs_approval`` pauses the SDK's run (``result.interruptions``). A run
no view shows (``display=False``: a script, a batch, CI) ends there, as ``Runner.run`` does: its
paused calls are ``"deferred"`` and ``run.result.interruptions`` holds them, to decide on
``run.result.to_state()`` and resume with ``nbagent.start(agent, state)``. In a shown run nbagent
shows each paused call in its approval panel (``run.pending_approvals``, ``run.approve``,
``run.deny``), applies the decisions to the SDK's ``RunState`` (``approve`` / ``reject``, a deny's
reason as the SDK's ``rejection_message``, the exact text the model sees) and resumes it, all
within one nbagent run. nbagent's own ``approve=`` policy is not supported for these agents
(use ``needs_approval``).

Memory. Agents SDK agents are stateless; nbagent keeps the items each run ended with
(``result.to_input_list()``) beside the agent, so ``reset=False`` sends them, then the new input,
as the next run's input. As with ``to_input_list()`` alone, that input goes to the agent the run
starts on: after a handoff, even one a Stop followed, ``reset=False`` starts again from the first
agent (the one given to ``nbagent.start``), with the whole conversation. A ``session``,
``conversation_id``, ``previous_response_id`` or ``auto_previous_response_id`` keeps the history
elsewhere, so nothing is added. Fresh runs of one agent run at once; a continued run waits for
the run it continues (``nbagent.runtime.turns``).

Usage on chat-completions servers. The SDK's chat-completions model asks a non-OpenAI server for
streamed usage only with ``ModelSettings(include_usage=True)``. nbagent asks for it in the runs it
drives by adding ``include_usage=True`` to the run's ``run_config.model_settings`` (merged with
yours; the agent is untouched), unless you or one of the run's agents (those it hands off to
included) set ``include_usage``. An agent used through ``agent.as_tool()`` runs with the
``run_config`` given to ``as_tool``, never the outer run's, so nothing is asked for it.

Model and cost. The record's ``model``, and the price a ``Limits(max_cost_usd=...)`` budget uses,
is the model the run starts on (``model_name_for``): ``run_config.model`` when given, else the
agent's. Known gap: a handoff to an agent on another model (and without ``run_config.model``) is
still priced at the starting model's rate.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import sys
from typing import TYPE_CHECKING, Any

from nbagent.adapters import instance_of
from nbagent.adapters.openai_agents.clients import own_client
from nbagent.adapters.openai_agents.mcp import connected_for_run
from nbagent.adapters.openai_agents.records import (
    HANDED_BACK,
    arguments_of,
    last_user_text,
    model_name,
    raw_field,
    records_from_openai_agents,
    require_openai_agents,
)
from nbagent.adapters.openai_agents.stream import (
    ABANDONED_ERROR,
    INTERRUPTED_OUTPUT,
    Translator,
    raising_tool,
    watching_hooks,
)
from nbagent.context import RunContext
from nbagent.errors import AgentInterrupted, MaxStepsReached, ModelError, describe
from nbagent.runtime.source import Source
from nbagent.text import observation

if TYPE_CHECKING:
    from nbagent.forks.origins import ForkOrigin

__all__ = [
    "ABANDONED_ERROR",
    "INTERRUPTED_OUTPUT",
    "OpenAIAgentsSource",
    "is_openai_agents_agent",
    "records_from_openai_agents",
]

SERVER_HISTORY = ("session", "conversation_id", "previous_response_id", "auto_previous_response_id")
"""Run keywords that keep the conversation outside the run: ``reset=False`` then adds nothing."""


def is_openai_agents_agent(obj: Any) -> bool:
    """True for an Agents SDK ``Agent``. Never imports the SDK itself."""
    return "agents.run" in sys.modules and instance_of(obj, "agents.agent", "Agent")


def run_keywords() -> list[str]:
    """The keywords the installed SDK's ``Runner.run_streamed`` takes (besides the agent and input)."""
    from agents import Runner

    parameters = inspect.signature(Runner.run_streamed).parameters
    return [name for name in parameters if name not in ("starting_agent", "input")]


def _declare_run_keywords(cls: type) -> None:
    """Give ``cls.drive`` a signature with the SDK's run keywords as keyword-only parameters, so
    ``nbagent.start`` refuses any other keyword before the run starts, naming the ones it takes."""
    drive = cls.drive
    if getattr(drive, "__signature__", None) is not None:
        return
    head = list(inspect.signature(drive).parameters.values())[:4]  # self, task, ctx, reset
    keyword = inspect.Parameter.KEYWORD_ONLY
    extra = [inspect.Parameter(name, keyword, default=None) for name in run_keywords()]
    drive.__signature__ = inspect.Signature([*head, *extra])


class OpenAIAgentsSource(Source):
    """An nbagent source for an OpenAI Agents SDK agent; ``nbagent.start`` makes one for you."""

    @property
    def takes_turns(self) -> bool:  # type: ignore[override]
        """The agent keeps nothing between runs, so only a continued run waits
        (``nbagent.runtime.turns``); but an agent with MCP servers, which each run connects and
        cleans up (``mcp``), runs one run at a time."""
        from nbagent.adapters.openai_agents.mcp import servers_of

        return bool(servers_of(self.agent))

    framework = "openai-agents"

    def __init__(self, agent: Any) -> None:
        require_openai_agents()
        if not is_openai_agents_agent(agent):
            raise TypeError(f"not an OpenAI Agents SDK agent: {type(agent).__name__}")
        self.agent = agent
        self.name = str(getattr(agent, "name", None) or type(agent).__name__)
        _declare_run_keywords(type(self))

    @property
    def model_name(self) -> str:
        return model_name(self.agent)

    def model_name_for(self, options: dict[str, Any]) -> str:
        """The model a run with these ``drive`` options starts on: ``run_config.model`` when given
        (it overrides every agent's, as in the SDK), else the agent's own. The run's record and a
        cost budget use this name (see the module's note on handoffs)."""
        return model_name(self.agent, options.get("run_config"))

    def task_text(self, task: Any) -> str:
        """The task as the record shows it. The SDK takes a string, a list of input items (the
        record shows the last user message's text) or a ``RunState`` (a run resumed)."""
        from agents import RunState

        if isinstance(task, str):
            return task
        if isinstance(task, list):
            return last_user_text(task) or f"{len(task)} input items"
        if isinstance(task, RunState):
            original = getattr(task, "_original_input", None)
            text = original if isinstance(original, str) else last_user_text(original or [])
            return f"resumed: {text}" if text else "resumed run state"
        raise TypeError(
            "an OpenAI Agents SDK task is a str, a list of input items or a RunState, "
            f"not {type(task).__name__}"
        )

    def check_run(self, options: dict[str, Any], reset: bool = True) -> None:
        """Refuse an agent whose MCP server is connected on another loop (``mcp``)."""
        from nbagent.adapters.openai_agents.mcp import refusal

        refused = refusal(self.agent)
        if refused:
            raise ValueError(refused)

    def approvals_refusal(self) -> str:
        return (
            "approve= is not supported for OpenAI Agents SDK agents: give the tool "
            "needs_approval=True, and nbagent shows its calls for a decision"
        )

    def __repr__(self) -> str:
        return f"OpenAIAgentsSource({self.name}, model={self.model_name!r})"

    async def drive(self, task: Any, ctx: RunContext, reset: bool = True, **options: Any) -> Any:
        """Run ``task`` with ``Runner.run_streamed``, reporting through ``ctx``; returns the final
        output. The keywords are ``Runner.run_streamed``'s own and pass through unchanged (see
        ``_declare_run_keywords``), but for ``include_usage`` (see the module's note)."""
        run_input = self._input(task, ctx, reset, options)
        run_config = with_usage_asked(self.agent, options.get("run_config"))
        async with own_client(run_config) as run_config, connected_for_run(self.agent):
            options = {**options, "run_config": run_config}
            if options["run_config"] is None:
                del options["run_config"]
            return await self._run(run_input, ctx, options)

    def fork_data(self, conversation: Any, options: dict[str, Any]) -> dict[str, Any] | None:
        """The input items (``to_input_list()``) as JSON: they are the SDK's own JSON already."""
        from pydantic_core import to_jsonable_python

        return {"conversation": to_jsonable_python(list(conversation), fallback=str)}

    def fork_input(self, origin: ForkOrigin) -> list[Any]:
        """The input items the model was sent at step ``at_step`` (its ``on_llm_start`` items),
        the outputs of the edited calls replaced and the message added as a user item: the SDK
        sends a run's input items as they are, so the fork's first request is that one."""
        import copy

        items = [copy.deepcopy(item) for item in origin.prefix()]
        # the record names a call "<step>:<the SDK's call_id>"
        edits = {key.partition(":")[2]: value for key, value in origin.tool_results.items()}
        for item in items:
            output = isinstance(item, dict) and item.get("type") == "function_call_output"
            if output and item.get("call_id") in edits:
                item["output"] = observation(edits[item["call_id"]])
        if origin.message is not None:
            items.append({"role": "user", "content": origin.message})
        return items

    def _input(self, task: Any, ctx: RunContext, reset: bool, options: dict[str, Any]) -> Any:
        from agents import RunState

        if ctx.fork is not None:  # a fork: the items as step k's request had them (fork_input)
            return ctx.fork.input
        if reset or any(options.get(name) for name in SERVER_HISTORY):
            return task
        if isinstance(task, RunState):
            raise TypeError(
                "a RunState carries its own history: resume it with reset=True (the default), not reset=False"
            )
        kept = ctx.kept_history
        if not kept:
            return task
        return [*kept, *(task if isinstance(task, list) else [{"role": "user", "content": task}])]

    async def _run(self, run_input: Any, ctx: RunContext, options: dict[str, Any]) -> Any:
        from agents import Runner, RunState
        from agents.exceptions import MaxTurnsExceeded
        from openai import APIError

        translator = Translator(ctx)
        # Run hooks tell which model calls and tools the SDK has begun (it announces every call of a
        # turn first, and a model call long before its reply's first event).
        hooks = watching_hooks(options.get("hooks"), translator)
        options = {**options, "run_config": reporting_tool_errors(options.get("run_config"), translator)}
        result: Any = None
        stopped = after_turn = False
        try:
            if isinstance(run_input, RunState):
                translator.resume(run_input)
            while True:
                result = Runner.run_streamed(self.agent, run_input, **{**options, "hooks": hooks})
                translator.total_usage = lambda result=result: _usage_of(result)
                after_turn = await _stream(result, translator, ctx)
                if not result.interruptions:
                    break
                if not ctx.shown:  # no one sees an approval panel: the SDK's own contract holds
                    _hand_back(result, translator)
                    break
                # Paused for approvals: decide them in nbagent's panel, then resume the same run.
                run_input = await _decide(result, translator, ctx)
            translator.catch_up()
            translator.close()
            if after_turn and result.final_output is None:
                raise AgentInterrupted("stopped after the turn")
            ctx.set_result(result)  # ``RunResult``'s interface: to_input_list(), final_output, to_state()
            return result.final_output
        except MaxTurnsExceeded as exc:
            translator.catch_up()
            translator.close()
            raise MaxStepsReached(str(exc)) from exc
        except BaseException as exc:
            translator.open_unanswered_call()
            if not ctx.scope.interrupted:  # an error, not a Stop: the SDK's own, as it raised it
                _end_quietly(result)
                translator.catch_up()
                cancelled = isinstance(exc, asyncio.CancelledError)
                translator.fail_calls(describe(exc), cancelled, raised_by=raising_tool(exc))
                translator.close(error=describe(exc))
                if isinstance(exc, APIError):
                    raise model_error(exc, self.model_name_for(options)) from exc
                raise
            stopped = True
            if result is not None:
                # the SDK's run task, model stream and tools stop with ours
                result.cancel(mode="immediate")
            translator.cut_calls()
            raise
        finally:
            history = _input_list(result)
            if stopped:
                history += translator.cut_turn(history)
            ctx.messages = [item if isinstance(item, dict) else {"item": item} for item in history]
            ctx.keep_history(history)
            ctx.conversation = history


async def _stream(result: Any, translator: Translator, ctx: RunContext) -> bool:
    """Consume ``result``'s events; True if a Stop after step was passed on to the SDK."""
    after_turn = False
    async for event in result.stream_events():
        translator.apply(event)
        # The SDK decides whether to start another turn only once the consumer has taken the
        # last event of this one, so asking here is never too late for that turn.
        if not after_turn and ctx.scope.stop_after_step:
            after_turn = True
            result.cancel(mode="after_turn")
    return after_turn


async def _decide(result: Any, translator: Translator, ctx: RunContext) -> Any:
    """The paused run's ``RunState`` with every pending call decided in nbagent's approval panel.
    All of them are shown before the first is awaited, so a person decides them together."""
    translator.catch_up()
    state = result.to_state()
    waiting = []
    for item in result.interruptions:
        sdk_id, tool, arguments = _paused_call(item)
        call_id = translator.open_calls.get(sdk_id) or translator.start_call(sdk_id, tool, arguments)
        ctx.approvals.request(ctx, call_id, tool, arguments_of(arguments))
        waiting.append((item, sdk_id, call_id))
    for item, sdk_id, call_id in waiting:
        decision = await ctx.approvals.wait(ctx, call_id)
        if decision.approved:
            state.approve(item)
        else:
            translator.finish_call(sdk_id, "denied", error=decision.reason or "denied")
            # The reason is the model's answer, as the SDK's own rejection_message; none: the SDK's.
            state.reject(item, rejection_message=decision.reason)
    return state


def _hand_back(result: Any, translator: Translator) -> None:
    """A run paused for approvals that no view shows ends as ``Runner.run`` ends it: its calls are
    ``"deferred"``, and ``run.result.interruptions`` holds them to decide and resume."""
    translator.catch_up()
    for item in result.interruptions:
        sdk_id, tool, arguments = _paused_call(item)
        if sdk_id not in translator.open_calls:
            translator.start_call(sdk_id, tool, arguments)
        translator.finish_call(sdk_id, "deferred", error=HANDED_BACK)


def _paused_call(item: Any) -> tuple[str, str, Any]:
    """A ``ToolApprovalItem``'s call: the SDK's call id, the tool's name, the arguments."""
    raw = item.raw_item
    sdk_id = str(raw_field(raw, "call_id") or raw_field(raw, "id"))
    tool = str(getattr(item, "tool_name", None) or raw_field(raw, "name") or "tool")
    return sdk_id, tool, raw_field(raw, "arguments")


def reporting_tool_errors(run_config: Any, translator: Translator) -> Any:
    """A copy of ``run_config`` whose ``tool_error_formatter`` tells ``translator`` the exception a
    function tool raised (the SDK shows the model a fixed text and keeps the exception from its
    logs and traces: its formatter is the one place that sees it), then answers as the user's own
    formatter would, or with the SDK's default message when there is none."""
    own = _config_field(run_config, "tool_error_formatter")

    def formatter(args: Any) -> Any:
        if args.kind == "tool_exception" and args.error is not None:
            translator.tool_raised(str(args.call_id), args.error)
        return own(args) if own is not None else None

    return _with_config_field(run_config, "tool_error_formatter", formatter)


def with_usage_asked(agent: Any, run_config: Any) -> Any:
    """``run_config`` with ``include_usage=True`` in its model settings, so a chat-completions
    server streams usage; unchanged when it, or an agent of the run, sets ``include_usage``."""
    from agents import ModelSettings

    settings = _config_field(run_config, "model_settings")
    if raw_field(settings, "include_usage") is not None or _sets_include_usage(agent, set()):
        return run_config
    if isinstance(settings, dict):
        settings = {**settings, "include_usage": True}
    elif settings is None:
        settings = ModelSettings(include_usage=True)
    else:
        settings = dataclasses.replace(settings, include_usage=True)
    return _with_config_field(run_config, "model_settings", settings)


def _config_field(run_config: Any, name: str) -> Any:
    """Field ``name`` of a run config given as a ``RunConfig``, a dict of its fields, or ``None``."""
    from agents import RunConfig

    if isinstance(run_config, RunConfig):
        return getattr(run_config, name)
    return run_config.get(name) if isinstance(run_config, dict) else None


def _with_config_field(run_config: Any, name: str, value: Any) -> Any:
    """A copy of ``run_config`` (a ``RunConfig``, a dict of its fields, or ``None``: a fresh one)
    with field ``name`` set to ``value``; the user's own config is never changed."""
    from agents import RunConfig

    if run_config is None:
        return RunConfig(**{name: value})
    if isinstance(run_config, dict):
        return {**run_config, name: value}
    if isinstance(run_config, RunConfig):
        return dataclasses.replace(run_config, **{name: value})
    return run_config  # not a run config: the SDK refuses it with its own message


def _sets_include_usage(agent: Any, seen: set[int]) -> bool:
    """True if ``agent`` or an agent it hands off to (directly or through ``handoff(agent)``) sets
    ``include_usage`` itself, or hands off to an agent nbagent cannot see (a custom ``Handoff``):
    nbagent never overrides a setting it cannot read. An agent used through ``agent.as_tool()``
    runs its own ``Runner.run`` with the ``run_config`` given to ``as_tool``, never the outer run's,
    so nbagent asks nothing of it: give it ``ModelSettings(include_usage=True)`` to count its usage
    on a chat-completions server that only streams usage when asked."""
    if id(agent) in seen:
        return False
    seen.add(id(agent))
    if getattr(getattr(agent, "model_settings", None), "include_usage", None) is not None:
        return True
    for target in getattr(agent, "handoffs", None) or ():
        reached = target if hasattr(target, "model_settings") else handoff_target(target)
        if reached is None or _sets_include_usage(reached, seen):
            return True
    return False


def handoff_target(handoff: Any) -> Any:
    """The agent a ``Handoff`` hands off to, or None when it cannot be known. The SDK has no public
    accessor: ``handoff(agent)`` keeps a weak reference in ``_agent_ref`` (what the SDK itself
    reads, agents 0.24); a ``.agent`` attribute is the older, custom form. A custom ``Handoff``
    built with only its ``on_invoke_handoff`` names its agent nowhere."""
    ref = getattr(handoff, "_agent_ref", None)
    target = ref() if callable(ref) else None
    if target is None:
        target = getattr(handoff, "agent", None)
    return target if hasattr(target, "model_settings") else None


RETRY_STATUSES = (408, 409, 429)
"""HTTP statuses (besides 5xx) after which the same request may succeed."""


def model_error(exc: BaseException, model: str) -> ModelError:
    """The ``ModelError`` an ``openai.APIError`` becomes (as in nbagent's other adapters, so
    ``raise_for_status`` raises one type for every model failure): its text is the model's name
    once, then the SDK's exception type and message as ``Runner.run`` raises them
    (``test-model: APIConnectionError: Connection error.``); the HTTP status, if any, is
    ``status_code``, and 408, 409, 429, 5xx and connection errors are ``retryable``."""
    from openai import APIConnectionError

    text = describe(exc)
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    retryable = isinstance(exc, APIConnectionError) or status in RETRY_STATUSES or (status or 0) >= 500
    message = text if text.startswith(f"{model}: ") else f"{model}: {text}"
    return ModelError(message, status_code=status, retryable=retryable)


def _usage_of(result: Any) -> Any:
    wrapper = getattr(result, "context_wrapper", None)
    return getattr(wrapper, "usage", None)


def _end_quietly(result: Any) -> None:
    """After an error: make sure the SDK's run task is over (it is when the SDK raised the error)."""
    task = getattr(result, "run_loop_task", None)
    if task is not None and not task.done():
        result.cancel(mode="immediate")


def _input_list(result: Any) -> list[Any]:
    try:
        return list(result.to_input_list())
    except Exception:  # no result, or one the SDK cannot turn into input (a run that failed early)
        return []
