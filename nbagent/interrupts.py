"""Jupyter's interrupt and blocking waits, as they meet a run.

``blocking_wait(run)`` wraps a blocking ``run.wait()``; ``sigint_stops(run)`` wraps ``await run``.
(Filled in with the kernel-facing behaviour: see the view and the kernel tests.)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .runner import Run


@dataclass
class KeyboardFlag:
    pressed: bool = False


@contextlib.contextmanager
def blocking_wait(run: Run) -> Iterator[None]:
    yield


@contextlib.contextmanager
def sigint_stops(run: Run) -> Iterator[KeyboardFlag]:
    yield KeyboardFlag()
