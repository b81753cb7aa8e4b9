"""The live view and its HTML, in-process: coalescing, one writer, escaping, the final state."""

from __future__ import annotations

import html
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone

import ipywidgets as widgets
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_support import html_problems, html_text
from support import fast_model, wait_until

import nbagent
from nbagent import events as ev
from nbagent.models import Reply, ScriptedModel, ToolCall
from nbagent.records import StepRecord
from nbagent.runtime.handle import Run
from nbagent.view import display
from nbagent.view import format as htmlformat
from nbagent.view import html as htmlview
from nbagent.view.live import WIDGET_MIMETYPE, LiveView

CORPUS = [
    "<script>alert('x')</script>",
    '<img src=x onerror="alert(1)">',
    "</div></div></div><div onclick=alert(2)>owned",
    "</style><style>body{display:none}</style>",
    '"><svg onload=alert(3)>',
    "&lt;already escaped&gt; & <b>bold</b>",
]
PAYLOAD = " ".join(CORPUS)


class ManualLoop:
    """Stands in for the runner's loop: timers fire only when the test says so."""

    def __init__(self) -> None:
        self.timers: list[ManualTimer] = []

    def call_later(self, delay: float, callback, *args) -> ManualTimer:
        timer = ManualTimer(callback, args)
        self.timers.append(timer)
        return timer

    def fire(self) -> None:
        due, self.timers = self.timers, []
        for timer in due:
            if not timer.cancelled:
                timer.callback(*timer.args)

    @property
    def pending(self) -> int:
        return sum(not t.cancelled for t in self.timers)


class ManualTimer:
    def __init__(self, callback, args) -> None:
        self.callback, self.args, self.cancelled = callback, args, False

    def cancel(self) -> None:
        self.cancelled = True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Feed:
    """Builds the events of one run for a view under a manual loop."""

    def __init__(self, view: LiveView, run: Run, clock: Clock) -> None:
        self.view, self.run, self.clock, self.step = view, run, clock, 0

    def send(self, cls, *fields, **named) -> None:
        event = cls(self.run.run_id, self.step, self.clock.now, *fields, **named)
        self.run._recorder.apply(event)  # as the runner does: the recorder first, then the sinks
        self.view(event)

    def start(self) -> None:
        self.send(ev.RunStarted, self.run.task, "agent", "model", datetime.now(timezone.utc))

    def step_started(self) -> None:
        self.step += 1
        self.send(ev.StepStarted, "action")


def value_changes(widget: widgets.Widget, name: str = "value") -> list[str]:
    seen: list[str] = []
    widget.observe(lambda change: seen.append(change["new"]), names=name)
    return seen


@pytest.fixture
def manual():
    loop, clock = ManualLoop(), Clock()
    run = Run(nbagent.Agent(fast_model(["ok"])), "the task")
    view = LiveView(run, loop=loop, clock=clock)  # type: ignore[arg-type]
    feed = Feed(view, run, clock)
    feed.start()
    return loop, clock, view, feed


def test_updates_are_coalesced_however_fast_tokens_stream(manual) -> None:
    loop, clock, view, feed = manual
    feed.step_started()
    loop.fire()
    (panel,) = view.steps.children
    changes = value_changes(panel)
    for i in range(5000):  # each token ends its word: a word still streaming is held back
        feed.send(ev.TextDelta, f"t{i} ")
    assert loop.pending == 1  # one flush scheduled, not one per token
    clock.now += 0.1
    loop.fire()
    assert len(changes) == 1
    assert "t4999" in changes[0]


def test_a_flush_sends_only_the_current_step_and_finished_steps_stay_frozen(manual) -> None:
    loop, clock, view, feed = manual
    feed.step_started()
    feed.send(ev.TextDelta, "first step")
    feed.send(ev.StepFinished, model_output="first step")
    feed.step_started()
    loop.fire()
    first, second = view.steps.children
    first_changes, second_changes, children = value_changes(first), value_changes(second), []
    view.steps.observe(lambda c: children.append(c), names="children")
    for tick in range(20):
        feed.send(ev.TextDelta, f"word{tick} ")
        clock.now += 0.1
        loop.fire()
    assert first_changes == []
    assert len(second_changes) == 20
    assert children == []
    assert "word19" in second.value


