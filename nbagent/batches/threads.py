"""A batch's own threads, for the user's code that may take seconds: agent factories and scorers.

Not the runner loop's default executor: that one serves every run of the process (a model
client's DNS lookup, a store read), and a batch of slow judges or hung factories starved it (a
plain run's DNS lookup took 3.5 s instead of 50 ms). The pool is bounded (``limit`` threads,
started as needed), and its threads are daemons: a factory or scorer that never returns is
abandoned by a Stop (``nbagent.batches.handle``) and holds neither the batch nor the exit of
the interpreter.

Whatever the user's code raises fails its job only: a ``BaseException`` that is no ``Exception``
(``SystemExit``, a test framework's skip, a ``KeyboardInterrupt`` raised by hand) comes back as
``RaisedInThread``, an ``Exception`` that carries it, so it ends one task, never the batch.
"""

from __future__ import annotations

import concurrent.futures
import queue
import threading
from collections.abc import Callable
from typing import Any

from nbagent.errors import describe

MAX_THREADS = 32
"""The most threads one batch's pool runs at once (fewer when its concurrency is lower)."""


class RaisedInThread(Exception):
    """A ``BaseException`` raised by a factory or a scorer, carried as an ``Exception``."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(describe(original))
        self.original = original


def original(exc: BaseException) -> BaseException:
    """What the user's code raised: ``exc`` itself, or the one a ``RaisedInThread`` carries."""
    return exc.original if isinstance(exc, RaisedInThread) else exc


_Job = tuple[concurrent.futures.Future, Callable[..., Any], tuple[Any, ...]]


class BatchThreads:
    """A bounded pool of daemon threads: ``submit(fn, *args)`` gives a ``concurrent.futures.Future``."""

    def __init__(self, limit: int, name: str = "nbagent-batch") -> None:
        self.limit = max(1, limit)
        self.name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._threads = 0
        self._closed = False

    def submit(self, fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the batch's threads are closed")
            self._jobs.put((future, fn, args))
            if not self._idle.acquire(blocking=False) and self._threads < self.limit:
                self._threads += 1
                threading.Thread(target=self._work, name=f"{self.name}-{self._threads}", daemon=True).start()
        return future

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            future, fn, args = job
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except Exception as exc:
                    future.set_exception(exc)
                except BaseException as exc:  # SystemExit, a test's skip: one job's failure
                    future.set_exception(RaisedInThread(exc))
            del job, future, fn, args  # an abandoned job's agent is not kept alive by an idle thread
            self._idle.release()

    def close(self) -> None:
        """Let each thread end once it is idle (a thread still in a hung job ends after it)."""
        with self._lock:
            self._closed = True
            for _ in range(self._threads):
                self._jobs.put(None)
