"""The samples of the README and of every page in docs/ run as written, so none can rot again.

Every ```python block of README.md, docs/*.md and CONTRIBUTING.md is executed, in order, each in a
fresh namespace. Conventions for whoever edits the docs:

- ``<!-- continues -->`` (an HTML comment, invisible on GitHub) on the line just above a fence
  runs that block in the namespace of the python block before it, for a sample told in steps.
- ``<!-- needs: smolagents, plots -->`` just above a sample's first fence names the extras it needs
  beyond ``test`` (tests/needs.py): without them it is skipped, saying which to install.
- A block may ``await`` at top level, as a notebook cell may: it is compiled with
  ``PyCF_ALLOW_TOP_LEVEL_AWAIT`` and its coroutine run with ``asyncio.run``, so names it assigns
  land in the namespace like any cell's.
- After a sample, every ``Run`` it left (waited for), ``RunRecord`` and list of records in its
  namespace must have ended ``"success"``: a sample that runs but fails is a failure here too.

Network models are answered offline, and only those (fixture ``offline_models``):

- ``OpenAIChatModel`` is the real client, pointed at ``tests/openai_server.OpenAIServer`` on
  127.0.0.1 through ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``; the server answers every request
  with a short streamed text, so an agent gives its final answer in one step.
- ``smolagents.InferenceClientModel`` is replaced by ``OfflineSmolModel`` (a real smolagents
  ``Model`` that answers every task at once) and ``smolagents.WebSearchTool`` by
  ``OfflineWebSearch`` (same name and inputs, canned text), so no sample can reach the web.

What is checked is that the samples run against the real API, not what a real model would say.
Every command in a ```bash block is checked without running anything long: ``pip install``
names extras that exist, ``python -m nbagent ...`` runs, ``python -m pytest`` starts, ``bash
FILE`` parses. A command with no check fails the test: teach this file how to check it. Every
script in benchmarks/ must be in the Benchmarks table and take the flags its prose promises; the
notebook install that the README and binder/postBuild name must bring every extra a notebook says
it needs (its metadata's ``nbagent.needs``), by pyproject.toml.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import inspect
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from doc_samples import OFFLINE_ANSWER, offline_smolagents, outcomes
from needs import (
    BENCHMARK_NEEDS,
    distribution,
    missing_extras,
    notebook_needs,
    pyproject,
    requirements_of,
    skip_reason,
)
from openai_server import OpenAIServer, Stream
from packaging.utils import canonicalize_name
from support import ROOT

import nbagent
from nbagent.config import settings

README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md")), ROOT / "CONTRIBUTING.md"]
BENCHMARKS_PAGE = ROOT / "docs" / "benchmarks.md"
CONTINUES = "<!-- continues -->"
NEEDS = re.compile(r"^<!-- needs: ([\w, -]+) -->$")


@dataclass(frozen=True)
class Block:
    """One fenced code block: its language, code, first code line (1-based), whether it continues
    and the extras it needs."""

    language: str
    code: str
    line: int
    continues: bool = False
    path: Path = README
    needs: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def read_blocks(markdown: str, path: Path = README) -> list[Block]:
    """The fenced blocks of ``markdown`` (the text of ``path``), in order."""
    blocks: list[Block] = []
    lines = markdown.splitlines()
    index = 0
    while index < len(lines):
        opening = re.match(r"^```(\w*)\s*$", lines[index])
        if not opening:
            index += 1
            continue
        comments = _comments_above(lines[:index])
        end = index + 1
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        code = "\n".join(lines[index + 1 : end]) + "\n"
        needs = tuple(n.strip() for c in comments if (m := NEEDS.match(c)) for n in m[1].split(","))
        blocks.append(Block(opening[1], code, index + 2, CONTINUES in comments, path, needs))
        index = end + 1
    return blocks


def _comments_above(lines: list[str]) -> list[str]:
    """The HTML comment lines just above a fence (blank lines between them allowed)."""
    comments = []
    for line in reversed([line.strip() for line in lines if line.strip()]):
        if not (line.startswith("<!--") and line.endswith("-->")):
            break
        comments.append(line)
    return comments


def python_samples(blocks: list[Block]) -> list[list[Block]]:
    """The python blocks grouped into samples: a block and the blocks that continue it."""
    samples: list[list[Block]] = []
    for block in blocks:
        if block.language != "python":
            continue
        if block.continues:
            if not samples:
                raise ValueError(f"{block.where}: {CONTINUES} but no python block before it")
            samples[-1].append(block)
        else:
            samples.append([block])
    return samples


def bash_commands(blocks: list[Block]) -> list[str]:
    """Every command of every bash block: lines split at ``&&``, ``||`` and ``;``."""
    commands = []
    for block in blocks:
        if block.language == "bash":
            for line in block.code.splitlines():
                if line.strip() and not line.lstrip().startswith("#"):
                    commands += [part.strip() for part in re.split(r"&&|\|\||;", line) if part.strip()]
    return commands


BLOCKS = [block for path in DOCS for block in read_blocks(path.read_text(encoding="utf-8"), path)]


# -- offline stand-ins -----------------------------------------------------------------------


@pytest.fixture
def offline_models(monkeypatch: pytest.MonkeyPatch):
    """Answer the README's network models offline (see the module docstring); yields the server."""
    if not missing_extras(["smolagents"]):  # installed (a tests folder of that name is not)
        import smolagents

        model, search = offline_smolagents()
        monkeypatch.setattr(smolagents, "InferenceClientModel", model)
        monkeypatch.setattr(smolagents, "WebSearchTool", search)
    with OpenAIServer(default=Stream(text=OFFLINE_ANSWER)) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-offline-readme-test")
        yield server


