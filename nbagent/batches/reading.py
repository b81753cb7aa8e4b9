"""What a batch lets any thread read while it runs: a task's run and record, the progress its
views show, and the batch as DataFrames (``nbagent.batches.frames``).

The progress and the running tasks come from the batch's ``Tally`` and a task's state from a key
index, never from a walk over every task: a view refreshed ten times a second costs the same for
a batch of 100,000 tasks as for one of ten."""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING

from nbagent.batches.state import Progress, StopMode, Tally, TaskRun, TaskState
from nbagent.records import RunRecord

if TYPE_CHECKING:
    import pandas as pd


class BatchReading:
    """The readers of ``nbagent.batches.handle.Batch`` (whole-field reads of what its loop writes)."""

    name: str | None
    tasks: list[TaskState]
    _tally: Tally
    _by_key: dict[str, TaskState]
    _stop: StopMode | None
    _latest: deque[TaskState]
    _earlier: list[RunRecord]
    _session: list[RunRecord]
    _t0: float
    _ended_at: float | None

    @property
    def status(self) -> str:
        raise NotImplementedError

    def run_of(self, task: int | str) -> TaskRun | None:
        """The run handle of a task (by position or key), ``None`` if it has not started."""
        return self._state(task).run

    def _state(self, task: int | str) -> TaskState:
        if isinstance(task, int):
            return self.tasks[task]
        return self._by_key[task]

    def record_of(self, task: int | str) -> RunRecord | None:
        """A task's record: final, reused, or a snapshot of its live run; ``None`` if none."""
        state = self._state(task)
        if state.record is not None:
            return state.record
        return _snapshot(state.run) if state.run is not None else None

    def records(self) -> list[RunRecord]:
        """The latest record of every task that has one, in task order."""
        return [r for s in self.tasks if (r := s.record) is not None]

    def progress(self) -> Progress:
        t = self._tally
        phases = t.phases
        p = Progress(
            self.name,
            len(self.tasks),
            ended=dict(t.ended),
            reused=phases["reused"],
            running=phases["running"] + phases["starting"],
            queued=phases["queued"],
            skipped=phases["skipped"],
            input_tokens=t.input_tokens,
            output_tokens=t.output_tokens,
            cost_usd=t.cost_usd,
            state=self.status,
        )
        end = self._ended_at if self._ended_at is not None else time.perf_counter()
        p.elapsed_s = end - self._t0
        finished = sum(p.ended.values())
        left = p.running + p.queued
        if finished and left and self._stop is None:
            p.eta_s = p.elapsed_s / finished * left
        return p

    def running(self) -> list[TaskState]:
        """The tasks whose run is live, in the order they started."""
        return list(self._tally.running.values())

    def latest(self) -> list[TaskState]:
        """The latest ended tasks, newest first."""
        return list(reversed(self._latest))

    def frame(self) -> pd.DataFrame:
        """One row per task, in task order (``nbagent.batches.frames.batch_frame``)."""
        from nbagent.batches.frames import batch_frame

        return batch_frame(self)

    def attempts(self) -> pd.DataFrame:
        """Every attempt of every task, earlier batches of the same name (from the store)
        included, oldest first: the runs frame with ``task_key`` and ``attempt`` (1, 2, ...)."""
        from nbagent.batches.frames import attempts_frame

        return attempts_frame([*self._earlier, *self._session])

    def steps(self) -> pd.DataFrame:
        """One row per step of each task's latest attempt, with its ``task_key``."""
        from nbagent.analytics.frames import steps_frame
        from nbagent.batches.frames import keyed

        return keyed(steps_frame, self.records())

    def tool_calls(self) -> pd.DataFrame:
        """One row per tool call of each task's latest attempt, with its ``task_key``."""
        from nbagent.analytics.frames import tool_calls_frame
        from nbagent.batches.frames import keyed

        return keyed(tool_calls_frame, self.records())


def _snapshot(run: TaskRun) -> RunRecord | None:
    try:
        return run.record
    except RuntimeError:  # a remote run whose first events have not come back yet
        return None
