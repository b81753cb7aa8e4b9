"""The Stop button on a Google ADK run, in a real Jupyter kernel, clicked as a browser clicks it
(a ``comm_msg`` to the Button's comm).

The agent's sync tool blocks; the test clicks Stop while it runs, checks that the view says
interrupted and the call is abandoned (its thread cannot be stopped), then takes the session's
next turn with the user's own ``runner.run_async`` on the kernel's loop, and with ``reset=False``.
"""

from __future__ import annotations

import pytest
from kernel_support import KernelDriver

pytestmark = [pytest.mark.needs("adk"), pytest.mark.kernel, pytest.mark.timeout(180)]

ADK_SETUP = """
import asyncio, threading
import nbagent
from google.adk import Agent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.genai import types

class Scripted(BaseLlm):
    model: str = "scripted"
    replies: list = []

    async def generate_content_async(self, llm_request, stream=False):
        calls, text = self.replies.pop(0)
        parts = [types.Part(text=text)] if text else []
        parts += [types.Part(function_call=types.FunctionCall(name=n, args=a)) for n, a in calls]
        usage = types.GenerateContentResponseUsageMetadata(prompt_token_count=12, candidates_token_count=3)
        yield LlmResponse(content=types.Content(role="model", parts=parts), usage_metadata=usage)

gate = threading.Event()

def lookup(city: str) -> str:
    \"\"\"Looks a city up, slowly.\"\"\"
    gate.wait(600)
    return "found"

calling = ([("lookup", {"city": "Rome"})], "")
model = Scripted(replies=[calling, ([], "Rome is in Italy."), ([], "Still Italy.")])
agent = Agent(name="finder", model=model, tools=[lookup])
runner = InMemoryRunner(agent=agent)
"""


def test_stop_button_stops_an_adk_run_mid_sync_tool_and_the_session_goes_on(tmp_path) -> None:
    with KernelDriver.start(cwd=str(tmp_path)) as kernel:
        kernel.execute(ADK_SETUP)
        view = kernel.execute("run = nbagent.start(runner, 'Find Rome.')").widget_view()
        kernel.execute("while not run.record.tool_calls:\n    await asyncio.sleep(0.01)")
        kernel.click_stop(view)
        out = kernel.execute(
            "record = await run\n"
            "step = record.steps[0]\n"
            "print(record.status, step.input_tokens, step.output_tokens, step.tool_calls[0].status)"
        ).stdout.split()
        assert out == ["interrupted", "12", "3", "abandoned"]
        out = kernel.execute(
            "gate.set()\n"
            "s = run.result.session_id if run.result else None\n"
            "s = (await runner.session_service.list_sessions(app_name=runner.app_name, user_id='user'))\n"
            "s = s.sessions[0]\n"
            "msg = types.Content(role='user', parts=[types.Part(text='Where?')])\n"
            "events = [e async for e in runner.run_async(user_id='user', session_id=s.id, new_message=msg)]\n"
            "print(events[-1].content.parts[0].text)"
        ).stdout.strip()
        assert out == "Rome is in Italy."
        out = kernel.execute(
            "more = await nbagent.start(runner, 'Sure?', reset=False)\nprint(more.status, more.output)"
        ).stdout.strip()
        assert out == "success Still Italy."


APPROVAL_SETUP = """
from google.adk.tools import FunctionTool

sent = []

def send_email(to: str) -> str:
    \"\"\"Sends an email (ADK asks a person first).\"\"\"
    sent.append(to)
    return f"sent to {to}"

mail_model = Scripted(replies=[([("send_email", {"to": "bob"})], ""), ([], "Sent it.")])
mailer = Agent(name="mailer", model=mail_model, tools=[FunctionTool(send_email, require_confirmation=True)])
"""


def test_an_approve_click_confirms_adks_tool_call_and_the_run_goes_on(tmp_path) -> None:
    """ADK's ``require_confirmation`` shows as an Approve button; a click (a ``comm_msg`` to the
    Button's comm, as a browser sends it) confirms the call through ADK, which runs the tool."""
    with KernelDriver.start(cwd=str(tmp_path)) as kernel:
        kernel.execute(ADK_SETUP + APPROVAL_SETUP)
        view = kernel.execute("run = nbagent.start(mailer, 'Mail Bob.')").widget_view()

        def approve_buttons() -> list[str]:
            return [
                m
                for m in kernel.widgets.under(view)
                if kernel.widgets.states.get(m, {}).get("_model_name") == "ButtonModel"
                and kernel.widgets.states[m].get("description") == "Approve"
            ]

        (approve,) = kernel.wait_for(approve_buttons, what="an Approve button")
        assert kernel.execute("print(sent)").stdout.strip() == "[]"
        kernel.click(approve)
        out = kernel.execute(
            "record = await run\nprint(record.status, sent, record.output, record.tool_calls[0].status)"
        ).stdout.split()
        assert out == ["success", "['bob']", "Sent", "it.", "ok"]
        kernel.wait_for(lambda: not approve_buttons(), what="the decided row to go")