@pytest.fixture
def sample_sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A temporary working directory (``runs.db`` lands there), no view, settings restored after."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    saved = {field.name: getattr(settings, field.name) for field in dataclasses.fields(settings)}
    nbagent.configure(display=False)
    namespace: dict[str, Any] = {"__name__": "__readme__"}
    yield namespace
    nbagent.interrupt_all()
    for name, value in saved.items():
        setattr(settings, name, value)
    for value in namespace.values():
        if isinstance(value, nbagent.RunStore):
            value.close()
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")


def execute(block: Block, namespace: dict[str, Any]) -> None:
    """Run one block in ``namespace``; a block that awaits at top level runs on a fresh event loop."""
    padded = "\n" * (block.line - 1) + block.code  # tracebacks point at the page's own lines
    code = compile(padded, str(block.path), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    if code.co_flags & inspect.CO_COROUTINE:
        asyncio.run(eval(code, namespace))
    else:
        exec(code, namespace)


# -- the tests -------------------------------------------------------------------------------


def test_continues_comment_joins_a_block_to_the_one_before():
    markdown = (
        "```python\nx = 1\n```\n\ntext\n\n<!-- continues -->\n\n```python\ny = x + 1\n```\n\n"
        "```bash\necho hi && echo there; ls\n```\n\n```python\nz = 3\n```\n"
    )
    blocks = read_blocks(markdown)
    assert [(b.language, b.line, b.continues) for b in blocks] == [
        ("python", 2, False),
        ("python", 10, True),
        ("bash", 14, False),
        ("python", 18, False),
    ]
    assert [[b.code for b in sample] for sample in python_samples(blocks)] == [
        ["x = 1\n", "y = x + 1\n"],
        ["z = 3\n"],
    ]
    assert bash_commands(blocks) == ["echo hi", "echo there", "ls"]
    with pytest.raises(ValueError, match="no python block before"):
        python_samples(read_blocks("<!-- continues -->\n```python\nx = 1\n```\n"))


def test_a_failing_sample_fails_at_its_readme_line(sample_sandbox):
    block = Block("python", "import asyncio\nawait asyncio.sleep(0)\nraise LookupError('broken')\n", 40)
    with pytest.raises(LookupError) as caught:
        execute(block, sample_sandbox)
    assert caught.traceback[-1].lineno + 1 == 42  # pytest counts from 0


SAMPLES = python_samples(BLOCKS)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("sample", SAMPLES, ids=[s[0].where for s in SAMPLES])
def test_docs_python_sample_runs_as_written(sample, offline_models, sample_sandbox):
    missing = missing_extras(sample[0].needs)
    if missing:
        pytest.skip(skip_reason(f"the sample at {sample[0].where}", missing))
    for block in sample:
        execute(block, sample_sandbox)
    records = outcomes(sample_sandbox)
    failed = {name: (r.status, r.error) for name, r in records.items() if r.status != "success"}
    assert not failed, f"runs of the sample at {sample[0].where} did not succeed: {failed}"
    if any("OpenAIChatModel(" in block.code for block in sample) and records:
        assert offline_models.requests, "the sample's OpenAI model never reached the offline server"


def test_the_readme_has_samples_of_each_kind():
    assert len(SAMPLES) >= 15 and bash_commands(BLOCKS), "the docs lost their samples, or this parser broke"
    readme = [block for block in BLOCKS if block.path == README]
    assert python_samples(readme) and bash_commands(readme), "the README lost its quickstart"


def _extras_named(words: list[str]) -> list[str]:
    """The extras in pip arguments such as ``-e .[a,b]`` or ``DISTRIBUTION[c]``."""
    pattern = rf"^[\"']?(?:\.|{re.escape(distribution())})\[([^\]]*)\][\"']?$"
    groups = [group for word in words for group in re.findall(pattern, word)]
    return [name.strip() for group in groups for name in group.split(",")]


def _run(*command: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def check_command(command: str) -> None:
    """Check one command of the docs without running anything long (see the module docstring)."""
    words = shlex.split(command)
    match words:
        case ["pip", "install", *arguments]:
            extras = pyproject()["project"]["optional-dependencies"]
            unknown = [name for name in _extras_named(arguments) if name not in extras]
            assert not unknown, f"{command!r} names extras pyproject.toml lacks: {unknown}"
            assert all(a in (".", "-e") or _extras_named([a]) for a in arguments), f"unexpected: {command!r}"
        case ["python", "-m", "nbagent", *arguments]:
            result = _run(sys.executable, "-m", "nbagent", *arguments)
            assert result.returncode == 0, f"{command!r} failed:\n{result.stdout}\n{result.stderr}"
        case ["python", "-m", "pytest", *_]:
            result = _run(sys.executable, "-m", "pytest", "--version")
            assert result.returncode == 0, result.stderr
        case ["bash", script]:
            assert (ROOT / script).is_file(), f"{command!r}: no {script}"
            result = _run("bash", "-n", script)
            assert result.returncode == 0, result.stderr
        case _:
            pytest.fail(f"no check for the command {command!r}: teach tests/test_readme.py one")


@pytest.mark.parametrize("command", bash_commands(BLOCKS))
def test_docs_bash_command_works(command):
    check_command(command)


PIP_INSTALL = re.compile(r"pip install (?:-U |--upgrade )?(?:-e )?([\"']?[\w.-]*\[[^\]]*\][\"']?)")


def _install_texts() -> dict[str, str]:
    """Every text a user may copy an install command from: the docs, the notebooks, nbagent's hints."""
    texts = {str(path.relative_to(ROOT)): path.read_text(encoding="utf-8") for path in DOCS}
    for path in [*(ROOT / "notebooks").glob("*.ipynb"), *(ROOT / "nbagent").rglob("*.py")]:
        texts[str(path.relative_to(ROOT))] = path.read_text(encoding="utf-8")
    return texts


def test_every_pip_install_names_this_project_and_an_existing_extra():
    extras = pyproject()["project"]["optional-dependencies"]
    found = {where: PIP_INSTALL.findall(text.replace('\\"', '"')) for where, text in _install_texts().items()}
    assert found["README.md"], "the README names no extra to install"
    for where, targets in found.items():
        for target in targets:
            if "{" in target:  # a template in nbagent's own hints: its extras are checked where it is filled
                continue
            command = f"{where}: 'pip install {target}'"
            named = _extras_named([target])
            assert named, f"{command} would not install this project ({distribution()})"
            unknown = [name for name in named if name not in extras]
            assert not unknown, f"{command} names extras pyproject.toml lacks: {unknown}"


def _benchmarks_section() -> str:
    return BENCHMARKS_PAGE.read_text(encoding="utf-8")


BENCHMARKS = sorted(path.name for path in (ROOT / "benchmarks").glob("*.py"))


def test_the_benchmark_table_lists_every_benchmark():
    listed = sorted(set(re.findall(r"`benchmarks/(\w+\.py)`", _benchmarks_section())))
    assert listed == BENCHMARKS


@pytest.mark.parametrize(
    "script",
    [pytest.param(name, marks=pytest.mark.needs(*BENCHMARK_NEEDS.get(name[:-3], ()))) for name in BENCHMARKS],
)
def test_every_benchmark_takes_the_flags_the_readme_promises(script):
    prose = "\n".join(line for line in _benchmarks_section().splitlines() if not line.startswith("|"))
    promised = set(re.findall(r"`(--[a-z][a-z-]*)`", prose))
    assert promised, "the Benchmarks section names no flag"
    result = _run(sys.executable, f"benchmarks/{script}", "--help")
    assert result.returncode == 0, result.stderr
    accepted = set(re.findall(r"(--[a-z][a-z-]*)", result.stdout))
    assert promised <= accepted, f"{script} does not take {sorted(promised - accepted)}"


def _distributions(extras: list[str]) -> set[str]:
    """The distributions ``pip install .[extras]`` brings beyond the core ones, by pyproject.toml."""
    return {canonicalize_name(requirement.name) for requirement in requirements_of(extras)}


def _notebook_installs() -> dict[str, list[str]]:
    readme = re.findall(r"pip install -e \"(\.\[[^\]]*\])\"; jupyter lab", README.read_text(encoding="utf-8"))
    binder = re.findall(
        r"pip install[^\n]*?[\"']?(\.\[[^\]]*\])", (ROOT / "binder" / "postBuild").read_text()
    )
    return {"README": _extras_named(readme), "binder/postBuild": _extras_named(binder)}


@pytest.mark.parametrize("where", ["README", "binder/postBuild"])
def test_the_notebook_install_brings_what_every_notebook_needs(where):
    extras = _notebook_installs()[where]
    assert extras, f"{where} names no notebook install (pip install ... .[extra])"
    installed = _distributions(extras)
    missing = {
        nb.name: sorted(_distributions(notebook_needs(nb)) - installed)
        for nb in sorted((ROOT / "notebooks").glob("*.ipynb"))
    }
    missing = {name: needs for name, needs in missing.items() if needs}
    assert not missing, f"{where} installs .[{','.join(extras)}], which lacks: {missing}"
