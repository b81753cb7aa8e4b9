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
  thread; the calls of the same super-step that finished before the Stop keep their real
  answers. A graph that ended (nothing pending) is left as it is, even when its last reply asks
  for calls: nobody stopped it. To run the cut tools again instead, go on with ``None``:
  LangGraph's own resume re-runs the pending super-step, and that run records those calls.

Inputs that resume (``None``, a ``Command``) go to LangGraph as they are: they continue the pause.
"""

from __future__ import annotations

from typing import Any

from nbagent.adapters.langgraph.records import message_type, messages_of
from nbagent.errors import NbagentError
from nbagent.text import safe_text, shorten

INTERRUPTED_OUTPUT = "interrupted: the run was stopped before this call returned"
"""What the model sees for a tool call a Stop cut (the same words as the Agents SDK adapter)."""


class ThreadPausedError(NbagentError, ValueError):
    """A new input for a thread that waits for the answer to an ``interrupt()``."""


def resumes(task: Any) -> bool:
    """True for an input that continues a thread where it is (``None``, a ``Command``)."""
    return task is None or type(task).__name__ == "Command"


def unanswered_calls(messages: list[Any]) -> list[dict[str, Any]]:
    """The tool calls of the newest model reply that no tool message answers."""
    for index in range(len(messages) - 1, -1, -1):
        if message_type(messages[index]) == "ai":
            answered = {
                getattr(m, "tool_call_id", None) for m in messages[index + 1 :] if message_type(m) == "tool"
            }
            calls = getattr(messages[index], "tool_calls", None) or []
            return [c for c in calls if c.get("id") and c["id"] not in answered]
    return []


def finished_answers(state: Any) -> list[Any]:
    """The tool messages of the pending super-step's tasks that finished before a Stop cut the
    others: LangGraph keeps them as pending writes, not yet in the state's ``messages``."""
    answers = []
    for task in state.tasks:
        if task.error is None and task.result is not None:
            answers += [m for m in messages_of(task.result) if message_type(m) == "tool"]
    return answers


def pending_calls(state: Any) -> list[dict[str, Any]]:
    """The model's calls the thread still has to run: unanswered, in a graph that has not ended
    (an extraction graph may end on a reply whose calls nothing runs), and not answered by a
    task that finished before a Stop."""
    if not state.next:
        return []
    done = {getattr(m, "tool_call_id", None) for m in finished_answers(state)}
    return [c for c in unanswered_calls(messages_of(state.values)) if c["id"] not in done]


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
    cut = pending_calls(state)
    if not cut:
        return []
    from langchain_core.messages import ToolMessage

    # One update for the whole super-step: it replaces its pending writes, so the answers of the
    # calls that finished go in with the "interrupted" answers of the calls the Stop cut.
    answers = finished_answers(state) + [
        ToolMessage(content=INTERRUPTED_OUTPUT, tool_call_id=c["id"], name=c["name"], status="error")
        for c in cut
    ]
    order = {c["id"]: i for i, c in enumerate(unanswered_calls(messages_of(state.values)))}
    answers.sort(key=lambda m: order.get(m.tool_call_id, len(order)))
    nodes = set(state.next)
    as_node = nodes.pop() if len(nodes) == 1 else None
    await graph.aupdate_state(config, {"messages": answers}, as_node=as_node)
    return [c["id"] for c in cut]