def test_the_header_clock_moves_while_the_run_is_quiet(manual) -> None:
    loop, clock, view, feed = manual
    feed.step_started()
    loop.fire()
    head_changes = value_changes(view.head)
    for _ in range(3):
        clock.now += 0.5
        loop.fire()
    assert len(head_changes) == 3
    assert "1.5 s" in head_changes[-1]
    assert "--nbagent-total:1.500" in head_changes[-1]  # the step bars scale with the run


def test_retrying_notice_is_shown_while_the_step_waits(manual) -> None:
    loop, _, view, feed = manual
    feed.step_started()
    feed.send(ev.Retrying, 2, 4.0, "429 Too Many Requests")
    loop.fire()
    assert "retrying in 4.0 s (attempt 2): 429 Too Many Requests" in html_text(view.steps.children[0].value)


def test_long_text_is_clipped_in_the_view_and_kept_whole_in_the_record() -> None:
    long = "x" * 50_000 + "THE END"
    record = nbagent.run(nbagent.Agent(fast_model([long])), "talk")
    assert record.steps[0].model_output == long
    panel = htmlview.step_html(record.steps[0])
    assert len(panel) < 5_000
    assert "THE END" in panel
    assert "characters not shown" in panel


def test_cost_is_shown_once_known() -> None:
    record = nbagent.run(nbagent.Agent(fast_model(["ok"])), "task")
    assert "cost" not in html_text(htmlview.record_html(record))
    record.cost_usd = 0.01234
    assert "cost $0.0123" in html_text(htmlview.record_html(record))


def test_unknown_tokens_show_as_unknown_never_zero() -> None:
    step = StepRecord(1, "action", datetime.now(timezone.utc), 0.0, end_s=1.0, input_tokens=None)
    assert "tokens unknown" in html_text(htmlview.step_html(step))
    assert htmlformat.tokens(120, None) == "120 in / ? out"


@settings(max_examples=300, deadline=None)
@given(text=st.text(), tool=st.text(max_size=40), argument=st.text(), result=st.text(), error=st.text())
def test_any_model_or_tool_text_renders_as_inert_escaped_text(text, tool, argument, result, error) -> None:
    step = StepRecord(1, "action", datetime.now(timezone.utc), 0.0, model_output=text, error=error or None)
    call = nbagent.ToolCallRecord("c1", tool, {"a": argument}, step.started_at, 0.0, "ok", result)
    step.tool_calls.append(call)
    fragment = htmlview.step_html(step)
    assert html_problems(fragment) == []
    shown = html_text(fragment)
    if len(text) <= htmlformat.TEXT_HEAD + htmlformat.TEXT_TAIL:
        assert text.replace("\r", "\n") in shown.replace("\r", "\n")


@dataclass
class Watched:
    """Every live view started while the fixture is active, and every write to its widgets."""

    views: list[LiveView] = field(default_factory=list)
    writes: list[tuple[str, str, object]] = field(default_factory=list)
    """(thread name, trait, new value), in order."""

    def values(self) -> list[str]:
        return [value for _, name, value in self.writes if name == "value"]  # type: ignore[misc]


@pytest.fixture
def watched(monkeypatch) -> Watched:
    """Make ``start(..., display=True)`` attach a LiveView (not displayed) whose writes are recorded."""
    seen = Watched()

    def record(change) -> None:
        seen.writes.append((threading.current_thread().name, change["name"], change["new"]))

    def new_steps(change) -> None:
        record(change)
        for widget in change["new"]:
            if widget not in change["old"]:
                seen.writes.append((threading.current_thread().name, "value", widget.value))
                widget.observe(record, names="value")

    def show_run(run: Run) -> None:
        view = LiveView(run)
        for widget in (view.head, view.summary, view.stop_button, view.after_step_button):
            widget.observe(record, names=["value", "disabled", "description"])
        view.steps.observe(new_steps, names="children")
        run.add_sink(view)
        seen.views.append(view)

    monkeypatch.setattr(display, "show_run", show_run)
    return seen


