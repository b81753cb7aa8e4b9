"""Names a package serves on first use, so importing the package stays cheap.

``lazy_attributes(package, names, submodules)`` gives a package its module ``__getattr__`` and
``__dir__``: each of ``names`` is imported from the submodule it maps to (``{"runs_frame":
"frames"}`` loads pandas only when ``runs_frame`` is first read), each of ``submodules`` is
imported as itself, and any other name is an ``AttributeError`` that names the package.
``__dir__`` lists the served names beside the package's own (its ``__all__``, else its public
globals), because tab completion in IPython and editors asks ``dir()``, and a name that is not
there yet would not complete.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple


class LazyAttributes(NamedTuple):
    """A package's module ``__getattr__`` and ``__dir__``; unpack them into its namespace."""

    getattr: Callable[[str], Any]
    dir: Callable[[], list[str]]


def lazy_attributes(
    package: str, names: Mapping[str, str] | None = None, submodules: Iterable[str] = ()
) -> LazyAttributes:
    """``__getattr__, __dir__`` for ``package``, serving ``names`` and ``submodules`` on first use."""
    where = dict(names or {})
    modules = frozenset(submodules)

    def __getattr__(name: str) -> Any:
        if name in where:
            return getattr(importlib.import_module(f"{package}.{where[name]}"), name)
        if name in modules:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        namespace = vars(sys.modules[package])
        own = namespace.get("__all__") or [name for name in namespace if not name.startswith("_")]
        return sorted({*own, *where, *modules})

    return LazyAttributes(__getattr__, __dir__)
