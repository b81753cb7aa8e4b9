"""A Stop stops the spending: smolagents models and tools that talk HTTP lose their connection at once.

Against a real local server (tests/smolagents_server.py) that records when each client went away.
The server "generates" for far longer than any test waits (a Stop that did not drop the connection
would leave the request running to its end), so ``disconnected`` set and ``finished`` unset is
the fact to check. Each case also continues the agent afterwards: the dead connection is replaced.
"""

from __future__ import annotations

import threading
import time

import pytest
import requests
from smolagents import CodeAgent, InferenceClientModel, OpenAIServerModel, Tool, ToolCallingAgent
from smolagents.monitoring import LogLevel
from smolagents_server import ChatServer, Reply, answer_call, code_reply
from support import run_threads, wait_until

import nbagent
from nbagent.adapters.smolagents import source as adapter

pytestmark = pytest.mark.needs("smolagents")

LONG_S = 60.0
"""How long a held reply would take: the tests end long before, unless the Stop failed."""
DISCONNECT_WITHIN_S = 1.0
"""Stop -> the server sees the client go (measured: about 1 ms; generous for a loaded machine)."""


@pytest.fixture
def server():
    with ChatServer() as made:
        yield made
    wait_until(lambda: not run_threads())


def model_for(server: ChatServer, kind: str):
    if kind == "openai":
        return OpenAIServerModel("test-model", api_base=server.base_url, api_key="test-key")
    return InferenceClientModel(model_id=server.base_url, token="test-key")


class Clock(Tool):
    name = "clock"
    description = "Tells the time."
    inputs = {}  # noqa: RUF012
    output_type = "string"

    def forward(self) -> str:
        return "noon"


def agent_for(server: ChatServer, agent_kind: str, model_kind: str, stream: bool, tools=()):
    cls = CodeAgent if agent_kind == "code" else ToolCallingAgent
    return cls(
        tools=[*tools, Clock()],
        model=model_for(server, model_kind),
        stream_outputs=stream,
        verbosity_level=LogLevel.OFF,
    )


def final(agent_kind: str, seconds: float = 0.0) -> Reply:
    return (
        code_reply("final_answer('done')", seconds) if agent_kind == "code" else answer_call("done", seconds)
    )


def stop_during(server: ChatServer, run: nbagent.Run, request: int) -> tuple[nbagent.RunRecord, float]:
    """Stop once the server is working on request number ``request``; the record, and Stop -> disconnect."""
    server.wait_until(lambda: len(server.requests) >= request)
    asked = time.perf_counter()
    assert run.interrupt()
    record = run.wait(timeout=30)
    server.wait_until(lambda: server.requests[request - 1].disconnected is not None, timeout=10)
    held = server.requests[request - 1]
    assert held.finished is None
    return record, held.disconnected - asked


CASES = [
    ("code", "openai", False),
    ("code", "openai", True),
    ("tool", "openai", False),
    ("tool", "openai", True),
    ("tool", "inference-client", False),
    ("code", "inference-client", True),
]


@pytest.mark.parametrize(
    ("agent_kind", "model_kind", "stream"), CASES, ids=["-".join(map(str, c)) for c in CASES]
)
def test_stop_mid_model_call_drops_the_connection_and_the_agent_goes_on(
    server, agent_kind, model_kind, stream
):
    server.push(code_reply("print(clock())") if agent_kind == "code" else Reply(tool_calls=(("clock", {}),)))
    server.push(Reply(text="never finished", seconds=LONG_S, chunks=60))
    agent = agent_for(server, agent_kind, model_kind, stream)
    run = nbagent.start(agent, "go")
    record, delay = stop_during(server, run, 2)
    assert record.status == "interrupted" and len(record.steps) == 2
    assert delay < DISCONNECT_WITHIN_S
    assert adapter.wait_idle(agent, timeout=10)  # the worker unwound with the connection, not at its end

    server.push(final(agent_kind))
    second = nbagent.run(agent, "go on", reset=False)
    assert (second.status, second.output) == ("success", "done")
    assert server.requests[-1].connection != server.requests[1].connection  # the dead one was replaced


@pytest.mark.parametrize("stream", [False, True], ids=["generate", "streaming"])
def test_a_pooled_connection_from_an_earlier_run_is_dropped_too(server, stream):
    agent = agent_for(server, "code", "openai", stream=False)  # a whole reply leaves the connection pooled
    server.push(final("code"))
    assert nbagent.run(agent, "first").status == "success"
    agent.stream_outputs = stream
    server.push(Reply(text="never finished", seconds=LONG_S, chunks=60))
    run = nbagent.start(agent, "second")
    record, delay = stop_during(server, run, 2)
    assert server.requests[1].connection == server.requests[0].connection  # kept alive and reused
    assert record.status == "interrupted" and delay < DISCONNECT_WITHIN_S
    server.push(final("code"))
    assert nbagent.run(agent, "third").output == "done"


