"""The metrics: sessions, fleets, gateways and workers through the OpenTelemetry metrics API.

Like the traces (``tracing.py``) they cost nothing until the application configures an SDK's
``MeterProvider`` (globally, as the commands do from ``OTEL_*``, or passed as
``open_session(meter_provider=...)``): :func:`instruments` returns None then, and every
place that records checks that once.

The GenAI conventions' client metrics (version ``SEMCONV_VERSION`` of ``tracing.py``), one
point per execution (``gen_ai.operation.name`` ``invoke_agent``, ``gen_ai.provider.name``
``anthropic``, the request and response model; ``error.type`` on a failed one):

* ``gen_ai.client.token.usage`` (histogram, ``{token}``, the conventions' bucket advice):
  ``gen_ai.token.type`` ``input`` (every input token, cached ones included, as the
  conventions count them) and ``output``;
* ``gen_ai.client.operation.duration`` (histogram, ``s``): from the open to the terminal
  event.

claude-trio's own:

* ``claude_trio.session.starts`` (counter, ``{session}``): executions started;
* ``claude_trio.session.cost`` (counter, ``USD``): what they cost (the CLI's figures);
* ``claude_trio.session.stop.duration`` (histogram, ``s``): from a stop (``abort()``, a
  deadline) to the CLI reaped (its process gone);
* ``claude_trio.fleet.sessions`` (observable up-down counter, ``{session}``): the fleets'
  sessions by ``claude_trio.state`` (``live``: holding a CLI; ``waiting``: for a slot),
  read when the SDK collects, never on the way;
* ``claude_trio.gateway.clients`` (observable up-down counter, ``{connection}``): the
  gateways' open connections;
* ``claude_trio.gateway.lag`` (histogram, ``{event}``): per event frame sent, how many of the
  session's events the client has still to receive (behind a cluster's fleet, as of the
  session record the gateway read last: a lower bound);
* ``claude_trio.cluster.publish.lag`` (histogram, ``{event}``): per batch a worker stores in
  Redis, the session's events still to store after it; ``claude_trio.cluster.publish.duration``
  (histogram, ``s``): the batch's round trip.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

import attrs
import trio
from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Counter, Histogram, Observation
from opentelemetry.trace import TracerProvider

from claude_trio.actors.session.trace_context import cli_trace_env
from claude_trio.actors.session.tracing import SEMCONV_VERSION, SessionTracer, session_tracer
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.session.events import (
    Aborted,
    AdapterReady,
    AssistantMessage,
    Error,
    Event,
    Result,
)
from claude_trio.protocol.session.outcomes import Outcome
from claude_trio.protocol.session.usage import ZERO_USAGE, add_usage

__all__ = [
    "DURATION_BUCKETS",
    "TOKEN_BUCKETS",
    "Instruments",
    "SessionMeter",
    "close_telemetry",
    "instruments",
    "observer_of",
    "session_meter",
    "session_telemetry",
    "unwatch_fleet",
    "unwatch_gateway",
    "watch_fleet",
    "watch_gateway",
    "watch_stop",
]

TOKEN_BUCKETS = (
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
)  # fmt: skip
"""The conventions' bucket advice for ``gen_ai.client.token.usage``."""
DURATION_BUCKETS = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip
"""The conventions' bucket advice for ``gen_ai.client.operation.duration``."""
_STOP_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
_LAG_BUCKETS = (0, 1, 4, 16, 64, 256, 1024, 4096)


class _Fleet(Protocol):
    def statistics(self) -> Any: ...


class _Gateway(Protocol):
    @property
    def connections(self) -> int: ...


_fleets: weakref.WeakSet[Any] = weakref.WeakSet()
_gateways: weakref.WeakSet[Any] = weakref.WeakSet()


def watch_fleet(fleet: _Fleet) -> None:
    """Count ``fleet``'s sessions in ``claude_trio.fleet.sessions`` while it exists."""
    _fleets.add(fleet)


def unwatch_fleet(fleet: _Fleet) -> None:
    _fleets.discard(fleet)


def watch_gateway(gateway: _Gateway) -> None:
    """Count ``gateway``'s connections in ``claude_trio.gateway.clients`` while it exists."""
    _gateways.add(gateway)


def unwatch_gateway(gateway: _Gateway) -> None:
    _gateways.discard(gateway)


def _observe_fleets(options: CallbackOptions) -> Iterable[Observation]:
    live = waiting = 0
    for fleet in list(_fleets):
        statistics = fleet.statistics()
        live += statistics.live
        waiting += statistics.waiting
    return [
        Observation(live, {"claude_trio.state": "live"}),
        Observation(waiting, {"claude_trio.state": "waiting"}),
    ]


