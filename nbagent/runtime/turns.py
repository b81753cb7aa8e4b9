"""Turns: which runs of one agent may work at once, and the history a continued run picks up.

Every run joins its agent's line before its source drives it (``Run._main``); this module is the
one place that orders runs of an agent, whatever framework it comes from. The line is kept beside
the agent (by identity, never on it), used on the runner's loop only. A source says which order its
agent needs with ``takes_turns``:

- ``True`` (the native ``Agent``, smolagents): the agent keeps its memory on itself, so every run
  waits for the run before it to end, first come first served, and its memory stays a valid chat.
- ``False`` (pydantic-ai, the OpenAI Agents SDK): the agent keeps nothing between runs, so a fresh
  run needs no turn and runs at once, however many others are live. Only a run that continues
  (``reset=False``) waits, for the run it continues (``RunRecord.continues_run_id``: the agent's
  latest run when it started), and picks up the history that very run kept (``Turn.history``; a
  source keeps it with ``Turn.keep``). A run that kept none (stopped while queued, failed before
  its framework began) passes on the history it would have continued, and ends for the runs
  continuing it only once the run it waited for has ended, so a chain of continued runs never
  skips to another conversation nor starts before the history it continues is kept.

A source may also name a ``turn_key(options, reset)``: the state its runs share lives outside
the agent, under that key (a LangGraph thread in its checkpointer). Runs with a key take turns on
the line of (agent, key), first come first served, whatever ``takes_turns`` says; runs with other
keys, or none, do not wait for them.

A run that must wait is reported queued (``RunQueued``, naming the live run it waits for) and its
clock starts when its turn comes (``RunDequeued``). While queued, a Stop "now" cancels the wait
like any await, and a "Stop after step" ends it too, as a queued run has no step to finish.

Who wins a race: a run takes its place in line synchronously when it starts driving, so the order
is the order of arrival on the loop. A run that leaves the line early (stopped while queued)
passes its place on only once the run it waited for has ended, so the run behind it never
overtakes a live one, and a run joining later is told it waits for that live run.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from nbagent.errors import AgentInterrupted
from nbagent.runtime.identity_map import IdentityMap

MEMORY = 256
"""How many ended runs of one agent a line remembers (their end and kept history): a run can
only continue the agent's latest run, so a few are plenty even with many runs in flight."""


def _remember(table: OrderedDict[str, Any], run_id: str, value: Any) -> None:
    table[run_id] = value
    table.move_to_end(run_id)
    while len(table) > MEMORY:
        table.popitem(last=False)


@dataclass(frozen=True)
class _Passed:
    """What a run that kept no history left: the history of the run it continued, whenever that
    run keeps it (it may still be live when this one ends)."""

    run_id: str


@dataclass
class _Line:
    """One agent's line on one loop (a retired loop's line is dropped with it)."""

    loop: asyncio.AbstractEventLoop
    tail: asyncio.Future[None] | None = None
    """Done once the last run to join has ended (and, if it waited, every run before it)."""
    tail_run_id: str | None = None
    ends: OrderedDict[str, asyncio.Future[None]] = field(default_factory=OrderedDict)
    """Per run: done once that run has ended (what a run continuing it waits for)."""
    kept: OrderedDict[str, Any] = field(default_factory=OrderedDict)
    """Per run: the history it left for a run that continues it."""
    keyed: dict[Any, _Line] = field(default_factory=dict)
    """The lines of this agent's keys (``turn_key``), while a run of the key is live."""

    def keeper_of(self, run_id: str) -> str:
        """The run whose history ``run_id`` passes on: itself, or, through the runs that kept
        none, the run they continued (it may still be live)."""
        for _ in range(MEMORY):
            kept = self.kept.get(run_id)
            if not isinstance(kept, _Passed):
                break
            run_id = kept.run_id
        return run_id

    def history_of(self, run_id: str) -> Any:
        """The history ``run_id`` left for a run that continues it (``None`` if none)."""
        kept = self.kept.get(self.keeper_of(run_id))
        return None if isinstance(kept, _Passed) else kept


@dataclass
class Turn:
    """A run's place in its agent's line: the history it continues, and where it keeps its own."""

    line: _Line | None
    run_id: str = ""
    history: Any = field(default=None)
    """What the run it continues kept (``None`` for a fresh run, or when that run kept none)."""

    def keep(self, history: Any) -> None:
        """Keep ``history`` for a run that continues this one."""
        if self.line is not None:
            _remember(self.line.kept, self.run_id, history)


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
    """Wait for ``before`` to end; a "Stop after step" ends the wait (a queued run has no step)."""
    stop = asyncio.ensure_future(ctx.scope.after_step_requested())
    try:
        await asyncio.wait({before, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
    if not before.done():
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
async def turn(
    agent: Any, ctx: Any, *, takes_turns: bool, continues: str | None, key: Any = None
) -> AsyncIterator[Turn]:
    """Hold ``agent``'s turn for one run (see the module docstring for the order); ``continues``
    is the run a ``reset=False`` run continues (None for a fresh run); with a ``key``, the turn
    on the line of (agent, key)."""
    loop = asyncio.get_running_loop()
    line = _line_of(agent, loop)
    if line is None:
        yield Turn(None)
        return
    owner = line
    if key is not None:
        line = owner.keyed.setdefault(key, _Line(loop))
        takes_turns = True
    mine: asyncio.Future[None] = loop.create_future()
    place = Turn(owner, ctx.run_id)
    _remember(owner.ends, ctx.run_id, mine)
    if takes_turns:
        before, before_run_id = line.tail, line.tail_run_id
        line.tail, line.tail_run_id = mine, ctx.run_id
    elif continues is not None:
        before, before_run_id = owner.ends.get(continues), owner.keeper_of(continues)
    else:
        before, before_run_id = None, None
    try:
        if before is not None and not before.done():
            ctx.queued(before_run_id)
            await _wait_for(before, ctx)
            ctx.dequeued()
        if continues is not None:
            place.history = owner.history_of(continues)
        yield place
    finally:
        if ctx.run_id not in owner.kept and continues is not None:
            place.keep(_Passed(continues))  # kept nothing: pass on what it continued
        if takes_turns and before is not None and not before.done() and line.tail is mine:
            line.tail_run_id = before_run_id  # a run joining now waits, in effect, for that one
        _pass_on(mine, before)
        if key is not None:
            mine.add_done_callback(lambda _: _forget(owner, key, line))


def _forget(owner: _Line, key: Any, line: _Line) -> None:
    """Drop a key's line once its last run has ended (a new run starts a new line)."""
    if owner.keyed.get(key) is line and line.tail is not None and line.tail.done():
        del owner.keyed[key]