def slow_agent(steps: int = 3, words: int = 200, **options) -> nbagent.Agent:
    @nbagent.tool
    def echo(text: str) -> str:
        """Echo the text.

        Args:
            text: what to echo
        """
        return text

    turns = [Reply("word " * words, [ToolCall("echo", {"text": f"call {i}"})]) for i in range(steps)]
    options.setdefault("tokens_per_s", 400)
    model = ScriptedModel([*turns, "done"], first_token_s=0.0, **options)
    return nbagent.Agent(model, tools=[echo], name="slow")


def test_one_writer_thread_even_when_clicks_arrive_on_other_threads(watched: Watched) -> None:
    run = nbagent.start(slow_agent(), "talk", display=True)
    (view,) = watched.views
    wait_until(lambda: "word word" in view.steps.children[0].value if view.steps.children else False)
    clicks = [threading.Thread(target=view.stop_button.click, name=f"click-{i}") for i in range(3)]
    for click in clicks:
        click.start()
    for click in clicks:
        click.join()
    record = run.wait(timeout=30)
    assert record.status == "interrupted"
    assert {thread for thread, _, _ in watched.writes} == {"nbagent-loop"}
    assert view.stop_button.disabled and view.after_step_button.disabled


def test_stop_after_step_button_finishes_the_step_and_says_so_meanwhile(watched: Watched) -> None:
    run = nbagent.start(slow_agent(steps=3, words=800), "talk", display=True)  # 2 s steps
    (view,) = watched.views
    wait_until(lambda: bool(view.steps.children) and "word word" in view.steps.children[0].value)
    threading.Thread(target=view.after_step_button.click).start()
    record = run.wait(timeout=30)
    assert record.status == "interrupted"
    assert [s.interrupted for s in record.steps] == [False]
    assert record.steps[0].tool_calls[0].status == "ok"
    assert any("stopping after this step" in str(v) for v in watched.values())
    assert "■ interrupted" in html_text(view.head.value)


def test_final_state_shows_the_end_status_disables_the_buttons_and_keeps_errors_red(watched: Watched) -> None:
    model = fast_model([Reply("trying", [ToolCall("nope", {})])])  # then the script runs out: ModelError
    record = nbagent.run(nbagent.Agent(model), "fail please", display=True)
    (view,) = watched.views
    assert record.status == "error"
    assert "✗ error" in html_text(view.head.value)
    assert '<div class="nbagent-error">✗ ModelError' in view.summary.value
    assert "nbagent-error" in view.steps.children[-1].value
    assert view.stop_button.disabled and view.after_step_button.disabled
    writes = len(watched.writes)
    nbagent.run(nbagent.Agent(fast_model(["another run"])), "x")  # the loop goes on; this view is done
    assert len(watched.writes) == writes


def test_each_run_has_its_own_view(watched: Watched) -> None:
    first = nbagent.start(nbagent.Agent(fast_model(["one"])), "first", display=True)
    second = nbagent.start(nbagent.Agent(fast_model(["two"])), "second", display=True)
    first.wait(), second.wait()
    assert [v.run for v in watched.views] == [first, second]
    assert "first" in watched.views[0].summary.value and "second" in watched.views[1].summary.value


