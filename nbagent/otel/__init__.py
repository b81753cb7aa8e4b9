"""OpenTelemetry for runs: ``export(records_or_store)`` after the fact, ``OTelSink()`` live.

Spans follow the GenAI semantic conventions and OpenInference (see ``nbagent.otel.spans``).
Needs the ``otel`` extra (``opentelemetry-sdk``, ``opentelemetry-exporter-otlp-proto-http``),
imported only when a function here is used.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["OTelSink", "export", "otlp_provider", "run_spans"]

_WHERE = {"OTelSink": "sink", "export": "traces", "otlp_provider": "traces", "run_spans": "spans"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return list(__all__)
