"""OTLP export to a real receiver: Arize Phoenix, started by the test on 127.0.0.1.

Phoenix runs as its own process (its own SQLite in a temporary folder, telemetry off, ports
chosen free), the runs go to it over OTLP/HTTP exactly as a user's would (``otlp_provider``),
and Phoenix's REST API must then return every span, with its kind, parent, status and token
counts. One run is exported live through ``OTelSink`` and one after the fact from a store.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import end_states
import pytest
from support import wait_until

from nbagent import otel
from nbagent.analytics.store import RunStore

pytestmark = [pytest.mark.needs("otel", "test-all"), pytest.mark.timeout(240)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory) -> Iterator[str]:
    work = tmp_path_factory.mktemp("phoenix")
    port = _free_port()
    env = dict(
        os.environ,
        PHOENIX_HOST="127.0.0.1",
        PHOENIX_PORT=str(port),
        PHOENIX_GRPC_PORT=str(_free_port()),
        PHOENIX_WORKING_DIR=str(work),
        PHOENIX_TELEMETRY_ENABLED="false",
    )
    log = work / "phoenix.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "phoenix.server.main", "serve"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                _get(f"{url}/v1/projects")
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"Phoenix did not start:\n{log.read_text()[-3000:]}") from None
                time.sleep(0.25)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _spans_of(url: str, run_id: str) -> list[dict]:
    body = _get(f"{url}/v1/projects/default/spans?limit=1000")
    return [s for s in body["data"] if s["attributes"].get("nbagent.run_id") == run_id]  # type: ignore[index]


def _check(url: str, record, expected_spans: int) -> list[dict]:
    wait_until(lambda: len(_spans_of(url, record.run_id)) >= expected_spans, timeout=60, interval=0.2)
    spans = _spans_of(url, record.run_id)
    assert len(spans) == expected_spans
    [root] = [s for s in spans if s["parent_id"] is None]
    assert root["name"] == f"invoke_agent {record.agent}" and root["span_kind"] == "AGENT"
    assert {s["parent_id"] for s in spans if s is not root} == {root["context"]["span_id"]}
    chats = sorted(
        (s for s in spans if s["span_kind"] == "LLM"), key=lambda s: s["attributes"]["nbagent.step"]
    )
    assert len(chats) == len(record.steps)
    for chat, step in zip(chats, record.steps, strict=True):
        if step.input_tokens is None:
            assert "llm.token_count.prompt" not in chat["attributes"]
        else:
            assert chat["attributes"]["llm.token_count.prompt"] == step.input_tokens
            assert chat["attributes"]["gen_ai.usage.output_tokens"] == step.output_tokens
    tools = [s for s in spans if s["span_kind"] == "TOOL"]
    assert sorted(s["attributes"]["tool.name"] for s in tools) == sorted(c.tool for c in record.tool_calls)
    return spans


def test_otlp_export_reaches_phoenix_with_token_counts(phoenix, tmp_path):
    provider = otel.otlp_provider(f"{phoenix}/v1/traces", service_name="nbagent-test")
    try:
        live = end_states.success(sinks=[otel.OTelSink(provider)])
        provider.force_flush()
        _check(phoenix, live, 4)

        store = RunStore(tmp_path / "runs.db")
        stopped = end_states.interrupted_mid_tool(store=store)
        assert otel.export(RunStore(tmp_path / "runs.db", readonly=True), provider) == 1 + 2 + 2
        spans = _check(phoenix, stopped, 5)
        [root] = [s for s in spans if s["parent_id"] is None]
        assert root["status_code"] == "ERROR" and root["attributes"]["nbagent.interrupted"] is True
        [cut] = [s for s in spans if s["name"] == "execute_tool wait_forever"]
        assert cut["status_code"] == "ERROR" and cut["attributes"]["nbagent.tool.status"] == "cancelled"
    finally:
        provider.shutdown()
