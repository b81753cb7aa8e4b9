"""``AdkSource``: runs a Google ADK agent, ``Workflow``, ``App`` or ``Runner`` under nbagent.

What runs. ``nbagent.start(x, task)`` takes what ADK users build: an agent (``Agent`` /
``LlmAgent``, ``SequentialAgent``, ``ParallelAgent``, ``LoopAgent``, a custom ``BaseAgent``), a
``Workflow`` graph, an ``App``, or a ``Runner``. The run is ADK's own ``runner.run_async`` on the
runner's loop:

- a ``Runner`` (given as the agent, or as ``runner=`` beside its root agent) is used with its
  session, artifact, memory and credential services and its plugins;
- otherwise nbagent makes one runner per agent (or ``App``) as ``InMemoryRunner`` does, once,
  and keeps it beside the agent, so ``reset=False`` finds the session again.

The run gets a shallow copy of that runner whose plugin manager holds nbagent's ``Watcher`` first,
then the runner's own plugins: ADK tells it each model call, tool and agent as they begin (see
``nbagent.adapters.adk.stream``). The user's runner, app, agent and plugins are not changed.

Options: ``run_config=`` (ADK's ``RunConfig``), ``session_id=`` / ``user_id=`` (an existing session:
refused before the run when it does not exist), ``state=`` (a new session's state),
``runner=``. ``reset=False`` continues the session of the agent's previous run (its id is in
``run.result.session_id``); ``reset=True`` (the default) starts a new session, unless
``session_id=`` names one.

Stop. ``interrupt("now")`` is ADK's own abort (``run_async(abort_signal=...)``): nbagent sets the
signal and cancels ADK's iteration, which cancels the model request (an HTTP model closes its
connection) and the tool in flight, and ADK seals the invocation: every call it left unanswered
gets an "aborted" response, the call cut included. ``session.seal`` then checks the session and
answers any call still open, so the session's next turn works. A sync function tool runs in ADK's
tool thread pool under nbagent (``RunConfig.tool_thread_pool_config``, set for the run when you
did not set it; plain ADK runs it on the event loop, where nothing could stop the run): a Stop
leaves its thread to finish (the call is ``"abandoned"``). "Stop after step" lets the step end,
then aborts before the next model call.

End states. ``RunConfig.max_llm_calls`` reached (ADK's ``LlmCallsLimitExceededError``) is
``"max_steps"``; anything ADK raises ends the run ``"error"`` with ADK's exception as it raised it;
a model's reply that is an error (``LlmResponse.error_code``, which ADK ends the agent on without
raising) is a ``ModelError`` naming the code, as ``records_from_adk`` reads it from the session.

Result. ``run.result`` is an ``AdkRunResult``: the final response's text and event, and the events
this run added to the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nbagent.adapters import instance_of
from nbagent.adapters.adk.fork import AdkFork, events_json, fork_events, fork_message, fork_session
from nbagent.adapters.adk.records import final_text, require_adk, text_of
from nbagent.adapters.adk.session import chat_messages, find_session, seal
from nbagent.adapters.adk.stream import Translator
from nbagent.context import RunContext
from nbagent.errors import AgentInterrupted, MaxStepsReached, ModelError, describe
from nbagent.runtime.identity_map import IdentityMap
from nbagent.runtime.source import Source
from nbagent.text import safe_text

if TYPE_CHECKING:
    from nbagent.forks.origins import ForkOrigin

STOP_GRACE_S = 5.0
"""How long a Stop waits for ADK to unwind and seal the session before the run ends anyway."""

DEFAULT_USER = "user"

_homes = IdentityMap()
"""The user's agent / app / runner -> its ``_Home`` (the runner nbagent made, the last session)."""


@dataclass
class _Home:
    runner: Any
    last: tuple[str, str] | None = None
    """(user_id, session_id) of the newest run: what ``reset=False`` continues."""


@dataclass
class AdkRunResult:
    """What an ADK run under nbagent gives back (``run.result``)."""

    text: str | None
    """The final response's text, as a plain ``run_async`` caller reads it off the last event."""
    final_response: Any
    """That event (an ADK ``Event``), or None."""
    events: list[Any] = field(default_factory=list)
    """The events this run added to the session, in order (the user's message first)."""
    user_id: str = DEFAULT_USER
    session_id: str = ""


def is_adk_agent(obj: Any) -> bool:
    """True for an ADK agent, ``Workflow`` (any ``BaseNode``), ``App`` or ``Runner``. Never
    imports ADK: an object of it exists only once ADK is imported."""
    return (
        instance_of(obj, "google.adk.workflow._base_node", "BaseNode")
        or instance_of(obj, "google.adk.runners", "Runner")
        or instance_of(obj, "google.adk.apps.app", "App")
    )


