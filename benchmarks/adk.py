"""What does nbagent cost an ADK run, and how fast does a Stop end one?

- overhead: one ``LlmAgent`` on a scripted ``BaseLlm`` (tests/adk_fakes.py) streaming a long reply
  as SSE partial events, run plainly (``runner.run_async`` consumed to the end) and through
  ``nbagent.run`` (display off). Printed: time per event for each, both from this one process,
  and their ratio (target <= 1.1x). The nbagent figure includes the run's setup and record.
- stop: the same agent with a reply that streams one word every 5 ms; ``run.interrupt()`` a random
  20-80 ms after its first word; Stop -> ``run.wait()`` returns the record, p50 / p99. After each
  Stop the session must have every call answered (checked).

    python benchmarks/adk.py [--quick] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from pathlib import Path

import nbagent

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from adk_fakes import Turn, scripted
from google.adk import Agent
from google.adk.agents.run_config import RunConfig, StreamingMode
from google.adk.runners import InMemoryRunner
from google.genai import types

SSE = RunConfig(streaming_mode=StreamingMode.SSE)


async def plain(words: int) -> tuple[float, int]:
    agent = Agent(name="bench", model=scripted([Turn("word " * words)]))
    runner = InMemoryRunner(agent=agent)
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id="u")
    message = types.Content(role="user", parts=[types.Part(text="go")])
    began, events = time.perf_counter(), 0
    async for _event in runner.run_async(
        user_id="u", session_id=session.id, new_message=message, run_config=SSE
    ):
        events += 1
    return time.perf_counter() - began, events


def through_nbagent(words: int) -> float:
    agent = Agent(name="bench", model=scripted([Turn("word " * words)]))
    began = time.perf_counter()
    record = nbagent.run(agent, "go", display=False, run_config=SSE)
    assert record.status == "success", record.error
    return time.perf_counter() - began


def stop_once(rng: random.Random) -> float:
    class Slow(type(scripted([]))):  # a reply that streams a word every 5 ms
        async def generate_content_async(self, llm_request, stream=False):
            from google.adk.models.llm_response import LlmResponse

            for _ in range(100_000):
                await asyncio.sleep(0.005)
                yield LlmResponse(
                    content=types.Content(role="model", parts=[types.Part(text="w ")]), partial=True
                )

    agent = Agent(name="bench", model=Slow(script=None))
    run = nbagent.start(agent, "go", display=False, run_config=SSE)
    while not run.live_text(1):
        time.sleep(0.001)
    time.sleep(rng.uniform(0.02, 0.08))
    began = time.perf_counter()
    run.interrupt()
    record = run.wait(timeout=30)
    took = time.perf_counter() - began
    assert record.status == "interrupted"
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    words, rounds, stops = (2000, 2, 5) if args.quick else (20000, 5, 40)
    plain_s, events, nb_s = [], 0, []
    for _ in range(rounds):
        seconds, events = asyncio.run(plain(words))
        plain_s.append(seconds)
        nb_s.append(through_nbagent(words))
    per_plain = min(plain_s) / events * 1e6
    per_nb = min(nb_s) / events * 1e6
    rng = random.Random(7)
    stop_s = sorted(stop_once(rng) for _ in range(stops))
    result = {
        "events": events,
        "plain_us_per_event": round(per_plain, 2),
        "nbagent_us_per_event": round(per_nb, 2),
        "ratio": round(per_nb / per_plain, 3),
        "stop_p50_ms": round(statistics.median(stop_s) * 1e3, 2),
        "stop_p99_ms": round(stop_s[min(len(stop_s) - 1, int(len(stop_s) * 0.99))] * 1e3, 2),
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"events per run: {events}")
    print(f"plain run_async: {per_plain:.1f} us/event")
    print(f"nbagent.run:     {per_nb:.1f} us/event  ({result['ratio']:.2f}x)")
    print(f"Stop -> record:  p50 {result['stop_p50_ms']} ms, p99 {result['stop_p99_ms']} ms ({stops} Stops)")


if __name__ == "__main__":
    main()
