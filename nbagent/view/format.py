"""How one value reads in nbagent's HTML: escaped, never typeset as math, clipped for the eye.

Every string that came from a model, a tool or the user is escaped here (``esc``; ``attr`` for an
attribute) and nowhere else, after ``nbagent.text`` made it safe, and scrubbed of credentials
(``nbagent.secrets``): formatting never raises on a value (a ``repr`` that fails,
``2 ** 20000``) and never emits text that is not valid UTF-8 (a lone surrogate would make the
widget update fail in the kernel and freeze the view). Long values are clipped (the record keeps
them whole), and only the clipped part is ever looked at, so a 10 MB task or tool argument costs
little.

The page shows what was said, never math made of it. JupyterLab and Notebook 7 run MathJax over
every HTML output, so "It costs $5 today and $10 tomorrow." would show "5 today and 10" as an italic
formula, and a backslash starts math too (``\\(``, ``\\[``, ``\\begin{…}``, ``\\ref{…}``). The one
opt-out JupyterLab 4 honours is the class ``mathjax_ignore`` (not the older ``tex2jax_ignore``), and
other front ends differ (a KaTeX extension, MathJax 2 in classic Notebook and in ipywidgets' own
fallback, VS Code's renderers), so ``esc`` relies on no class: it puts every ``$`` and ``\\`` in an
element of its own. Typesetters (MathJax 2 and 3, KaTeX's auto-render) look for delimiters within
one run of text, and an element ends the run, so no delimiter pair can form; the text reads and
copies exactly as it was.
"""

from __future__ import annotations

import html
import json
from typing import Any

from nbagent.secrets import scrub
from nbagent.text import clean, safe_text

LOG_LINES_SHOWN = 5
"""A call's row shows at most its last this many log lines, and a count of the rest."""
PROGRESS_MESSAGE_LIMIT = 160

TEXT_HEAD = 600
TEXT_TAIL = 2400
ARGUMENTS_LIMIT = 200


def attr(value: Any) -> str:
    """``value`` escaped for an attribute (``title="…"``): strings cleaned of lone surrogates,
    anything else its ``repr`` (or a placeholder when that fails), scrubbed of credentials (a
    record made outside a run, by ``records_from_*`` or by hand, was never scrubbed). Never raises.
    Typesetters do not read attributes, so nothing more is needed there."""
    return html.escape(scrub(clean(value) if isinstance(value, str) else safe_text(value)), quote=True)


def esc(value: Any) -> str:
    """``value`` as HTML text that shows exactly as it is: escaped like ``attr``, and with each
    ``$`` and ``\\`` in an element of its own so no front end typesets it as math (see the module
    docstring). Every piece of text nbagent puts in HTML passes through here. Never raises."""
    text = attr(value)
    if "$" in text:
        text = text.replace("$", "<span>$</span>")
    if "\\" in text:
        text = text.replace("\\", "<span>\\</span>")
    return text


def seconds(value: float | None) -> str:
    """A duration for people: ``12 ms``, ``1.6 s``, ``2 min 05 s``."""
    if value is None:
        return "?"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 60:
        return f"{value:.1f} s"
    minutes, rest = divmod(round(value), 60)
    return f"{minutes} min {rest:02d} s"


def tokens(input_tokens: int | None, output_tokens: int | None) -> str:
    """``180 in / 32 out``; an unknown count shows as ``?``, never as 0."""
    if input_tokens is None and output_tokens is None:
        return "tokens unknown"
    return f"{count(input_tokens)} in / {count(output_tokens)} out"


def count(n: int | None) -> str:
    """``1,024``, or ``?`` for an unknown count."""
    return "?" if n is None else f"{n:,}"


def _value_text(value: Any, limit: int) -> str:
    if isinstance(value, str):
        return json.dumps(value[: limit + 1], ensure_ascii=False)  # quoted, as in a call
    try:
        return json.dumps(value, default=safe_text, ensure_ascii=False)
    except Exception:  # 2 ** 20000, a cycle, a dict with odd keys: its repr, or a placeholder
        return safe_text(value)


def arguments_text(arguments: Any, limit: int = ARGUMENTS_LIMIT) -> str:
    """A tool call's arguments as they would be written in a call: ``n=391, mode="fast"``.

    Never raises. Stops after about ``limit`` characters, and a string (the usual huge value) is
    read only that far, so a 10 MB argument costs what a short one does."""
    if isinstance(arguments, str):
        return clean(arguments[: limit + 1])
    if not isinstance(arguments, dict):
        return _value_text(arguments, limit)
    parts: list[str] = []
    size = 0
    try:
        for name, value in arguments.items():
            if size > limit:
                break
            label = clean(name[:limit]) if isinstance(name, str) else safe_text(name)
            parts.append(f"{label}={_value_text(value, limit)}")
            size += len(parts[-1]) + 2
    except Exception:  # a dict subclass whose items() fails
        return safe_text(arguments)
    return ", ".join(parts)


def clipped_text(text: str, head: int = TEXT_HEAD, tail: int = TEXT_TAIL) -> str:
    """Escaped ``text``; when longer than ``head + tail`` its middle becomes a marker."""
    if len(text) <= head + tail:
        return esc(text)
    hidden = len(text) - head - tail
    marker = (
        f'<span class="nbagent-clipped">[… {hidden:,} characters not shown; the record has them all …]</span>'
    )
    return f"{esc(text[:head])}{marker}{esc(text[-tail:])}"


def _amount(value: float) -> str:
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:.4g}"


def progress_text(progress: Any) -> str:
    """A call's last progress (``nbagent.records.ToolProgress``) as plain words for any view:
    ``3/10 · step 3 of 10``, or the bare count ``3 · item 3`` when the total is unknown."""
    count = _amount(progress.progress)
    if progress.fraction is not None:
        count += f"/{_amount(progress.total)}"
    message = progress.message
    if message:
        from nbagent.text import shorten

        count += f" · {shorten(message, PROGRESS_MESSAGE_LIMIT)}"
    return count


def log_tail(lines: list[str], dropped: int) -> tuple[list[str], int]:
    """The log lines a view shows of a call (its last ``LOG_LINES_SHOWN``), and how many earlier
    lines it does not show (those the record dropped included)."""
    shown = lines[-LOG_LINES_SHOWN:]
    return shown, dropped + len(lines) - len(shown)
