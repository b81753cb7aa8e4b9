"""Run analytics: DataFrames of runs, steps and tool calls (``frames``), summaries (``analysis``),
plots, cost, this process's ``history`` and the SQLite ``store``.

Importing this package is cheap: pandas loads with ``frames``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nbagent.lazy import lazy_attributes

if TYPE_CHECKING:
    from nbagent.analytics.frames import runs_frame, steps_frame, tool_calls_frame
    from nbagent.analytics.store import RunStore

__all__ = ["RunStore", "history", "runs_frame", "steps_frame", "tool_calls_frame"]

_WHERE = {
    "RunStore": "store",
    "runs_frame": "frames",
    "steps_frame": "frames",
    "tool_calls_frame": "frames",
}


_SUBMODULES = ("analysis", "cost", "frames", "history", "plots", "store")


# pandas loads with the frames, not with this package
__getattr__, __dir__ = lazy_attributes(__name__, _WHERE, submodules=_SUBMODULES)
