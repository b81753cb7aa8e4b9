"""A weak mapping keyed by object identity.

Runs remember things about the agent object a user passed (its last run, a framework agent's kept
history, whose turn it is) without touching the object. ``weakref.WeakKeyDictionary`` needs
hashable keys that compare by equality; a pydantic-ai ``Agent`` defines ``__eq__`` and so is
unhashable, and two equal agents are still two agents. This map compares keys by identity and
holds them weakly, so an agent that is dropped takes its entries with it.
"""

from __future__ import annotations

import weakref
from typing import Any


class IdentityMap:
    """Object → value, by identity, keys held weakly. Raises ``TypeError`` for a key that cannot be
    weakly referenced (callers decide whether that matters)."""

    def __init__(self) -> None:
        self._items: dict[int, tuple[weakref.ref[Any], Any]] = {}

    def get(self, key: Any) -> Any:
        entry = self._items.get(id(key))
        return entry[1] if entry is not None and entry[0]() is key else None

    def set(self, key: Any, value: Any) -> None:
        ident = id(key)
        self._items[ident] = (weakref.ref(key, lambda _ref: self._items.pop(ident, None)), value)

    def pop(self, key: Any) -> None:
        if self.get(key) is not None:
            del self._items[id(key)]
