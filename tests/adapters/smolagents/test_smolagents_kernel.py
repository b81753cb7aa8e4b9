"""The Stop button on a smolagents run, in a real Jupyter kernel, clicked as a browser clicks it.

A smolagents ``CodeAgent`` runs on a scripted smolagents model whose second reply is held (it
waits until the test releases it). The test clicks Stop while that model call is in flight and
checks that the run ended while the call was still running, that the record is complete, that
smolagents printed nothing into the notebook, and that the same agent then continues.
"""

from __future__ import annotations

import json

import pytest
from kernel_support import KernelDriver, html_text
from support import TESTS

pytestmark = [pytest.mark.needs("smolagents"), pytest.mark.kernel, pytest.mark.timeout(180)]

SETUP = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
import dataclasses
import nbagent
from smolagents import CodeAgent
from smolagents_fakes import HOLD_S, ScriptedSmolModel, SlowTool, code

model = ScriptedSmolModel([
    code("print(lookup('paris'))"),
    dataclasses.replace(code("print(lookup('rome'))"), delay_s=HOLD_S),
    code("final_answer('sunny')"),
])
tool = SlowTool()
agent = CodeAgent(tools=[tool], model=model)
"""


def test_stop_button_stops_a_smolagents_run_mid_model_call(tmp_path) -> None:
    with KernelDriver.start(cwd=str(tmp_path)) as kernel:
        kernel.execute(SETUP)
        started = kernel.execute("run = nbagent.start(agent, 'What is the weather?')")
        view = started.widget_view()
        stop = kernel.widgets.find_under(view, "ButtonModel", description="Stop")
        # Wait, in the kernel, until the second (held) model call is in flight.
        kernel.execute("await __import__('asyncio').to_thread(model.wait_for_call, 2)")
        kernel.click(stop)
        kernel.wait_for(
            lambda: "■ interrupted" in html_text(kernel.widgets.text_under(view)),
            what="the view to say interrupted",
        )
        out = kernel.execute(
            "record = await run\n"
            "print(record.status, model.calls_finished, len(record.steps), record.steps[-1].interrupted,\n"
            "      record.steps[0].input_tokens, tool.calls_started)"
        ).stdout.split()
        # interrupted while the held call was still running (1 of 2 calls finished), step 1 complete
        assert out == ["interrupted", "1", "2", "True", "100", "1"]
        assert kernel.widgets.states[stop]["disabled"] is True
        # smolagents' own console output (its "New run" panel, say) never reached the notebook
        assert not any("New run" in json.dumps(r.content, default=str) for r in kernel.received)

        out = kernel.execute(
            "model.release()\n"
            "record2 = await nbagent.start(agent, 'Go on.', reset=False)\n"
            "print(record2.status, record2.output, tool.calls_started)"
        ).stdout.split()
        assert out == ["success", "sunny", "1"]  # the abandoned reply never ran its code


STREAMING_SETUP = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
import nbagent
from smolagents import CodeAgent
from smolagents_fakes import StreamingScriptedSmolModel, SlowTool, code

def streaming_agent():
    turns = [code("print(lookup('paris'))"), code("final_answer('sunny')")]
    model = StreamingScriptedSmolModel(turns, delay_s=0.6, chunks=6)  # long enough for rich to refresh
    return CodeAgent(tools=[SlowTool()], model=model, stream_outputs=True)
"""


def _rich_output_widgets(kernel: KernelDriver) -> list[str]:
    return [m for m, state in kernel.widgets.states.items() if state.get("_model_name") == "OutputModel"]


def test_a_streaming_smolagents_run_puts_nothing_of_smolagents_on_the_page(tmp_path) -> None:
    with KernelDriver.start(cwd=str(tmp_path)) as kernel:
        kernel.execute(STREAMING_SETUP)
        out = kernel.execute("record = await nbagent.start(streaming_agent(), 'W?')\nprint(record.status)")
        assert out.stdout.split() == ["success"]
        # rich draws smolagents' streaming panel in an ipywidgets Output; under nbagent there is none
        assert _rich_output_widgets(kernel) == []
        assert not any("New run" in json.dumps(r.content, default=str) for r in kernel.received)

        # The same agent run by plain smolagents in the same kernel does draw it: the check above is real.
        kernel.execute("streaming_agent().run('Weather?')")
        assert _rich_output_widgets(kernel) != []
