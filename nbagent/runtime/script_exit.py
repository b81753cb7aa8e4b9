"""How a script that runs agents ends: live runs are waited for, and Ctrl-C exits 130 in one line.

Two hooks, installed once by the first run prepared outside a Jupyter kernel (``install``; the
runner calls it). A kernel needs neither: it outlives its cells, and Jupyter shows errors itself.

- **At exit.** A script that calls ``nbagent.start(...)`` and ends would exit under its runs: they
  live on the runner's daemon thread, which dies with the interpreter mid step, silently. So the
  exit hook says on stderr, in one line, that it waits and how to stop, then waits for every live
  run while its transcript goes on printing. Ctrl-C stops them at once (each record completes, the
  transcript shows the cut step); a second Ctrl-C leaves at once, naming what was left unfinished.
  A run started with ``display=False`` has no transcript to wait with: one line names it as left
  unfinished (``run.wait()`` before the script ends is how to keep it).
  It is a ``threading`` exit hook, not an ``atexit`` one: those run first, in
  ``threading._shutdown``, while the loop's daemon thread still runs as usual and before
  ``concurrent.futures`` turns new work away (its own hook was registered earlier, and these hooks
  run last registered first), so a tool run in a thread can still start.
- **Ctrl-C.** ``nbagent.run``, ``run.wait()`` and ``run_batch`` raise ``StoppedByKeyboard`` /
  ``BatchStoppedByKeyboard`` (``KeyboardInterrupt`` subclasses carrying the record or the batch)
  once what they stopped is complete, so code that catches them gets the record. Uncaught, Python
  would print a traceback through nbagent's internals and exit 1: it exits 130 only for a bare
  ``KeyboardInterrupt``. The ``sys.excepthook`` set here prints one line instead and raises
  ``SystemExit(130)``, which Python honours from an excepthook with its normal shutdown (the exit
  hooks above, ``atexit``, flushed files). Any other exception goes to the previous hook; a bare
  ``KeyboardInterrupt`` too, after marking that the exit hook must stop live runs, not wait.
"""

from __future__ import annotations

import concurrent.futures
import concurrent.futures.thread  # its exit hook must be registered before ours (see above)
import contextlib
import sys
import threading
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nbagent.runtime.handle import Run

EXIT_SIGINT = 130
"""The shell's code for "stopped by SIGINT"."""
SLICE_S = 0.1
"""A wait at exit takes slices this long, so Ctrl-C lands between them."""

_lock = threading.Lock()
_installed = False
_keyboard = False
"""Set when the script ended by Ctrl-C: live runs are then stopped at exit, not waited for."""
_previous_hook: Any = None


def _in_kernel() -> bool:
    ipython = sys.modules.get("IPython")  # a script that never imported IPython is not in a kernel
    if ipython is None:
        return False
    shell = ipython.get_ipython()
    return getattr(shell, "kernel", None) is not None


def install() -> None:
    """Install both hooks, once, unless in a Jupyter kernel. Any thread; cheap after the first."""
    global _installed, _previous_hook
    if _installed:
        return
    with _lock:
        if _installed or _in_kernel():
            return
        _installed = True
        with contextlib.suppress(RuntimeError):  # already shutting down: nothing to wait in
            threading._register_atexit(_wait_at_exit)  # type: ignore[attr-defined]
        _previous_hook = sys.excepthook
        sys.excepthook = _excepthook


def _excepthook(kind: type[BaseException], error: BaseException, tb: TracebackType | None) -> None:
    global _keyboard
    from nbagent.errors import StoppedByKeyboard

    if issubclass(kind, KeyboardInterrupt):
        _keyboard = True
    record = getattr(error, "record", None)
    if isinstance(error, StoppedByKeyboard) and record is not None:
        steps = len(record.steps)
        line = f"run {record.run_id} ended {record.status} after {steps} step{'' if steps == 1 else 's'}"
    elif isinstance(error, StoppedByKeyboard):  # a batch's: every task has its record
        line = "the batch stopped; its finished tasks kept their records"
    else:
        (_previous_hook or sys.__excepthook__)(kind, error, tb)
        return
    print(f"nbagent: stopped by Ctrl-C: {line}", file=sys.stderr, flush=True)
    raise SystemExit(EXIT_SIGINT)


def _plural(runs: list[Run]) -> str:
    return f"{len(runs)} run{'' if len(runs) == 1 else 's'}"


def _shown(runs: list[Run]) -> list[Run]:
    return [run for run in runs if run.shown]


def _wait(runs: list[Run]) -> None:
    """Until every shown run, those in ``runs`` and any started meanwhile, has ended."""
    from nbagent.runtime.handle import live_runs

    while runs:
        concurrent.futures.wait([run.completion for run in runs], timeout=SLICE_S)
        runs = _shown(live_runs())


def _stop(runs: list[Run]) -> None:
    for run in runs:
        run.interrupt(reason="keyboard")


def _say(line: str) -> None:
    print(f"nbagent: {line}", file=sys.stderr, flush=True)


def _wait_at_exit() -> None:
    from nbagent.runtime.handle import live_runs

    runs = live_runs()
    unseen = [run for run in runs if not run.shown]
    if unseen:  # started with display=False: no transcript to wait with
        names = ", ".join(run.run_id for run in unseen)
        _say(f"{_plural(unseen)} started without display and never waited for, left unfinished: {names}")
    runs = _shown(runs)
    if not runs:
        return
    try:
        if _keyboard:
            _say(f"stopping {_plural(runs)} still going (Ctrl-C again leaves at once)")
            _stop(live_runs())
        else:
            _say(f"the script has ended; waiting for {_plural(runs)} still going (Ctrl-C stops them)")
            try:
                _wait(runs)
                return
            except KeyboardInterrupt:
                runs = _shown(live_runs())
                _say(f"stopping {_plural(runs)} (Ctrl-C again leaves at once)")
                _stop(live_runs())
        _wait(runs)
    except KeyboardInterrupt:
        left = _shown(live_runs())
        _say(f"left {_plural(left)} unfinished: {', '.join(run.run_id for run in left)}")
