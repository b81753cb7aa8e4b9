"""The Stop buttons in a real kernel, clicked exactly as a browser clicks them.

Each test starts runs in a real ipykernel (``KernelDriver``), finds the run's view from the
widget display, clicks with a ``comm_msg`` on the shell channel, and checks both the record (from
a follow-up cell) and what the view shows.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest
from kernel_support import Execution, KernelDriver, html_problems, html_text

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(180)]

SETUP = r'''
import nbagent
from nbagent.models import Reply, ScriptedModel, ToolCall

@nbagent.tool
def echo(text: str) -> str:
    """Echo the text.

    Args:
        text: what to echo
    """
    return text

@nbagent.tool
def fail(text: str) -> str:
    """Always fails.

    Args:
        text: the error message
    """
    raise ValueError(text)

def talker(steps=3, words=300, tokens_per_s=150.0, name="talker"):
    """Each step streams `words` words, then calls echo; a final answer after `steps` steps."""
    turns = [Reply("word " * words, [ToolCall("echo", {"text": f"call {i}"})]) for i in range(steps)]
    model = ScriptedModel([*turns, "done"], tokens_per_s=tokens_per_s, first_token_s=0.0)
    return nbagent.Agent(model, tools=[echo, fail], name=name)
'''

BLOCKING = "this cell is blocking: use ■ Interrupt, or await run"  # `await run` shows as code

CORPUS = [
    "<script>alert('x')</script>",
    '<img src=x onerror="alert(1)">',
    "</div></div></div><div onclick=alert(2)>owned",
    "</style><style>*{display:none}</style>",
    '"><svg onload=alert(3)>',
]


@pytest.fixture(scope="module")
def kernel(tmp_path_factory) -> Iterator[KernelDriver]:
    with KernelDriver.start(cwd=str(tmp_path_factory.mktemp("kernel"))) as driver:
        driver.execute(SETUP)
        yield driver


def start_view(kernel: KernelDriver, code: str) -> tuple[Execution, str]:
    execution = kernel.execute(code)
    return execution, execution.widget_view()


def kernel_errors(kernel: KernelDriver, since: int) -> list[str]:
    """Tracebacks and stderr the kernel published after message ``since``."""
    return [
        r.content.get("text", "") or r.content.get("evalue", "")
        for r in kernel.received[since:]
        if r.type == "error" or (r.type == "stream" and r.content["name"] == "stderr")
    ]


def _view_of(kernel: KernelDriver, msg_id: str) -> str | None:
    try:
        return Execution(msg_id, {}, kernel.outputs_of(msg_id)).widget_view()
    except LookupError:
        return None


def test_stop_button_interrupts_mid_stream(kernel: KernelDriver) -> None:
    # A 20 s step: the click lands mid-stream however slow a loaded machine delivers it.
    execution, view = start_view(kernel, "run = nbagent.start(talker(words=3000), 'talk')")
    stop = kernel.widgets.find_under(view, "ButtonModel", description="Stop")
    kernel.wait_for(lambda: "word word" in kernel.shown(view), what="streamed words")
    kernel.click(stop)
    kernel.wait_for(lambda: "■ interrupted" in kernel.shown(view), what="the view to say interrupted")
    code = "r = await run\ncut = r.steps[-1]\nprint(r.status, cut.interrupted, len(cut.model_output))"
    status, interrupted, said = kernel.execute(code).stdout.split()
    assert (status, interrupted) == ("interrupted", "True")
    assert 0 < int(said) < len("word " * 3000)  # cut mid-stream
    assert "stopped here" in kernel.shown(view)
    assert kernel.widgets.states[stop]["disabled"] is True
    final = kernel.last_update(execution.display_id())
    assert "■ interrupted" in html_text(final["text/html"])
    assert "application/vnd.jupyter.widget-view+json" not in final


def test_stop_after_step_button_lets_the_step_finish(kernel: KernelDriver) -> None:
    _, view = start_view(kernel, "run = nbagent.start(talker(words=300), 'talk')")  # 2 s steps
    after = kernel.widgets.find_under(view, "ButtonModel", description="Stop after step")
    kernel.wait_for(lambda: "word word" in kernel.shown(view), what="streamed words")
    kernel.click(after)
    kernel.wait_for(lambda: "■ interrupted" in kernel.shown(view), what="the view to say interrupted")
    out = kernel.execute(
        "r = await run\n"
        "print(r.status, len(r.steps), any(s.interrupted for s in r.steps), {c.status for c in r.tool_calls})"
    ).stdout
    status, steps, any_cut, *calls = out.split()
    assert (status, any_cut, calls) == ("interrupted", "False", ["{'ok'}"])
    assert int(steps) < 3  # it stopped before the script's end, at a step boundary
    assert any("stopping after this step" in v for v in kernel.widgets.values_ever(view))


def test_a_second_click_and_a_click_on_the_other_button_change_nothing(kernel: KernelDriver) -> None:
    since = len(kernel.received)
    _, view = start_view(kernel, "run = nbagent.start(talker(), 'talk')")
    stop = kernel.widgets.find_under(view, "ButtonModel", description="Stop")
    after = kernel.widgets.find_under(view, "ButtonModel", description="Stop after step")
    kernel.wait_for(lambda: "word word" in kernel.shown(view), what="streamed words")
    kernel.click(stop)
    kernel.click(stop)
    kernel.click(after)
    kernel.wait_for(lambda: "■ interrupted" in kernel.shown(view), what="the view to say interrupted")
    kernel.click(stop)
    out = kernel.execute("r = await run; print(r.status, r.steps[-1].interrupted, run.interrupt())").stdout
    assert out.split() == ["interrupted", "True", "False"]
    assert kernel_errors(kernel, since) == []


def test_a_click_after_the_end_changes_nothing(kernel: KernelDriver) -> None:
    since = len(kernel.received)
    code = "run = nbagent.start(talker(steps=1, tokens_per_s=1e6), 'quick')\nr = await run"
    _, view = start_view(kernel, code)
    assert "✓ success" in kernel.shown(view)
    kernel.click(kernel.widgets.find_under(view, "ButtonModel", description="Stop"))
    kernel.click(kernel.widgets.find_under(view, "ButtonModel", description="Stop after step"))
    out = kernel.execute("print(run.status, run.record.status, r.status, r.output)").stdout
    assert out.split() == ["success", "success", "success", "done"]
    assert "✓ success" in kernel.shown(view)
    assert kernel_errors(kernel, since) == []


def stop_buttons(kernel: KernelDriver, view: str) -> list[dict]:
    return [
        kernel.widgets.states[m]
        for m in kernel.widgets.under(view)
        if kernel.widgets.states.get(m, {}).get("_model_name") == "ButtonModel"
    ]


SIGINT_HANDLER = """
import asyncio, signal
from nbagent.runtime import interrupts
await asyncio.sleep(0)
handler = signal.getsignal(signal.SIGINT)
if handler is interrupts._on_cell_sigint:  # nbagent's wrapper of the kernel's handler for this cell
    handler = interrupts._cell.kernel_handler
