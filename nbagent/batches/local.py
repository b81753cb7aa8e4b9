"""The local backend: each task is an ordinary nbagent run on this process's runner loop.

The runs share the loop the batch is driven on, so a batch costs what its runs cost: nothing
else waits on a thread or a queue. The factory runs on the batch's own threads (building an agent
may load a model or open a connection, and must not hold up the loop, its runs and every Stop,
nor the loop's default executor; a Stop abandons a factory that hangs: ``Batch.in_thread``);
sync agents (smolagents) keep their own worker threads as in any run. The runs are not shown one
by one (a thousand live views would be the problem a batch table solves): the batch's table
shows them, and opens any one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nbagent.batches.tasks import TaskItem

if TYPE_CHECKING:
    from nbagent.batches.handle import Batch
    from nbagent.runtime.handle import Run


def make_agent(batch: Batch, item: TaskItem) -> Any:
    """A fresh agent for ``item``: ``factory(row)`` when the factory takes the row, else ``factory()``."""
    agent = batch.factory(dict(item.row)) if batch.factory_takes_row else batch.factory()
    if agent is None:
        raise TypeError("the agent factory returned None; it must return an agent")
    return agent


class LocalBackend:
    """Runs each task in this process (the default backend)."""

    name = "local"

    def __repr__(self) -> str:
        return "LocalBackend()"

    async def open(self, batch: Batch) -> None:
        return None

    async def close(self, batch: Batch) -> None:
        return None

    async def launch(self, batch: Batch, item: TaskItem) -> Run | None:
        """The task's run; ``None`` when the batch was stopped while its agent was built (a
        factory may take seconds): the task is skipped rather than started and interrupted."""
        from nbagent.api import start

        agent = await batch.in_thread("the agent factory", make_agent, batch, item)
        if batch.stopped():
            return None
        batch.agents.claim(agent, item.key)
        try:
            return start(
                agent,
                item.task,
                store=batch.store,
                display=False,
                tags=batch.tags_for(),
                metadata=batch.metadata_for(item),
                **batch.run_options(),
            )
        except BaseException:
            batch.agents.release(item.key)
            raise
