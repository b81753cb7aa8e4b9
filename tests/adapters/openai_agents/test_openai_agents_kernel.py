"""The Stop button on an OpenAI Agents SDK run, in a real Jupyter kernel, clicked as a browser
clicks it (a ``comm_msg`` to the Button's comm).

The agent runs on the SDK's own ``agents.testing.ScriptedModel``; its tool waits until cancelled.
The test clicks Stop while the tool runs, and checks that the view says interrupted, the record
keeps the turn's usage and the cancelled call, and the same agent continues.
"""

from __future__ import annotations

import pytest
from kernel_support import KernelDriver

pytestmark = [pytest.mark.needs("openai-agents"), pytest.mark.kernel, pytest.mark.timeout(180)]

SDK_SETUP = """
import asyncio
import nbagent
from agents import Agent, function_tool, set_tracing_disabled
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from agents.usage import Usage

set_tracing_disabled(True)

@function_tool
async def lookup(city: str) -> str:
    \"\"\"Looks a city up, slowly.\"\"\"
    await asyncio.sleep(3600)
    return "never"

model = ScriptedModel([
    ModelStep(output=[function_call("lookup", {"city": "Rome"}, call_id="l1")],
              usage=Usage(requests=1, input_tokens=12, output_tokens=3, total_tokens=15)),
])
agent = Agent(name="finder", model=model, tools=[lookup])
"""


def test_stop_button_stops_an_openai_agents_run_mid_tool(tmp_path) -> None:
    with KernelDriver.start(cwd=str(tmp_path)) as kernel:
        kernel.execute(SDK_SETUP)
        view = kernel.execute("run = nbagent.start(agent, 'Find Rome.')").widget_view()
        kernel.execute("while not run.record.tool_calls:\n    await asyncio.sleep(0.01)")
        kernel.click_stop(view)
        out = kernel.execute(
            "record = await run\n"
            "step = record.steps[0]\n"
            "print(record.status, step.input_tokens, step.output_tokens, step.tool_calls[0].status)"
        ).stdout.split()
        assert out == ["interrupted", "12", "3", "cancelled"]
        out = kernel.execute(
            "model.enqueue([assistant_message('Rome is in Italy.')])\n"
            "more = await nbagent.start(agent, 'Go on.', reset=False)\nprint(more.status, more.output)"
        ).stdout.strip()
        assert out == "success Rome is in Italy."
