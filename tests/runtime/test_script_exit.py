"""Scripts, run as scripts: runs left going at exit are waited for, and Ctrl-C exits 130 in one line.

Each test writes a small script, runs it in a subprocess (its own session, so a SIGINT reaches only
it), reads its output as it comes and presses Ctrl-C (SIGINT) once the output says the moment has
come, never after a fixed sleep.
"""

from __future__ import annotations

import codecs
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from support import wait_until

import nbagent

TIMEOUT = 120
ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "NO_COLOR": "1"}
BATCH_STOPPED = "the batch stopped; its finished tasks kept their records"

HEAD = """
import nbagent
from nbagent.models import Reply, ScriptedModel, ToolCall

@nbagent.tool
def lookup(topic: str) -> str:
    '''Look a topic up.

    Args:
        topic: what to look up
    '''
    return "the fact about " + topic

def agent(words=3, tokens_per_s=1e9):
    turns = [Reply("Let me look. ", [ToolCall("lookup", {"topic": "tea"})]), "word " * words + "done."]
    return nbagent.Agent(ScriptedModel(turns, tokens_per_s=tokens_per_s, first_token_s=0.0), tools=[lookup])

SLOW = dict(words=20000, tokens_per_s=200)  # about 100 s of streaming: stopped long before
"""


class Script:
    """A script running in a subprocess, with what it has printed so far."""

    def __init__(self, tmp_path: Path, body: str) -> None:
        path = tmp_path / "script.py"
        path.write_text(HEAD + textwrap.dedent(body))
        self.proc = subprocess.Popen(
            [sys.executable, "-u", str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=ENV,
            start_new_session=True,
        )
        self.out: list[str] = []
        self.err: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(self.proc.stdout, self.out), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stderr, self.err), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream, chunks: list[str]) -> None:
        # In pieces as they come, not by line: a model's text streams without a newline.
        decoder = codecs.getincrementaldecoder("utf-8")()
        while chunk := os.read(stream.fileno(), 65536):
            chunks.append(decoder.decode(chunk))

    @property
    def stdout(self) -> str:
        return "".join(self.out)

    @property
    def stderr(self) -> str:
        return "".join(self.err)

    def wait_for(self, text: str, *, stream: str = "stdout") -> None:
        wait_until(lambda: text in getattr(self, stream) or self.proc.poll() is not None, timeout=TIMEOUT)
        assert text in getattr(self, stream), f"no {text!r}:\n{self.stdout}\n{self.stderr}"

    def ctrl_c(self) -> None:
        self.proc.send_signal(signal.SIGINT)

    def end(self) -> int:
        try:
            code = self.proc.wait(timeout=TIMEOUT)
        finally:
            self.proc.kill()
            self.proc.wait()
        for reader in self._readers:
            reader.join(timeout=10)
        return code


@pytest.fixture
def script(tmp_path: Path):
    started: list[Script] = []

    def make(body: str) -> Script:
        started.append(Script(tmp_path, body))
        return started[-1]

    yield make
    for each in started:
        each.proc.kill()
        each.proc.wait()


def test_a_script_that_only_starts_a_run_waits_for_it_at_exit_with_its_transcript(script) -> None:
    run = script("""
        run = nbagent.start(agent(words=200, tokens_per_s=2000), "Tell me about tea")
        print("SCRIPT DONE")
    """)
    assert run.end() == 0, run.stderr
    lines = run.stderr.splitlines()
    assert lines == ["nbagent: the script has ended; waiting for 1 run still going (Ctrl-C stops them)"]
    out = run.stdout
    assert out.index("SCRIPT DONE") < out.index("done.")  # the run went on after the script's end
    assert "→ 'the fact about tea'" in out or "the fact about tea" in out
    assert re.search(r"^■ success · 2 steps", out, re.M), out


def test_ctrl_c_while_waiting_at_exit_stops_the_run_shows_it_and_exits_130(script) -> None:
    run = script("""
        run = nbagent.start(agent(**SLOW), "Tell me everything")
    """)
    run.wait_for("waiting for 1 run still going", stream="stderr")
    run.wait_for("word word")  # the second step streams
    run.ctrl_c()
    assert run.end() == 130, run.stderr
    assert "stopping 1 run" in run.stderr
    assert "Traceback" not in run.stderr
    assert re.search(r"^■ interrupted · 2 steps", run.stdout, re.M), run.stdout