class SlowService(Tool):
    """Calls a slow web service with requests (urllib3), through one pooled session."""

    name = "slow_service"
    description = "Asks a slow web service."
    inputs = {"seconds": {"type": "number", "description": "how long it takes"}}  # noqa: RUF012
    output_type = "string"

    def __init__(self, url: str, swallow: bool = False) -> None:
        super().__init__()
        self.url = url
        self.swallow = swallow
        self.session = requests.Session()
        self.retried = threading.Event()
        self.refused: list[BaseException] = []

    def forward(self, seconds: float) -> str:
        try:
            return self.session.get(f"{self.url}/slow", params={"seconds": seconds}, timeout=120).text
        except BaseException:
            if not self.swallow:
                raise
        try:  # a tool that ignores the Stop and tries again must not reach the server
            return self.session.get(f"{self.url}/slow", params={"seconds": 0}, timeout=5).text
        except BaseException as exc:
            self.refused.append(exc)
            raise
        finally:
            self.retried.set()


@pytest.mark.parametrize("agent_kind", ["tool", "code"])
def test_stop_mid_tool_drops_the_tools_connection(server, agent_kind):
    tool = SlowService(server.root_url)
    call = Reply(tool_calls=(("slow_service", {"seconds": LONG_S}),))
    server.push(call if agent_kind == "tool" else code_reply(f"print(slow_service(seconds={LONG_S}))"))
    agent = agent_for(server, agent_kind, "openai", stream=False, tools=[tool])
    run = nbagent.start(agent, "ask the service")
    record, delay = stop_during(server, run, 2)
    assert record.status == "interrupted" and delay < DISCONNECT_WITHIN_S
    assert adapter.wait_idle(agent, timeout=10)

    quick = Reply(tool_calls=(("slow_service", {"seconds": 0}),))
    server.push(
        quick if agent_kind == "tool" else code_reply("print(slow_service(seconds=0))"), final(agent_kind)
    )
    second = nbagent.run(agent, "again", reset=False)
    assert second.status == "success"
    assert "slow answer" in str(second.steps[0].tool_calls[-1].result)  # urllib3 replaced the dead connection


def test_parallel_tool_calls_all_lose_their_connections(server):
    tool = SlowService(server.root_url)
    both = Reply(
        tool_calls=(("slow_service", {"seconds": LONG_S}), ("slow_service", {"seconds": LONG_S + 1}))
    )
    server.push(both)
    agent = agent_for(server, "tool", "openai", stream=False, tools=[tool])
    run = nbagent.start(agent, "ask twice")
    server.wait_until(lambda: len(server.requests) >= 3)
    assert run.interrupt()
    assert run.wait(timeout=30).status == "interrupted"
    server.wait_until(lambda: all(r.disconnected is not None for r in server.requests[1:]), timeout=10)
    assert adapter.wait_idle(agent, timeout=10)


def test_after_a_stop_the_run_opens_no_new_connection(server):
    tool = SlowService(server.root_url, swallow=True)
    server.push(Reply(tool_calls=(("slow_service", {"seconds": LONG_S}),)))
    agent = agent_for(server, "tool", "openai", stream=False, tools=[tool])
    run = nbagent.start(agent, "ask")
    record, _ = stop_during(server, run, 2)
    assert record.status == "interrupted"
    assert tool.retried.wait(10)
    assert [type(e).__name__ for e in tool.refused] == ["RunStopped"]
    assert len(server.requests) == 2  # the retry never reached the server
    assert adapter.wait_idle(agent, timeout=10)


def test_idle_pooled_connections_of_the_agent_are_dropped_and_replaced(server):
    tool = SlowService(server.root_url)
    quick = Reply(tool_calls=(("slow_service", {"seconds": 0}),))
    server.push(quick, final("tool"))
    model = OpenAIServerModel(
        "test-model", api_base=server.base_url, api_key="k", client_kwargs={"max_retries": 0}
    )  # no retry may hide a dead connection that was reused
    agent = ToolCallingAgent(tools=[tool], model=model, verbosity_level=LogLevel.OFF)
    assert nbagent.run(agent, "first").status == "success"  # leaves a model and a tool connection idle
    known = {r.connection for r in server.requests}

    server.push(Reply(text="never finished", seconds=LONG_S, chunks=60))
    run = nbagent.start(agent, "second")
    record, _ = stop_during(server, run, 4)  # mid model call, on the pooled model connection
    assert record.status == "interrupted" and server.requests[3].connection in known
    assert adapter.wait_idle(agent, timeout=10)

    server.push(quick, final("tool"))  # the tool's idle connection was dropped by that Stop too
    third = nbagent.run(agent, "third")
    assert third.status == "success", third.error
    assert "slow answer" in str(third.steps[0].tool_calls[0].result)
    assert all(r.connection not in known for r in server.requests[4:])
