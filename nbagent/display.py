"""Show a run in the current front end: the live widget view in a Jupyter kernel, text elsewhere.

The runner calls ``show_run(run)`` from ``start()`` before the run starts (sinks must be in place
before the first event). In a kernel the widget view is displayed with static HTML and text
fallbacks, for front ends that cannot render widgets (nbconvert, a plain console); in an IPython
terminal or a plain interpreter the run streams as text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from .runner import Run

FrontEnd = Literal["widgets", "text"]


def front_end() -> FrontEnd:
    """``"widgets"`` inside a Jupyter kernel with ipywidgets importable, else ``"text"``."""
    try:
        from IPython import get_ipython
    except ImportError:
        return "text"
    shell = get_ipython()
    if shell is None or getattr(shell, "kernel", None) is None:
        return "text"
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return "text"
    return "widgets"


def show_run(run: Run) -> None:
    """Attach the view that fits the front end to ``run`` and show it. Before the run starts."""
    if front_end() == "widgets":
        from .live import LiveView

        view = LiveView(run)
        run.add_sink(view)
        view.display()
    else:
        from .textview import TextView

        run.add_sink(TextView())
