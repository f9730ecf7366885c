"""The metrics (actors/session/metrics.py): an SDK ``MeterProvider`` with an
``InMemoryMetricReader`` passed to ``open_session(meter_provider=...)`` / ``open_fleet``, over
the fake CLI under trio's MockClock (durations are exact virtual times)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import trio
import trio.testing
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from session_kit import CONFIG, check_stream, collect, fake_session

from claude_trio import ExecuteParams, Result, ToolUse, open_fleet
from claude_trio.actors.session.metrics import (
    DURATION_BUCKETS,
    TOKEN_BUCKETS,
    instruments,
    session_meter,
)
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.testing import FakeCLI, FakeTurn
from claude_trio.testing.fake_cli import DEFAULT_MODEL


@pytest.fixture
def reader() -> InMemoryMetricReader:
    return InMemoryMetricReader()


@pytest.fixture
def meters(reader: InMemoryMetricReader) -> Iterator[MeterProvider]:
    provider = MeterProvider(metric_readers=[reader])
    yield provider
    provider.shutdown()


def points(reader: InMemoryMetricReader) -> dict[str, list[tuple[dict[str, Any], Any]]]:
    """Metric name -> (attributes, data point) of every point collected now."""
    out: dict[str, list[tuple[dict[str, Any], Any]]] = {}
    data = reader.get_metrics_data()
    if data is None:
        return out
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                out[metric.name] = [
                    (dict(point.attributes or {}), point) for point in metric.data.data_points
                ]
    return out


async def two_calls(cli: FakeTurn) -> None:
    await cli.text("Let me look", chunk=4)
    tool = await cli.tool_use("Read", {"file_path": "a.txt"})
    await cli.sleep(3.0)
    await cli.tool_result(tool, "contents")
    await cli.text("done")


async def test_an_execution_records_the_genai_client_metrics(
    autojump_clock: trio.testing.MockClock,
    meters: MeterProvider,
    reader: InMemoryMetricReader,
) -> None:
    params = ExecuteParams(prompt="look", model=DEFAULT_MODEL)
    async with fake_session(FakeCLI(two_calls), params=params, meter_provider=meters) as session:
        started = trio.current_time()
        events = await collect(session)
        ended = trio.current_time()
    check_stream(events)
    result = events[-1]
    assert isinstance(result, Result)
    usage = result.execution_usage
    got = points(reader)
    base = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": DEFAULT_MODEL,
        "gen_ai.response.model": DEFAULT_MODEL,
    }
    tokens = {attrs["gen_ai.token.type"]: (attrs, point) for attrs, point in got[
        "gen_ai.client.token.usage"
    ]}
    inputs = usage.input_tokens + usage.cache_read_input_tokens
    inputs += usage.cache_creation_input_tokens
    assert tokens["input"][0] == {**base, "gen_ai.token.type": "input"}
    assert (tokens["input"][1].count, tokens["input"][1].sum) == (1, inputs)
    assert (tokens["output"][1].count, tokens["output"][1].sum) == (1, usage.output_tokens)
    assert usage.output_tokens > 0
    assert tuple(tokens["input"][1].explicit_bounds) == TOKEN_BUCKETS
    ((attributes, duration),) = got["gen_ai.client.operation.duration"]
    assert attributes == base
    assert tuple(duration.explicit_bounds) == DURATION_BUCKETS
    assert duration.sum == pytest.approx(3.0, abs=0.1)  # the tool's 3 s, and nothing more
    assert duration.sum <= ended - started + 1e-9
    ((_, starts),) = got["claude_trio.session.starts"]
    assert starts.value == 1
    ((cost_attributes, cost),) = got["claude_trio.session.cost"]
    assert cost_attributes == base
    assert cost.value == pytest.approx(usage.cost_usd)
    assert "claude_trio.session.stop.duration" not in got  # nothing was stopped


async def test_a_stop_mid_tool_records_its_duration_to_the_cli_reaped(
    autojump_clock: trio.testing.MockClock,
    meters: MeterProvider,
    reader: InMemoryMetricReader,
) -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.tool_use("Bash", {"command": "sleep 100"}, id="toolu_slow")
        await cli.sleep(100.0)
        await cli.tool_result("toolu_slow", "slept")

    aborted_at: list[float] = []
    # A CLI that goes on regardless of the interrupt: the stop waits out abort_grace, kills it.
    wedged = FakeCLI(script, ignores_interrupts=True)
    async with fake_session(wedged, meter_provider=meters) as session:

        async def on_event(event: object) -> None:
            if isinstance(event, ToolUse):
                aborted_at.append(trio.current_time())
                await session.abort()

        events = await collect(session, on_event)
    closed_at = trio.current_time()
    check_stream(events)
    got = points(reader)
    ((_, stop),) = got["claude_trio.session.stop.duration"]
    assert stop.count == 1
    assert stop.sum == pytest.approx(closed_at - aborted_at[0])
    assert stop.sum == CONFIG.abort_grace  # the kill, then its exit, at once
    ((attributes, _),) = got["gen_ai.client.operation.duration"]
    assert "error.type" not in attributes  # a stop is no error


async def test_a_failed_execution_says_so_in_its_duration(
    autojump_clock: trio.testing.MockClock,
    meters: MeterProvider,
    reader: InMemoryMetricReader,
) -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.text("half")
        await cli.exit(3)

    async with fake_session(FakeCLI(script), meter_provider=meters) as session:
        events = await collect(session)
    final = events[-1]
    assert final.outcome is not None
    ((attributes, _),) = points(reader)["gen_ai.client.operation.duration"]
    assert attributes["error.type"] == final.outcome.value
    assert attributes["error.type"] != "completed"


async def test_a_fleet_counts_its_live_and_waiting_sessions(
    autojump_clock: trio.testing.MockClock,
    meters: MeterProvider,
    reader: InMemoryMetricReader,
) -> None:
    async def hold(cli: FakeTurn) -> None:
        await cli.sleep(10.0)
        await cli.text("done")

    assert instruments(meters) is instruments(meters)  # made once per provider
    async with open_fleet(
        transport_factory=FakeCLI(hold), max_live=1, meter_provider=meters
    ) as fleet:
        first = await fleet.start(ExecuteParams(prompt="one"))
        await fleet.start(ExecuteParams(prompt="two"))
        await trio.sleep(1.0)
        sessions = {a["claude_trio.state"]: p.value for a, p in points(reader)[
            "claude_trio.fleet.sessions"
        ]}
        assert sessions == {"live": 1, "waiting": 1}
        await first.result()
        await trio.sleep(30.0)
        sessions = {a["claude_trio.state"]: p.value for a, p in points(reader)[
            "claude_trio.fleet.sessions"
        ]}
        assert sessions == {"live": 0, "waiting": 0}
        ((_, starts),) = points(reader)["claude_trio.session.starts"]
        assert starts.value == 2
    sessions = {a["claude_trio.state"]: p.value for a, p in points(reader)[
        "claude_trio.fleet.sessions"
    ]}
    assert sessions == {"live": 0, "waiting": 0}  # a closed fleet is no longer counted


async def test_nothing_is_measured_without_an_sdk() -> None:
    # This process never sets the global meter provider: the API's proxy, a no-op.
    assert instruments() is None
    assert session_meter(None, model=None) is None


async def test_a_wrong_meter_provider_is_refused_by_name() -> None:
    with pytest.raises(InvalidParamsError, match="meter_provider"):
        async with fake_session(FakeCLI(), meter_provider="otlp"):  # type: ignore[arg-type]
            pass
