"""Static HTML rendering of a run record (a saved notebook shows it without widget state)."""

from __future__ import annotations

import html

from .records import RunRecord
from .textview import record_text


def record_html(record: RunRecord) -> str:
    return f"<pre>{html.escape(record_text(record))}</pre>"