def _root_of(obj: Any) -> Any:
    if instance_of(obj, "google.adk.runners", "Runner"):
        return obj.agent
    if instance_of(obj, "google.adk.apps.app", "App"):
        return obj.root_agent
    return obj


def _llm_agents(node: Any) -> list[Any]:
    from google.adk.agents.llm_agent import LlmAgent

    found, todo, seen = [], [node], set()
    while todo:
        item = todo.pop(0)
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, LlmAgent):
            found.append(item)
        todo.extend(getattr(item, "sub_agents", None) or ())
        graph = getattr(item, "graph", None)
        todo.extend(getattr(graph, "nodes", None) or ())
        todo.extend(getattr(item, "nodes", None) or ())
    return found


def _model_name(model: Any) -> str | None:
    if isinstance(model, str):
        return model or None
    return getattr(model, "model", None) or (type(model).__name__ if model is not None else None)


def _message(task: Any) -> Any:
    from google.genai import types

    if isinstance(task, types.Content):
        return task
    return types.Content(role="user", parts=[types.Part(text=task)])


class AdkSource(Source):
    """An nbagent source for an ADK agent, workflow, app or runner; ``nbagent.start`` makes one."""

    supports_approvals = True
    """ADK's own tool confirmation and long-running calls are decided in nbagent's approval panel
    (or ``run.approve``); ``approve=`` holds the calls it picks through the same confirmation."""

    takes_turns = False
    """ADK keeps the conversation in a session, not on the agent; a session's runs take turns
    (``turn_key``)."""

    def __init__(self, agent: Any) -> None:
        require_adk()
        if not is_adk_agent(agent):
            raise TypeError(f"not a Google ADK agent, workflow, app or runner: {type(agent).__name__}")
        self.agent = agent
        self.root = _root_of(agent)
        self.name = safe_text(getattr(self.root, "name", None) or type(self.root).__name__)

    def __repr__(self) -> str:
        return f"AdkSource({self.name})"

    framework = "adk"

    def fork_data(self, conversation: Any, options: dict[str, Any]) -> dict[str, Any] | None:
        """The session's events as ADK's JSON (``adk.fork``)."""
        return events_json(conversation)

    def fork_input(self, origin: ForkOrigin) -> AdkFork:
        """Copies of the session's events up to step ``at_step``'s request, edited; ``drive``
        puts them in a new session and runs on from them (``adk.fork``)."""
        return fork_events(origin)

    @property
    def model_name(self) -> str:
        for agent in _llm_agents(self.root):
            name = _model_name(agent.model)
            if name:
                return name
        return "unknown"

    def task_text(self, task: Any) -> str:
        """A str, or a ``google.genai.types.Content`` (its text)."""
        if isinstance(task, str):
            return task
        if type(task).__name__ in ("Content", "UserContent") and hasattr(task, "parts"):
            return text_of(task) or "(a message without text)"
        raise TypeError(f"an ADK task is a str or a google.genai.types.Content, not {type(task).__name__}")

    def turn_key(self, options: dict[str, Any], reset: bool = True) -> Hashable | None:
        """Runs on one named session take turns (a session takes one invocation at a time)."""
        session_id = options.get("session_id")
        if session_id is None:
            return None
        return ("adk", id(self._home(options.get("runner")).runner), options.get("user_id"), session_id)

    def check_run(self, options: dict[str, Any], reset: bool = True) -> None:
        """Refuse, before anything runs, what ADK would fail on later or what cannot be meant: a
        ``runner=`` over another root agent, an agent whose model is ADK's default Gemini with no
        Google credentials, ``reset=False`` with no session to continue."""
        runner = options.get("runner")
        if runner is not None:
            if not instance_of(runner, "google.adk.runners", "Runner"):
                raise TypeError(f"runner= takes an ADK Runner, not {type(runner).__name__}")
            if runner.agent is not self.root:
                raise ValueError(
                    f"runner= runs {getattr(runner.agent, 'name', runner.agent)!r}, not {self.name!r}: "
                    "pass the runner's own root agent (or the runner alone: nbagent.start(runner, task))"
                )
        self._check_models()
        if not reset and options.get("session_id") is None:
            home = _homes.get(self._owner(runner))
            if home is None or home.last is None:
                raise ValueError(
                    f"reset=False continues {self.name}'s ADK session, but it has none under nbagent "
                    "yet: run it once first, or pass session_id= (and user_id=) of an existing session"
                )

    def _check_models(self) -> None:
        from google.adk.agents.llm_agent import LlmAgent

        credentials = ("GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI")
        for agent in _llm_agents(self.root):
            if agent.model:
                continue
            ancestor, inherited = agent.parent_agent, False
            while ancestor is not None:
                if isinstance(ancestor, LlmAgent) and ancestor.model:
                    inherited = True
                ancestor = ancestor.parent_agent
            default = LlmAgent._default_model
            if inherited or not isinstance(default, str) or default != LlmAgent.DEFAULT_MODEL:
                continue
            if not any(os.environ.get(name) for name in credentials):
                raise ValueError(
                    f"ADK agent {agent.name!r} has no model (nor has any agent above it), so ADK would "
                    f"call its default {default!r} with Google credentials that are not set: give it "
                    "model=..., or call LlmAgent.set_default_model(...)"
                )

    def _owner(self, runner: Any) -> Any:
        return runner if runner is not None else self.agent

    def _home(self, runner: Any = None) -> _Home:
        owner = self._owner(runner)
        home = _homes.get(owner)
        if home is None:
            is_runner = instance_of(owner, "google.adk.runners", "Runner")
            home = _Home(owner if is_runner else _in_memory_runner(owner))
            with contextlib.suppress(TypeError):
                _homes.set(owner, home)
        return home

    async def drive(
        self,
        task: Any,
        ctx: RunContext,
        reset: bool = True,
        *,
        runner: Any = None,
        run_config: Any = None,
        session_id: str | None = None,
        user_id: str | None = None,
        state: dict[str, Any] | None = None,
    ) -> Any:
        """Run ``task`` with ``runner.run_async`` on the session the options name (see the
        module), reporting through ``ctx``; returns the final response's text."""
        from google.adk.agents.invocation_context import LlmCallsLimitExceededError

        self.check_run({"runner": runner, "session_id": session_id}, reset)
        home = self._home(runner)
        runner = home.runner
        if ctx.fork is not None:  # a new session holding the original's events up to step k
            user_id = user_id or DEFAULT_USER
            session = await fork_session(runner, user_id, state, ctx.fork.input)
            session_id = session.id
        elif session_id is not None:
            user_id = user_id or DEFAULT_USER
            session = await find_session(runner, user_id, session_id)
        elif not reset:
            kept = ctx.kept_history or home.last
            assert kept is not None  # check_run refused it
            user_id, session_id = kept
            session = await find_session(runner, user_id, session_id)
        else:
            user_id = user_id or DEFAULT_USER
            session = await runner.session_service.create_session(
                app_name=runner.app_name, user_id=user_id, state=state
            )
            session_id = session.id
        since = len(session.events)
        home.last = (user_id, session_id)
        ctx.keep_history((user_id, session_id))

        abort = asyncio.Event()
        translator = Translator(ctx, self.name)
        watcher = _watcher(translator, ctx, abort)
        mine = copy.copy(runner)
        mine.plugin_manager = _plugins_with(runner.plugin_manager, watcher)
        config = _run_config(run_config)
        message = _message(task) if ctx.fork is None else fork_message(ctx.fork.input)

        deciding = ctx.shown or ctx.approvals.policy not in (None, False)

        async def consume() -> None:
            nonlocal message
            while True:
                watcher.invocation = None  # each turn is an invocation of its own
                stream = mine.run_async(
                    user_id=user_id, session_id=session_id, new_message=message,
                    run_config=config, abort_signal=abort,
                )  # fmt: skip
                async with contextlib.aclosing(stream) as events:
                    async for event in events:
                        translator.event(event)
                waiting = translator.waiting()
                if not waiting or not deciding or translator.error_event is not None:
                    return  # nobody decides: the run ends waiting, as plain ADK's does
                message = await _decide(waiting, translator, ctx)

        inner = asyncio.ensure_future(consume())
        aborted = asyncio.ensure_future(abort.wait())
        stopped = False
        try:
            await asyncio.wait({inner, aborted}, return_when=asyncio.FIRST_COMPLETED)
            if not inner.done():  # a Stop after step: ADK aborted at the step boundary
                inner.cancel()
                await asyncio.wait({inner}, timeout=STOP_GRACE_S)
            if inner.cancelled() or abort.is_set():
                translator.cut()
                await seal(runner, user_id, session_id, since)
                raise AgentInterrupted("stopped after the step")
            exc = inner.exception()
            if exc is not None:
                raise exc
            if translator.error_event is not None:
                # the model answered with an error (``LlmResponse.error_code``) and ADK ended on it
                # without raising: the same end ``records_from_adk`` reads from the session
                event = translator.error_event
                detail = f"{event.error_code}: {event.error_message or ''}".strip()
                raise ModelError(safe_text(f"{self.model_name}: {detail}"))
            translator.pending("deferred", "ADK waits for this call's response")
            translator.close()
        except asyncio.CancelledError:
            if ctx.scope.interrupted or ctx.scope.stop_after_step:
                stopped = True
                abort.set()
                inner.cancel()
                await asyncio.wait({inner}, timeout=STOP_GRACE_S)
                translator.cut()
                await seal(runner, user_id, session_id, since)
            else:
                translator.fail("cancelled")
            raise
        except LlmCallsLimitExceededError as exc:
            translator.cut()
            raise MaxStepsReached(safe_text(exc)) from exc
        except AgentInterrupted:
            raise
        except BaseException as exc:
            translator.fail(describe(exc))
            raise
        finally:
            aborted.cancel()
            if not inner.done():
                inner.cancel()
            with contextlib.suppress(Exception):
                await self._finish(ctx, runner, user_id, session_id, since, stopped)
        return ctx.result.text if ctx.result is not None else None

    async def _finish(
        self, ctx: RunContext, runner: Any, user_id: str, session_id: str, since: int, stopped: bool
    ) -> None:
        session = await runner.session_service.get_session(
            app_name=runner.app_name, user_id=user_id, session_id=session_id
        )
        events = list(session.events[since:]) if session is not None else []
        ctx.conversation = list(session.events) if session is not None else None
        ctx.messages = chat_messages(list(session.events)) if session is not None else None
        if stopped:
            return
        final = None
        for event in reversed(events):
            if event.author != "user" and event.is_final_response() and text_of(event.content):
                final = event
                break
        ctx.set_result(AdkRunResult(final_text(events), final, events, user_id, session_id))


