"""Read ADK events: the pieces the live adapter and ``records_from_adk`` share.

``records_from_adk(session)`` reads a session made with ADK alone (``runner.run_async`` without
nbagent) into nbagent records, one per invocation, by feeding its events through the same
``Translator`` a live run uses, so a record read later says what a live record says (minus the
timing: a session keeps when each event happened, not how long a model took to answer).
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from nbagent import events as ev
from nbagent.records import RunRecord
from nbagent.text import safe_text

ABORTED = "INVOCATION_ABORTED"
"""The ``error_code`` of the events ADK writes to seal an aborted invocation."""


def require_adk() -> Any:
    from nbagent.adapters import require

    return require("google.adk", "adk", "Google ADK")


def is_abort_event(event: Any) -> bool:
    return getattr(event, "error_code", None) == ABORTED


def text_of(content: Any) -> str:
    """The text of a ``types.Content`` (its thoughts left out)."""
    parts = getattr(content, "parts", None) or ()
    return "".join(p.text for p in parts if getattr(p, "text", None) and not getattr(p, "thought", None))


def usage_of(usage: Any) -> tuple[int | None, int | None]:
    """(input, output) tokens of ADK's ``usage_metadata``: the prompt (its cached part included),
    and the candidates plus the thoughts (a thinking model is billed for both). ``(None, None)``
    for none."""
    if usage is None:
        return None, None
    prompt = getattr(usage, "prompt_token_count", None)
    candidates = getattr(usage, "candidates_token_count", None)
    thoughts = getattr(usage, "thoughts_token_count", None)
    if prompt is None and candidates is None and thoughts is None:
        return None, None
    out = None if candidates is None and thoughts is None else (candidates or 0) + (thoughts or 0)
    return prompt, out


def call_arguments(call: Any) -> Any:
    args = getattr(call, "args", None)
    return dict(args) if isinstance(args, dict) else args


def response_outcome(response: Any) -> tuple[ev.ToolCallStatus, Any, str | None]:
    """A ``FunctionResponse`` as (status, result, error): ADK answers a tool that failed, or a call
    it could not run, with ``{"error": ...}``; a plain result comes as ``{"result": ...}``."""
    body = getattr(response, "response", None)
    if isinstance(body, dict) and "error" in body and "result" not in body:
        return "error", None, safe_text(body["error"])
    if isinstance(body, dict) and set(body) == {"result"}:
        return "ok", body["result"], None
    return "ok", body, None


LLM_CALLS_LIMIT = "LlmCallsLimitExceededError"
"""The ``error_code`` of the event ADK writes when ``RunConfig.max_llm_calls`` is reached."""


def error_kind(event: Any) -> str:
    """The error type an error event stands for. ADK writes an event for an exception it raises
    with the exception's type name as ``error_code`` (``ValueError``, and
    ``LlmCallsLimitExceededError``: nbagent's ``MaxStepsReached``); a model's own error code
    (``LlmResponse.error_code``: ``SAFETY``, ``MAX_TOKENS``, an HTTP status) is a ``ModelError``."""
    code = str(getattr(event, "error_code", "") or "")
    if code == LLM_CALLS_LIMIT:
        return "MaxStepsReached"
    if code.isidentifier() and code[:1].isupper() and not code.isupper():
        return code
    return "ModelError"


def final_text(events: list[Any]) -> str | None:
    """The text of the last final response among ``events`` (what a plain ADK caller reads)."""
    for event in reversed(events):
        if getattr(event, "author", None) == "user" or getattr(event, "partial", None):
            continue
        if event.is_final_response() and text_of(getattr(event, "content", None)):
            return text_of(event.content)
    return None


def records_from_adk(session: Any, agent: Any = None) -> list[RunRecord]:
    """One ``RunRecord`` per invocation of an ADK ``Session`` (or a list of its events), read as
    a live nbagent run would have recorded it: a step per model reply with its usage, the tool
    calls it asked for with their results, sub-agents as node lines. An invocation ADK sealed
    after an abort is ``"interrupted"``; one that ends on an error event is ``"error"``."""
    from nbagent.adapters.adk.stream import Translator
    from nbagent.context import RunContext
    from nbagent.recorder import Recorder
    from nbagent.runtime.cancel import CancelScope

    events = list(getattr(session, "events", session) or [])
    root = getattr(agent, "name", None)
    invocations: dict[str, list[Any]] = {}
    for event in events:
        invocations.setdefault(str(getattr(event, "invocation_id", "") or ""), []).append(event)
    records = []
    for invocation_id, group in invocations.items():
        recorder = Recorder()
        t0 = time.perf_counter()
        task = next((text_of(e.content) for e in group if getattr(e, "author", None) == "user"), "")
        authors = [e.author for e in group if getattr(e, "author", None) not in (None, "user")]
        name = root or (authors[0] if authors else "adk")
        began = datetime.fromtimestamp(getattr(group[0], "timestamp", 0) or 0, timezone.utc)
        started = ev.RunStarted(invocation_id, 0, t0, safe_text(task), safe_text(name), "unknown", began)
        recorder.apply(started)
        ctx = RunContext(invocation_id, CancelScope(invocation_id), recorder.apply)
        translator = Translator(ctx, name)
        error = next((e for e in group if getattr(e, "error_code", None) and not is_abort_event(e)), None)
        aborted = any(is_abort_event(e) for e in group)
        for event in group:
            translator.event(event)
        status: ev.RunStatus = "success"
        stop_reason = None
        message = kind = None
        if aborted:
            translator.cut()
            status, stop_reason = "interrupted", "user"
        elif error is not None:
            message = f"{error.error_code}: {error.error_message or ''}".strip()
            kind = error_kind(error)
            translator.fail(message)
            status, stop_reason = (
                ("max_steps", "max_steps") if kind == "MaxStepsReached" else ("error", "error")
            )
        else:
            translator.pending("deferred", "ADK waits for this call's response")
            translator.close()
        output = final_text(group) if status == "success" else None
        end = ev.RunFinished(invocation_id, ctx.step, time.perf_counter(), status, output, message, kind)
        recorder.apply(replace(end, stop_reason=stop_reason))
        record = recorder.snapshot()
        if record is not None:
            records.append(record)
    return records
