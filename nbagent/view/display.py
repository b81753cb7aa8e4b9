"""Show a run in the current front end: the live widget view in a Jupyter kernel, text elsewhere.

The runner calls ``show_run(run)`` from ``start()`` before the run starts (sinks must be in place
before the first event). In a kernel the widget view is displayed with static HTML and text
fallbacks, for front ends that cannot render widgets (nbconvert, a plain console); in an IPython
terminal or a plain interpreter the run streams as text.

A live run shown again (``show_again``: ``nbagent.show(run)``, a ``Run`` as a cell's last line)
gets a view that follows it to its end. It also remembers which cell displayed each run's live
view (the id of the kernel request that ran it), so a ``RunRecord`` or ``Run`` that is the same
cell's result (``record = await run`` as its last line) shows as one line under the view, or
nothing, instead of drawing the run a second time.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from nbagent.runtime.handle import Run

FrontEnd = Literal["widgets", "text"]

SHOWN_REMEMBERED = 1000
"""How many runs' cells are remembered (only the latest cells matter)."""

_shown: OrderedDict[str, str] = OrderedDict()
_shown_lock = threading.Lock()


def _kernel() -> Any:
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    return getattr(shell, "kernel", None) if shell is not None else None


def in_kernel() -> bool:
    """True inside a Jupyter kernel (not an IPython terminal, not a plain interpreter)."""
    return _kernel() is not None


def front_end() -> FrontEnd:
    """``"widgets"`` inside a Jupyter kernel with ipywidgets importable, else ``"text"``."""
    if not in_kernel():
        return "text"
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return "text"
    return "widgets"


def current_cell_id() -> str | None:
    """The id of the request (the cell) the kernel is executing now, or ``None`` outside one."""
    kernel = _kernel()
    if kernel is None:
        return None
    try:
        return kernel.get_parent()["header"]["msg_id"] or None
    except Exception:  # no parent yet, or a kernel without get_parent (ipykernel < 6)
        return None


def note_shown(run_id: str) -> None:
    """Remember that the cell running now displayed the live view of ``run_id``."""
    cell = current_cell_id()
    if cell is None:
        return
    with _shown_lock:
        _shown[run_id] = cell
        while len(_shown) > SHOWN_REMEMBERED:
            _shown.popitem(last=False)


def shown_in_this_cell(run_id: str) -> bool:
    """True when the cell running now displayed the live view of ``run_id``."""
    cell = current_cell_id()
    with _shown_lock:
        return cell is not None and _shown.get(run_id) == cell


def show_run(run: Run) -> None:
    """Attach the view that fits the front end to ``run`` and show it. Before the run starts."""
    if front_end() == "widgets":
        from nbagent.view.live import LiveView

        view = LiveView(run)
        run.add_sink(view)
        view.display()
    else:
        from nbagent.view.terminal import TextView
        from nbagent.view.terminal_approvals import TerminalApprovals

        run.add_sink(TextView())
        run.add_sink(TerminalApprovals(run))


def show_again(run: Run) -> None:
    """Display ``run`` once more: in a kernel with widgets, a view that follows it while it is
    live (``nbagent.view.follow``), its static end once it has ended; elsewhere its text so far."""
    from nbagent.view.terminal import record_text

    if run.done() or front_end() != "widgets":
        if not in_kernel():
            print(record_text(run.record))
            return
        from IPython.display import display

        from nbagent.view.html import record_html

        record = run.record
        display({"text/html": record_html(record), "text/plain": record_text(record)}, raw=True)
        return
    from nbagent.view.follow import FollowingView

    FollowingView(run).display()


def display_run(run: Run) -> None:
    """A ``Run`` as a cell's last line (``Run._ipython_display_``): nothing in the cell that shows
    its live view already (``run = nbagent.start(...); run``), else ``show_again``."""
    if not in_kernel():
        print(repr(run))
    elif not shown_in_this_cell(run.run_id):
        show_again(run)