def test_injection_corpus_is_escaped_in_every_widget_value_and_in_the_record(watched: Watched) -> None:
    @nbagent.tool
    def echo(text: str) -> str:
        """Echo.

        Args:
            text: what to echo
        """
        return text

    @nbagent.tool
    def fail(text: str) -> str:
        """Fail.

        Args:
            text: the message
        """
        raise ValueError(text)

    turns = [
        Reply(PAYLOAD, [ToolCall("echo", {"text": PAYLOAD})]),
        Reply(PAYLOAD, [ToolCall("fail", {"text": PAYLOAD}), ToolCall(PAYLOAD, "{")]),
        PAYLOAD,
    ]
    agent = nbagent.Agent(fast_model(turns, name=PAYLOAD), tools=[echo, fail], name=PAYLOAD)
    record = nbagent.run(agent, PAYLOAD, display=True)
    assert record.status == "success"
    values = watched.values()
    assert len(values) >= 5
    for value in values:
        assert html_problems(value) == [], value
    (view,) = watched.views
    for payload in CORPUS:
        assert payload in html_text(view.summary.value)
        assert payload in html_text(view.steps.children[0].value)
    static = htmlview.record_html(record)
    assert html_problems(static) == []
    for payload in CORPUS:
        assert html.escape(payload) in static
    assert html_problems(record._repr_html_()) == []


def test_in_a_kernel_the_view_is_displayed_and_ends_as_static_html_of_the_record(monkeypatch) -> None:
    shown: list[tuple[dict, dict]] = []
    monkeypatch.setattr(display, "front_end", lambda: "widgets")
    monkeypatch.setattr("IPython.display.display", lambda bundle, **kw: shown.append((bundle, kw)))
    monkeypatch.setattr("IPython.display.update_display", lambda bundle, **kw: shown.append((bundle, kw)))
    final = nbagent.run(nbagent.Agent(fast_model(["<b>done</b>"])), "task", display=True)
    (first, first_options), (last, last_options) = shown
    assert WIDGET_MIMETYPE in first and "text/plain" in first
    assert "● running" in html_text(first["text/html"])
    assert first_options == last_options == {"raw": True, "display_id": f"nbagent-{final.run_id}"}
    assert WIDGET_MIMETYPE not in last  # a saved notebook needs no widget state to show the end
    assert last["text/html"] == htmlview.record_html(final)
    assert "<button" not in last["text/html"]  # nothing in a saved notebook pretends to be clickable
    assert "✓ success" in html_text(last["text/html"]) and "<b>done</b>" in html_text(last["text/html"])
    assert last["text/plain"] == str(final)


def test_outside_a_kernel_runs_are_shown_as_text(capsys) -> None:
    assert display.front_end() == "text"
    nbagent.run(nbagent.Agent(fast_model(["all <b>fine</b>"]), name="texty"), "task", display=True)
    out = capsys.readouterr().out
    assert "▶ texty" in out and "all <b>fine</b>" in out and "■ success" in out


def test_record_displays_itself_as_the_static_view() -> None:
    record = nbagent.run(nbagent.Agent(fast_model([[ToolCall("missing", {})], "fine"])), "task")
    page = record._repr_html_()
    assert page.count('class="nbagent-step"') == 2
    assert "✓ success" in html_text(page)
    assert "unknown tool" in html_text(page)


def test_a_queued_run_says_which_run_it_waits_for_and_its_clock_starts_with_its_turn(manual) -> None:
    loop, clock, view, feed = manual
    feed.send(ev.RunQueued, "abc123")
    clock.now += 5.0
    loop.fire()
    head = html_text(view.head.value)
    assert "◌ queued · after run abc123" in head and "running" not in head
    assert "5.0 s" not in head  # the wait is not the run's time
    feed.send(ev.RunDequeued)
    clock.now += 1.5
    loop.fire()
    head = html_text(view.head.value)
    assert "● running" in head and "1.5 s" in head and "queued" not in head


def test_runs_of_one_agent_started_together_show_queued_until_their_turn(watched: Watched) -> None:
    model = ScriptedModel(["word " * 200, "second answer"], tokens_per_s=400, first_token_s=0.0)
    agent = nbagent.Agent(model, name="turns")  # the first run takes 0.5 s; the second waits for it
    first = nbagent.start(agent, "first", display=True)
    second = nbagent.start(agent, "second", display=True)
    assert second.wait(timeout=30).queued_s > 0
    heads = [html_text(v) for t, name, v in watched.writes if name == "value" and "nbagent-title" in str(v)]
    assert any(f"◌ queued · after run {first.run_id}" in h for h in heads)
    assert "✓ success" in html_text(watched.views[1].head.value)


