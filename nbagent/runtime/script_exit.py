"""How a process that runs agents ends: a script waits for its runs and Ctrl-C exits 130 in one
line; a kernel that shuts down stops its runs as a Stop would.

Two hooks, installed once by the first run prepared (``install``; the runner calls it). In a
Jupyter kernel only the first, and only its last part: a kernel outlives its cells, and Jupyter
shows errors itself.

- **At exit.** A script that calls ``nbagent.start(...)`` and ends would exit under its runs: they
  live on the runner's daemon thread, which dies with the interpreter mid step, silently. So the
  exit hook says on stderr, in one line, that it waits and how to stop, then waits for every live
  run while its transcript goes on printing. Ctrl-C stops them at once (each record completes, the
  transcript shows the cut step) and the script then exits 130, as Ctrl-C anywhere else in it
  does; a second Ctrl-C leaves at once, naming what was left unfinished.
  A run started with ``display=False`` has no transcript to wait with: one line says it is
  stopped, and it is, at once (``run.wait()`` before the script ends is how to keep it).
  Last, in a script and in a kernel that shuts down (Kernel > Restart or Shut Down sends a
  shutdown request; the kernel's loop stops and the interpreter exits), every run still live is
  stopped like a Stop, with the reason ``"shutdown"``, and its record is given
  ``SHUTDOWN_WAIT_S`` to complete: it is stored ``interrupted`` and its view shows the end, never
  an ``error`` from the loop dying under it. (A process killed outright leaves its stored runs
  ``unfinished``.)
  It is a ``threading`` exit hook, not an ``atexit`` one: those run first, in
  ``threading._shutdown``, while the loop's daemon thread still runs as usual, before the kernel's
  own ``atexit`` hooks close its channels, and before ``concurrent.futures`` turns new work away
  (its own hook was registered earlier, and these hooks run last registered first), so a tool run
  in a thread can still start.
- **Ctrl-C.** ``nbagent.run``, ``run.wait()`` and ``run_batch`` raise ``StoppedByKeyboard`` /
  ``BatchStoppedByKeyboard`` (``KeyboardInterrupt`` subclasses carrying the record or the batch)
  once what they stopped is complete, so code that catches them gets the record. Uncaught, Python
  would print a traceback through nbagent's internals and exit 1: it exits 130 only for a bare
  ``KeyboardInterrupt``. The ``sys.excepthook`` set here prints one line instead and raises
  ``SystemExit(130)``, which Python honours from an excepthook with its normal shutdown (the exit
  hooks above, ``atexit``, flushed files). Any other exception goes to the previous hook; a bare
  ``KeyboardInterrupt`` too, after marking that the exit hook must stop live runs, not wait.

The exit status is fixed before the exit hooks run, so a Ctrl-C during the wait at exit ends the
process itself: it runs the ``atexit`` functions as the exit would, flushes, and leaves with
``os._exit(130)``.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import concurrent.futures.thread  # its exit hook must be registered before ours (see above)
import contextlib
import os
import sys
import threading
from types import TracebackType
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from nbagent.runtime.handle import Run

EXIT_SIGINT = 130
"""The shell's code for "stopped by SIGINT"."""
SLICE_S = 0.1
"""A wait at exit takes slices this long, so Ctrl-C lands between them."""
SHUTDOWN_WAIT_S = 2.0
"""How long the runs stopped at exit get to complete their records (and store them). A kernel
is killed if it has not exited 5 s after its shutdown request (jupyter_client's default)."""
SHUTDOWN = "shutdown"
"""The ``stop_reason`` of a run stopped because its process shut down."""

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
    """Install the hooks, once: in a Jupyter kernel only the stop at shutdown. Any thread; cheap
    after the first."""
    global _installed, _previous_hook
    if _installed:
        return
    with _lock:
        if _installed:
            return
        _installed = True
        in_kernel = _in_kernel()
        with contextlib.suppress(RuntimeError):  # already shutting down: nothing to wait in
            threading._register_atexit(_stop_at_shutdown if in_kernel else _wait_at_exit)  # type: ignore[attr-defined]
        if not in_kernel:
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


def _ids(runs: list[Run]) -> str:
    return ", ".join(run.run_id for run in runs)


def _shown(runs: list[Run]) -> list[Run]:
    return [run for run in runs if run.shown]


def _wait(runs: list[Run]) -> None:
    """Until every shown run, those in ``runs`` and any started meanwhile, has ended."""
    from nbagent.runtime.handle import live_runs

    while runs:
        concurrent.futures.wait([run.completion for run in runs], timeout=SLICE_S)
        runs = _shown(live_runs())


def _stop(runs: list[Run], reason: str = "keyboard") -> None:
    for run in runs:
        run.interrupt(reason=reason)


def _say(line: str) -> None:
    print(f"nbagent: {line}", file=sys.stderr, flush=True)


def _stop_at_shutdown() -> None:
    """Stop every live run as the process shuts down, and give their records time to complete."""
    from nbagent.runtime.handle import live_runs

    runs = live_runs()
    _stop(runs, SHUTDOWN)
    concurrent.futures.wait([run.completion for run in runs], timeout=SHUTDOWN_WAIT_S)


def _exit_interrupted() -> NoReturn:
    """Leave with the status of a Ctrl-C, the ``atexit`` functions run and the streams flushed."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(EXIT_SIGINT)


def _wait_at_exit() -> None:
    from nbagent.runtime.handle import live_runs

    runs = live_runs()
    unseen = [run for run in runs if not run.shown]
    if unseen:  # started with display=False: no transcript to wait with
        _stop(unseen, SHUTDOWN)
        _say(
            f"stopping {_plural(unseen)} started without display and never waited for "
            f"(run.wait() keeps a run to its end): {_ids(unseen)}"
        )
    runs = _shown(runs)
    pressed = _keyboard
    try:
        if _keyboard:
            if runs:
                _say(f"stopping {_plural(runs)} still going (Ctrl-C again leaves at once)")
            _stop(live_runs())
        elif runs:
            _say(f"the script has ended; waiting for {_plural(runs)} still going (Ctrl-C stops them)")
            try:
                _wait(runs)
            except KeyboardInterrupt:
                pressed = True
                runs = _shown(live_runs())
                _say(f"stopping {_plural(runs)} (Ctrl-C again leaves at once)")
                _stop(live_runs())
        _wait(runs)
        _stop_at_shutdown()
    except KeyboardInterrupt:
        left = live_runs()
        _stop(left, SHUTDOWN)  # what the loop's end cuts short is then a Stop, not an error
        if left:
            _say(f"left {_plural(left)} unfinished: {_ids(left)}")
        pressed = True
    if pressed and not _keyboard:  # a bare KeyboardInterrupt exits with Python's own status
        _exit_interrupted()