def _observe_gateways(options: CallbackOptions) -> Iterable[Observation]:
    return [Observation(sum(gateway.connections for gateway in list(_gateways)))]


@attrs.frozen(kw_only=True)
class Instruments:
    """The instruments of one meter provider (see the module docstring)."""

    token_usage: Histogram
    duration: Histogram
    starts: Counter
    cost: Counter
    stop_duration: Histogram
    gateway_lag: Histogram
    publish_lag: Histogram
    publish_duration: Histogram

    @classmethod
    def create(cls, meter: metrics.Meter) -> Instruments:
        meter.create_observable_up_down_counter(
            "claude_trio.fleet.sessions",
            callbacks=[_observe_fleets],
            unit="{session}",
            description="Sessions of the fleets: live (holding a CLI) or waiting for a slot",
        )
        meter.create_observable_up_down_counter(
            "claude_trio.gateway.clients",
            callbacks=[_observe_gateways],
            unit="{connection}",
            description="Open connections of the gateways",
        )
        return cls(
            token_usage=meter.create_histogram(
                "gen_ai.client.token.usage",
                unit="{token}",
                description="Number of input and output tokens used",
                explicit_bucket_boundaries_advisory=list(TOKEN_BUCKETS),
            ),
            duration=meter.create_histogram(
                "gen_ai.client.operation.duration",
                unit="s",
                description="GenAI operation duration",
                explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS),
            ),
            starts=meter.create_counter(
                "claude_trio.session.starts", unit="{session}", description="Executions started"
            ),
            cost=meter.create_counter(
                "claude_trio.session.cost", unit="USD", description="What the executions cost"
            ),
            stop_duration=meter.create_histogram(
                "claude_trio.session.stop.duration",
                unit="s",
                description="From a stop to the CLI reaped",
                explicit_bucket_boundaries_advisory=list(_STOP_BUCKETS),
            ),
            gateway_lag=meter.create_histogram(
                "claude_trio.gateway.lag",
                unit="{event}",
                description="Events of the session a gateway client has still to receive",
                explicit_bucket_boundaries_advisory=list(_LAG_BUCKETS),
            ),
            publish_lag=meter.create_histogram(
                "claude_trio.cluster.publish.lag",
                unit="{event}",
                description="Events of the session a worker has still to store in Redis",
                explicit_bucket_boundaries_advisory=list(_LAG_BUCKETS),
            ),
            publish_duration=meter.create_histogram(
                "claude_trio.cluster.publish.duration",
                unit="s",
                description="A worker's round trip storing a batch of events in Redis",
            ),
        )


_Observe = Callable[[Event], None]
_made: dict[int, tuple[metrics.MeterProvider, Instruments]] = {}


def _sdk_configured() -> bool:
    # The API has no public "is one set" (the proxy it returns until then is private).
    from opentelemetry.metrics import _internal

    return _internal._METER_PROVIDER is not None


def instruments(meter_provider: metrics.MeterProvider | None = None) -> Instruments | None:
    """The instruments of ``meter_provider`` (default: the global one), None when nothing
    would record them (no SDK configured). Made once per provider."""
    if meter_provider is None:
        if not _sdk_configured():
            return None
        meter_provider = metrics.get_meter_provider()
    if isinstance(meter_provider, metrics.NoOpMeterProvider):
        return None
    made = _made.get(id(meter_provider))
    if made is not None and made[0] is meter_provider:
        return made[1]
    meter = meter_provider.get_meter(
        "claude_trio", schema_url=f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
    )
    created = Instruments.create(meter)
    _made[id(meter_provider)] = (meter_provider, created)
    return created


class _StopClock(Protocol):
    @property
    def requested_at(self) -> float | None: ...


