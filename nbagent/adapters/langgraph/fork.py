"""Forking a LangGraph run (``nbagent.fork``): from a checkpoint on a thread of its own, or from
the message prefix of a graph without a checkpointer.

A graph with a checkpointer forks from the checkpoint taken before step ``k``'s model node (the
step's ``fork_point`` names it; the thread is the record's ``fork_data["thread_id"]``). That
checkpoint is *copied* to the fork's own thread, so the original thread is left as it was (its
head does not move to a new branch, as LangGraph's own replay on the same thread would). An edited
tool result and an added message are written into the copy's ``messages`` channel before the fork
runs, so no node runs to apply them, then the fork goes on from the copy as
``graph.astream(None, config)`` does: the model node runs with exactly that state. Past the last
step the thread's latest checkpoint is copied and the message is the new input, as ``reset=False``.
A stored run forks in another process when its checkpointer is durable (an ``AsyncSqliteSaver``
on the same file); whether the checkpoint is there is asked before the fork runs.

A graph without a checkpointer whose state has ``messages`` forks from the messages the model saw
(the step's ``fork_point`` says how many): they are the fork's input. Any other graph without a
checkpointer keeps nothing a fork could start from: a clear ``ForkError``.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any

from nbagent.adapters.langgraph.records import messages_of
from nbagent.errors import ForkError
from nbagent.text import observation

if TYPE_CHECKING:
    from nbagent.forks.origins import ForkOrigin


def has_checkpointer(graph: Any) -> bool:
    saver = getattr(graph, "checkpointer", None)
    return saver is not None and not isinstance(saver, bool)


def fork_data(conversation: Any) -> dict[str, Any]:
    """The run's thread and its messages (LangChain's own dicts) as JSON for the record."""
    from langchain_core.messages import messages_to_dict

    messages = [m for m in conversation.get("messages") or () if hasattr(m, "type")]
    return {"thread_id": conversation.get("thread_id"), "conversation": messages_to_dict(messages)}


def fork_plan(graph: Any, name: str, origin: ForkOrigin) -> dict[str, Any]:
    """What the fork's ``drive`` does (``LangGraphSource.fork_input``); checked now, before it runs."""
    held = origin.conversation or {}
    data = origin.data or {}
    thread = held.get("thread_id") or data.get("thread_id")
    point = origin.point if isinstance(origin.point, dict) else {}
    edits = dict(origin.tool_results)
    run = origin.record.run_id
    if has_checkpointer(graph) and thread is not None:
        checkpoint = point.get("checkpoint_id")
        if origin.point is not None and checkpoint is None:
            raise ForkError(f"step {origin.at_step} of run {run} has no checkpoint before it to fork from")
        _check_checkpoint(graph, str(thread), checkpoint, run)
        return {"mode": "checkpoint", "thread_id": str(thread), "checkpoint_id": checkpoint,
                "edits": edits, "message": origin.message}  # fmt: skip
    if "messages" not in getattr(graph, "channels", {}):
        raise ForkError(
            f"{name} has no checkpointer and its state is not a list of messages, so run {run} kept "
            "nothing to fork from: compile it with a checkpointer (a SqliteSaver keeps runs across "
            "kernels) to fork its runs"
        )
    if held.get("messages"):
        messages = list(held["messages"])
    else:
        from langchain_core.messages import messages_from_dict

        messages = messages_from_dict(data.get("conversation") or [])
    if origin.point is not None:
        if point.get("messages") is None:
            raise ForkError(f"step {origin.at_step} of run {run} has no message count to fork from")
        messages = messages[: int(point["messages"])]
    return {"mode": "messages", "messages": edited(messages, edits, origin.message)}


def edited(messages: list[Any], edits: dict[str, Any], message: str | None) -> list[Any]:
    """``messages`` with the results of the edited calls replaced and ``message`` added."""
    out = []
    for m in messages:
        call_id = getattr(m, "tool_call_id", None)
        if getattr(m, "type", None) == "tool" and call_id in edits:
            m = m.model_copy(update={"content": observation(edits[call_id])})
        out.append(m)
    if message is not None:
        from langchain_core.messages import HumanMessage

        out.append(HumanMessage(message))
    return out


def _source_config(thread: str, checkpoint: str | None) -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint is not None:
        configurable["checkpoint_id"] = checkpoint
    return {"configurable": configurable}


def _check_checkpoint(graph: Any, thread: str, checkpoint: str | None, run: str) -> None:
    """Refuse now a fork whose checkpoint the graph's checkpointer does not have (an in-memory
    saver in a new kernel): asked on the runner's loop, where the graph's runs use the saver."""
    from nbagent.runtime.loop import runner_loop

    loop = runner_loop()
    if getattr(loop, "_thread_id", None) == threading.get_ident():
        return  # fork() called from the loop itself (a tool): checked as the fork runs
    found = asyncio.run_coroutine_threadsafe(
        graph.checkpointer.aget_tuple(_source_config(thread, checkpoint)), loop
    ).result(timeout=30)
    if found is None:
        raise ForkError(_missing(thread, checkpoint, run))


def _missing(thread: str, checkpoint: str | None, run: str) -> str:
    what = f"checkpoint {checkpoint} of thread {thread!r}" if checkpoint else f"thread {thread!r}"
    return (
        f"the graph's checkpointer has no {what} (run {run}): a run forks from the checkpointer "
        "that kept it; a stored run of another kernel needs a durable one (AsyncSqliteSaver on the "
        "same file), not an InMemorySaver"
    )


async def copy_to_thread(graph: Any, plan: dict[str, Any], config: dict[str, Any]) -> Any:
    """Copy the plan's checkpoint to the fork's thread (``config``), edits written into it; the
    fork's input: ``None`` (go on from the copy), or the message as new input past the end."""
    from langgraph.checkpoint.base import copy_checkpoint

    saver = graph.checkpointer
    saved = await saver.aget_tuple(_source_config(plan["thread_id"], plan["checkpoint_id"]))
    if saved is None:
        raise ForkError(_missing(plan["thread_id"], plan["checkpoint_id"], "forked"))
    checkpoint = copy_checkpoint(saved.checkpoint)
    at_end = plan["checkpoint_id"] is None
    if plan["edits"] or (plan["message"] is not None and not at_end):
        values = checkpoint["channel_values"]
        values["messages"] = edited(messages_of(values), plan["edits"], None if at_end else plan["message"])
    thread = config["configurable"]["thread_id"]
    target = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    await saver.aput(target, checkpoint, saved.metadata, dict(checkpoint["channel_versions"]))
    if at_end and plan["message"] is not None:
        return {"messages": [{"role": "user", "content": plan["message"]}]}
    return None
