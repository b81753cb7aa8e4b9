"""Names a package serves on first use, so importing the package stays cheap.

``lazy_attributes(package, names, submodules)`` is a package's module ``__getattr__``: each of
``names`` is imported from the submodule it maps to (``{"runs_frame": "frames"}`` loads pandas only
when ``runs_frame`` is first read), each of ``submodules`` is imported as itself, and any other name
is an ``AttributeError`` that names the package.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def lazy_attributes(
    package: str, names: Mapping[str, str] | None = None, submodules: Iterable[str] = ()
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` serving ``names`` and ``submodules`` on first use."""
    where = dict(names or {})
    modules = frozenset(submodules)

    def __getattr__(name: str) -> Any:
        if name in where:
            return getattr(importlib.import_module(f"{package}.{where[name]}"), name)
        if name in modules:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
