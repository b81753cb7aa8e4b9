"""Explore and share runs: show any run again, write it as one HTML file, browse and compare runs.

- ``show(run_or_id)``: a run from history or a store, as it looked at its end.
- ``to_html(record, path)``: a self-contained HTML file of a run (no script, no CDN).
- ``browse(store)``: a table of runs, filtered, sorted and paged in SQL; pick one to open it,
  two to compare them.
- ``compare(a, b)`` / ``compare_frame(records)``: runs side by side, steps aligned, deltas marked.

Each lives in its own module and loads its dependencies (pandas, ipywidgets, itables) on use.
"""

from __future__ import annotations

from nbagent.lazy import lazy_attributes

__all__ = ["browse", "compare", "compare_frame", "find_record", "html_document", "show", "to_html"]

_WHERE = {
    "browse": "browser",
    "compare": "comparison",
    "compare_frame": "comparison",
    "find_record": "lookup",
    "html_document": "share",
    "show": "lookup",
    "to_html": "share",
}


__getattr__, __dir__ = lazy_attributes(__name__, _WHERE)
