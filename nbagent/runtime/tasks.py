"""Untrusted coroutines (async tools, model streams) as tasks that can neither take the runner's
loop down nor hold a Stop hostage.

asyncio re-raises ``SystemExit`` and ``KeyboardInterrupt`` from a task out of the event loop, so
``contained`` turns them (and any other ``BaseException`` that is not an ``Exception`` or the
task's own cancellation) into an ``AgentError`` the caller chooses. A coroutine that swallows its
cancellation (a bare ``except:`` in a retry loop) would keep a stopped run waiting forever, so
``stop_within`` cancels its task and waits only a grace period for it: past that the caller
abandons the task, as it abandons a sync tool's thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from nbagent.errors import AgentError

T = TypeVar("T")


async def contained(coro: Awaitable[T], error: Callable[[BaseException], AgentError]) -> T:
    """Await ``coro``; a ``BaseException`` that is neither an ``Exception`` nor a cancel becomes
    ``error(exc)``, so running it as a task cannot end the event loop."""
    try:
        return await coro
    except (Exception, asyncio.CancelledError):
        raise
    except BaseException as exc:
        raise error(exc) from None


def spawn_contained(
    coro: Awaitable[T], error: Callable[[BaseException], AgentError], name: str | None = None
) -> asyncio.Task[T]:
    """Run ``coro`` as a task of its own, ``contained``. If the task is cancelled before it first
    runs (a Stop right as it was made), ``coro`` is closed with it, not left "never awaited"."""
    task = asyncio.get_running_loop().create_task(contained(coro, error), name=name)
    close = getattr(coro, "close", None)
    if close is not None:
        task.add_done_callback(lambda _: close())  # a no-op for a coroutine that ran
    return task


async def stop_within(task: asyncio.Future[Any], grace_s: float) -> bool:
    """Cancel ``task`` and give it ``grace_s`` to end. True if it ended (whatever it raised while
    stopping is retrieved: it is not news); False if it ignored the cancel and is left running."""
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=grace_s)
    if done and not task.cancelled():
        task.exception()
    return bool(done)
