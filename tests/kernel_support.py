"""Drive a real Jupyter kernel from a test, the way a notebook front end does.

``KernelDriver`` starts a ``python3`` kernel with jupyter_client and reads everything it publishes
on iopub, in order, with the time each message arrived. On top of that it mirrors the widget
models the kernel opens (``comm_open``) and updates (``comm_msg`` with ``method: update``), so a
test can find a widget by what it is (a ``ButtonModel`` whose description is ``"Stop"``) and read
every value a widget ever had. ``click`` sends exactly what a browser sends when a Button is
clicked: a ``comm_msg`` on the shell channel with ``{"method": "custom", "content": {"event":
"click"}}``.

Typical use::

    with KernelDriver.start() as kernel:
        reply = kernel.execute("import nbagent; run = nbagent.start(agent, 'task')")
        view = reply.widget_view()                        # model id of the displayed widget
        stop = kernel.widgets.find_under(view, "ButtonModel", description="Stop")
        kernel.click(stop)
        kernel.wait_for(lambda: "■ interrupted" in html_text(kernel.widgets.text_under(view)))
        assert kernel.execute("print((await run).status)").stdout.strip() == "interrupted"

(The view shows the end a moment before the ``Run`` handle is done: read the record with
``await run`` in the follow-up cell, not ``run.status``.)

``html_problems`` checks that a widget value is inert markup: only the tags the view itself
writes, no event-handler attributes, balanced ``div``s (a ``</div>`` breakout would unbalance them).

Single-threaded on purpose: a test calls ``pump``/``wait_for``/``execute`` and messages are read
only then, so nothing races. Waits are conditions with deadlines, never fixed sleeps.
The kernel runs this interpreter (jupyter_client starts kernelspecs whose command is ``python``
with ``sys.executable``); ``.ci/run`` installs the ``python3`` kernelspec.
"""

from __future__ import annotations

import json
import queue
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any, TypeVar

from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager, start_new_kernel

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_TARGET = "jupyter.widget"
MODEL_REF = "IPY_MODEL_"

T = TypeVar("T")

VIEW_TAGS = frozenset({"div", "span", "b", "style", "button"})
"""Every tag nbagent's views write; anything else in a value came from model or tool text."""


