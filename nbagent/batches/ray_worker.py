"""The worker side of the Ray backend: the actor that runs a batch's tasks in a Ray worker process.

Part of ``nbagent.batches.ray`` (which explains the design). A task's stream opens with
``("accepted", None)`` and the worker then waits for the notebook's ``go``: so a task the
notebook never saw accepted never started, and when its worker is lost the notebook may give it
to another worker without running anything twice. Then ``("events", [...])`` chunks, or
``("failed", (text, type))`` when the factory or ``start`` failed, or ``("skipped", None)`` when
a Stop came first.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import threading
from dataclasses import fields, replace
from typing import TYPE_CHECKING, Any

from nbagent import events as ev
from nbagent.batches.guards import AgentClaims
from nbagent.errors import describe
from nbagent.records import RunRecord
from nbagent.text import safe_text

if TYPE_CHECKING:
    from nbagent.batches.tasks import TaskItem

CHUNK_S = 0.05
"""How long events wait in a worker before they are sent to the notebook, at most."""


def _shippable(event: ev.RunEvent) -> ev.RunEvent:
    """``event`` as something pickle takes: values that refuse become their text."""
    try:
        pickle.dumps(event)
        return event
    except Exception:
        changes = {}
        for f in fields(event):
            value = getattr(event, f.name)
            try:
                pickle.dumps(value)
            except Exception:
                changes[f.name] = safe_text(value)
        return replace(event, **changes)


class BatchWorker:
    """Runs tasks in a Ray worker process (an async actor: ``interrupt``, ``go`` and ``decide``
    are served while runs go)."""

    def __init__(self, factory: Any, takes_row: bool) -> None:
        self.factory = factory
        self.takes_row = takes_row
        self.runs: dict[str, Any] = {}
        self.stops: dict[str, tuple[str, str]] = {}
        self.gates: dict[str, asyncio.Event] = {}
        self.agents = AgentClaims()

    def pid(self) -> int:
        return os.getpid()

    def go(self, token: str) -> None:
        """The notebook saw the task accepted: it may start (sent only after ``accepted``, so
        the task's gate is there unless a Stop ended the task first)."""
        gate = self.gates.get(token)
        if gate is not None:
            gate.set()

    def interrupt(self, token: str, mode: str, reason: str) -> bool:
        run = self.runs.get(token)
        if run is None:
            self.stops.setdefault(token, (mode, reason))  # it has not started here yet
            gate = self.gates.get(token)
            if gate is not None:
                gate.set()
            return False
        return run.interrupt(mode, reason=reason)

    def decide(self, token: str, call_id: str, decision: str, reason: str | None) -> bool:
        """A person's decision on a pending tool call of the run ``token``, from the notebook."""
        run = self.runs.get(token)
        return run is not None and run.approvals.decide(call_id, decision, reason)

    async def run(
        self, token: str, item: TaskItem, tags: list[str], metadata: dict[str, Any], options: dict[str, Any]
    ):
        gate = self.gates.setdefault(token, asyncio.Event())
        try:
            yield ("accepted", None)
            await gate.wait()
        finally:
            self.gates.pop(token, None)
        if token in self.stops:
            self.stops.pop(token, None)
            yield ("skipped", None)
            return
        async for item_out in self._run(token, item, tags, metadata, options):
            yield item_out

    async def _run(
        self, token: str, item: TaskItem, tags: list[str], metadata: dict[str, Any], options: dict[str, Any]
    ):
        from nbagent.api import start

        try:
            row = dict(item.row)
            agent = await asyncio.to_thread(lambda: self.factory(row) if self.takes_row else self.factory())
            if agent is None:
                raise TypeError("the agent factory returned None; it must return an agent")
            self.agents.claim(agent, item.key)  # two live runs of this worker on one agent
        except Exception as exc:
            yield ("failed", (describe(exc), type(exc).__name__))
            return
        buffer: list[ev.RunEvent] = []
        lock = threading.Lock()

        def sink(event: ev.RunEvent) -> None:
            with lock:
                buffer.append(event)

        if token in self.stops:
            self.agents.release(item.key)
            yield ("skipped", None)
            return
        try:
            run = start(
                agent, item.task, sinks=[sink], display=False, tags=tags, metadata=metadata, **options
            )
        except Exception as exc:
            self.agents.release(item.key)
            yield ("failed", (describe(exc), type(exc).__name__))
            return
        self.runs[token] = run
        if token in self.stops:
            mode, reason = self.stops.pop(token)
            run.interrupt(mode, reason=reason)
        try:
            waiter = asyncio.ensure_future(_wait(run))
            while True:
                finished, _ = await asyncio.wait({waiter}, timeout=CHUNK_S)
                with lock:
                    chunk, buffer[:] = list(buffer), []
                if chunk:
                    yield ("events", [_shippable(e) for e in chunk])
                if finished:
                    with lock:
                        rest = list(buffer)
                    if rest:
                        yield ("events", [_shippable(e) for e in rest])
                    return
        finally:
            self.runs.pop(token, None)
            self.stops.pop(token, None)
            self.agents.release(item.key)


async def _wait(run: Any) -> RunRecord:
    return await run
