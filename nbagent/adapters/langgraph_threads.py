"""Before a run sends a new input to a thread that has state: make sure a model can go on with it.

LangGraph starts a new input from ``START`` and drops what the thread's last checkpoint had
pending. Two pending things would leave the thread in a state a model API refuses:

- **A pause at ``interrupt()``** (a question, or ``HumanInTheLoopMiddleware``'s review of a tool
  call, left open by a Stop, a timeout or ``interrupts="end"``). A new message cannot answer it,
  and dropping it would leave the reviewed tool call unanswered. The run is refused with the
  reason and the two ways on: ``Command(resume=...)`` answers it, ``None`` asks again in the view.
- **Tool calls without an answer** (a Stop while the tools ran: the checkpoint is the one before
  the tool node, the model's ``AIMessage`` asks for calls no ``ToolMessage`` answers). OpenAI-style
  APIs reject such a history (HTTP 400). A Stop means "do not finish this", so each cut call is
  answered with a ``ToolMessage`` (``status="error"``) saying it was interrupted, written with the
  graph's own ``aupdate_state`` (as the pending node), so the thread stays a valid LangGraph
  thread. To run the cut tools again instead, go on with ``None``: LangGraph's own resume re-runs
  the pending super-step.

Inputs that resume (``None``, a ``Command``) go to LangGraph as they are: they continue the pause.
"""

from __future__ import annotations

from typing import Any

from nbagent.adapters.langgraph_records import message_type, messages_of
from nbagent.errors import NbagentError
from nbagent.text import safe_text, shorten

INTERRUPTED_OUTPUT = "interrupted: the run was stopped before this call returned"
"""What the model sees for a tool call a Stop cut (the same words as the Agents SDK adapter)."""


class ThreadPausedError(NbagentError, ValueError):
    """A new input for a thread that waits for the answer to an ``interrupt()``."""


def resumes(task: Any) -> bool:
    """True for an input that continues a thread where it is (``None``, a ``Command``)."""
    return task is None or type(task).__name__ == "Command"


def unanswered_calls(messages: list[Any]) -> list[tuple[str, str]]:
    """(id, tool) of the calls of the newest model reply that no tool message answers."""
    for index in range(len(messages) - 1, -1, -1):
        if message_type(messages[index]) == "ai":
            answered = {
                getattr(m, "tool_call_id", None) for m in messages[index + 1 :] if message_type(m) == "tool"
            }
            calls = getattr(messages[index], "tool_calls", None) or []
            return [(c["id"], c["name"]) for c in calls if c.get("id") and c["id"] not in answered]
    return []


async def prepare_thread(graph: Any, config: dict[str, Any], name: str) -> list[str]:
    """Check the thread ``config`` names before a new input: refuse a paused thread
    (``ThreadPausedError``), answer the calls a Stop cut. Returns the ids of the calls answered."""
    state = await graph.aget_state(config)
    pending = list(state.interrupts or ()) or [i for t in state.tasks for i in t.interrupts]
    if pending:
        asked = "; ".join(shorten(safe_text(getattr(i, "value", i)), 200) for i in pending)
        thread = (config.get("configurable") or {}).get("thread_id")
        raise ThreadPausedError(
            f"thread {thread!r} of {name} is paused at an interrupt ({asked}); a new input cannot "
            "answer it. Answer it with nbagent.start(graph, Command(resume=...), reset=False, "
            "config=...), or pass None as the task to be asked again in the view"
        )
    cut = unanswered_calls(messages_of(state.values))
    if not cut:
        return []
    from langchain_core.messages import ToolMessage

    answers = [
        ToolMessage(content=INTERRUPTED_OUTPUT, tool_call_id=call_id, name=tool, status="error")
        for call_id, tool in cut
    ]
    nodes = set(state.next)
    as_node = nodes.pop() if len(nodes) == 1 else None
    await graph.aupdate_state(config, {"messages": answers}, as_node=as_node)
    return [call_id for call_id, _tool in cut]
