"""Forks of ADK runs: a new session holding the original session's events up to a step's request.

Part of the ADK adapter (``adk.source``). ADK makes every model request of a session's events, so a
run's history is its session's events, and step k's request is made of the events there were when
ADK asked the model (``fork_point``: how many, read in nbagent's plugin as the request goes). A
fork gets a session of its own (the original's is left as it was), holding copies of those
events, appended through the runner's session service as ADK appends its own (their state deltas
apply again); then ``run_async`` without a new message goes on from them, as plain ADK does over
such a session. A ``message=`` is the fork's ``new_message``. The events are kept as ADK's own
JSON (``Event.model_dump``), so a stored run forks in a new process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nbagent.errors import ForkError

if TYPE_CHECKING:
    from nbagent.forks.origins import ForkOrigin


@dataclass(frozen=True)
class AdkFork:
    """A fork's start (``ctx.fork.input``): the events its new session holds, and the message
    ``run_async`` is given (``None``: none, ADK goes on from the events)."""

    events: list[Any]
    message: str | None


def events_json(events: Any) -> dict[str, Any] | None:
    """``fork_data``: a session's events as ADK's JSON."""
    if events is None:
        return None
    return {"conversation": [e.model_dump(mode="json", exclude_none=True) for e in list(events)]}


def _events(items: Any) -> list[Any]:
    from google.adk.events.event import Event

    return [Event.model_validate(item) for item in items or []]


def fork_events(origin: ForkOrigin) -> AdkFork:
    """Copies of the session's events up to step ``at_step``'s request, step ``at_step - 1``'s
    function responses replaced by ``tool_results`` (a record names a call ``"<step>:<ADK id>"``)."""
    events = [e.model_copy(deep=True) for e in origin.prefix(_events)]
    edits = {key.partition(":")[2]: value for key, value in origin.tool_results.items()}
    for event in reversed(events):
        if not edits:
            break
        for part in (event.content.parts or []) if event.content is not None else []:
            response = part.function_response
            if response is not None and response.id in edits:
                value = edits.pop(response.id)
                response.response = value if isinstance(value, dict) else {"result": value}
    if edits:
        raise ForkError(
            f"run {origin.record.run_id} has no function response of {', '.join(sorted(edits))} in its "
            f"ADK session before step {origin.at_step}"
        )
    return AdkFork(events, origin.message)


async def fork_session(runner: Any, user_id: str, state: dict[str, Any] | None, fork: AdkFork) -> Any:
    """A new session of ``runner`` holding the fork's events, appended as ADK appends events."""
    session = await runner.session_service.create_session(
        app_name=runner.app_name, user_id=user_id, state=state
    )
    for event in fork.events:
        await runner.session_service.append_event(session=session, event=event.model_copy(deep=True))
    return session


def fork_message(fork: AdkFork) -> Any:
    """The fork's ``new_message``: its ``message=``, or none."""
    if fork.message is None:
        return None
    from google.genai import types

    return types.Content(role="user", parts=[types.Part(text=fork.message)])