def test_a_run_started_without_display_is_stopped_at_exit_and_stored_as_stopped(script, tmp_path) -> None:
    store = tmp_path / "runs.db"
    run = script(f"""
        import atexit
        nbagent.configure(store={str(store)!r})
        run = nbagent.start(agent(**SLOW), "Tell me everything", display=False)
        while not run.record.steps:
            pass
        atexit.register(lambda: print("AT EXIT", run.status, run.record.stop_reason))
        print("RUN", run.run_id)
    """)
    assert run.end() == 0, run.stderr
    run_id = run.stdout.split()[1]
    assert run.stderr.splitlines() == [
        "nbagent: stopping 1 run started without display and never waited for "
        f"(run.wait() keeps a run to its end): {run_id}"
    ]
    assert "AT EXIT interrupted shutdown" in run.stdout
    stored = nbagent.RunStore(store).record(run_id)
    assert (stored.status, stored.stop_reason, stored.error) == ("interrupted", "shutdown", None)


WAITS = {
    "nbagent.run": """
        record = nbagent.run(agent(**SLOW), "Tell me everything")
    """,
    "run.wait": """
        run = nbagent.start(agent(**SLOW), "Tell me everything")
        record = run.wait()
    """,
    "run_batch": """
        frame = nbagent.run_batch(lambda: agent(**SLOW), ["Tell me everything", "And more"])
    """,
}


@pytest.mark.parametrize("how", list(WAITS))
def test_ctrl_c_in_a_blocking_wait_exits_130_with_one_line(script, how: str) -> None:
    run = script(WAITS[how])
    if how == "run_batch":
        run.wait_for("2 running", stream="stderr")  # the batch's progress lines go to stderr
    else:
        run.wait_for("word word")  # the second step streams
    run.ctrl_c()
    assert run.end() == 130, run.stderr
    assert "Traceback" not in run.stderr
    lines = run.stderr.splitlines()
    if how == "run_batch":
        ours = [line for line in lines if not line.startswith("batch: ")]  # the progress lines aside
        assert ours == [f"nbagent: stopped by Ctrl-C: {BATCH_STOPPED}"], lines
    else:
        (line,) = lines
        assert re.fullmatch(r"nbagent: stopped by Ctrl-C: run \w+ ended interrupted after 2 steps", line)


def test_code_that_catches_the_keyboard_stop_gets_the_record_and_exits_as_it_likes(script) -> None:
    run = script("""
        from nbagent.errors import StoppedByKeyboard
        try:
            nbagent.run(agent(**SLOW), "Tell me everything")
        except StoppedByKeyboard as stopped:
            print("CAUGHT", stopped.record.status, len(stopped.record.steps))
    """)
    run.wait_for("word word")
    run.ctrl_c()
    assert run.end() == 0, run.stderr
    assert "CAUGHT interrupted 2" in run.stdout
    assert run.stderr == ""


def test_other_errors_still_print_their_traceback_and_exit_1(script) -> None:
    run = script("""
        nbagent.run(agent(), "Tell me about tea")
        raise ValueError("a bug in the script")
    """)
    assert run.end() == 1
    assert "Traceback" in run.stderr and "ValueError: a bug in the script" in run.stderr


def test_ctrl_c_in_the_scripts_own_code_stops_the_runs_it_left_going(script) -> None:
    run = script("""
        import threading
        run = nbagent.start(agent(**SLOW), "Tell me everything")
        threading.Event().wait()  # the script's own long wait, which Ctrl-C ends
    """)
    run.wait_for("word word")
    run.ctrl_c()
    assert run.end() != 0, run.stderr  # the exit status of a bare KeyboardInterrupt is Python's own
    assert "KeyboardInterrupt" in run.stderr  # the script's own traceback, as Python prints it
    assert "nbagent: stopping 1 run still going (Ctrl-C again leaves at once)" in run.stderr
    assert "waiting for" not in run.stderr
    assert re.search(r"^■ interrupted · 2 steps", run.stdout, re.M), run.stdout


def test_a_tool_that_swallows_every_cancel_does_not_hang_the_exit(script) -> None:
    # Freeing such a coroutine closes it, and its bare except turns the close into a busy loop
    # (it once hung a benchmark's exit for good); the runner keeps it suspended instead.
    run = script("""
        import asyncio, contextlib

        @nbagent.tool
        async def stubborn() -> str:
            '''Retries forever.'''
            while True:
                with contextlib.suppress(BaseException):
                    await asyncio.sleep(3600)

        model = ScriptedModel([Reply("", [ToolCall("stubborn")]), "never"], first_token_s=0.0)
        run = nbagent.start(nbagent.Agent(model, tools=[stubborn]), "go", display=False)
        while not run.record.tool_calls:
            pass
        run.interrupt()
        print("STATUS", run.wait().status)
    """)
    assert run.end() == 0, run.stderr
    assert "STATUS interrupted" in run.stdout
    assert "left suspended: " in run.stderr and "stubborn" in run.stderr, run.stderr