print(handler.__qualname__)
"""


def test_jupyter_interrupt_stops_a_blocking_run_the_cell_fails_after_the_record_and_queued_cells_do_not_run(
    kernel: KernelDriver,
) -> None:
    msg_id = kernel.submit("r = nbagent.run(talker(words=2000), 'talk for long')")
    queued = kernel.submit("print('the queued cell ran')")
    view = kernel.wait_for(lambda: _view_of(kernel, msg_id), what="the view of the blocking run")
    kernel.wait_for(lambda: "word word" in kernel.shown(view), what="streamed words")
    kernel.interrupt()
    execution = kernel.result(msg_id, timeout=60)
    assert (execution.reply["status"], execution.reply["ename"]) == ("error", "StoppedByKeyboard")
    assert kernel.result(queued).reply["status"] == "aborted"  # "Run All" stops here
    out = kernel.execute(
        "import sys\nlast = nbagent.history.last()\n"
        "print(last.status, last.stop_reason, last.steps[-1].interrupted,"
        " sys.last_value.record.run_id == last.run_id)"
    ).stdout
    assert out.split() == ["interrupted", "keyboard", "True", "True"]
    assert "■ interrupted" in kernel.shown(view)
    final = html_text(kernel.last_update(execution.display_id())["text/html"])
    assert "■ interrupted" in final and "Stop" not in final  # the static end state has no buttons


def test_stop_buttons_of_a_blocking_run_are_disabled_with_a_notice_and_jupyter_interrupt_stops_it(
    kernel: KernelDriver,
) -> None:
    msg_id = kernel.submit("r = nbagent.run(talker(words=2000), 'blocking')")
    view = kernel.wait_for(lambda: _view_of(kernel, msg_id), what="the view of the blocking run")
    kernel.wait_for(lambda: BLOCKING in kernel.shown(view), what="the blocking notice")
    buttons = stop_buttons(kernel, view)
    assert [b["disabled"] for b in buttons] == [True, True]
    assert all("■ Interrupt" in b["tooltip"] for b in buttons)
    kernel.click(kernel.widgets.find_under(view, "ButtonModel", description="Stop"))  # as a stale page might
    said = len(kernel.shown(view))
    kernel.wait_for(lambda: len(kernel.shown(view)) > said + 500, what="the run to go on streaming")
    assert "● running" in kernel.shown(view)  # the click waits behind the cell: why the button is disabled
    kernel.interrupt()
    execution = kernel.result(msg_id, timeout=60)
    assert execution.reply["ename"] == "StoppedByKeyboard"
    assert "■ interrupted" in kernel.shown(view) and BLOCKING not in kernel.shown(view)
    assert kernel.execute("print(nbagent.history.last().status)").stdout.strip() == "interrupted"


def test_a_blocking_wait_warns_once_and_a_timeout_gives_the_buttons_back(kernel: KernelDriver) -> None:
    _, view = start_view(kernel, "run = nbagent.start(talker(words=2000), 'talk')")
    wait = "try:\n    run.wait(timeout=0.5)\nexcept TimeoutError:\n    print('timed out')"
    first = kernel.execute(wait)
    assert first.stdout.strip() == "timed out"
    kernel.wait_for(
        lambda: [b["disabled"] for b in stop_buttons(kernel, view)] == [False, False], what="buttons"
    )
    assert BLOCKING not in kernel.shown(view)
    assert any(BLOCKING in html_text(v) for v in kernel.widgets.values_ever(view))
    kernel.execute(wait)
    stderr = "".join(
        r.content["text"] for r in kernel.received if r.type == "stream" and r.content["name"] == "stderr"
    )
    assert stderr.count("BlockingWaitWarning") == 1  # once per kernel process, however many blocking waits
    kernel.click(kernel.widgets.find_under(view, "ButtonModel", description="Stop"))
    assert kernel.execute("print((await run).status)").stdout.strip() == "interrupted"


@pytest.mark.parametrize(
    "code",
    [
        "run = nbagent.start(talker(words=3000), 'talk')\nrecord = await run",
        "record = await nbagent.start(talker(words=3000), 'talk')",
    ],
    ids=["await run", "await start"],
)
def test_jupyter_interrupt_during_an_await_interrupts_the_run_at_once_and_fails_the_cell(
    kernel: KernelDriver, code: str
) -> None:
    msg_id = kernel.submit(code)  # the run would stream for 20 s
    queued = kernel.submit("print('the queued cell ran')")
    view = kernel.wait_for(lambda: _view_of(kernel, msg_id), what="the view")
    kernel.wait_for(lambda: "word word" in kernel.shown(view), what="streamed words")
    sent = time.monotonic()
    kernel.interrupt()
    execution = kernel.result(msg_id, timeout=60)
    took = time.monotonic() - sent
    assert (execution.reply["status"], execution.reply["ename"]) == ("error", "StoppedByKeyboard")
    assert took < 10, f"the cell ended {took:.1f} s after the interrupt"
    assert kernel.result(queued).reply["status"] == "aborted"
    last = "last = nbagent.history.last()\nprint(last.status, last.stop_reason, last.steps[-1].interrupted)"
    assert kernel.execute(last).stdout.split() == ["interrupted", "keyboard", "True"]
    assert "_cancel_on_sigint" in kernel.execute(SIGINT_HANDLER).stdout  # the kernel's own handler is back


def test_jupyter_interrupt_during_a_gather_of_two_runs_stops_both_and_the_kernel_goes_on(
    kernel: KernelDriver,
) -> None:
    code = (
        "import asyncio\na = nbagent.start(talker(words=3000), 'a')\n"
        "b = nbagent.start(talker(words=3000), 'b')\nawait asyncio.gather(a, b)"
    )
    msg_id = kernel.submit(code)
    view = kernel.wait_for(lambda: _view_of(kernel, msg_id), what="the first view")
    kernel.wait_for(lambda: "word word" in kernel.shown(view), what="streamed words")
    kernel.interrupt()
    execution = kernel.result(msg_id, timeout=60)
    assert (
        execution.reply["status"] == "error"
    )  # CancelledError: gather's tasks may not raise KeyboardInterrupt
    out = kernel.execute("print((await a).status, (await b).status, a.record.stop_reason)", timeout=30).stdout
    assert out.split() == ["interrupted", "interrupted", "keyboard"], out
    assert "_cancel_on_sigint" in kernel.execute(SIGINT_HANDLER).stdout


def test_jupyter_interrupt_during_another_await_stops_the_runs_the_cell_started_and_says_which_go_on(
    kernel: KernelDriver,
) -> None:
    kernel.execute("earlier = nbagent.start(talker(words=3000), 'started by an earlier cell')")
    code = "import asyncio\nrun = nbagent.start(talker(words=3000), 'talk')\nawait asyncio.sleep(120)"
    msg_id = kernel.submit(code)
    view = kernel.wait_for(lambda: _view_of(kernel, msg_id), what="the view")
    kernel.wait_for(lambda: "word word" in kernel.shown(view), what="streamed words")
    kernel.interrupt()
    execution = kernel.result(msg_id, timeout=60)
    assert (execution.reply["status"], execution.reply["ename"]) == ("error", "CancelledError")
    mine, earlier = kernel.execute("print(run.run_id, earlier.run_id)").stdout.split()
    assert execution.reply["evalue"] == (
        f"■ Interrupt cancelled this cell; stopped run {mine} it started (records in nbagent.history); "
        f"run {earlier} started by earlier cells goes on (stop it with the Stop button or run.interrupt())"
    )
    out = kernel.execute("r = await run\nprint(r.status, r.stop_reason, earlier.done())").stdout
    assert out.split() == ["interrupted", "keyboard", "False"]
    stopped = kernel.execute("earlier.interrupt()\nprint((await earlier).status)").stdout
    assert stopped.strip() == "interrupted"
    assert "_cancel_on_sigint" in kernel.execute(SIGINT_HANDLER).stdout


@pytest.mark.parametrize(
    "code",
    [
        "r = nbagent.run(talker(words=3000), 'talk')",
        "run = nbagent.start(talker(words=3000), 'talk')\nr = await run",
        "r = await nbagent.arun(talker(words=3000), 'talk')",
    ],
)
def test_a_keyboard_stop_traceback_shows_the_users_line_and_only_the_frame_that_raised(
    kernel: KernelDriver, code: str
) -> None:
    msg_id = kernel.submit(code)
    view = kernel.wait_for(lambda: _view_of(kernel, msg_id), what="the view")
    kernel.wait_for(lambda: "word word" in kernel.shown(view), what="streamed words")
    kernel.interrupt()
    reply = kernel.result(msg_id, timeout=60).reply
    assert reply["ename"] == "StoppedByKeyboard"
    traceback = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(reply["traceback"]))
    assert "'talk')" in traceback  # the user's own line
    # IPython always shows the frame that raised; the ones between it and the user's are hidden.
    assert traceback.count("nbagent/") == 1 and "skipping hidden" in traceback, traceback
    assert "raise ends.stopped(value)" in traceback


def follows_to_the_end(kernel: KernelDriver, execution: Execution) -> None:
    """``execution`` displayed a view of the live ``run``: it follows the run to its Stop."""
    view = execution.widget_view()
    kernel.wait_for(lambda: "word word" in kernel.shown(view), what="the run so far")
    kernel.execute("run.interrupt()\nr = await run")
    kernel.wait_for(lambda: "■ interrupted" in kernel.shown(view), what="the end")
    stop = kernel.widgets.find_under(view, "ButtonModel", description="Stop")
    assert kernel.widgets.states[stop]["disabled"] is True
    final = html_text(kernel.last_update(execution.display_id())["text/html"])
    assert "■ interrupted" in final and "Stop" not in final


def test_a_live_run_shown_again_follows_it_to_its_end(kernel: KernelDriver) -> None:
    kernel.execute("run = nbagent.start(talker(words=3000), 'talk')")
    follows_to_the_end(kernel, kernel.execute("nbagent.show(run)"))


def test_a_run_as_a_cells_last_line_shows_a_view_that_follows_it(kernel: KernelDriver) -> None:
    started = kernel.execute("run = nbagent.start(talker(words=3000), 'talk')\nrun")
    assert [r.type for r in started.outputs].count("display_data") == 1  # its live view, once
    follows_to_the_end(kernel, kernel.execute("run"))


def test_a_record_awaited_as_the_last_line_shows_as_one_line_under_its_view(kernel: KernelDriver) -> None:
    execution = kernel.execute("run = nbagent.start(talker(steps=1, tokens_per_s=1e6), 'quick')\nawait run")
    (result,) = [r for r in execution.outputs if r.type == "execute_result"]
    line = result.content["data"]["text/html"]
    assert 'class="nbagent-step"' not in line and "✓ success" in html_text(line)
    again = kernel.execute("run.record")  # a later cell shows the whole record
    (result,) = [r for r in again.outputs if r.type == "execute_result"]
    assert result.content["data"]["text/html"].count('class="nbagent-step"') == 2


ODD_VALUES = r'''
class Unprintable:
    def __repr__(self):
        raise RuntimeError("no repr")

@nbagent.tool
def odd(kind: str) -> object:
    """Return an odd value.

    Args:
        kind: which
    """
    return {"unprintable": Unprintable(), "huge": 2 ** 20000, "text": "bad \ud800 text"}[kind]

turns = [
    Reply("say \ud800 it", [ToolCall("odd", {"kind": "unprintable"}), ToolCall("odd", {"kind": "huge"})]),
    Reply("\udfff", [ToolCall("odd", {"kind": "text", "x\ud800": "\ud800"}),
                     ToolCall("fail", {"text": "\ud800"})]),
    "done \ud800",
]
model = ScriptedModel(turns, tokens_per_s=400, first_token_s=0.0, name="m\ud800")
run = nbagent.start(nbagent.Agent(model, tools=[odd, fail], name="a\ud800"), "task \ud800")
r = await run
print(r.status)
'''


def test_text_that_is_not_utf8_and_values_that_cannot_print_end_in_a_static_final_view(
    kernel: KernelDriver,
) -> None:
    since = len(kernel.received)
    execution, view = start_view(kernel, ODD_VALUES)
    assert execution.stdout.split() == ["success"]
    assert "✓ success" in kernel.shown(view)
    final = html_text(kernel.last_update(execution.display_id())["text/html"])
    assert "✓ success" in final and "<unprintable" in final and "\\ud800" in final
    assert kernel_errors(kernel, since) == []


def test_injection_corpus_appears_escaped_in_every_widget_value(kernel: KernelDriver) -> None:
    payload = " ".join(CORPUS)
    code = f"""
payload = {payload!r}
turns = [
    Reply(payload, [ToolCall("echo", {{"text": payload}})]),
    Reply(payload, [ToolCall("fail", {{"text": payload}}), ToolCall(payload, "{{")]),
    payload,
]
model = ScriptedModel(turns, tokens_per_s=400, first_token_s=0.0, name=payload)
run = nbagent.start(nbagent.Agent(model, tools=[echo, fail], name=payload), payload)
r = await run
"""
    execution, view = start_view(kernel, code)
    assert "✓ success" in kernel.shown(view)
    values = list(kernel.widgets.values_ever(view))
    assert len(values) > 10
    for value in values:
        assert html_problems(value) == [], value
    final = kernel.last_update(execution.display_id())["text/html"]
    assert html_problems(final) == []
    for piece in CORPUS:
        assert piece in kernel.shown(view)
        assert piece in html_text(final)