async def _decide(waiting: list[Any], translator: Translator, ctx: RunContext) -> Any:
    """Ask a person about every call ADK waits on (all shown before the first is awaited, so they
    are decided together), and return the message that gives ADK the decisions: the function
    responses ADK's own clients send (a ``ToolConfirmation`` for a confirmation, a status for a
    long-running call), the next turn of the same session."""
    from google.genai import types

    asked = []
    for item in waiting:
        call_id = translator.call_for(item)
        ctx.approvals.request(ctx, call_id, item.tool, item.arguments)
        asked.append((item, call_id))
    parts = []
    for item, call_id in asked:
        decision = await ctx.approvals.wait(ctx, call_id)
        if not decision.approved:
            translator.finish_call(item.adk_id, "denied", error=decision.reason or "denied")
        parts.append(item.answer(decision.approved, decision.reason))
        translator.answered(item, decision.approved)
    return types.Content(role="user", parts=parts)


def _in_memory_runner(owner: Any) -> Any:
    """A runner for an agent, workflow or app, made as ``InMemoryRunner`` makes one."""
    from google.adk.runners import InMemoryRunner

    if instance_of(owner, "google.adk.apps.app", "App"):
        return InMemoryRunner(app=owner)
    if instance_of(owner, "google.adk.agents.base_agent", "BaseAgent"):
        return InMemoryRunner(agent=owner)
    return InMemoryRunner(node=owner)


def _plugins_with(manager: Any, watcher: Any) -> Any:
    """A plugin manager for this run: nbagent's watcher, then the runner's own plugins."""
    from google.adk.plugins.plugin_manager import PluginManager

    timeout = getattr(manager, "_close_timeout", 5.0)
    return PluginManager(plugins=[watcher, *manager.plugins], close_timeout=timeout)


def _run_config(run_config: Any) -> Any:
    """The run's ``RunConfig``: the user's, with sync tools in ADK's thread pool unless they set
    how (see the module: on the loop, a sync tool would make the run unstoppable)."""
    from google.adk.agents.run_config import RunConfig, ToolThreadPoolConfig

    if run_config is None:
        run_config = RunConfig()
    elif not isinstance(run_config, RunConfig):
        raise TypeError(f"run_config must be an ADK RunConfig, not {type(run_config).__name__}")
    if run_config.tool_thread_pool_config is None:
        run_config = run_config.model_copy(update={"tool_thread_pool_config": ToolThreadPoolConfig()})
    return run_config


def _watcher(translator: Translator, ctx: RunContext, abort: asyncio.Event) -> Any:
    from nbagent.adapters.adk.stream import make_watcher

    return make_watcher(translator, ctx, abort)
