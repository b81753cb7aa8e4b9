"""``python -m nbagent``: the terminal demo, its Ctrl-C, its help, and the demo agent's fact table."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import termios
import time

import pytest

import nbagent
from nbagent.__main__ import main
from nbagent.demo import demo_policy, find_fact, lookup_fact, topics_in

TIMEOUT = 120
ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "NO_COLOR": "1"}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nbagent", *args], capture_output=True, text=True, timeout=TIMEOUT, env=ENV
    )


def test_demo_prints_the_transcript_once_then_a_summary_line():
    result = _cli("demo", "--fast")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "⚙ calculator(expression='17 * 23')" in out and "→ 391" in out
    assert out.count("Final answer: 17 * 23 = 391.") == 1  # live only, not again in a record dump
    assert out.count("⚙ calculator") == 1
    assert re.search(r"^  ✓ step 4 · final answer · \d+\.\d\d s · \d+ in / \d+ out$", out, re.M)
    assert re.search(r"\A▶ demo \(demo-scripted\): What is 17 \* 23", out)
    assert re.fullmatch(r"■ success · 4 steps · \d+\.\d\d s · \d+ in / \d+ out tokens", out.splitlines()[-1])


def _read_until(proc: subprocess.Popen[str], marker: str) -> str:
    seen = ""
    deadline = time.monotonic() + TIMEOUT
    while marker not in seen:
        assert time.monotonic() < deadline, seen
        line = proc.stdout.readline()
        assert line, f"the demo ended before printing {marker!r}: {seen}"
        seen += line
    return seen


def test_ctrl_c_exits_130_with_interrupted_on_its_own_line_and_a_summary():
    proc = subprocess.Popen(
        [sys.executable, "-u", "-m", "nbagent", "demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        start_new_session=True,
    )
    try:
        seen = _read_until(proc, "── step 1")  # the run is streaming: press Ctrl-C
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    lines = (seen + out).splitlines()
    end = [line for line in lines if line.startswith("■ ")]
    assert len(end) == 1 and re.fullmatch(
        r"■ interrupted · (1 step|\d+ steps) · \d+\.\d\d s · .* tokens.* · stopped by Ctrl-C", end[0]
    ), lines
    assert any(re.match(r"  ✗ step \d+ · interrupted · ", line) for line in lines), lines
    assert "Final answer" not in out


def test_ctrl_c_echoed_by_a_terminal_gets_a_line_of_its_own():
    """In a terminal, ``^C`` is echoed where the cursor is; what follows must not be glued to it."""
    master, slave = os.openpty()
    attrs = termios.tcgetattr(slave)
    attrs[3] = (attrs[3] | termios.ECHO | termios.ECHOCTL | termios.ICANON) & ~termios.ISIG
    termios.tcsetattr(slave, termios.TCSANOW, attrs)  # echo "^C" but leave the signal to us
    proc = subprocess.Popen(
        [sys.executable, "-u", "-m", "nbagent", "demo", "What is the speed of light?"],
        stdin=slave,
        stdout=slave,
        stderr=subprocess.PIPE,
        env=ENV,
        start_new_session=True,
    )
    os.close(slave)
    screen = b""

    def read_until(marker: bytes) -> None:
        nonlocal screen
        deadline = time.monotonic() + TIMEOUT
        while marker not in screen:
            assert time.monotonic() < deadline, screen
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            screen += chunk

    try:
        read_until(b"lookup_fact(topic='speed of light')\r\n")  # the cursor is at a line's start
        os.write(master, b"\x03")  # the key: the terminal echoes "^C"
        read_until(b"^C")
        proc.send_signal(signal.SIGINT)  # what the terminal would send
        read_until(b"tokens")
        assert proc.wait(timeout=TIMEOUT) == 130
    finally:
        proc.kill()
        proc.wait()
        proc.stderr.close()
        os.close(master)
    text = screen.decode("utf-8")
    assert "^C\r\n" in text, text
    assert re.search(r"\r\n■ interrupted · (1 step|\d+ steps) · ", text), text


def test_bare_command_prints_help_and_exits_0():
    result = _cli()
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: python -m nbagent")
    assert "demo" in result.stdout and "arguments are required" not in result.stdout + result.stderr


def test_version_is_the_package_version():
    result = _cli("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"nbagent {nbagent.__version__}"


@pytest.mark.parametrize("argv", [["--help"], ["demo", "--help"]])
def test_help_says_what_the_demo_is_in_plain_text(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 0
    help_text = capsys.readouterr().out
    assert "offline" in help_text
    assert "``" not in help_text and "`" not in help_text


def test_main_runs_the_demo_in_process(capsys):
    assert main(["demo", "--fast", "What is 6 * 7?"]) == 0
    out = capsys.readouterr().out
    assert "→ 42" in out
    assert out.splitlines()[-1].startswith("■ success · 2 steps · ")


def test_fact_lookup_matches_whole_words_not_substrings():
    assert find_fact("capital of France") is None  # "capital" holds "pi"
    assert topics_in("What is the capital of France?") == []
    assert find_fact("What is the speed of light?") == "speed of light"
    assert find_fact("Everest") == "mount everest"
    assert find_fact("pi") == "pi"
    assert find_fact("of") is None
    answer = asyncio.run(lookup_fact.acall({"topic": "capital of France"}))
    assert answer.startswith("No entry for 'capital of France'")
    reply = demo_policy([{"role": "user", "content": "What is the capital of France?"}])
    assert not reply.tool_calls  # no lookup of "pi": the model says what it can do
