"""The terminal view and ``str(record)``: one live transcript, safe for a terminal, never raising."""

from __future__ import annotations

import io
import os
import re
import sys
from datetime import datetime, timezone

import pytest
from support import fast_model

import nbagent
import nbagent.text
from nbagent import events as ev
from nbagent.models import Reply, ToolCall
from nbagent.recorder import Recorder
from nbagent.view.terminal import TextView, plural

OSC52 = "\x1b]52;c;aGFja2Vk\x07"
CLEAR = "\x1b[2J"
HOSTILE = f"A{OSC52}B{CLEAR}C\rD\x9b31mE"
RAW_CONTROLS = ("\x1b", "\x07", "\r", "\x9b")
OUR_COLORS = re.compile(r"\x1b\[\d+m")


def _assert_terminal_safe(text: str) -> None:
    for char in RAW_CONTROLS:
        assert char not in text, f"raw {char!r} in {text!r}"
    assert "\\x1b]52;c;aGFja2Vk\\x07" in text  # shown, not dropped: the user sees what was sent


@nbagent.tool
def echo(text: str) -> str:
    """Return the text.

    Args:
        text: anything.
    """
    return text


@nbagent.tool
def explode(text: str) -> str:
    """Raise with the text.

    Args:
        text: the message.
    """
    raise ValueError(text)


def _hostile_agent() -> nbagent.Agent:
    turns = [
        Reply(HOSTILE, [ToolCall("echo", {"text": HOSTILE}), ToolCall("explode", {"text": HOSTILE})]),
        Reply("multi", [ToolCall("echo", {"text": f"line one\n{HOSTILE}"}), ToolCall(f"ev{CLEAR}il", {})]),
        f"Final: {HOSTILE}",
    ]
    return nbagent.Agent(fast_model(turns), tools=[echo, explode], name=f"agent{OSC52}")


def _run(agent: nbagent.Agent, task: str, **view_options) -> tuple[str, nbagent.RunRecord]:
    out = io.StringIO()
    record = nbagent.run(agent, task, sinks=[TextView(out, **view_options)], display=False)
    return out.getvalue(), record


def test_control_sequences_from_task_text_tools_and_errors_are_neutralised():
    printed, record = _run(_hostile_agent(), f"task {HOSTILE}")
    assert record.status == "success"
    for where in (printed, str(record)):
        _assert_terminal_safe(where)
        assert "task A\\x1b]52" in where  # the task
        assert "ValueError: A\\x1b]52" in where  # the tool's error
        assert "ev\\x1b[2Jil" in where  # a tool name
        assert "\\x0dD\\x9b31mE" in where  # carriage return and the C1 CSI
    assert "  │ A\\x1b]52" in printed  # streamed text
    assert "text='A\\x1b]52" in printed  # tool arguments, inline
    assert "      A\\x1b]52" in printed  # a multi-line argument, as a code block
    assert "→ A\\x1b]52" in printed  # a tool result


def test_an_error_message_is_neutralised_in_the_view_and_the_record():
    def policy(messages):
        raise RuntimeError(f"server said {HOSTILE}")

    agent = nbagent.Agent(fast_model(policy))
    printed, record = _run(agent, "go")
    assert record.status == "error"
    for where in (printed, str(record)):
        _assert_terminal_safe(where)
        assert "server said A\\x1b]52" in where


