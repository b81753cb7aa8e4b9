"""What a fork starts from: this process's note of each run (``Kept``), what a source's
``fork_input`` is handed (``ForkOrigin``), and what a fork's ``drive`` gets (``ForkStart``).

Part of ``nbagent.forks``; imported by the runtime as every run launches, so it imports nothing
heavy. A run of this process is noted here as it launches: its agent (weakly: a fork's default
agent is the original's only while it is alive), its source's framework, and the history its
source keeps (``RunContext.conversation``) as the very objects the source has, not their JSON. A
fork in this process starts from those objects, exactly what the model was sent; a run no longer
noted (an earlier kernel, or more than ``KEPT`` runs ago) is forked from its record's
``fork_data``, the same history as JSON.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nbagent.records import RunRecord

KEPT = 1000
"""How many runs this process keeps the history objects of (as ``nbagent.history`` keeps 1000
records by default); an older run is forked from its record's JSON ``fork_data``."""


@dataclass
class Kept:
    """One run of this process, as a fork of it needs it."""

    run_id: str
    framework: str
    agent: Callable[[], Any]
    """The run's agent while it is alive (a weak reference when it can be one), else ``None``."""
    conversation: Any = None
    """The source's history objects (``RunContext.conversation``), live while the run runs."""


_kept: OrderedDict[str, Kept] = OrderedDict()
_lock = threading.Lock()


def _reference(agent: Any) -> Callable[[], Any]:
    try:
        return weakref.ref(agent)
    except TypeError:  # not weakly referenceable: kept while the note is
        return lambda: agent


def keep(run_id: str, agent: Any, framework: str) -> Kept:
    """Note a run as it launches (``nbagent.runtime.run_loop``)."""
    kept = Kept(run_id, framework, _reference(agent))
    with _lock:
        _kept[run_id] = kept
        while len(_kept) > KEPT:
            _kept.popitem(last=False)
    return kept


def kept_run(run_id: str) -> Kept | None:
    """This process's note of ``run_id`` (``None`` for a run of another process, or too old)."""
    with _lock:
        return _kept.get(run_id)


@dataclass(frozen=True)
class ForkOrigin:
    """What a source's ``fork_input`` turns into its framework's input: the conversation as the
    model saw it when step ``at_step`` of ``record`` began, and the edits to it.

    The shared part of a fork (``nbagent.forks.start``) has checked everything here: the step
    exists and has ended before ``at_step``, every ``tool_results`` id is a call of step
    ``at_step - 1``, the agent is of the record's framework. The source only builds its input.
    """

    record: RunRecord
    """The run forked (for a fork of a fork before its first step: the run that step is of)."""
    at_step: int
    point: Any
    """Step ``at_step``'s ``fork_point`` (where its request began in the history); ``None`` for
    ``at_step`` past the last step: the whole history."""
    conversation: Any
    """The source's history objects when the run was of this process, else ``None`` (use
    ``data``)."""
    data: dict[str, Any] | None
    """The record's ``fork_data`` (JSON; ``None`` while the run runs)."""
    tool_results: dict[str, Any] = field(default_factory=dict)
    """Call id of step ``at_step - 1`` → the result the model sees instead of the recorded one."""
    message: str | None = None
    """A user message added just before step ``at_step``."""

    def history(self, load: Callable[[Any], Any] | None = None) -> Any:
        """The whole history: this process's objects, else ``load(data["conversation"])`` (the
        JSON made back into the source's objects; as it is without ``load``)."""
        if self.conversation is not None:
            return self.conversation
        stored = (self.data or {}).get("conversation")
        return stored if load is None else load(stored)

    def prefix(self, load: Callable[[Any], Any] | None = None) -> list[Any]:
        """The history items the model was sent at step ``at_step`` (a new list), for a source
        whose ``fork_point`` is how many items that was."""
        items = list(self.history(load) or [])
        return items if self.point is None else items[: int(self.point)]


@dataclass(frozen=True)
class ForkStart:
    """What a fork's ``drive`` finds on ``ctx.fork``: where it comes from, and ``input``, what the
    source's ``fork_input`` made of it (its framework's input: a message list, input items...)."""

    origin: ForkOrigin
    input: Any

    @property
    def at_step(self) -> int:
        return self.origin.at_step
