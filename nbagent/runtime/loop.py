"""The runner's private event loop, on a daemon thread ("nbagent-loop") started on first use.

Nothing a run does may take this loop down, since every live run and every Stop depends on it.
asyncio re-raises ``SystemExit`` and ``KeyboardInterrupt`` from any task or callback out of
``run_forever``; the runner converts those into records where it can (tools, models, sinks), and
the loop thread goes back into ``run_forever`` if one escapes anyway, so the other runs go on.

If the loop stops all the same (``loop.stop()`` from a misbehaving callback), it is retired at
once, so the next ``get()`` starts a fresh loop on a fresh thread; then every run of the old loop
is ended with an ``"error"`` record that says so (``on_loop_death``), the old loop's tasks are
cancelled and run to their ends on their own thread (so an agent's ``finally`` blocks run where
they belong, and its turn lock is released), and the old loop is closed. A run submitted to the
old loop in that window fails to submit (the runner retries on the fresh loop) or is ended by the
second ``on_loop_death`` call after the close.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import threading
import time
from collections.abc import Callable

from nbagent.runtime.cancel import track_task

logger = logging.getLogger("nbagent")


class LoopThread:
    """The loop and its thread. ``get()`` is thread-safe and always returns a running loop."""

    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    on_loop_death: Callable[[asyncio.AbstractEventLoop, str], None] | None = None
    """Set by the runner: ends the live runs of a loop that stopped for good."""
    on_start: Callable[[], None] | None = None
    """Set by the runner: called once per new loop, off the loop (to warm up slow imports)."""

    @classmethod
    def get(cls) -> asyncio.AbstractEventLoop:
        with cls._lock:
            if cls._loop is None or cls._thread is None or not cls._thread.is_alive():
                loop = asyncio.new_event_loop()
                loop.set_task_factory(track_task)
                ready = threading.Event()
                thread = threading.Thread(
                    target=cls._serve, args=(loop, ready), name="nbagent-loop", daemon=True
                )
                thread.start()
                ready.wait()
                cls._loop, cls._thread = loop, thread
                if not cls._stops_at_exit:
                    cls._stops_at_exit = True
                    atexit.register(cls._stop_at_exit)
                if cls.on_start is not None:
                    cls.on_start()
            return cls._loop

    @classmethod
    def thread(cls) -> threading.Thread | None:
        return cls._thread

    _stops_at_exit = False

    @classmethod
    def _stop_at_exit(cls) -> None:
        """At interpreter exit (after the exit hook of ``nbagent.runtime.script_exit`` has stopped
        the live runs, reason ``"shutdown"``), stop the loop and let its thread finish: a daemon
        thread that wakes while the interpreter finalizes is ended with ``pthread_exit``, which
        CPython < 3.14 can turn into "FATAL: exception not rethrown" and an abort (seen on a
        script's exit while the loop had a timer due)."""
        with cls._lock:
            loop, thread = cls._loop, cls._thread
        if loop is None or thread is None or not thread.is_alive():
            return
        with contextlib.suppress(RuntimeError):  # closed meanwhile
            loop.call_soon_threadsafe(loop.stop)
        thread.join(UNWIND_TIMEOUT_S + 1.0)

    @classmethod
    def _serve(cls, loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        reason = "the runner's event loop stopped"
        try:
            while True:
                try:
                    loop.run_forever()
                    break  # stopped on purpose (loop.stop()): the loop is gone for good
                except BaseException as exc:  # escaped from a task or callback: keep serving
                    logger.error("nbagent: %r escaped to the runner's event loop; it keeps running", exc)
        except BaseException as exc:  # pragma: no cover - the logging itself failed
            reason = f"the runner's event loop died: {exc!r}"
        finally:
            with cls._lock:
                if cls._loop is loop:
                    cls._loop = None  # retired: the next get() starts a fresh loop
            cls._end_runs(loop, reason)
            _unwind(loop)
            cls._end_runs(loop, reason)  # runs submitted while it was unwinding

    @classmethod
    def _end_runs(cls, loop: asyncio.AbstractEventLoop, reason: str) -> None:
        if cls.on_loop_death is not None:
            try:
                cls.on_loop_death(loop, reason)
            except Exception:
                logger.exception("nbagent: could not end the runs of a stopped event loop")


UNWIND_TIMEOUT_S = 5.0
"""How long a retired loop's cancelled tasks get to run their ``finally`` blocks."""


def _unwind(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel the retired loop's tasks, let them unwind on this thread, and close the loop."""
    try:
        deadline = time.monotonic() + UNWIND_TIMEOUT_S
        cancelled: set[asyncio.Task] = set()
        while pending := {t for t in asyncio.all_tasks(loop) if not t.done()}:
            for task in pending - cancelled:  # including tasks made while the others unwound
                task.cancel()
            cancelled |= pending
            left = deadline - time.monotonic()
            if left <= 0:
                break
            waiting = asyncio.wait(pending, timeout=left, return_when=asyncio.FIRST_COMPLETED)
            loop.run_until_complete(waiting)
        _keep_forever([t for t in cancelled if not t.done()])
    except BaseException:
        logger.exception("nbagent: a retired event loop did not unwind cleanly")
    finally:
        loop.close()


def _keep_forever(stuck: list[asyncio.Task]) -> None:
    """Never free a task that would not end when cancelled.

    Freeing a pending coroutine closes it (``GeneratorExit`` at its ``await``); code that swallows
    every exception there and awaits again spins forever without a running loop, on whichever
    thread drops the last reference, or the main thread at interpreter exit. So such tasks are
    given a reference nobody holds (never collected, never closed): a small leak, once per task
    that ignored its cancel for ``UNWIND_TIMEOUT_S``.
    """
    if not stuck:
        return
    import ctypes

    for task in stuck:
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(task))
    logger.warning(
        "nbagent: %d task(s) ignored their cancel for %.0f s and are left suspended: %s",
        len(stuck),
        UNWIND_TIMEOUT_S,
        ", ".join(sorted({t.get_name() for t in stuck})),
    )


def runner_loop() -> asyncio.AbstractEventLoop:
    """The runner's event loop (started if needed)."""
    return LoopThread.get()
