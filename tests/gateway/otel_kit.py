"""Helpers for the tests of traces and metrics: an SDK tracer provider (and meter provider)
set as the global one for one test, and the span tree as (name, parent's name) pairs.

OpenTelemetry lets a process set its global providers once; a test swaps the API's module
globals and puts them back, so the other tests of the worker process still see no SDK.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from opentelemetry import trace
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
