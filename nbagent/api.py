"""The public calls (``start``, ``run``, ``interrupt_all``, ``configure``): the thin
layer on top that composes the runtime, the views, the store and the adapters, as httpx's ``_api``
sits on its client.

Every run is a task on one private event loop on a daemon thread (``nbagent.runtime``). Nothing is
patched: the user's loop (Jupyter's, or none in a script) only ever waits on a
``concurrent.futures.Future``. So ``start()`` returns at once and the kernel stays idle, which is
what lets a Stop click reach it (see docs/architecture.md); ``run()`` blocks in short slices so
Jupyter's interrupt (``KeyboardInterrupt`` in the main thread) becomes an interrupt of the run;
``record = await start(...)`` waits without blocking the kernel, and cancelling it stops the run
(``arun`` was that under another name: it still works, with a ``DeprecationWarning``).

Here, and only here, an agent becomes a source (``nbagent.adapters.as_source``), a run gets its
store's sink and its view (``nbagent.view.display``), and the script-exit behaviour is installed.
The runtime below knows none of them: it talks to sinks through the sink interface only.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from nbagent import records
from nbagent.adapters import as_source
from nbagent.config import UNCHANGED, Settings, settings
from nbagent.guardrails.approvals import ApprovalPolicy, check_approval_timeout
from nbagent.guardrails.limits import Limits
from nbagent.records import RunRecord
from nbagent.runtime.cancel import InterruptMode
from nbagent.runtime.handle import Run, Sink, displays, live_runs
from nbagent.runtime.interrupts import watch_cells
from nbagent.runtime.script_exit import install as install_script_exit
from nbagent.view.display import display_run
from nbagent.view.html import record_display_html
from nbagent.view.terminal import record_text

if TYPE_CHECKING:
    from nbagent.forks.origins import ForkStart


def _record_file(record: RunRecord, path: Any) -> Any:
    from nbagent.explore.share import to_html  # explore loads on first use

    return to_html(record, path)


records.renderers.text = record_text
records.renderers.html = record_display_html
records.renderers.file = _record_file
displays.run = display_run


def _prepare(
    agent: Any,
    task: str,
    *,
    reset: bool,
    sinks: Iterable[Sink],
    store: Any,
    display: bool | None,
    tags: Iterable[str],
    metadata: dict[str, Any] | None,
    options: dict[str, Any],
    limits: Limits | None = None,
    approve: ApprovalPolicy = None,
    approval_timeout_s: float | None = None,
    fork: ForkStart | None = None,
) -> Run:
    install_script_exit()  # outside a kernel: live runs are waited for at exit, Ctrl-C exits 130
    watch_cells()  # in a kernel: ■ Interrupt during a cell's other awaits stops the cell's runs
    run = Run(
        agent,
        task,
        source=as_source(agent),
        sinks=sinks,
        reset=reset,
        tags=tags,
        metadata=metadata,
        options=options,
        limits=limits if limits is not None else settings.limits,
        approve=approve,
        approval_timeout_s=settings.approval_timeout_s if approval_timeout_s is None else approval_timeout_s,
        fork=fork,
    )
    store = store if store is not None else settings.store
    if store is not None:
        from nbagent.analytics.store import open_store  # a path, or a RunStore

        run.add_sink(open_store(store).sink())
    if display is None:
        display = settings.display if settings.display is not None else True
    if display:
        from nbagent.view.display import show_run

        show_run(run)
        run.shown = True
    return run


def start(
    agent: Any,
    task: str,
    *,
    reset: bool = True,
    sinks: Iterable[Sink] = (),
    store: Any = None,
    display: bool | None = None,
    tags: Iterable[str] = (),
    metadata: dict[str, Any] | None = None,
    limits: Limits | None = None,
    approve: ApprovalPolicy = None,
    approval_timeout_s: float | None = None,
    **options: Any,
) -> Run:
    """Start ``task`` on ``agent`` in the background and return its ``Run`` at once.

    In Jupyter, wait for it with ``record = await run`` in a later cell: the Stop button works
    while a cell awaits, not while a cell blocks (``run.wait()``, ``nbagent.run``).

    Args:
        agent: an ``nbagent.Agent``, or an agent of smolagents, pydantic-ai, the OpenAI Agents SDK
            or LangGraph (a compiled graph).
        task: what to do.
        reset: False continues the agent's memory (after an interrupt, say); the record's
            ``continues_run_id`` names the run it continues.
        sinks: callables that receive every ``RunEvent`` in order, on the runner's thread.
        store: a ``RunStore`` to persist the run to as it happens (default: ``configure(store=)``).
        display: show the run: the live widget view in a Jupyter kernel, text elsewhere
            (default: ``configure(display=)``, which defaults to True).
        tags: labels kept with the record (a ``tags`` column in the runs frame).
        metadata: a dict kept with the record (a ``metadata`` column).
        limits: budgets (``nbagent.Limits``) that end the run ``"limit"`` when crossed (default:
            ``configure(limits=)``). A cost limit on a model with no price is refused here.
        approve: which tool calls wait for a person (Approve / Deny in the view, or
            ``run.approve(call_id)`` / ``run.deny(call_id, reason)``): True, tool names, or a
            predicate on an ``ApprovalCall``; added to ``@tool(requires_approval=True)``.
        approval_timeout_s: a call undecided this long is denied with the reason "timed out"
            (default: ``configure(approval_timeout_s=)``, None: wait as long as it takes).
        **options: passed to the agent's run: for smolagents ``max_steps``, ``additional_args``,
            ``images``; for ``nbagent.Agent`` ``max_steps``.
    """
    return start_prepared(
        agent, task, reset=reset, sinks=sinks, store=store, display=display,
        tags=tags, metadata=metadata, options=options, limits=limits, approve=approve,
        approval_timeout_s=approval_timeout_s,
    )  # fmt: skip


def start_prepared(agent: Any, task: Any, **keywords: Any) -> Run:
    """``start`` with ``_prepare``'s keywords (``fork=`` too: ``nbagent.forks`` starts a fork so)."""
    run = _prepare(agent, task, **keywords)
    run.launch()
    return run


