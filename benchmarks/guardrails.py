"""How far past a token budget does a run get, and how fast does an Approve click start the tool?

- Overshoot: a native agent streams a 2,000-token reply at 2,000 tokens/s (``ScriptedModel``, one
  token a piece) under ``Limits(max_output_tokens=N)``. We count the real tokens the model had
  streamed when the run stopped, past the limit (p50 / p99 over the runs, and the recorded,
  estimated count). The baseline is the check it replaces, the one every framework does (e.g.
  pydantic-ai's ``UsageLimits``): after each reply, against the reported usage; measured in the same
  run with the same model and no nbagent limit, its overshoot is the whole reply past the limit.
  Target: p99 at most one streamed piece.
- Approve click: in a real kernel (jupyter_client, the messages a browser sends), a tool marked
  ``requires_approval=True`` waits; we send the click on **Approve** as a ``comm_msg`` and time to
  the tool's first line (both clocks are ``CLOCK_MONOTONIC``). Target: p50 <= 50 ms. Baseline in
  the same run: ``run.approve(call_id)`` from a cell (an ``execute_request``).

    python benchmarks/guardrails.py [--quick] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import nbagent
from nbagent.guardrails import Limits
from nbagent.models import ScriptedModel
from nbagent.models.scripted import split_tokens

REPLY_TOKENS = 2000
RATE = 2000.0

KERNEL_SETUP = r'''
import time
import nbagent
from nbagent.models import ScriptedModel, ToolCall

STARTED = []

@nbagent.tool(requires_approval=True)
def deploy(target: str) -> str:
    """Deploy.

    Args:
        target: where to.
    """
    STARTED.append(time.monotonic())
    return f"deployed to {target}"

def deployer():
    turns = [[ToolCall("deploy", {"target": "prod"}, id="d1")], "done"]
    return nbagent.Agent(ScriptedModel(turns, tokens_per_s=1e6, first_token_s=0.0), tools=[deploy])
'''


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def overshoot(runs: int, limit: int) -> dict[str, float]:
    nbagent.configure(display=False)
    reply = "word " * REPLY_TOKENS
    ours, recorded, baseline = [], [], []
    for _ in range(runs):
        model = ScriptedModel([reply], tokens_per_s=RATE, first_token_s=0.0)
        record = nbagent.run(nbagent.Agent(model), "talk", limits=Limits(max_output_tokens=limit))
        assert record.status == "limit", record.status
        ours.append(len(split_tokens(record.steps[-1].model_output)) - limit)
        recorded.append(record.output_tokens - limit)
    for _ in range(max(3, runs // 5)):  # checked after the reply: the whole reply streams first
        model = ScriptedModel([reply], tokens_per_s=RATE * 10, first_token_s=0.0)
        record = nbagent.run(nbagent.Agent(model), "talk")
        baseline.append(record.output_tokens - limit)
    return {
        "limit_tokens": limit,
        "overshoot_p50_tokens": percentile(ours, 50),
        "overshoot_p99_tokens": percentile(ours, 99),
        "recorded_overshoot_p99_tokens": percentile(recorded, 99),
        "baseline_overshoot_p99_tokens": percentile(baseline, 99),
    }


def approve_latencies(clicks: int) -> dict[str, float]:
    from kernel_support import KernelDriver

    click_ms, code_ms = [], []
    with KernelDriver.start() as kernel:
        kernel.execute(KERNEL_SETUP)
        for _ in range(clicks):
            view = kernel.execute("STARTED.clear()\nrun = nbagent.start(deployer(), 'deploy')").widget_view()
            approve = kernel.wait_for(lambda v=view: _approve_button(kernel, v), what="the Approve button")
            sent = kernel.click(approve)
            started = float(kernel.execute("r = await run\nprint(STARTED[0])").stdout)
            click_ms.append((started - sent) * 1000)
        for _ in range(max(3, clicks // 2)):
            kernel.execute("STARTED.clear()\nrun = nbagent.start(deployer(), 'deploy', display=False)")
            kernel.execute("import asyncio\nwhile not run.pending_approvals: await asyncio.sleep(0.005)")
            sent = time.monotonic()
            started = float(kernel.execute("run.approve('d1')\nr = await run\nprint(STARTED[0])").stdout)
            code_ms.append((started - sent) * 1000)
    return {
        "approve_click_to_tool_p50_ms": statistics.median(click_ms),
        "approve_click_to_tool_p95_ms": percentile(click_ms, 95),
        "approve_from_a_cell_p50_ms": statistics.median(code_ms),
    }


def _approve_button(kernel, view: str) -> str | None:
    for m in kernel.widgets.under(view):
        state = kernel.widgets.states.get(m, {})
        if state.get("_model_name") == "ButtonModel" and state.get("description") == "Approve":
            return m
    return None


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer runs")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    runs, clicks = (10, 5) if args.quick else (50, 20)
    figures = {**overshoot(runs, limit=300), **approve_latencies(clicks)}
    ratio = figures["baseline_overshoot_p99_tokens"] / max(1.0, figures["overshoot_p99_tokens"])
    figures["overshoot_ratio_baseline_to_nbagent"] = ratio
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(
        f"token budget of {figures['limit_tokens']} output tokens, "
        f"reply of {REPLY_TOKENS} at {RATE:,.0f} tokens/s:"
    )
    print(
        f"  nbagent, checked as tokens stream: past the limit p50 {figures['overshoot_p50_tokens']:.0f}, "
        f"p99 {figures['overshoot_p99_tokens']:.0f} tokens (target <= 1 piece); "
        f"recorded (estimated) p99 {figures['recorded_overshoot_p99_tokens']:.0f}"
    )
    print(
        f"  baseline, checked after each reply: p99 {figures['baseline_overshoot_p99_tokens']:.0f} tokens "
        f"past the limit ({ratio:,.0f}x nbagent's)"
    )
    print("Approve click (comm_msg) -> the tool starts:")
    print(
        f"  p50 {figures['approve_click_to_tool_p50_ms']:.1f} ms   (target <= 50)   "
        f"p95 {figures['approve_click_to_tool_p95_ms']:.1f} ms"
    )
    print(f"  baseline, run.approve() from a cell: p50 {figures['approve_from_a_cell_p50_ms']:.1f} ms")


if __name__ == "__main__":
    main()
