"""The ADK session a run works in: found or made before the run, left consistent after it.

Why this matters. A model API rejects a history with a function call that has no response, so a
session with an unanswered call cannot take its next turn. ADK 2 seals an aborted invocation
itself (``run_async(abort_signal=...)``: each unanswered call gets an ``{"error": "Invocation was
aborted by client."}`` response, ``error_code="INVOCATION_ABORTED"``), and a Stop under nbagent
is that abort. ``seal`` then looks at the session again and answers, the same way, any call of
the run that is still unanswered (a runner whose sealing failed, a custom agent that wrote a call
ADK did not see), so ``reset=False`` and the user's own ``runner.run_async`` on the session work.
"""

from __future__ import annotations

from typing import Any

from nbagent.adapters.adk.records import ABORTED

ABORT_MESSAGE = "Invocation was aborted by client."
"""The text ADK itself answers an aborted call with (the model sees the same either way)."""


async def find_session(runner: Any, user_id: str, session_id: str) -> Any:
    """The session, or a ``ValueError`` that names what was looked for (before anything runs)."""
    session = await runner.session_service.get_session(
        app_name=runner.app_name, user_id=user_id, session_id=session_id
    )
    if session is None:
        raise ValueError(
            f"ADK has no session {session_id!r} for user {user_id!r} in app {runner.app_name!r}: "
            "create it with runner.session_service.create_session(...) first, or leave session_id "
            "out for a new one"
        )
    return session


def unanswered(events: list[Any], invocations: set[str]) -> list[tuple[Any, list[Any]]]:
    """The function calls of ``invocations`` no event answers, grouped by the event that made
    them: ``[(event, [call, ...]), ...]``."""
    answered = {r.id for e in events for r in e.get_function_responses() if r.id}
    found = []
    for event in events:
        if event.invocation_id not in invocations:
            continue
        calls = [c for c in event.get_function_calls() if c.id and c.id not in answered]
        if calls:
            found.append((event, calls))
    return found


async def seal(runner: Any, user_id: str, session_id: str, since: int) -> int:
    """Answer every call the run (the session's events from index ``since`` on) left unanswered,
    as ADK answers an aborted call; returns how many it answered."""
    from google.adk.events.event import Event
    from google.genai import types

    session = await runner.session_service.get_session(
        app_name=runner.app_name, user_id=user_id, session_id=session_id
    )
    if session is None:
        return 0
    mine = {e.invocation_id for e in session.events[since:] if e.invocation_id}
    count = 0
    for event, calls in unanswered(session.events, mine):
        parts = [
            types.Part(
                function_response=types.FunctionResponse(
                    id=call.id, name=call.name, response={"error": ABORT_MESSAGE}
                )
            )
            for call in calls
        ]
        sealing = Event(
            invocation_id=event.invocation_id,
            author=event.author,
            branch=event.branch,
            content=types.Content(role="user", parts=parts),
            error_code=ABORTED,
            error_message=ABORT_MESSAGE,
        )
        await runner.session_service.append_event(session=session, event=sealing)
        count += len(calls)
    return count


def chat_messages(events: list[Any]) -> list[dict[str, Any]]:
    """A session's events as the chat messages a record keeps (text, calls and their results)."""
    from nbagent.adapters.adk.records import text_of

    messages: list[dict[str, Any]] = []
    for event in events:
        if getattr(event, "partial", None):
            continue
        text = text_of(getattr(event, "content", None))
        role = "user" if event.author == "user" else "assistant"
        calls = event.get_function_calls()
        responses = event.get_function_responses()
        if responses:
            for r in responses:
                messages.append({"role": "tool", "tool_call_id": r.id, "name": r.name, "content": r.response})
            continue
        message: dict[str, Any] = {"role": role, "content": text}
        if role == "assistant":
            message["name"] = event.author
        if calls:
            message["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.args} for c in calls]
        if text or calls:
            messages.append(message)
    return messages