def run(
    agent: Any,
    task: str,
    *,
    reset: bool = True,
    sinks: Iterable[Sink] = (),
    store: Any = None,
    display: bool | None = None,
    tags: Iterable[str] = (),
    metadata: dict[str, Any] | None = None,
    limits: Limits | None = None,
    approve: ApprovalPolicy = None,
    approval_timeout_s: float | None = None,
    **options: Any,
) -> RunRecord:
    """Run ``task`` to its end and return the record, blocking (arguments as for ``start``).

    In Jupyter the Stop button cannot work while this cell blocks (the kernel takes the click
    only after the cell ends), so the view disables it and says so: use Jupyter's ■ Interrupt,
    or ``run = start(...)`` and ``await run``. Ctrl-C / ■ Interrupt stops the run and, once its
    record is complete, raises ``StoppedByKeyboard`` (a ``KeyboardInterrupt``) so what follows
    (a loop of runs, the next cells) stops too; the record is ``nbagent.history.last()``.
    """
    handle = _prepare(
        agent, task, reset=reset, sinks=sinks, store=store, display=display,
        tags=tags, metadata=metadata, options=options, limits=limits, approve=approve,
        approval_timeout_s=approval_timeout_s,
    )  # fmt: skip
    try:
        handle.launch()
    except KeyboardInterrupt:  # pressed while the run was being launched: it must not run on unseen
        handle.interrupt()
        if not handle.launched:
            raise  # it may never start, so there is no record to wait for
    __tracebackhide__ = True  # a keyboard stop's traceback shows the caller's line (IPython, pytest)
    return handle.wait()


async def arun(agent: Any, task: str, **keywords: Any) -> RunRecord:
    """Deprecated: ``record = await start(agent, task, ...)`` is the same call."""
    __tracebackhide__ = True
    warnings.warn(
        "nbagent.arun(agent, task) is `await nbagent.start(agent, task)` under another name: "
        "use that (arun goes in the next release)",
        DeprecationWarning,
        stacklevel=2,
    )
    return await start(agent, task, **keywords)


def interrupt_all(mode: InterruptMode = "now") -> int:
    """Interrupt every live run; returns how many were asked to stop."""
    return sum(r.interrupt(mode) for r in live_runs())


def configure(
    *,
    store: Any = UNCHANGED,
    display: bool | None = UNCHANGED,
    quiet_smolagents: bool = UNCHANGED,
    history_limit: int | None = UNCHANGED,
    limits: Any = UNCHANGED,
    approval_timeout_s: float | None = UNCHANGED,
) -> Settings:
    """Set process-wide defaults; returns the settings. Only the options you pass change.

    Args:
        store: a ``RunStore``, or a path to one (``"runs.db"``, a ``Path``, ``"~/runs.db"``),
            every run is persisted to (None: no store); another type is a ``TypeError``.
        display: False to show no view; None/True: widgets in Jupyter, text elsewhere.
        quiet_smolagents: silence smolagents' own console output while nbagent shows the run.
        history_limit: how many finished runs ``nbagent.history`` keeps in memory (default
            1000; None keeps every run). Older runs are dropped from memory, not from a store.
        limits: ``nbagent.Limits`` for every run (None: no limits); ``start(limits=)`` overrides.
        approval_timeout_s: seconds before an undecided approval is denied (None: no end).
    """
    if store is not UNCHANGED and store is not None:  # first: a bad store changes nothing
        from nbagent.analytics.store import open_store  # a path becomes its store, now

        store = open_store(store)
    if limits is not UNCHANGED:
        if limits is not None and not isinstance(limits, Limits):
            raise TypeError(f"limits must be nbagent.Limits(...) or None, not {type(limits).__name__}")
        settings.limits = limits
    if approval_timeout_s is not UNCHANGED:
        settings.approval_timeout_s = check_approval_timeout(approval_timeout_s)
    if store is not UNCHANGED:
        settings.store = store
    if display is not UNCHANGED:
        settings.display = display
    if quiet_smolagents is not UNCHANGED:
        settings.quiet_smolagents = quiet_smolagents
    if history_limit is not UNCHANGED:
        if history_limit is not None:
            try:
                if isinstance(history_limit, bool):
                    raise TypeError
                history_limit = operator.index(history_limit)
            except TypeError:
                raise ValueError(f"history_limit must be an int or None, not {history_limit!r}") from None
            if history_limit < 1:
                raise ValueError(
                    f"history_limit must be at least 1 (nbagent.history.last() returns the latest run), "
                    f"not {history_limit}"
                )
        settings.history_limit = history_limit
        from nbagent.analytics.history import trim

        trim()
    return settings


__all__ = ["configure", "interrupt_all", "run", "start"]