class SessionMeter:
    """One execution's metric points, from its events in order (inline where the session
    queues each event, like ``SessionTracer.observe``), and its stop's duration at its close."""

    def __init__(self, instruments: Instruments, *, request_model: str | None) -> None:
        self._instruments = instruments
        self._started = trio.current_time()
        self._request_model = request_model
        self._response_model: str | None = None
        self._usage = ZERO_USAGE
        self._done = False
        #: The stopper (its ``requested_at``), once the session has one.
        self.stop_clock: _StopClock | None = None
        self._handlers: dict[type, Callable[[Any], None]] = {
            AdapterReady: self._on_ready,
            AssistantMessage: self._on_message,
            Result: self._on_result,
            Aborted: self._on_aborted,
            Error: self._on_error,
        }
        #: The kinds of event it measures.
        self.kinds = frozenset(self._handlers)
        instruments.starts.add(1)

    def observe(self, event: Event) -> None:
        handler = self._handlers.get(type(event))
        if handler is not None and not self._done:
            handler(event)

    def close(self) -> None:
        """The session is closed, its CLI reaped: a stop's duration, from the stop to now."""
        clock, self.stop_clock = self.stop_clock, None  # measured once
        requested_at = clock.requested_at if clock is not None else None
        if requested_at is not None:
            self._instruments.stop_duration.record(trio.current_time() - requested_at)
        if not self._done:
            self._end(None)

    def _on_ready(self, event: AdapterReady) -> None:
        if event.model is not None:
            self._request_model = event.model

    def _on_message(self, event: AssistantMessage) -> None:
        if not event.is_subagent and event.message.model is not None:
            self._response_model = event.message.model

    def _on_result(self, event: Result) -> None:
        self._usage = event.execution_usage
        if event.final:
            failed = event.is_error or event.outcome is not Outcome.COMPLETED
            self._end(_error_type(event.outcome) if failed else None)

    def _on_aborted(self, event: Aborted) -> None:
        if event.usage is not None:
            self._usage = add_usage(self._usage, event.usage)
        self._end(None)

    def _on_error(self, event: Error) -> None:
        if event.fatal:
            self._end(_error_type(event.outcome))

    def _end(self, error: str | None) -> None:
        self._done = True
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": "anthropic",
        }
        if self._request_model is not None:
            attributes["gen_ai.request.model"] = self._request_model
        if self._response_model is not None:
            attributes["gen_ai.response.model"] = self._response_model
        instruments = self._instruments
        usage = self._usage
        tokens = instruments.token_usage
        inputs = usage.input_tokens + usage.cache_read_input_tokens
        inputs += usage.cache_creation_input_tokens
        tokens.record(inputs, {**attributes, "gen_ai.token.type": "input"})
        tokens.record(usage.output_tokens, {**attributes, "gen_ai.token.type": "output"})
        if usage.cost_usd:
            instruments.cost.add(usage.cost_usd, attributes)
        if error is not None:
            attributes["error.type"] = error
        instruments.duration.record(trio.current_time() - self._started, attributes)


class _Observer(Protocol):
    def observe(self, event: Event) -> None: ...


def observer_of(tracer: _Observer | None, meter: SessionMeter | None) -> _Observe | None:
    """One observer of the session's events for the traces' and the metrics' (or None). The
    metrics' sees only the kinds it measures: the deltas, most of a turn, skip it."""
    if meter is None:
        return tracer.observe if tracer is not None else None
    if tracer is None:
        return meter.observe
    trace_event, meter_event, measured = tracer.observe, meter.observe, meter.kinds

    def both(event: Event) -> None:
        trace_event(event)
        if type(event) in measured:
            meter_event(event)

    return both


def _error_type(outcome: Outcome | None) -> str:
    return outcome.value if outcome is not None else "error"


def session_meter(
    meter_provider: metrics.MeterProvider | None, *, model: str | None
) -> SessionMeter | None:
    """The execution's meter, or None when nothing would record its points (no SDK)."""
    made = instruments(meter_provider)
    return None if made is None else SessionMeter(made, request_model=model)


def session_telemetry(
    params: ExecuteParams,
    env: Mapping[str, str] | None,
    *,
    tracer_provider: TracerProvider | None,
    meter_provider: metrics.MeterProvider | None,
    trace_content: bool | None,
    handler: bool,
    pooled: bool,
) -> tuple[SessionTracer | None, SessionMeter | None, Mapping[str, str] | None]:
    """``open_session``'s tracer and meter (None each without an SDK), and the CLI's ``env``
    with ``TRACEPARENT`` (``trace_context.cli_trace_env``; a pooled CLI started before the
    span existed). ``handler``: an ``on_user_input`` callback answers the session's requests."""
    tracer = session_tracer(
        tracer_provider, prompt=params.prompt, model=params.model, trace_content=trace_content
    )
    if tracer is not None:
        tracer.answerer = "handler" if handler else "caller"
        if not pooled:
            env = {**cli_trace_env(tracer.span), **(env or {})}
    return tracer, session_meter(meter_provider, model=params.model), env


def watch_stop(stopper: _StopClock, *observers: SessionTracer | SessionMeter | None) -> None:
    """The tracer and the meter read when the session's stop began from its stopper."""
    for observer in observers:
        if observer is not None:
            observer.stop_clock = stopper


def close_telemetry(tracer: SessionTracer | None, meter: SessionMeter | None) -> None:
    """The session is closed, its CLI reaped: end what is open, measure a stop's duration."""
    if tracer is not None:
        tracer.close()
    if meter is not None:
        meter.close()
