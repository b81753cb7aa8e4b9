"""Run analytics: DataFrames of runs, steps and tool calls (``frames``), summaries (``analysis``),
plots, cost, this process's ``history`` and the SQLite ``store``.

Importing this package is cheap: pandas loads with ``frames``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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


def __getattr__(name: str) -> Any:
    if name in _WHERE:  # pandas loads with the frames, not with this package
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
