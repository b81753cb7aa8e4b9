"""smolagents' silenced console leaves nothing on the page, in a real Jupyter kernel: no empty
``<pre>`` displays (rich shows one each time a capture ends in Jupyter), no empty stream writes."""

from __future__ import annotations

import pytest
from kernel_support import KernelDriver, Received
from support import TESTS

pytestmark = [pytest.mark.needs("smolagents"), pytest.mark.kernel, pytest.mark.timeout(180)]

SETUP = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
import nbagent
from smolagents import CodeAgent, ToolCallingAgent
from smolagents_fakes import ScriptedSmolModel, SlowTool, answer, call, code

def code_agent():
    model = ScriptedSmolModel([code("print(lookup('paris'))"), code("print(lookup('rome'))"),
                               code("final_answer('sunny')")])
    return CodeAgent(tools=[SlowTool()], model=model)

def tool_agent():
    model = ScriptedSmolModel([call("lookup", query="paris"), answer("sunny")])
    return ToolCallingAgent(tools=[SlowTool()], model=model)
"""


def empty_outputs(received: list[Received]) -> list[dict]:
    """Outputs that put nothing visible on the page but still take room (a blank ``<pre>``)."""
    empty = []
    for message in received:
        content = message.content
        if message.type == "stream" and not content.get("text", "").strip():
            empty.append(content)
        elif message.type in ("display_data", "execute_result", "update_display_data"):
            data = content.get("data", {})
            widget = "application/vnd.jupyter.widget-view+json" in data
            if not widget and not str(data.get("text/plain", "")).strip():
                empty.append(content)
    return empty


@pytest.mark.parametrize("kind", ["code_agent", "tool_agent"])
def test_a_shown_smolagents_run_leaves_no_empty_outputs_on_the_page(tmp_path, kind) -> None:
    with KernelDriver.start(cwd=str(tmp_path)) as kernel:
        kernel.execute(SETUP)
        out = kernel.execute(f"record = await nbagent.start({kind}(), 'Weather?')\nprint(record.status)")
        assert out.stdout.split() == ["success"]
        assert out.widget_view()  # the run was shown, so smolagents' console was silenced
        kernel.execute("print('after')")  # anything a thread of the run wrote late has arrived by now
        assert empty_outputs(kernel.received) == []


def test_empty_output_check_sees_riches_empty_capture_display(tmp_path) -> None:
    """The check above is real: a rich capture ended in Jupyter shows an empty ``<pre>``."""
    with KernelDriver.start(cwd=str(tmp_path)) as kernel:
        kernel.execute("from rich.console import Console\nc = Console()\nc.begin_capture()\nc.end_capture()")
        assert empty_outputs(kernel.received) != []
