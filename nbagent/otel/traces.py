"""``export``: runs that already happened (records, a store) as OpenTelemetry traces.

Exporting needs somewhere to send spans. ``tracer_provider=`` names it; without it the global
provider is used, and when none was configured (OpenTelemetry's default is a proxy that drops
every span) ``export`` raises ``ValueError`` saying how to set one up, instead of silently
exporting nothing. ``otlp_provider(endpoint)`` is the short way to a provider that sends OTLP
over HTTP (Phoenix, Langfuse, Jaeger and the OpenTelemetry Collector all take it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from nbagent.extras import install_hint
from nbagent.otel.spans import emit, run_spans
from nbagent.records import RunRecord

INSTRUMENTATION = "nbagent"

NO_PROVIDER = (
    "no OpenTelemetry tracer provider is configured, so these spans would go nowhere: pass "
    "tracer_provider=..., call opentelemetry.trace.set_tracer_provider(...), or use "
    "nbagent.otel.otlp_provider('http://127.0.0.1:6006/v1/traces')"
)


def _require_sdk() -> None:
    try:
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"OpenTelemetry export needs the SDK: {install_hint('otel')} "
            "(opentelemetry-sdk, opentelemetry-exporter-otlp-proto-http)"
        ) from exc


def tracer_for(tracer_provider: Any = None) -> tuple[Any, Any]:
    """The provider to use and a tracer from it; ``ValueError`` when there is none configured."""
    _require_sdk()
    from opentelemetry import trace

    provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        raise ValueError(NO_PROVIDER)
    from nbagent import __version__

    return provider, provider.get_tracer(INSTRUMENTATION, __version__)


def otlp_provider(
    endpoint: str = "http://127.0.0.1:6006/v1/traces",
    *,
    service_name: str = "nbagent",
    headers: dict[str, str] | None = None,
) -> Any:
    """A ``TracerProvider`` that batches spans to an OTLP/HTTP ``endpoint`` (Phoenix's default
    here). Call ``provider.shutdown()`` (or ``force_flush()``) before the process ends."""
    _require_sdk()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, headers=headers)))
    return provider


def _records(runs: Any) -> list[RunRecord]:
    if isinstance(runs, RunRecord):
        return [runs]
    records = getattr(runs, "records", None)
    if callable(records):  # a RunStore, or nbagent.history
        return list(records())
    if isinstance(runs, Iterable) and not isinstance(runs, (str, bytes)):
        found = list(runs)
        bad = [type(r).__name__ for r in found if not isinstance(r, RunRecord)]
        if bad:
            raise TypeError(f"export takes RunRecords, a RunStore or nbagent.history; got {bad[0]}")
        return found
    raise TypeError(f"export takes RunRecords, a RunStore or nbagent.history, not {type(runs).__name__}")


def export(runs: Any, tracer_provider: Any = None, *, content: bool = False, flush: bool = True) -> int:
    """Export runs as traces: one trace per run (``invoke_agent`` with its ``chat`` and
    ``execute_tool`` spans). ``runs``: a record, records, a ``RunStore`` or ``nbagent.history``.
    ``content=True`` also puts message content on the spans. Flushes the provider at the end
    (when it can) so the spans are sent before this returns. Returns how many spans were made."""
    provider, tracer = tracer_for(tracer_provider)
    made = 0
    for record in _records(runs):
        tree = run_spans(record, content=content)
        emit(tracer, tree)
        made += len(tree.walk())
    if flush and hasattr(provider, "force_flush"):
        provider.force_flush()
    return made
