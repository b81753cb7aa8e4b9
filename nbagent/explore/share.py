"""A run as one self-contained HTML file: open it in any browser, mail it, attach it to an issue.

The page is the run's static view (``nbagent.view.html.record_html``, what a finished live view
turns into) inside a minimal document with its own CSS: no script, no widget state, no CDN, no
font or image to fetch, so it renders the same offline and years later. The view's colours come
from JupyterLab's CSS variables with fallbacks; outside JupyterLab the fallbacks apply, and the
page follows the reader's light or dark preference. Everything from a model or tool was escaped
by the view; the title is escaped here.
"""

from __future__ import annotations

import html
import os
from pathlib import Path

from nbagent.records import RunRecord
from nbagent.text import shorten

__all__ = ["html_document", "to_html"]

PAGE_STYLE = """<style>
:root { color-scheme: light dark; }
body { margin: 24px; background: #fff; color: #1f1f1f; }
@media (prefers-color-scheme: dark) { body { background: #1e1e1e; color: #e6e6e6; } }
.nbagent-page-foot { margin-top: 12px; opacity: .7;
  font: 12px -apple-system, "Segoe UI", Roboto, sans-serif; }
</style>"""


def html_document(record: RunRecord) -> str:
    """The whole page for ``record`` as text (``to_html`` writes it)."""
    from nbagent.view.html import record_html

    title = html.escape(f"{shorten(record.agent, 60)} · {record.status} · run {record.run_id}", quote=True)
    started = record.started_at.isoformat(timespec="seconds") if record.started_at else "?"
    foot = html.escape(f"run {record.run_id} · started {started} · saved by nbagent", quote=True)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{title}</title>{PAGE_STYLE}</head><body>"
        f'{record_html(record)}<div class="nbagent-page-foot">{foot}</div></body></html>\n'
    )


def to_html(record: RunRecord, path: str | os.PathLike[str]) -> Path:
    """Write ``record`` as a self-contained HTML file at ``path`` (UTF-8); returns the path."""
    if not isinstance(record, RunRecord):
        raise TypeError(f"to_html takes a RunRecord, not {type(record).__name__}")
    target = Path(path).expanduser()
    target.write_text(html_document(record), encoding="utf-8")
    return target
