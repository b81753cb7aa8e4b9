"""What a ``Run`` checks and looks up as it is built: its options, tags, the run it continues,
and its price at the end (kept apart from ``nbagent.runtime.handle`` so each
reads in one sitting)."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterable
from typing import Any

from nbagent.analytics import cost
from nbagent.errors import describe
from nbagent.records import RunRecord
from nbagent.runtime.identity_map import IdentityMap

logger = logging.getLogger("nbagent")


def check_options(source: Any, options: dict[str, Any]) -> None:
    """Refuse, before the run starts, options the source's ``drive`` does not take."""
    if not options:
        return
    import inspect

    parameters = inspect.signature(source.drive).parameters
    if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        return
    accepted = [n for n, p in parameters.items() if p.kind is p.KEYWORD_ONLY]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise TypeError(
            f"{type(source).__name__} runs take no {', '.join(map(repr, unknown))}; "
            f"the options it takes are: {', '.join(accepted) or 'none'}"
        )


def check_tags(tags: Iterable[str]) -> list[str]:
    if isinstance(tags, str):
        raise TypeError("tags must be a list of strings, not one string (tags=['a', 'b'])")
    tags = list(tags)
    bad = [t for t in tags if not isinstance(t, str)]
    if bad:
        raise TypeError(f"tags must be strings, not {type(bad[0]).__name__}")
    return tags


_last_runs = IdentityMap()  # by identity: a pydantic-ai Agent is unhashable
_last_runs_lock = threading.Lock()


def last_run_of(agent: Any) -> str | None:
    with _last_runs_lock, contextlib.suppress(TypeError):
        return _last_runs.get(agent)
    return None


def remember_run_of(agent: Any, run_id: str) -> None:
    with _last_runs_lock, contextlib.suppress(TypeError):  # an agent that cannot be weakly referenced
        _last_runs.set(agent, run_id)


def cost_of(record: RunRecord) -> float | None:
    """The run's cost when it can be priced now, without an import or disk on the loop (else
    ``None``: ``nbagent.analytics.cost.record_cost(record)`` prices it later); a pricing failure never
    fails a run."""
    try:
        return cost.record_cost_if_ready(record)
    except Exception as exc:
        logger.warning("nbagent: could not price run %s: %s", record.run_id, describe(exc))
        return None
