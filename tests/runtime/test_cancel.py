"""The cancel scope's awaitable "stop after step requested" (``CancelScope.after_step_requested``)."""

from __future__ import annotations

import asyncio
import threading

from nbagent.runtime.cancel import CancelScope


def test_a_stop_after_step_from_another_thread_wakes_the_await():
    async def main() -> None:
        scope = CancelScope()
        waiter = asyncio.ensure_future(scope.after_step_requested())
        await asyncio.sleep(0)  # let it register
        assert not waiter.done()
        threading.Thread(target=scope.interrupt, args=("after_step",)).start()
        await asyncio.wait_for(waiter, timeout=10)

    asyncio.run(main())


def test_a_stop_now_wakes_it_too_and_a_later_await_returns_at_once():
    async def main() -> None:
        scope = CancelScope()
        waiters = [asyncio.ensure_future(scope.after_step_requested()) for _ in range(3)]
        await asyncio.sleep(0)
        scope.interrupt("now")
        await asyncio.wait_for(asyncio.gather(*waiters), timeout=10)
        await asyncio.wait_for(scope.after_step_requested(), timeout=10)
        assert scope._step_waiters == []

    asyncio.run(main())


def test_an_await_given_up_leaves_no_waiter_behind():
    async def main() -> None:
        scope = CancelScope()
        waiter = asyncio.ensure_future(scope.after_step_requested())
        await asyncio.sleep(0)
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
        assert scope._step_waiters == []
        assert scope.interrupt("after_step")

    asyncio.run(main())
