"""The commands' OpenTelemetry: an SDK configured from the standard ``OTEL_*`` variables.

``run``, ``record``, ``serve``, ``worker`` and ``batch`` call :func:`command_telemetry`
around their work. It configures the OpenTelemetry SDK (a global tracer and meter provider)
only when all of these hold, and does nothing otherwise:

* the ``claude-trio[otel]`` extra is installed (``opentelemetry-sdk`` and
  ``opentelemetry-exporter-otlp-proto-http``);
* ``OTEL_SDK_DISABLED`` is not ``true``, and no provider was set already (an application or
  ``opentelemetry-instrument`` configured its own);
* the environment asks for an export: ``OTEL_TRACES_EXPORTER`` or ``OTEL_METRICS_EXPORTER``
  (``console``, ``otlp`` or ``none``, comma-separated), or an ``OTEL_EXPORTER_OTLP_ENDPOINT``
  (then both default to ``otlp``). Installing the extra alone sends nothing anywhere.

``console`` writes one JSON object per line to standard error (a span per line; standard
output stays the command's own, events for ``run --json``); ``otlp`` sends OTLP over HTTP
(``http/protobuf``) to ``OTEL_EXPORTER_OTLP_ENDPOINT`` (default ``http://localhost:4318``),
the exporter reading its other ``OTEL_EXPORTER_OTLP_*`` variables itself. The service is named
by ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES``, else ``claude-trio``. Everything is
flushed when the command ends.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

__all__ = ["TELEMETRY_COMMANDS", "command_telemetry", "wanted_exporters"]

TELEMETRY_COMMANDS = frozenset({"run", "record", "serve", "worker", "batch"})
"""The commands that configure the SDK (``demo`` shows a canned session: it does not)."""

_KNOWN = frozenset({"console", "otlp", "none"})


def wanted_exporters(environ: Mapping[str, str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The trace and metric exporters the environment asks for (empty: none)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return (), ()
    endpoint = bool(
        environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        or environ.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
    )
    default = "otlp" if endpoint else ""

    def names(variable: str) -> tuple[str, ...]:
        raw = environ.get(variable, default)
        chosen = tuple(n.strip().lower() for n in raw.split(",") if n.strip())
        return tuple(n for n in chosen if n != "none")

    return names("OTEL_TRACES_EXPORTER"), names("OTEL_METRICS_EXPORTER")


def _warn(message: str) -> None:
    print(f"claude-trio: {message}", file=sys.stderr)


@contextmanager
def command_telemetry(environ: Mapping[str, str] = os.environ) -> Iterator[None]:
    """Configure the SDK for the block as the environment says (module docstring); flush and
    shut it down after. A no-op without the extra or without an exporter asked for."""
    traces, metrics = wanted_exporters(environ)
    if not traces and not metrics:
        yield
        return
    try:
        from opentelemetry.sdk.resources import Resource
    except ImportError:
        yield  # the extra is not installed: the API stays a no-op
        return
    from opentelemetry import trace

    for name in (*traces, *metrics):
        if name not in _KNOWN:
            _warn(
                f"OTEL exporter {name!r} is not one claude-trio configures "
                "(console, otlp or none): it is ignored"
            )
    if environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf") != "http/protobuf":
        _warn("claude-trio[otel] sends OTLP over HTTP (http/protobuf) only")
    named = "OTEL_SERVICE_NAME" in environ or "service.name=" in environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    )
    resource = Resource.create({} if named else {"service.name": "claude-trio"})
    shutdowns: list[Callable[[], Any]] = []
    if traces and isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        shutdowns.append(_tracing(traces, resource))
    if metrics and _meter_unset():
        shutdowns.append(_metering(metrics, resource))
    try:
        yield
    finally:
        for shutdown in shutdowns:
            shutdown()


def _meter_unset() -> bool:
    # The API has no public "is one set" (the proxy it returns until then is private).
    from opentelemetry.metrics import _internal

    return _internal._METER_PROVIDER is None


def _json_line(item: Any) -> str:
    return str(item.to_json(indent=None)) + "\n"


def _tracing(names: tuple[str, ...], resource: Any) -> Callable[[], Any]:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SimpleSpanProcessor,
    )

    provider = TracerProvider(resource=resource)
    if "console" in names:
        exporter = ConsoleSpanExporter(out=sys.stderr, formatter=_json_line)
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    if "otlp" in names:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider.shutdown


def _metering(names: tuple[str, ...], resource: Any) -> Callable[[], Any]:
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        ConsoleMetricExporter,
        MetricReader,
        PeriodicExportingMetricReader,
    )

    readers: list[MetricReader] = []
    if "console" in names:
        console = ConsoleMetricExporter(out=sys.stderr, formatter=_json_line)
        readers.append(PeriodicExportingMetricReader(console))
    if "otlp" in names:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
    provider = MeterProvider(resource=resource, metric_readers=readers)
    metrics.set_meter_provider(provider)
    return provider.shutdown
