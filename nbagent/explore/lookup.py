"""Any run, shown again as it looked at its end: from a record, a run handle, or just its id.

``show(run_id)`` finds the run in this process's history first (the record the run itself
returned), then in the given store or the configured one, so a run of an earlier kernel, even
one that was interrupted or whose process died (``"unfinished"``), is one call away. What it
shows is ``nbagent.view.html.record_html``: the very static view a finished live view turns into,
so a re-shown run and the saved notebook look the same. In a kernel it is displayed (HTML with a
text fallback); elsewhere the run is printed as the terminal view prints it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nbagent.records import RunRecord

if TYPE_CHECKING:
    from nbagent.analytics.store import RunStore

__all__ = ["find_record", "show"]


def find_record(run: Any, store: RunStore | None = None) -> RunRecord:
    """The ``RunRecord`` that ``run`` names: a record itself, a ``Run`` handle (its record so
    far), or a run id looked up in history, then in ``store`` (default: the configured store).

    Raises ``KeyError`` naming where it looked when no run has that id, and ``TypeError`` for
    anything that names no run."""
    if isinstance(run, RunRecord):
        return run
    from nbagent.runtime.handle import Run

    if isinstance(run, Run):
        return run.record
    if not isinstance(run, str):
        raise TypeError(f"show a RunRecord, a Run or a run id (str), not {type(run).__name__}")
    from nbagent.analytics import history
    from nbagent.config import settings

    store = store if store is not None else settings.store
    for source in (history, store):  # both are a RunSource (nbagent.analytics.runs)
        if source is None:
            continue
        try:
            return source.record(run)
        except KeyError:
            pass
    where = "this process's history" + (f" or {store!r}" if store is not None else "")
    hint = "" if store is not None else " (no store given or configured: show(run_id, store=RunStore(path)))"
    raise KeyError(f"no run {run!r} in {where}{hint}")


def show(run: Any, store: RunStore | None = None) -> None:
    """Show a run as it looked at its end: ``run`` is a record, a ``Run`` or a run id (looked
    up in history, then in ``store`` or the configured store). Displays the static run view in
    Jupyter, prints the text view elsewhere. Returns nothing, so a cell ending in ``show(...)``
    draws the run once; ``find_record`` gives the record itself. A live ``Run`` is shown
    following it to its end."""
    from nbagent.runtime.handle import Run

    if isinstance(run, Run):
        from nbagent.view.display import show_again

        show_again(run)
        return
    record = find_record(run, store)
    from nbagent.view.display import in_kernel

    if in_kernel():
        from IPython.display import display

        from nbagent.view.html import record_html
        from nbagent.view.terminal import record_text

        display({"text/html": record_html(record), "text/plain": record_text(record)}, raw=True)
    else:
        from nbagent.view.terminal import record_text

        print(record_text(record))
