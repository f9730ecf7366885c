"""The trace context across hops: client -> gateway -> worker -> session -> CLI.

A trace follows a session wherever it runs: the gateway client sends the caller's current
context as a W3C ``traceparent`` on ``open`` and ``continue``; the gateway answers the op in a
``SERVER`` span that is its child; a cluster's fleet writes the current context into the
job (``protocol/cluster/records.py``, ``Job.traceparent``) and the worker that claims it runs
the session under a ``CONSUMER`` span that is its child; a fleet keeps the context each
``start`` / ``continue_`` was called in (a session waiting for a slot starts later, in
another task), so the session's ``invoke_agent`` span is a child of that hop's span; and the
CLI gets the session's ``TRACEPARENT`` in its environment (:func:`cli_trace_env`).

Only the ``traceparent`` crosses (the W3C trace context propagator, whatever the
application's ``OTEL_PROPAGATORS``): it is what the wire checks and the CLI reads. Without an
SDK configured the hops record nothing but still pass the context on (the API's no-op tracer
returns the parent's span), so a gateway without an SDK between a traced client and a traced
worker keeps the trace whole.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from claude_trio.protocol.fanout.wire_checks import is_traceparent

__all__ = [
    "cli_trace_env",
    "context_of",
    "current_traceparent",
    "hop_span",
    "traceparent_of",
]

_W3C = TraceContextTextMapPropagator()
_TRACER_NAME = "claude_trio"


def traceparent_of(context: otel_context.Context | None = None) -> str | None:
    """The W3C ``traceparent`` of ``context`` (default: the current one), None when it holds
    no valid span context."""
    carrier: dict[str, str] = {}
    _W3C.inject(carrier, context=context)
    value = carrier.get("traceparent")
    return value if is_traceparent(value) else None


def current_traceparent() -> str | None:
    """The caller's current trace context as a ``traceparent`` (what a hop sends on)."""
    return traceparent_of(None)


def context_of(traceparent: str | None) -> otel_context.Context | None:
    """The context a received ``traceparent`` names (a remote parent), None for none."""
    if not traceparent or not is_traceparent(traceparent):
        return None
    return _W3C.extract({"traceparent": traceparent})


@contextmanager
def hop_span(
    name: str,
    traceparent: str | None,
    *,
    kind: SpanKind,
    attributes: Mapping[str, Any] | None = None,
) -> Iterator[Span]:
    """A span of a hop (the gateway's op, the worker's job), current inside the block: a
    child of ``traceparent`` when one came, else of the current context."""
    tracer = trace.get_tracer(_TRACER_NAME)
    with tracer.start_as_current_span(
        name, context=context_of(traceparent), kind=kind, attributes=attributes
    ) as span:
        yield span


def cli_trace_env(span: Span) -> dict[str, str]:
    """The CLI's environment for joining the trace under ``span``: ``TRACEPARENT``.

    The bundled CLI reads ``TRACEPARENT`` (and ``TRACESTATE``) as the parent of its
    ``claude_code.interaction`` span when its own tracing is on
    (``CLAUDE_CODE_ENABLE_TELEMETRY=1``, ``CLAUDE_CODE_ENHANCED_TELEMETRY_BETA=1`` and an
    ``OTEL_TRACES_EXPORTER``, which the application sets in the session's ``env``); otherwise
    it ignores it (``tests/e2e/test_trace_context_e2e.py`` pins this for the bundled CLI).
    """
    value = traceparent_of(trace.set_span_in_context(span))
    return {"TRACEPARENT": value} if value is not None else {}