class _TagAudit(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []
        self.depth = 0
        self.in_style = False
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in VIEW_TAGS:
            self.problems.append(f"unexpected <{tag}>")
        risky = [name for name, _ in attrs if name.startswith("on") or name in ("src", "href", "srcdoc")]
        self.problems.extend(f"attribute {name}= on <{tag}>" for name in risky)
        self.depth += tag == "div"
        self.in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self.in_style = False
        if tag == "div":
            self.depth -= 1
            if self.depth < 0:
                self.problems.append("a </div> closes a div it did not open")

    def handle_data(self, data: str) -> None:
        if not self.in_style:
            self.text.append(data)


def html_problems(fragment: str) -> list[str]:
    """What makes ``fragment`` more than the view's own markup (an empty list when it is inert)."""
    audit = _TagAudit()
    audit.feed(fragment)
    audit.close()
    if audit.depth > 0:
        audit.problems.append(f"{audit.depth} div(s) left open")
    return audit.problems


def html_text(fragment: str) -> str:
    """The text a reader of ``fragment`` sees (entities decoded), without the ``<style>`` rules."""
    audit = _TagAudit()
    audit.feed(fragment)
    audit.close()
    return "".join(audit.text)


def wait_for(condition: Callable[[], T], timeout: float, what: str, step: Callable[[], Any]) -> T:
    """Call ``step`` then ``condition`` until the condition returns something true; return it.
    Raise ``AssertionError`` naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        step()
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")


@dataclass
class Received:
    """One iopub message and the ``time.monotonic()`` at which it was read."""

    at: float
    msg: dict[str, Any]

    @property
    def type(self) -> str:
        return self.msg["header"]["msg_type"]

    @property
    def content(self) -> dict[str, Any]:
        return self.msg["content"]

    @property
    def parent_id(self) -> str | None:
        return (self.msg.get("parent_header") or {}).get("msg_id")


@dataclass
class WidgetUpdate:
    """A widget state change as the front end sees it: the opening state or an update."""

    at: float
    model_id: str
    state: dict[str, Any]
    size: int
    """Bytes of the message's ``data`` as JSON: what this change cost on the wire."""


class WidgetStates:
    """Mirror of the kernel's widget models, built from iopub ``comm_open`` / ``comm_msg``."""

    def __init__(self) -> None:
        self.states: dict[str, dict[str, Any]] = {}
        self.history: list[WidgetUpdate] = []

    def apply(self, received: Received) -> None:
        content = received.content
        if received.type == "comm_open" and content.get("target_name") == WIDGET_TARGET:
            state = dict(content["data"].get("state", {}))
            self.states[content["comm_id"]] = state
        elif received.type == "comm_msg" and content["comm_id"] in self.states:
            data = content.get("data", {})
            if data.get("method") != "update":
                return
            state = data.get("state", {})
            self.states[content["comm_id"]].update(state)
        else:
            return
        size = len(json.dumps(content.get("data", {})).encode())
        self.history.append(WidgetUpdate(received.at, content["comm_id"], state, size))

    def children(self, model_id: str) -> list[str]:
        refs = self.states.get(model_id, {}).get("children", [])
        return [ref[len(MODEL_REF) :] for ref in refs if isinstance(ref, str) and ref.startswith(MODEL_REF)]

    def under(self, model_id: str) -> list[str]:
        """``model_id`` and every model below it (through ``children``), depth first."""
        found = [model_id]
        for child in self.children(model_id):
            found.extend(self.under(child))
        return found

    def find_under(self, root: str, model_name: str, **state: Any) -> str:
        """The one model under ``root`` of ``model_name`` whose state has the given values."""
        matches = [
            m
            for m in self.under(root)
            if self.states.get(m, {}).get("_model_name") == model_name
            and all(self.states[m].get(k) == v for k, v in state.items())
        ]
        if len(matches) != 1:
            raise LookupError(f"{len(matches)} {model_name} with {state} under {root}")
        return matches[0]

    def text_under(self, root: str) -> str:
        """The current ``value`` of every HTML widget under ``root``, joined."""
        return "\n".join(
            str(self.states[m].get("value", ""))
            for m in self.under(root)
            if self.states.get(m, {}).get("_model_name") == "HTMLModel"
        )

    def values_ever(self, root: str) -> Iterator[str]:
        """Every string value and description any widget under ``root`` ever had."""
        models = set(self.under(root))
        for update in self.history:
            if update.model_id in models:
                for key in ("value", "description", "tooltip"):
                    if isinstance(update.state.get(key), str):
                        yield update.state[key]


@dataclass
class Execution:
    """What one ``execute_request`` produced."""

    msg_id: str
    reply: dict[str, Any]
    outputs: list[Received] = field(default_factory=list)

    @property
    def stdout(self) -> str:
        return "".join(
            r.content["text"] for r in self.outputs if r.type == "stream" and r.content["name"] == "stdout"
        )

    @property
    def stderr(self) -> str:
        return "".join(
            r.content["text"] for r in self.outputs if r.type == "stream" and r.content["name"] == "stderr"
        )

    def widget_view(self) -> str:
        """The model id of the (first) widget this execution displayed."""
        for r in self.outputs:
            if r.type == "display_data" and WIDGET_VIEW in r.content.get("data", {}):
                return r.content["data"][WIDGET_VIEW]["model_id"]
        raise LookupError("this execution displayed no widget")

    def display_id(self) -> str | None:
        for r in self.outputs:
            if r.type == "display_data":
                return (r.content.get("transient") or {}).get("display_id")
        return None


class KernelDriver:
    """A running kernel and a client that reads all it publishes. Use as a context manager."""

    def __init__(self, km: KernelManager, kc: BlockingKernelClient) -> None:
        self.km = km
        self.kc = kc
        self.received: list[Received] = []
        self.widgets = WidgetStates()
        self._replies: dict[str, dict[str, Any]] = {}

    @classmethod
    def start(cls, kernel_name: str = "python3", cwd: str | None = None, timeout: float = 60) -> KernelDriver:
        km, kc = start_new_kernel(kernel_name=kernel_name, startup_timeout=timeout, cwd=cwd)
        driver = cls(km, kc)
        driver.pump(0)
        return driver

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)

    def __enter__(self) -> KernelDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading ---------------------------------------------------------------------------

    def pump(self, timeout: float = 0.05) -> int:
        """Read every message waiting on iopub and shell; wait up to ``timeout`` for the first."""
        count = 0
        wait = timeout
        while True:
            try:
                msg = self.kc.get_iopub_msg(timeout=wait)
            except queue.Empty:
                break
            received = Received(time.monotonic(), msg)
            self.received.append(received)
            self.widgets.apply(received)
            count += 1
            wait = 0
        while True:
            try:
                reply = self.kc.get_shell_msg(timeout=0)
            except queue.Empty:
                break
            self._replies[reply["parent_header"].get("msg_id")] = reply
        return count

    def wait_for(self, condition: Callable[[], T], timeout: float = 30, what: str = "a condition") -> T:
        """Pump messages until ``condition()`` is true; return its value."""
        return wait_for(condition, timeout, what, lambda: self.pump(0.02))

    def outputs_of(self, msg_id: str) -> list[Received]:
        return [r for r in self.received if r.parent_id == msg_id]

    def last_update(self, display_id: str) -> dict[str, Any]:
        """The bundle of the last update of ``display_id`` (a view's static final state)."""
        updates = [
            r.content["data"]
            for r in self.received
            if r.type == "update_display_data"
            and r.content.get("transient", {}).get("display_id") == display_id
        ]
        assert updates, f"no update for display {display_id}"
        return updates[-1]

    def shown(self, view: str) -> str:
        """The text the widget view ``view`` shows."""
        return html_text(self.widgets.text_under(view))

    # -- acting ----------------------------------------------------------------------------

    def submit(self, code: str) -> str:
        """Send ``code`` for execution without waiting; returns the request's msg_id."""
        return self.kc.execute(code, store_history=False)

    def result(self, msg_id: str, timeout: float = 60) -> Execution:
        """Wait for the reply and the idle status of request ``msg_id``."""

        def finished() -> bool:
            idle = any(
                r.type == "status" and r.content["execution_state"] == "idle" for r in self.outputs_of(msg_id)
            )
            return idle and msg_id in self._replies

        self.wait_for(finished, timeout, f"execution {msg_id} to finish")
        return Execution(msg_id, self._replies[msg_id]["content"], self.outputs_of(msg_id))

    def execute(self, code: str, timeout: float = 60, allow_errors: bool = False) -> Execution:
        """Run ``code`` to its end; fail with the traceback if it raised (unless allowed)."""
        execution = self.result(self.submit(code), timeout)
        if not allow_errors and execution.reply["status"] != "ok":
            raise AssertionError(
                f"cell failed: {execution.reply.get('ename')}: {execution.reply.get('evalue')}\n"
                + "\n".join(execution.reply.get("traceback", []))
            )
        return execution

    def complete(self, code: str, timeout: float = 30) -> list[str]:
        """What the kernel offers for Tab at the end of ``code`` (a ``complete_request``)."""
        msg_id = self.kc.complete(code, len(code))
        reply = self.wait_for(lambda: self._replies.get(msg_id), timeout, f"completions of {code!r}")
        return reply["content"]["matches"]

    def click(self, model_id: str) -> float:
        """Click a Button exactly as a browser does; returns the ``time.monotonic()`` of the send."""
        content = {"comm_id": model_id, "data": {"method": "custom", "content": {"event": "click"}}}
        msg = self.kc.session.msg("comm_msg", content)
        sent = time.monotonic()
        self.kc.shell_channel.send(msg)
        return sent

    def click_stop(self, view: str) -> str:
        """Click the Stop button of the run view ``view`` and wait until the view says the run was
        interrupted and its Stop is disabled; returns the Stop button's model id."""
        stop = self.widgets.find_under(view, "ButtonModel", description="Stop")
        self.click(stop)
        self.wait_for(
            lambda: "■ interrupted" in html_text(self.widgets.text_under(view)),
            what="the view to say interrupted",
        )
        self.wait_for(lambda: self.widgets.states[stop]["disabled"] is True, what="Stop to be disabled")
        return stop

    def interrupt(self) -> None:
        """Jupyter's interrupt button: SIGINT to the kernel."""
        self.km.interrupt_kernel()
