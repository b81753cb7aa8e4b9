"""Show a run in the current front end: the live widget view in Jupyter, text elsewhere."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .runner import Run


def show_run(run: Run) -> None:
    from .textview import TextView

    run.add_sink(TextView())