def test_colours_are_the_views_own_only_on_a_terminal(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    terminal = Terminal()
    nbagent.run(_hostile_agent(), f"task {HOSTILE}", sinks=[TextView(terminal)], display=False)
    coloured = terminal.getvalue()
    assert OUR_COLORS.search(coloured), "a terminal gets colours"
    _assert_terminal_safe(OUR_COLORS.sub("", coloured))

    monkeypatch.setenv("NO_COLOR", "1")
    plain = Terminal()
    nbagent.run(_hostile_agent(), "task", sinks=[TextView(plain)], display=False)
    assert "\x1b" not in plain.getvalue()


def test_step_footer_has_its_final_kind_time_and_tokens():
    agent = nbagent.Agent(
        fast_model([Reply("adding", [ToolCall("echo", {"text": "hi"})]), "It says hi."]), tools=[echo]
    )
    printed, record = _run(agent, "say hi")
    lines = printed.splitlines()
    assert "── step 1" in lines and "── step 2" in lines  # the kind is not guessed at the start
    first, final = record.steps
    assert final.kind == "final"
    assert (
        f"  ✓ step 1 · {first.duration_s:.2f} s · {first.input_tokens} in / {first.output_tokens} out"
        in lines
    )
    footer = f"  ✓ step 2 · final answer · {final.duration_s:.2f} s · {final.input_tokens} in / "
    assert any(line.startswith(footer) for line in lines), printed
    assert lines[-1] == f"■ success · 2 steps · {record.duration_s:.2f} s · " + (
        f"{record.input_tokens} in / {record.output_tokens} out tokens"
    )
    assert printed.count("It says hi.") == 1


def _events(run_id: str = "r1") -> list[ev.RunEvent]:
    return [
        ev.RunStarted(run_id, 0, 100.0, "task", "agent", "model", datetime.now(timezone.utc)),
        ev.StepStarted(run_id, 1, 100.0, "action"),
        ev.TextDelta(run_id, 1, 100.1, "thinking"),
        ev.Usage(run_id, 1, 100.5, None, 35, "unknown"),
        ev.StepFinished(run_id, 1, 100.84, kind="final"),
        ev.RunFinished(run_id, 1, 101.0, "success", output="done"),
    ]


def _show(events: list[ev.RunEvent], view: TextView | None = None) -> str:
    out = io.StringIO()
    view = view or TextView(out)
    for event in events:
        view(event)
    return out.getvalue()


def test_unknown_tokens_print_as_question_marks_and_one_step_is_singular():
    printed = _show(_events())
    assert "  ✓ step 1 · final answer · 0.84 s · ? in / 35 out" in printed.splitlines()
    assert printed.splitlines()[-1] == "■ success · 1 step · 1.00 s · ? in / 35 out tokens"
    no_usage = [e for e in _events() if not isinstance(e, ev.Usage)]
    assert "· 0.84 s · ? in / ? out\n" in _show(no_usage)
    assert (plural(1, "step"), plural(2, "step"), plural(0, "step")) == ("1 step", "2 steps", "0 steps")


def test_interrupted_step_gets_its_footer_and_the_end_line_says_why():
    events = [*_events()[:4], ev.RunFinished("r1", 1, 100.6, "interrupted", stop_reason="user")]
    lines = _show(events).splitlines()
    assert lines[-2] == "  ✗ step 1 · interrupted · 0.60 s · ? in / 35 out"
    assert lines[-1].startswith("■ interrupted · 1 step · 0.60 s · ")
    assert lines[-1].endswith("· stopped by the user")


def _cut_by_ctrl_c(view: TextView) -> None:
    events = _events()
    for event in events[:3]:
        view(event)
    view.break_line()  # mid text: the "^C" line must end there
    view(events[3])
    view(ev.ToolCallStarted("r1", 1, 100.6, "c1", "echo", {"text": "x"}))
    view.break_line()  # at a line's start
    view(ev.RunFinished("r1", 1, 100.7, "interrupted", stop_reason="user"))


CUT_LINES = [
    "  │ thinking",
    "  ⚙ echo(text='x')",
    "  ✗ step 1 · interrupted · 0.70 s · ? in / 35 out",
    "■ interrupted · 1 step · 0.70 s · ? in / 35 out tokens · stopped by the user",
]


def test_break_line_ends_the_text_a_ctrl_c_cut_and_leaves_no_blank_line_in_a_transcript():
    out = io.StringIO()  # a file or a pipe: no "^C" was echoed into it
    _cut_by_ctrl_c(TextView(out))
    assert out.getvalue().splitlines()[2:] == CUT_LINES


@pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal")
def test_break_line_gives_the_ctrl_c_a_terminal_echoed_a_line_of_its_own():
    import pty

    leader, follower = pty.openpty()
    with os.fdopen(follower, "w", encoding="utf-8", closefd=True) as terminal:
        _cut_by_ctrl_c(TextView(terminal, color=False))
    shown = b""
    while chunk := _read_ready(leader):
        shown += chunk
    os.close(leader)
    # The terminal wrote "^C" where the cursor was: at a line's start it gets a line of its own
    # (both times: the unfinished word "thinking" was held back, as it could begin a key).
    lines = shown.decode().replace("\r\n", "\n").splitlines()[2:]
    assert lines == ["", *CUT_LINES[:2], "", *CUT_LINES[2:]]


def _read_ready(fd: int) -> bytes:
    import select

    if not select.select([fd], [], [], 0.5)[0]:
        return b""
    try:
        return os.read(fd, 65536)
    except OSError:  # the follower side is closed and drained
        return b""


def test_streamed_lines_stay_under_the_gutter_and_crlf_is_a_newline():
    run = _events()
    text = [ev.TextDelta("r1", 1, 100.2, piece) for piece in ("a\r\n", "\nb", "\rc\n\n")]
    lines = _show([*run[:3], *text, *run[3:]]).splitlines()
    assert lines[2:6] == [
        "  │ thinkinga",
        "  │ ",
        "  │ b\\x0dc",
        "  ✓ step 1 · final answer · 0.84 s · ? in / 35 out",
    ]


def test_code_in_tool_arguments_prints_as_an_indented_block():
    code = "import math\n\nfor i in range(3):\n    print(math.sqrt(i))\n"
    calls = [
        ev.ToolCallStarted("r1", 1, 100.2, "c1", "python_interpreter", code),
        ev.ToolCallStarted("r1", 1, 100.3, "c2", "run_python", {"code": "print(1)"}),
        ev.ToolCallStarted("r1", 1, 100.4, "c3", "write_file", {"path": "a.txt", "content": "x\ny"}),
        ev.ToolCallStarted("r1", 1, 100.5, "c4", "python_interpreter", "\n".join(map(str, range(100)))),
    ]
    run = _events()
    lines = _show([*run[:2], *calls, *run[4:]]).splitlines()
    start = lines.index("  ⚙ python_interpreter")
    assert lines[start : start + 5] == [
        "  ⚙ python_interpreter",
        "      import math",
        "",
        "      for i in range(3):",
        "          print(math.sqrt(i))",
    ]
    assert lines[start + 5 : start + 7] == ["  ⚙ run_python", "      print(1)"]
    assert lines[start + 7 : start + 11] == [
        "  ⚙ write_file(path='a.txt')",
        "    content:",
        "      x",
        "      y",
    ]
    long_block = lines[start + 12 : lines.index("      … (clipped; the record keeps the whole code)")]
    assert long_block == [f"      {i}" for i in range(40)]


class _BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")


@pytest.mark.parametrize(
    "value",
    [_BadRepr(), 2**20000, "lone \ud800 surrogate", {"k\udfff": [_BadRepr()]}, b"\x1b[2J"],
    ids=["bad-repr", "huge-int", "surrogate", "nested", "bytes"],
)
def test_values_that_cannot_be_printed_never_break_the_view(value):
    run = _events()
    odd = [
        ev.TextDelta("r1", 1, 100.2, "text \ud800 here"),
        ev.ToolCallStarted("r1", 1, 100.3, "c1", "t\ud800", {"x": value, "code": "a\ud800\nb"}),
        ev.ToolCallFinished("r1", 1, 100.4, "c1", "ok", result=value),
        ev.ToolCallStarted("r1", 1, 100.5, "c2", "t", value),
        ev.ToolCallFinished("r1", 1, 100.6, "c2", "error", error="bad \ud800"),
    ]
    end = ev.RunFinished("r1", 1, 101.0, "max_steps", output=value, error="MaxStepsReached: \ud800")
    events = [*run[:3], *odd, *run[3:5], end]
    strict = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")  # raises on a raw lone surrogate
    _show(events, TextView(strict))
    strict.flush()
    printed = strict.buffer.getvalue().decode("utf-8")
    assert printed.splitlines()[-1].startswith("  output: ")
    recorder = Recorder()
    for event in events:
        recorder.apply(event)
    account = str(recorder.snapshot())
    account.encode("utf-8")
    for where in (printed, account):
        assert "\\ud800" in where
        _assert_no_raw_controls(where)
    if isinstance(value, _BadRepr):
        assert "<unprintable _BadRepr: RuntimeError: no repr for you>" in printed


def _assert_no_raw_controls(text: str) -> None:
    for char in RAW_CONTROLS:
        assert char not in text


def test_a_stream_that_cannot_encode_the_marks_still_gets_the_run():
    ascii_out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    _show(_events(), TextView(ascii_out))
    ascii_out.flush()
    printed = ascii_out.buffer.getvalue().decode("ascii")
    assert "\\u25b6 agent (model): task" in printed and "success" in printed


def test_record_text_is_a_readable_account():
    agent = nbagent.Agent(
        fast_model([Reply("adding", [ToolCall("echo", {"text": "hi"})]), "It says hi."]), tools=[echo]
    )
    record = nbagent.run(agent, "say hi", tags=["t1"], display=False)
    lines = str(record).splitlines()
    assert lines[0] == f"Run {record.run_id} · Agent / scripted"
    assert lines[1].startswith("  success · 2 steps · ")
    assert lines[2:] == [
        "  task: say hi",
        "  tags: t1",
        lines[4],
        "    says: adding",
        "    ⚙ echo(text='hi')",
        "      → hi",
        lines[8],
        "    says: It says hi.",
        "  output: It says hi.",
    ]
    assert lines[4].startswith("  step 1 · ") and lines[8].startswith("  step 2 · final answer · ")


def test_shorten_stays_importable_from_the_view():
    from nbagent.view.terminal import shorten

    assert shorten is nbagent.text.shorten
