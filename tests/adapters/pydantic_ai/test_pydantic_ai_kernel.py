"""The Stop button on a pydantic-ai run, in a real Jupyter kernel, clicked as a browser clicks it
(a ``comm_msg`` to the Button's comm).

The agent runs on pydantic-ai's own ``FunctionModel``, whose second reply streams a word and then
waits until cancelled; the test clicks Stop while it is in flight, and checks that the view says
interrupted, the record keeps the finished step and the cut text, and the same agent continues.
"""

from __future__ import annotations

import pytest
from kernel_support import KernelDriver

pytestmark = [pytest.mark.needs("pydantic-ai"), pytest.mark.kernel, pytest.mark.timeout(180)]

PYDANTIC_SETUP = """
import asyncio
import nbagent
from pydantic_ai import Agent
from pydantic_ai.models.function import DeltaToolCall, FunctionModel

held = asyncio.Event()  # never set: the second reply streams one word, then waits for a Stop

async def stream(messages, info):
    if messages[-1].parts[-1].part_kind == "user-prompt":
        yield {0: DeltaToolCall(name="add", json_args='{"a": 1, "b": 2}', tool_call_id="c1")}
    elif len(messages) < 5:
        yield "The answer "
        await held.wait()
    else:
        yield "is 3."

agent = Agent(FunctionModel(stream_function=stream), name="adder")

@agent.tool_plain
def add(a: int, b: int) -> int:
    return a + b
"""


def test_stop_button_stops_a_pydantic_ai_run_mid_reply(tmp_path) -> None:
    with KernelDriver.start(cwd=str(tmp_path)) as kernel:
        kernel.execute(PYDANTIC_SETUP)
        view = kernel.execute("run = nbagent.start(agent, 'What is 1 + 2?')").widget_view()
        kernel.execute("while run.live_text(2) != 'The answer ':\n    await asyncio.sleep(0.01)")
        kernel.click_stop(view)
        out = (
            kernel.execute(
                "record = await run\n"
                "print(record.status, len(record.steps), record.steps[0].tool_calls[0].result,\n"
                "      record.steps[1].interrupted, repr(record.steps[1].model_output))"
            )
            .stdout.strip()
            .split(maxsplit=4)
        )
        assert out == ["interrupted", "2", "3", "True", "'The answer '"]
        out = kernel.execute(
            "more = await nbagent.start(agent, 'Go on.', reset=False)\nprint(more.status, more.output)"
        ).stdout.strip()
        assert out == "success is 3."
