"""Exploring runs: the run browser over 50,000 stored runs, a shared HTML file, OpenTelemetry export.

1. ``browse`` over a store of 50,000 runs (1–4 steps each, built fast through the store schema's
   row functions): the first page (``browse(store)``: the filter menus' choices and page one, in
   SQL, into the table widget) and a filter (status and text, back to page one) and a jump to the
   last page. Each is the median of five. The baseline is what a user has without the browser:
   ``store.runs()`` (every run read into a DataFrame), then the same filter and sort in pandas.
   Targets: ``first_page_ms`` and ``filter_ms`` <= 200.
2. ``to_html`` of a 200-step run (each step with model text and a tool call), median of five,
   next to ``record_html`` alone (the view it wraps): the file costs what the view costs.
3. OpenTelemetry export of 10,000 steps (100 runs x 100 steps, a tool call per step: 20,100
   spans) through an SDK provider whose exporter drops spans, in spans per second; the baseline
   is the same spans made directly with the SDK's tracer (names, times and attributes given), so
   the ratio is what nbagent's mapping costs on top of the SDK.

    python benchmarks/explore.py [--quick] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from explore_store import build_store, synthetic_record

from nbagent.explore import browse, to_html
from nbagent.records import RunRecord, StepRecord, ToolCallRecord


def median_ms(action: Callable[[], Any], times: int = 5) -> float:
    took = []
    for _ in range(times):
        start = time.perf_counter()
        action()
        took.append((time.perf_counter() - start) * 1000)
    return statistics.median(took)


def browse_figures(runs: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        store = build_store(Path(folder) / "runs.db", runs)
        browse(store)  # warm: imports, the OS file cache
        first_page = median_ms(lambda: browse(store))
        browser = browse(store)

        def flip() -> None:
            browser.filter(status="error", text="paris")
            browser.filter(status=None, text=None)

        filter_ms = median_ms(flip) / 2
        last_page = median_ms(lambda: browser.go(10**9))

        def in_pandas() -> None:
            frame = store.runs()
            chosen = frame[(frame.status == "error") & frame.task.str.contains("paris")]
            chosen.sort_values("started_at", ascending=False).head(25)

        baseline = median_ms(in_pandas, times=3)
    return {
        "runs": runs,
        "first_page_ms": round(first_page, 1),
        "filter_ms": round(filter_ms, 1),
        "last_page_ms": round(last_page, 1),
        "pandas_baseline_ms": round(baseline, 1),
        "filter_ratio": round(baseline / filter_ms, 1),
    }


def long_run(steps: int) -> RunRecord:
    import random

    record = synthetic_record(0, random.Random(1))
    record.steps.clear()
    at = record.started_at
    for number in range(1, steps + 1):
        start = at + timedelta(seconds=number)
        step = StepRecord(
            number, "action", start, float(number), start + timedelta(seconds=0.9), number + 0.9
        )
        step.input_tokens, step.output_tokens, step.usage_source = 1000 + number, 50, "reported"
        step.model_output = f"Step {number}: thinking about the next search. " * 8
        step.tool_calls.append(
            ToolCallRecord(
                f"c{number}", "search", {"q": f"query {number}"}, start, float(number), "ok", "x" * 200
            )
        )
        step.model_ended_at = start + timedelta(seconds=0.5)
        record.steps.append(step)
    record.duration_s = steps + 1.0
    record.ended_at = at + timedelta(seconds=record.duration_s)
    return record


def html_figures(steps: int) -> dict[str, float]:
    from nbagent.view.html import record_html

    record = long_run(steps)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "run.html"
        to_html(record, path)
        took = median_ms(lambda: to_html(record, path))
        size = path.stat().st_size
    view = median_ms(lambda: record_html(record))
    return {"steps": steps, "to_html_ms": round(took, 1), "record_html_ms": round(view, 1), "bytes": size}


def otel_figures(runs: int, steps: int) -> dict[str, float]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    from nbagent import otel
    from nbagent.otel.spans import SpanData, run_spans

    class Dropping(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Dropping()))
    records = [long_run(steps) for _ in range(runs)]
    for i, record in enumerate(records):
        record.run_id = f"run{i}"
    start = time.perf_counter()
    made = otel.export(records, provider)
    export_s = time.perf_counter() - start

    trees = [run_spans(r) for r in records]  # the same spans, ready-made, for the SDK alone
    tracer = provider.get_tracer("baseline")

    def raw(data: SpanData, parent: Any = None) -> None:
        from opentelemetry import trace

        context = trace.set_span_in_context(parent) if parent is not None else None
        span = tracer.start_span(
            data.name, context=context, attributes=data.attributes, start_time=data.start_ns
        )
        for child in data.children:
            raw(child, span)
        span.end(end_time=data.end_ns)

    start = time.perf_counter()
    for tree in trees:
        raw(tree)
    raw_s = time.perf_counter() - start
    provider.shutdown()
    return {
        "steps": runs * steps,
        "spans": made,
        "spans_per_s": round(made / export_s),
        "sdk_only_spans_per_s": round(made / raw_s),
        "overhead_ratio": round(export_s / raw_s, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5,000 runs and 1,000 steps")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = {
        "browse": browse_figures(5_000 if args.quick else 50_000),
        "to_html": html_figures(200),
        "otel": otel_figures(10 if args.quick else 100, 100),
    }
    if args.json:
        print(json.dumps(result))
        return
    b, h, o = result["browse"], result["to_html"], result["otel"]
    print(f"browse over {b['runs']:,} stored runs (median of 5)")
    print(f"  first page (browse(store))  {b['first_page_ms']:7.1f} ms   (target <= 200)")
    print(f"  filter status+text          {b['filter_ms']:7.1f} ms   (target <= 200)")
    print(f"  last page                   {b['last_page_ms']:7.1f} ms")
    print(
        f"  baseline store.runs()+pandas {b['pandas_baseline_ms']:6.1f} ms   "
        f"-> filter {b['filter_ratio']}x faster in the browser"
    )
    print(f"to_html of a {h['steps']}-step run (median of 5)")
    print(f"  to_html                     {h['to_html_ms']:7.1f} ms   ({h['bytes']:,} bytes)")
    print(f"  record_html alone           {h['record_html_ms']:7.1f} ms")
    print(f"OpenTelemetry export of {o['steps']:,} steps ({o['spans']:,} spans)")
    print(f"  nbagent.otel.export         {o['spans_per_s']:7,} spans/s")
    print(
        f"  SDK spans alone             {o['sdk_only_spans_per_s']:7,} spans/s   "
        f"-> export costs {o['overhead_ratio']}x the SDK alone"
    )


if __name__ == "__main__":
    main()