class CountingTask(str):
    """A task that counts how often the view reads it."""

    reads = 0

    def __getitem__(self, key):
        CountingTask.reads += 1
        return str.__getitem__(self, key)


class CountingValue:
    """A huge, non-JSON tool value that counts how often it is rendered."""

    renders = 0

    def __repr__(self) -> str:
        CountingValue.renders += 1
        return "<counting value>"


def test_huge_task_and_tool_values_are_rendered_once_not_on_every_tick() -> None:
    loop, clock = ManualLoop(), Clock()
    task = CountingTask("x" * 10_000_000)
    run = Run(nbagent.Agent(fast_model(["ok"])), task)
    view = LiveView(run, loop=loop, clock=clock)  # type: ignore[arg-type]
    feed = Feed(view, run, clock)
    feed.start()
    feed.step_started()
    value = CountingValue()
    feed.send(ev.ToolCallStarted, "c1", "tool", {"big": value, "text": "y" * 10_000_000})
    feed.send(ev.ToolCallFinished, "c1", "ok", value)
    loop.fire()
    reads, renders = CountingTask.reads, CountingValue.renders
    assert "x" * 100 in view.summary.value and "&lt;counting value&gt;" in view.steps.children[0].value
    for _ in range(20):
        feed.send(ev.TextDelta, " more")
        clock.now += 0.1
        loop.fire()
    assert "more" in view.steps.children[0].value
    assert (CountingTask.reads, CountingValue.renders) == (reads, renders)
    assert len(view.steps.children[0].value) < 5_000


class Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")

    __str__ = __repr__


WEIRD = [Unprintable(), 2**20000, "lone \ud800 surrogate", "\udfff", {"k\ud800": Unprintable()}, [2**20000]]


def weird(index: int) -> object:
    """A value no renderer can take for granted (hypothesis must not repr them: by index)."""
    return WEIRD[index]


@settings(max_examples=200, deadline=None)
@given(
    text=st.text() | st.just("say \ud800"),
    value=st.recursive(
        st.sampled_from(range(len(WEIRD))).map(weird) | st.text() | st.integers(),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
        max_leaves=6,
    ),
)
def test_no_value_makes_the_html_raise_or_leave_valid_utf8(text, value) -> None:
    step = StepRecord(1, "action", datetime.now(timezone.utc), 0.0, end_s=1.0, model_output=text, error=text)
    at = step.started_at
    step.tool_calls.append(nbagent.ToolCallRecord("c1", text, value, at, 0.0, "ok", value))
    step.tool_calls.append(nbagent.ToolCallRecord("c2", "t", {"a": value}, at, 0.0, "error", None, text))
    record = nbagent.RunRecord("r", text, text, text, at, "success", output=value, steps=[step])
    pages = (htmlview.record_html(record), htmlview.record_line_html(record), htmlview.step_html(step))
    for fragment in pages:
        fragment.encode("utf-8")  # a lone surrogate here is what froze the view in a kernel
        assert html_problems(fragment) == []


def test_a_record_shows_as_one_line_in_the_cell_that_showed_its_live_view(monkeypatch) -> None:
    record = nbagent.run(nbagent.Agent(fast_model(["fine"])), "task")
    cell = {"id": "cell-1"}
    monkeypatch.setattr(display, "current_cell_id", lambda: cell["id"])
    assert htmlview.record_display_html(record) == htmlview.record_html(record)  # never shown live
    display.note_shown(record.run_id)
    line = htmlview.record_display_html(record)
    assert line.count('class="nbagent-step"') == 0 and "<button" not in line
    assert f"✓ success RunRecord {record.run_id}" in html_text(line)
    cell["id"] = "cell-2"  # the same record shown by a later cell: the whole static view again
    assert htmlview.record_display_html(record) == htmlview.record_html(record)
