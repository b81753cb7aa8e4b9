"""What a batch is made of: its tasks' states, its progress, and the interfaces of its backends.

``Backend`` is where runs happen (``nbagent.batches.local``, ``nbagent.batches.ray``; another
engine, Dask say, implements the same three calls); ``TaskRun`` is what a backend hands back for
one launched task: local ``Run`` handles and Ray's ``RemoteRun`` both are one.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from nbagent.batches.tasks import TaskItem
from nbagent.errors import StoppedByKeyboard
from nbagent.records import RunRecord

if TYPE_CHECKING:
    from nbagent.batches.handle import Batch
    from nbagent.events import Stopper
    from nbagent.runtime.cancel import InterruptMode

OLD_AFTER_STEP = "after_current"
"""What ``Batch.interrupt`` called "after step" before it took a run's own modes: still accepted,
with a ``DeprecationWarning``."""
Phase = Literal["queued", "starting", "running", "ended", "skipped", "reused"]
PHASES: tuple[Phase, ...] = ("queued", "starting", "running", "ended", "skipped", "reused")
UNFINISHED = frozenset({"interrupted", "limit", "unfinished"})
"""End states of a run cut short: the scorer is not asked about it, and its score is NA."""


class BatchStoppedByKeyboard(StoppedByKeyboard):
    """Ctrl-C (or Jupyter's interrupt) stopped a batch that a blocking call waited on; raised once
    every task has its record, so a script stops instead of going on. ``batch`` is the batch
    (``record`` is None: a batch has one per task, in ``batch.frame()``)."""

    def __init__(self, batch: Batch) -> None:
        KeyboardInterrupt.__init__(
            self, "the batch was stopped by the keyboard; its frame is this exception's .batch.frame()"
        )
        self.record = None  # type: ignore[assignment]
        self.batch = batch


class TaskRun(Protocol):
    """A launched run, local or remote: what a batch needs of it."""

    run_id: str

    def interrupt(self, mode: InterruptMode = "now", *, reason: Stopper = "user") -> bool: ...

    def live_record(self) -> RunRecord:
        """The record being built (on the runner's loop only, between events)."""
        ...

    @property
    def record(self) -> RunRecord:
        """A snapshot of the run so far, then its final record (any thread)."""
        ...

    def __await__(self) -> Generator[Any, None, RunRecord | None]:
        """The final record (``None``: a remote run that a Stop reached before it started)."""
        ...


class Backend(Protocol):
    """Where a batch's runs happen. ``open``/``close`` bracket a batch; ``launch`` builds the
    task's agent and starts its run, raising if either fails, or returns ``None`` (the task is
    skipped) when the batch was stopped while the agent was built. All three run on the runner's
    loop; a backend that calls the user's code in this process does so through
    ``batch.in_thread(what, fn, *args)`` (the batch's own threads, abandoned by Stop all)."""

    name: str

    async def open(self, batch: Batch) -> None: ...

    async def launch(self, batch: Batch, item: TaskItem) -> TaskRun | None: ...

    async def close(self, batch: Batch) -> None: ...


@dataclass(eq=False, slots=True)
class TaskState:
    """One task's place in the batch; written on the loop, read anywhere (whole-field writes).
    Slotted, as a batch of 100,000 tasks holds 100,000 of them; ``phase`` is changed only through
    ``Tally.move``, which keeps the counts the views read."""

    item: TaskItem
    phase: Phase = "queued"
    run: TaskRun | None = None
    record: RunRecord | None = None
    score: Any = None
    score_error: str | None = None
    attempts: int = 0
    """Earlier attempts found in the store."""
    started: float | None = None


@dataclass
class Progress:
    """A batch at one moment: what its views show."""

    name: str | None
    total: int
    ended: dict[str, int] = field(default_factory=dict)
    """End states of the tasks that ended in this batch (reused ones apart)."""
    reused: int = 0
    running: int = 0
    queued: int = 0
    skipped: int = 0
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    elapsed_s: float = 0.0
    eta_s: float | None = None
    state: str = "running"

    @property
    def done(self) -> int:
        """Tasks that will not run any more: ended, reused, or skipped."""
        return sum(self.ended.values()) + self.reused + self.skipped

    @property
    def ran(self) -> int:
        """Tasks with a result: ended in this batch, or reused from an earlier one."""
        return sum(self.ended.values()) + self.reused


class Tally:
    """A batch's counts, kept as its tasks change phase (on the runner's loop), so what its views
    read costs the same for ten tasks or 100,000: tasks by phase, ended tasks by end state, their
    tokens and cost, and the running tasks by position. Other threads read whole fields (a count
    may lag by one task for a moment)."""

    def __init__(self, total: int) -> None:
        self.phases: dict[str, int] = dict.fromkeys(PHASES, 0)
        self.phases["queued"] = total
        self.ended: dict[str, int] = {}
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.cost_usd: float | None = None
        self.running: dict[int, TaskState] = {}

    def move(self, state: TaskState, phase: Phase) -> None:
        old = state.phase
        if old == phase:
            return
        self.phases[old] -= 1
        self.phases[phase] += 1
        state.phase = phase
        if phase == "running":
            self.running[state.item.index] = state
        elif old == "running":
            self.running.pop(state.item.index, None)
        if phase == "ended" and state.record is not None:
            self._count(state.record)

    def skip_queued(self, states: Iterable[TaskState]) -> None:
        """Every queued task of ``states`` skipped, counted once (a Stop of 100,000 queued tasks)."""
        skipped = 0
        for state in states:
            if state.phase == "queued":
                state.phase = "skipped"
                skipped += 1
        self.phases["queued"] -= skipped
        self.phases["skipped"] += skipped

    def _count(self, record: RunRecord) -> None:
        status = str(record.status)
        self.ended[status] = self.ended.get(status, 0) + 1
        if record.input_tokens is not None:
            self.input_tokens = (self.input_tokens or 0) + record.input_tokens
        if record.output_tokens is not None:
            self.output_tokens = (self.output_tokens or 0) + record.output_tokens
        if record.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + record.cost_usd


def takes_row(factory: Callable[..., Any]) -> bool:
    """Whether ``factory`` wants the task's row: it has a positional parameter without a default
    (``make(row)``); ``demo_agent`` (all defaults) and ``lambda: ...`` are called without it."""
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        p.kind is p.VAR_POSITIONAL
        or (p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty)
        for p in parameters
    )


def check_concurrency(concurrency: int) -> int:
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be a positive int, not {concurrency!r}")
    return concurrency


def deadline_limits(limits: Any, timeout_s: float) -> Any:
    """``limits`` (None: none) with ``max_seconds`` lowered to ``timeout_s``: a batch's per-task
    timeout is a deadline of the runs' one limits mechanism. Anything but ``Limits`` is passed
    on for ``start`` to refuse."""
    from nbagent.guardrails.limits import Limits

    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
        raise ValueError(f"timeout_s must be a positive number of seconds, not {timeout_s!r}")
    if limits is None:
        return Limits(max_seconds=timeout_s)
    if not isinstance(limits, Limits) or (limits.max_seconds or math.inf) <= timeout_s:
        return limits
    return dataclasses.replace(limits, max_seconds=timeout_s)
