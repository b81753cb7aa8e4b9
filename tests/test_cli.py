"""``python -m nbagent demo``: the terminal front end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


def test_demo_runs_offline_to_success():
    result = subprocess.run(
        [sys.executable, "-m", "nbagent", "demo", "--fast"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "calculator" in result.stdout
    assert "success: 4 steps" in result.stdout
    assert "391" in result.stdout


def test_ctrl_c_interrupts_gracefully_and_prints_the_record():
    proc = subprocess.Popen(
        [sys.executable, "-u", "-m", "nbagent", "demo", "What is 6 * 7?"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        seen = ""
        deadline = time.monotonic() + 60
        while "step 1" not in seen:  # wait until the run is streaming, then press Ctrl-C
            assert time.monotonic() < deadline, seen
            seen += proc.stdout.readline()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert "interrupted: 1 steps" in seen + out
    assert "INTERRUPTED" in out


def test_help_says_what_the_demo_is():
    result = subprocess.run(
        [sys.executable, "-m", "nbagent", "demo", "--help"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0 and "offline" in result.stdout
