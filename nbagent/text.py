"""Untrusted values as safe text: the one place a model's or a tool's value becomes a string.

Everything a model or a tool produced is untrusted, and not only for HTML: a value may refuse to
become text (a ``__repr__`` that raises, ``2 ** 20000`` past Python's int-to-str limit), a string
may not be valid UTF-8 (a lone surrogate that ``json.loads`` makes from a ``\\ud800`` escape), and
text printed to a terminal may carry control sequences (an OSC 52 sequence writes the user's
clipboard). So:

- ``clean(text)`` makes a string encodable: lone surrogates become visible ``\\udXXX`` escapes.
  The recorder applies it where text enters a record, so every consumer (views, frames, store,
  pandas, widgets) gets valid UTF-8.
- ``safe_text(value)`` turns *any* value into clean text and never raises: a value that cannot be
  rendered becomes a readable placeholder naming its type and the error.
- ``terminal_safe(text)`` neutralises control characters (ESC, OSC, BEL, C1 controls) for a
  terminal, keeping newlines and tabs.
- ``shorten(value, limit)`` is ``safe_text`` on one line, clipped.
"""

from __future__ import annotations

import json
import re
import reprlib
from collections.abc import Callable
from typing import Any


def clean(text: str) -> str:
    """``text`` with lone surrogates escaped, so it encodes as UTF-8. Cheap for ASCII text."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


Entry = Callable[[Any, Any, Callable[[Any], Any]], tuple[Any, Any]]
"""Maps one dict entry for ``map_strings``: ``(key, item, again) -> (key, item)``."""


def map_strings(value: Any, on_text: Callable[[str], str], on_entry: Entry | None = None) -> Any:
    """``value`` with ``on_text`` applied to every string in it (nested in plain lists, tuples and
    dicts); ``on_entry(key, item, again)`` maps a dict's entry (default: both through ``again``,
    this same mapping). Other values are returned as they are. A container with nothing changed
    is returned itself, not copied (the record keeps the very object the tool or agent returned);
    one met again inside itself (a cycle), or nested past 32 levels, is left as it is."""
    return _map_strings(value, on_text, on_entry, frozenset())


def _map_strings(
    value: Any, on_text: Callable[[str], str], on_entry: Entry | None, seen: frozenset[int]
) -> Any:
    if isinstance(value, str):
        return on_text(value)
    kind = type(value)
    if kind is not dict and kind is not list and kind is not tuple:
        return value
    if id(value) in seen or len(seen) > 32:
        return value
    inner = seen | {id(value)}

    def again(item: Any) -> Any:
        return _map_strings(item, on_text, on_entry, inner)

    if kind is dict:
        items = [on_entry(k, v, again) if on_entry else (again(k), again(v)) for k, v in value.items()]
        changed = any(
            k is not k0 or v is not v0 for (k, v), (k0, v0) in zip(items, value.items(), strict=True)
        )
        return dict(items) if changed else value
    mapped = [again(v) for v in value]
    changed = any(v is not v0 for v, v0 in zip(mapped, value, strict=True))
    return kind(mapped) if changed else value


def clean_value(value: Any) -> Any:
    """``value`` with every string in it cleaned (``map_strings``). Used on tool arguments and
    results, usually JSON-like data."""
    return map_strings(value, clean)


def _placeholder(value: Any, exc: BaseException) -> str:
    kind = type(value).__name__
    try:
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    except BaseException:
        reason = type(exc).__name__
    return f"<unprintable {clean(kind)}: {clean(reason)[:200]}>"


def safe_text(value: Any) -> str:
    """``value`` as clean text; never raises. Strings are themselves; other values their ``repr``;
    a value whose ``repr`` fails (or is past the int-to-str limit) a ``<unprintable ...>`` note."""
    if isinstance(value, str):
        return clean(value)
    try:
        text = repr(value)
        if not isinstance(text, str):
            raise TypeError(f"__repr__ returned {type(text).__name__}")
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # even SystemExit from a __repr__ must not break a view or a store
        return _placeholder(value, exc)
    return clean(text)


def observation(value: Any) -> str:
    """What the model sees of a tool's result: strings as they are, JSON for plain data, else the
    ``repr``; a result that cannot be rendered becomes a readable placeholder. Never raises."""
    if isinstance(value, str):
        return clean(value)
    try:
        return clean(json.dumps(value, default=safe_text, ensure_ascii=False))
    except KeyboardInterrupt:
        raise
    except BaseException:
        return safe_text(value)


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """``text`` with control characters shown as ``^[``-style escapes (newlines and tabs kept), so
    printed model or tool output cannot move the cursor, change colours or reach the clipboard."""
    if text.isprintable():
        return text
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class _BoundedRepr(reprlib.Repr):
    """``reprlib`` whose fallback for other objects is ``safe_text`` (its placeholder names the
    error a failing ``__repr__`` raised, where reprlib would only say ``<X instance at ...>``)."""

    def repr_instance(self, x: Any, level: int) -> str:
        text = safe_text(x)
        return text if len(text) <= self.maxother else text[: self.maxother - 1] + "…"


def _bounded_repr(value: Any, limit: int) -> str:
    """A ``repr`` that stops early on big containers and strings (``reprlib``), so a million-item
    list costs what its first items cost; small values read exactly as their ``repr``."""
    bounded = _BoundedRepr()
    bounded.maxlevel = 4
    bounded.maxstring = bounded.maxother = bounded.maxlong = max(limit, 40)
    bounded.maxlist = bounded.maxtuple = bounded.maxset = bounded.maxfrozenset = max(limit // 2, 6)
    bounded.maxdict = bounded.maxdeque = bounded.maxarray = max(limit // 4, 4)
    return bounded.repr(value)


def shorten(value: Any, limit: int = 200) -> str:
    """``value`` as one line of at most ``limit`` characters; never raises.

    Only the first ``4 * limit`` characters of a string are looked at, and big containers are
    walked only as far as the line can show, so a huge value costs little."""
    if isinstance(value, str):
        text = clean(value[: 4 * limit + 1])
    else:
        try:
            text = clean(_bounded_repr(value, limit))
        except KeyboardInterrupt:
            raise
        except BaseException:  # an element whose repr fails, an int past the limit...
            text = safe_text(value)
    if len(text) > 4 * limit:
        text = text[: 4 * limit]
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
