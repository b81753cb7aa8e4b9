"""The command that installs one of nbagent's optional extras, as this copy of nbagent was installed.

nbagent is not on a package registry yet: it is installed from a checkout (``pip install -e .``), and
an error's hint must be a command that works where it is shown. Running from a checkout (an editable
install, or the source folder on the path), the hint installs the extra from that checkout;
otherwise it names the distribution, ``nbagent-jupyter``, as a registry or a wheel index knows it.
Only an error's message asks, so the one file read costs nothing on the way to a run.
"""

from __future__ import annotations

import shlex
from pathlib import Path

DISTRIBUTION = "nbagent-jupyter"
"""This project's distribution name ("nbagent" on the package registry is an unrelated project)."""


def checkout() -> Path | None:
    """The source checkout this nbagent is imported from, or None for an installed copy."""
    root = Path(__file__).resolve().parent.parent
    try:
        project = (root / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return None
    return root if f'name = "{DISTRIBUTION}"' in project else None


def install_hint(extra: str) -> str:
    """``pip install ...`` that adds ``extra`` to this nbagent, ready to paste into a shell."""
    source = checkout()
    if source is None:
        return f"pip install {shlex.quote(f'{DISTRIBUTION}[{extra}]')}"
    return f"pip install -e {shlex.quote(f'{source}[{extra}]')}"
