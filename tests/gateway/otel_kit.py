"""Helpers for the tests of traces and metrics: an SDK tracer provider (and meter provider)
set as the global one for one test, and the span tree as (name, parent's name) pairs.

OpenTelemetry lets a process set its global providers once; a test swaps the API's module
globals and puts them back, so the other tests of the worker process still see no SDK.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.metrics import _internal as metrics_internal
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@contextmanager
def global_tracer_provider() -> Iterator[InMemorySpanExporter]:
    """An SDK provider with an in-memory exporter as the global one, for the block."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    before = trace._TRACER_PROVIDER
    trace._TRACER_PROVIDER = provider
    try:
        yield exporter
    finally:
        trace._TRACER_PROVIDER = before
        provider.shutdown()


def parents(spans: Sequence[ReadableSpan]) -> dict[str, str | None]:
    """Each span's name -> its parent's name (None: a root, "remote": a parent elsewhere)."""
    by_id = {span.context.span_id: span for span in spans}
    out: dict[str, str | None] = {}
    for span in spans:
        if span.parent is None:
            out[span.name] = None
        elif span.parent.span_id in by_id:
            out[span.name] = by_id[span.parent.span_id].name
        else:
            out[span.name] = "remote"
    return out


@contextmanager
def global_meter_provider() -> Iterator[InMemoryMetricReader]:
    """An SDK meter provider with an in-memory reader as the global one, for the block."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    before = metrics_internal._METER_PROVIDER
    metrics_internal._METER_PROVIDER = provider
    try:
        yield reader
    finally:
        metrics_internal._METER_PROVIDER = before
        provider.shutdown()


def metric_points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    """Metric name -> its data points, collected now."""
    out: dict[str, list[Any]] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                out[metric.name] = list(metric.data.data_points)
    return out
