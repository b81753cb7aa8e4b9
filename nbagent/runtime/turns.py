"""Turns: which runs of one agent may work at once, and the history a continued run picks up.

Every run joins its agent's line before its source drives it (``Run._main``); this module is the
one place that orders runs of an agent, whatever framework it comes from. The line is a slot kept
beside the agent (by identity, never on it), used on the runner's loop only. A source says which
order its agent needs with ``takes_turns``:

- ``True`` (the native ``Agent``, smolagents): the agent keeps its memory on itself, so every run
  waits for the run before it to end, first come first served, and its memory stays a valid chat.
- ``False`` (pydantic-ai, the OpenAI Agents SDK): the agent keeps nothing between runs, so a fresh
  run needs no turn and runs at once, however many others are live. Only a run that continues
  (``reset=False``) waits, for the run started just before it, and picks up the history that run
  kept (``Turn.history``; the source keeps it with ``Turn.keep``).

A run that must wait is reported queued (``RunQueued``, naming the run it waits for) and its clock
starts when its turn comes (``RunDequeued``). While queued, a Stop "now" cancels the wait like any
await, and a "Stop after step" ends it too, as a queued run has no step to finish.

Who wins a race: a run takes its place in line synchronously when it starts driving, so the order
is the order of arrival on the loop. A run that leaves the line early (stopped while queued)
passes its place on only once the run it waited for has ended, so the run behind it never
overtakes a live one. History kept by a run that started earlier never replaces history kept by
one that started later (concurrent fresh runs of a stateless agent may end in any order).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from nbagent.errors import AgentInterrupted
from nbagent.runtime.identity_map import IdentityMap

TURN_POLL_S = 0.05
"""How often a queued run looks for an ``interrupt("after_step")`` while it waits for its turn."""


@dataclass
class _Line:
    """One agent's line on one loop (a retired loop's line is dropped with it)."""

    loop: asyncio.AbstractEventLoop
    tail: asyncio.Future[None] | None = None
    """Done once the last run to join has ended (and, if it waited, every run before it)."""
    tail_run_id: str | None = None
    arrivals: int = 0
    history: Any = None
    history_from: int = 0
    """The arrival number of the run that kept ``history`` (0: none yet)."""


@dataclass
class Turn:
    """A run's place in its agent's line: the history it continues, and where it keeps its own."""

    line: _Line | None
    arrival: int = 0
    history: Any = field(default=None)
    """What the agent's previous run kept, for a run that continues (``None`` for a fresh run)."""

    def keep(self, history: Any) -> None:
        """Keep ``history`` for the agent's next continued run, unless a later run kept one."""
        line = self.line
        if line is not None and self.arrival >= line.history_from:
            line.history, line.history_from = history, self.arrival


_lines = IdentityMap()


def _line_of(agent: Any, loop: asyncio.AbstractEventLoop) -> _Line | None:
    line = _lines.get(agent)
    if line is None or line.loop is not loop:
        line = _Line(loop)
        try:
            _lines.set(agent, line)
        except TypeError:  # not weakly referenceable: its runs are not ordered and keep no history
            return None
    return line


async def _wait_for(before: asyncio.Future[None], ctx: Any) -> None:
    while not (await asyncio.wait({before}, timeout=TURN_POLL_S))[0]:
        if ctx.scope.stop_after_step:
            raise AgentInterrupted("stopped before its turn came")


def _pass_on(mine: asyncio.Future[None], before: asyncio.Future[None] | None) -> None:
    """End ``mine`` now, or once ``before`` ends if this run was in line behind it."""

    def done(_: object = None) -> None:
        if not mine.done():
            mine.set_result(None)

    if before is None or before.done():
        done()
    else:
        before.add_done_callback(done)


@contextlib.asynccontextmanager
async def turn(agent: Any, ctx: Any, *, takes_turns: bool, continuing: bool) -> AsyncIterator[Turn]:
    """Hold ``agent``'s turn for one run (see the module docstring for the order)."""
    loop = asyncio.get_running_loop()
    line = _line_of(agent, loop)
    if line is None:
        yield Turn(None)
        return
    before, before_run_id = line.tail, line.tail_run_id
    mine: asyncio.Future[None] = loop.create_future()
    line.tail, line.tail_run_id = mine, ctx.run_id
    line.arrivals += 1
    place = Turn(line, line.arrivals)
    waits = takes_turns or continuing
    try:
        if waits and before is not None and not before.done():
            ctx.queued(before_run_id)
            await _wait_for(before, ctx)
            ctx.dequeued()
        if continuing:
            place.history = line.history
        yield place
    finally:
        _pass_on(mine, before if waits else None)
