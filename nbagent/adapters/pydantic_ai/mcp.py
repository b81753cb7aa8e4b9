"""A pydantic-ai agent's MCP toolsets under nbagent: entered on nbagent's loop, by the run.

Why. An MCP session belongs to the event loop that opened it. A toolset entered with
``async with toolset:`` in a notebook cell runs its session on the kernel's loop; pydantic-ai only
counts a second entry, so a run under nbagent (on nbagent's loop) used that session and waited
forever for the tool list (the run hung until Stop).

What nbagent does. ``start`` refuses an agent whose MCP toolset is running already, in one
sentence saying to pass it without entering it (``refusal``). A toolset that is not running is
entered by ``agent.iter`` itself, on nbagent's loop, for the run, and a Stop cancels its calls as
pydantic-ai's own cancel does. That is pydantic-ai's behaviour: nbagent changes nothing there.
"""

from __future__ import annotations

from typing import Any


def toolsets_of(agent: Any, extra: Any = ()) -> list[Any]:
    """The toolsets of ``agent`` (and ``extra``, a run's ``toolsets=``), wrappers unwrapped."""
    found: list[Any] = []
    todo = [*(getattr(agent, "toolsets", None) or ()), *(extra or ())]
    while todo:
        toolset = todo.pop()
        if any(toolset is known for known in found):
            continue
        found.append(toolset)
        wrapped = getattr(toolset, "wrapped", None)
        if wrapped is not None:
            todo.append(wrapped)
        todo.extend(getattr(toolset, "toolsets", None) or ())
    return found


def refusal(agent: Any, options: dict[str, Any]) -> str | None:
    """Why a run of ``agent`` cannot work (an MCP toolset running on another loop), or ``None``."""
    from pydantic_ai.mcp import MCPToolset

    for toolset in toolsets_of(agent, options.get("toolsets")):
        if isinstance(toolset, MCPToolset) and toolset.is_running:
            name = toolset.id or type(toolset).__name__
            return (
                f"the MCP toolset {name!r} is running on another event loop (entered with async with "
                "in a cell), which nbagent's loop cannot use: pass it without entering it (leave "
                "the async with first) and pydantic-ai enters it on nbagent's loop for each run"
            )
    return None
