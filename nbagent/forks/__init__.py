"""Forking a run at any step: "what if step k had gone differently", for every source.

``nbagent.fork(run, at_step=k, agent=..., tool_results=..., message=...)`` starts a run from the
conversation exactly as the model saw it when step ``k`` of ``run`` began (the task and steps
1..k-1: their replies and tool results), with the edits given; no model call and no tool call of
steps 1..k-1 is made again. ``nbagent.compare(run, fork)`` then shows the shared prefix once and
the two paths side by side from step ``k`` (``nbagent.explore.comparison``).

The capability is built once, here, on the source contract (``nbagent.runtime.source``):

- ``start``: ``fork()`` itself: finds the run (``nbagent.explore.lookup``), checks the step, the
  edits and the agent, and starts the fork as a ``Run`` like any other.
- ``origins``: what a fork starts from: this process's note of each run (its agent, its
  history's objects), ``ForkOrigin`` (what a source's ``fork_input`` hook is handed) and
  ``ForkStart`` (what the fork's ``drive`` finds on ``ctx.fork``).

Each source only turns "the conversation at step k, plus edits" into its framework's own input
(``Source.fork_input``), marks where each step's request begins (``ctx.fork_point``) and hands its
history over (``ctx.conversation``, ``Source.fork_data``): docs/adapters.md.
"""

from __future__ import annotations

from nbagent.lazy import lazy_attributes

__all__ = ["ForkOrigin", "ForkStart", "fork"]

_WHERE = {"fork": "start", "ForkOrigin": "origins", "ForkStart": "origins"}

__getattr__, __dir__ = lazy_attributes(__name__, _WHERE)
