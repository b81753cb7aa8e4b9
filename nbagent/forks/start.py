"""``fork()``: start a run from step ``at_step`` of another, with edits, making no call again.

Everything a fork checks is checked here, once for every source, before anything runs (so a
refused fork writes nothing anywhere): the run exists (``nbagent.explore.lookup``: this process's
history, then the store), the step is in range and has not begun running, each ``tool_results``
id is a call of the step before, the agent is of the run's framework and its source can fork,
and the run kept the history to start from. Then the source's ``fork_input`` hook turns that
history into its framework's input, and the fork starts as any run does (``nbagent.api``): with
its view, its Stop, its limits, its store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nbagent.errors import ForkError
from nbagent.forks.origins import ForkOrigin, ForkStart, Kept, kept_run
from nbagent.records import RunRecord, StepRecord

if TYPE_CHECKING:
    from nbagent.runtime.handle import Run

__all__ = ["fork"]

_START_KEYWORDS = (
    "sinks", "store", "display", "tags", "metadata", "limits", "approve", "approval_timeout_s",
)  # fmt: skip


def fork(
    run: Any,
    at_step: int,
    *,
    agent: Any = None,
    tool_results: dict[str, Any] | None = None,
    message: str | None = None,
    **start_options: Any,
) -> Run:
    """Start a run from step ``at_step`` of ``run``: what if step ``at_step`` had gone differently?

    The fork is sent the conversation exactly as the model saw it when step ``at_step`` of
    ``run`` began (the task and steps 1..at_step-1: replies and tool results); no model call and
    no tool call of those steps is made again. Its steps are numbered from ``at_step``, so they
    line up with the original's (``nbagent.compare(run, fork)``); its record names the original
    (``forked_from_run_id``, ``forked_at_step``) and its totals are its own steps only.

    Args:
        run: a ``Run``, a ``RunRecord`` or a run id (looked up in this process's history, then in
            ``store=`` or the configured store).
        at_step: the step to make again, from 1 to the number of steps + 1 (past the last step:
            go on after it, like ``reset=False`` but from any run).
        agent: the agent that runs the fork (another model, other tools); by default the
            original's, when it is alive in this process. Same framework as the original's.
        tool_results: call id → result, in place of the results of calls of step
            ``at_step - 1``.
        message: a user message added just before step ``at_step`` (a hint, a correction).
        **start_options: as for ``nbagent.start``: ``display``, ``store``, ``limits``, ``tags``,
            ``metadata``... and the source's own options (``max_steps``).

    Raises ``ForkError`` (a ``ValueError``), before anything runs, when the run cannot be forked
    as asked; the message says why and what to do.
    """
    from nbagent import api
    from nbagent.adapters import as_source

    store = _store_of(start_options.get("store"))
    record, kept = _find(run, store)
    if isinstance(at_step, bool) or not isinstance(at_step, int):
        raise TypeError(f"at_step must be a step number (an int), not {type(at_step).__name__}")
    if message is not None and not isinstance(message, str):
        raise TypeError(f"message must be a str, not {type(message).__name__}")
    if tool_results is not None and not isinstance(tool_results, dict):
        kind = type(tool_results).__name__
        raise TypeError(f"tool_results must be a dict of call id -> result, not {kind}")
    first, last = _first_step(record), _last_step(record)
    if not 1 <= at_step <= last + 1:
        raise ForkError(
            f"at_step must be from 1 to {last + 1} for run {record.run_id} ({_steps_text(record)}; "
            f"{last + 1} goes on after the last), not {at_step}"
        )
    if at_step < first:  # a fork of a fork, before its own steps: those are its original's
        if agent is None and kept is not None:
            agent = kept.agent()
        parent = record.forked_from_run_id
        assert parent is not None
        return fork(parent, at_step, agent=agent, tool_results=tool_results, message=message, **start_options)
    step = _step_of(record, at_step)
    _check_step_began_cleanly(record, step, at_step, last)
    if tool_results:
        _check_tool_results(record, at_step, tool_results, store)
    data = record.fork_data
    framework = kept.framework if kept is not None else (data or {}).get("framework")
    conversation = kept.conversation if kept is not None else None
    if agent is None and kept is not None:
        agent = kept.agent()
    source = as_source(agent) if agent is not None else None
    if source is not None and framework is not None and source.framework != framework:
        raise ForkError(
            f"run {record.run_id} ran on {framework}: agent= must be an agent of {framework}, "
            f"not of {source.framework} ({type(agent).__name__})"
        )
    if source is not None and not source.supports_fork:  # before the history: none could help
        source.fork_input(None)  # type: ignore[arg-type]  # the source's own refusal
    if framework is None or (conversation is None and data is None):
        raise ForkError(
            f"run {record.run_id} keeps no history to fork from: its source kept none "
            "(Source.fork_data), or it was stored before nbagent kept one"
        )
    if source is None:
        raise ForkError(
            f"the agent of run {record.run_id} is not in this process (a stored run, or a deleted "
            f"agent): pass agent=, a {framework} agent to run the fork"
        )
    point = step.fork_point if step is not None else None
    if step is not None and point is None:
        raise ForkError(
            f"step {at_step} of run {record.run_id} has no fork point: its source did not mark "
            "where its model request began, so it cannot be made again"
        )
    origin = ForkOrigin(record, at_step, point, conversation, data, dict(tool_results or {}), message)
    start = ForkStart(origin, source.fork_input(origin))
    keywords: dict[str, Any] = {
        name: start_options.pop(name) for name in _START_KEYWORDS if name in start_options
    }
    keywords.setdefault("sinks", ())
    keywords.setdefault("store", None)
    keywords.setdefault("display", None)
    keywords.setdefault("tags", ())
    keywords.setdefault("metadata", None)
    return api.start_prepared(agent, record.task, reset=True, options=start_options, fork=start, **keywords)


def _store_of(store: Any) -> Any:
    if store is None:
        from nbagent.config import settings

        return settings.store
    from nbagent.analytics.store import open_store

    return open_store(store)


def _find(run: Any, store: Any) -> tuple[RunRecord, Kept | None]:
    """The record ``run`` names and this process's note of it (``None``: another process's)."""
    from nbagent.runtime.handle import Run
    from nbagent.runtime.run_loop import live_runs

    if isinstance(run, Run):
        return run.record, kept_run(run.run_id)
    if isinstance(run, RunRecord):
        return run, kept_run(run.run_id)
    if not isinstance(run, str):
        raise TypeError(f"fork a Run, a RunRecord or a run id (str), not {type(run).__name__}")
    for live in live_runs():
        if live.run_id == run:
            return live.record, kept_run(run)  # type: ignore[attr-defined]
    from nbagent.explore.lookup import find_record

    try:
        record = find_record(run, store)
    except KeyError as exc:
        raise ForkError(exc.args[0] if exc.args else f"no run {run!r}") from None
    return record, kept_run(record.run_id)


def _first_step(record: RunRecord) -> int:
    if record.steps:
        return record.steps[0].number
    return record.forked_at_step or 1


def _last_step(record: RunRecord) -> int:
    return record.steps[-1].number if record.steps else _first_step(record) - 1


def _steps_text(record: RunRecord) -> str:
    n = len(record.steps)
    text = f"{n} step{'' if n == 1 else 's'}"
    if record.forked_at_step is not None and record.steps:
        text += f", {record.steps[0].number} to {record.steps[-1].number}: a fork"
    return text


def _step_of(record: RunRecord, number: int) -> StepRecord | None:
    for step in record.steps:
        if step.number == number:
            return step
    return None


def _check_step_began_cleanly(record: RunRecord, step: StepRecord | None, at_step: int, last: int) -> None:
    """A step that is still running cannot be forked, nor can a run go on after a step that
    was cut or failed (its partial reply is no part of a conversation: fork at that step)."""
    if record.status == "running":
        running = next((s.number for s in record.steps if s.end_s is None), None)
        if step is None or step.end_s is None:
            where = f"step {running}" if running is not None else "its next step"
            raise ForkError(
                f"run {record.run_id} is still running {where}: fork it at a step that has ended "
                f"(1 to {at_step - 1}), or once it ends"
            )
        return
    if step is None and record.steps:
        end = record.steps[-1]
        if end.end_s is None or end.interrupted or end.error is not None:
            why = "was cut by a Stop" if end.interrupted or end.end_s is None else "failed"
            raise ForkError(
                f"step {last} of run {record.run_id} {why}: its reply is no part of the conversation, "
                f"so the run cannot go on after it; fork at step {last} to make it again"
            )


def _check_tool_results(record: RunRecord, at_step: int, tool_results: dict[str, Any], store: Any) -> None:
    """Every id is a call of step ``at_step - 1`` (of this run, or of the run it forks)."""
    before = _step_before(record, at_step - 1, store)
    if before is None:
        raise ForkError(
            f"tool_results= replaces results of calls of step {at_step - 1}, and run {record.run_id} "
            f"has no step {at_step - 1}: fork at a step after one that called tools"
        )
    ids = [c.call_id for c in before.tool_calls]
    unknown = [call_id for call_id in tool_results if call_id not in ids]
    if unknown:
        raise ForkError(
            f"no call {unknown[0]!r} in step {at_step - 1} of run {record.run_id}: tool_results= "
            f"replaces results of that step's calls, which are: {', '.join(map(repr, ids)) or 'none'}"
        )


def _step_before(record: RunRecord, number: int, store: Any) -> StepRecord | None:
    if number < 1:
        return None
    step = _step_of(record, number)
    if step is None and record.forked_from_run_id and number < _first_step(record):
        try:
            parent, _ = _find(record.forked_from_run_id, store)
        except ForkError:
            return None
        return _step_before(parent, number, store)
    return step
