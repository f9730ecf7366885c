"""The trace context across hops, in one process: a caller's span -> the gateway's op ->
the fleet's session (its ``invoke_agent`` span) -> the CLI's ``TRACEPARENT``.

Through a real ``serve_gateway`` over websockets on 127.0.0.1 with FakeCLI sessions, an SDK
tracer provider set as the global one for each test (``otel_kit``).
"""

from __future__ import annotations

import trio
from gateway_kit import TOKEN, gateway
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind
from otel_kit import global_meter_provider, global_tracer_provider, metric_points, parents

from claude_trio import AdapterReady, ExecuteParams, open_fleet
from claude_trio.actors.session.trace_context import (
    cli_trace_env,
    context_of,
    current_traceparent,
    traceparent_of,
)
from claude_trio.client import ClientConfig, connect_gateway
from claude_trio.testing import FakeCLI, FakeTurn, conformance_cli

CONFIG = ClientConfig(backoff_base=0.05, backoff_max=0.5, close_timeout=2.0)


def by_name(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    (span,) = [span for span in spans if span.name == name]
    return span


def test_a_traceparent_names_the_span_it_was_made_of() -> None:
    with global_tracer_provider():
        assert current_traceparent() is None  # no span: nothing to send
        with trace.get_tracer("t").start_as_current_span("caller") as span:
            sent = current_traceparent()
            assert sent is not None
            context = span.get_span_context()
            assert sent == f"00-{context.trace_id:032x}-{context.span_id:016x}-{sent[-2:]}"
            received = trace.get_current_span(context_of(sent)).get_span_context()
            assert (received.trace_id, received.span_id) == (context.trace_id, context.span_id)
            assert received.is_remote
            assert traceparent_of(context_of(sent)) == sent
            assert cli_trace_env(span) == {"TRACEPARENT": sent}
    assert context_of(None) is None
    assert context_of("00-zz") is None
    assert context_of("00-" + "0" * 32 + "-" + "1" * 16 + "-01") is None


async def test_without_an_sdk_the_context_still_passes_through_a_hop() -> None:
    # The API's no-op tracer hands the remote parent on: a hop without an SDK keeps the trace.
    sent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    from claude_trio.actors.session.trace_context import hop_span

    with hop_span("gateway open", sent, kind=SpanKind.SERVER) as span:
        assert not span.is_recording()
        assert current_traceparent() == sent


async def test_a_session_queued_for_a_slot_is_a_child_of_the_span_that_started_it() -> None:
    async def hold(cli: FakeTurn) -> None:
        await cli.sleep(5)
        await cli.text("done")

    with trio.fail_after(30), global_tracer_provider() as exporter:
        tracer = trace.get_tracer("t")
        async with open_fleet(transport_factory=FakeCLI(hold), max_live=1) as fleet:
            with tracer.start_as_current_span("first caller"):
                first = await fleet.start(ExecuteParams(prompt="one"))
            with tracer.start_as_current_span("second caller"):
                second = await fleet.start(ExecuteParams(prompt="two"))
            assert second.state == "waiting"  # started later, from the first one's task
            events = (await second.result()).events
            await first.result()
        spans = exporter.get_finished_spans()
        agents = [span for span in spans if span.name == "invoke_agent claude-code"]
        assert len(agents) == 2
        callers = {span.context.span_id: span.name for span in spans if "caller" in span.name}
        assert sorted(callers[agent.parent.span_id] for agent in agents if agent.parent) == [
            "first caller",
            "second caller",
        ]
        # The CLI was told the execution's own span as its parent (TRACEPARENT).
        (ready,) = [event for event in events if isinstance(event, AdapterReady)]
        (agent,) = [a for a in agents if callers[a.parent.span_id] == "second caller"]  # type: ignore[union-attr]
        assert ready.env["TRACEPARENT"] == traceparent_of(
            trace.set_span_in_context(trace.NonRecordingSpan(agent.context))
        )


async def test_a_trace_runs_from_the_client_through_the_gateway_to_the_session() -> None:
    with trio.fail_after(30), global_tracer_provider() as exporter:
        async with (
            gateway(conformance_cli()) as (_, port),
            connect_gateway(f"ws://127.0.0.1:{port}/", token=TOKEN, config=CONFIG) as gw,
        ):
            tracer = trace.get_tracer("t")
            with tracer.start_as_current_span("caller"):
                session = await gw.open(ExecuteParams(prompt="say:hi"))
                await session.result()
            with tracer.start_as_current_span("caller again"):
                continued = await gw.continue_(session.id, "say:more")
                await continued.result()
        spans = exporter.get_finished_spans()
    chain = parents([s for s in spans if s.name != "caller again"])
    assert chain["gateway open"] == "caller"
    assert chain["invoke_agent claude-code"] in ("gateway open", "gateway continue")
    opened = by_name(spans, "gateway open")
    assert opened.kind is SpanKind.SERVER
    assert dict(opened.attributes or {}) == {"claude_trio.session.id": session.id}
    caller = by_name(spans, "caller")
    assert opened.context.trace_id == caller.context.trace_id
    agents = [span for span in spans if span.name == "invoke_agent claude-code"]
    assert len(agents) == 2
    continued_span = by_name(spans, "gateway continue")
    assert {agent.parent.span_id for agent in agents if agent.parent} == {
        opened.context.span_id,
        continued_span.context.span_id,
    }
    assert continued_span.parent is not None
    assert continued_span.parent.span_id == by_name(spans, "caller again").context.span_id


async def test_a_gateway_counts_its_clients_and_how_far_behind_they_are() -> None:
    with trio.fail_after(30), global_meter_provider() as reader:
        async with gateway(conformance_cli()) as (_, port):
            async with connect_gateway(
                f"ws://127.0.0.1:{port}/", token=TOKEN, config=CONFIG
            ) as gw:
                session = await gw.open(ExecuteParams(prompt="say:hello there"))
                transcript = await session.result()
                (clients,) = metric_points(reader)["claude_trio.gateway.clients"]
                assert clients.value == 1
            with trio.fail_after(5):
                # Another task's count, read by the SDK: there is nothing to wait on.
                while True:
                    await trio.sleep(0.01)  # the server notices the close
                    if not metric_points(reader)["claude_trio.gateway.clients"][0].value:
                        break
            (lag,) = metric_points(reader)["claude_trio.gateway.lag"]
            # One point per event frame sent; the last one is never behind.
            assert lag.count == len(transcript.events)
            assert lag.min == 0
            assert lag.max <= len(transcript.events)
        (live, waiting) = sorted(
            metric_points(reader)["claude_trio.fleet.sessions"],
            key=lambda point: point.attributes["claude_trio.state"],
        )
        assert (live.value, waiting.value) == (0, 0)
