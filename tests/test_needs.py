"""The declarations of what a test needs (tests/needs.py) read pyproject.toml, not the environment."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from needs import ROOT, extra_installed, requirements_of, skip_reason
from packaging.requirements import Requirement
from test_readme import read_blocks


def test_an_extra_brings_what_pyproject_lists_following_extras_that_name_extras():
    assert [r.name for r in requirements_of(["plots"])] == ["matplotlib"]
    everything = {r.name for r in requirements_of(["test-all"])}
    assert {"matplotlib", "smolagents", "playwright", "pytest"} <= everything
    assert "nbagent-jupyter" not in everything


def test_a_misspelt_extra_is_an_error_not_a_silent_skip():
    with pytest.raises(ValueError, match=r"no extra \['plot'\]"):
        extra_installed("plot")


def test_the_reason_names_the_extras_and_the_command_that_installs_them():
    assert skip_reason("test_x.py", ["plots", "cost"]) == (
        "test_x.py needs the plots, cost extras: pip install -e '.[plots,cost]'"
    )


def test_a_docs_sample_declares_its_extras_in_a_comment_above_its_fence():
    markdown = (
        "<!-- needs: plots, cost -->\n```python\nx = 1\n```\n\n<!-- continues -->\n```python\ny = 2\n```\n"
    )
    first, second = read_blocks(markdown)
    assert (first.needs, first.continues) == (("plots", "cost"), False)
    assert (second.needs, second.continues) == ((), True)


def test_a_module_needing_a_missing_extra_is_skipped_unimported_saying_which(tmp_path: Path):
    (tmp_path / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'tests')!r})\n"
        "import needs\nneeds.extra_installed = lambda extra: extra != 'plots'\n"
        f"exec(open({str(ROOT / 'tests' / 'conftest.py')!r}).read())\n"
    )
    (tmp_path / "test_plotting.py").write_text(
        textwrap.dedent(
            """
            import pytest
            import no_such_plotting_library

            pytestmark = pytest.mark.needs("plots")

            def test_never_runs():
                pass
            """
        )
    )
    (tmp_path / "test_some.py").write_text(
        textwrap.dedent(
            """
            import pytest

            @pytest.mark.needs("plots", "cost")
            def test_one_needs_it():
                import no_such_plotting_library

            @pytest.mark.parametrize("x", [pytest.param(1, marks=pytest.mark.needs("plots")), 2])
            def test_one_parameter_needs_it(x):
                assert x == 2
            """
        )
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},  # the marker needs no plugin
    )
    assert "1 passed, 3 skipped" in result.stdout, result.stdout + result.stderr
    assert "test_plotting.py needs the plots extra: pip install -e '.[plots]'" in result.stdout
    assert "test_one_needs_it needs the plots extra" in result.stdout


def test_a_requirement_counts_as_installed_only_when_its_distribution_is():
    from needs import _installed

    assert _installed(Requirement("pytest"))
    assert not _installed(Requirement("nbagent-no-such-distribution"))
    assert _installed(Requirement("nbagent-no-such-distribution; python_version < '3'"))  # not for us
