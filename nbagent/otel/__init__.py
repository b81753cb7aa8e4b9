"""OpenTelemetry for runs: ``export(records_or_store)`` after the fact, ``OTelSink()`` live.

Spans follow the GenAI semantic conventions and OpenInference (see ``nbagent.otel.spans``).
Needs the ``otel`` extra (``opentelemetry-sdk``, ``opentelemetry-exporter-otlp-proto-http``),
imported only when a function here is used.
"""

from __future__ import annotations

from nbagent.lazy import lazy_attributes

__all__ = ["OTelSink", "export", "otlp_provider", "run_spans"]

_WHERE = {"OTelSink": "sink", "export": "traces", "otlp_provider": "traces", "run_spans": "spans"}

__getattr__, __dir__ = lazy_attributes(__name__, _WHERE)
