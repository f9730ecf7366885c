"""One trace over four processes: the client (this test), a ``claude-trio serve --redis``
gateway, a ``claude-trio worker --offline`` and its CLI, each command exporting its spans
with ``OTEL_TRACES_EXPORTER=console`` (one JSON object per line on standard error, read here).

The caller's span -> the gateway's ``gateway open`` (SERVER) -> the worker's ``worker run``
(CONSUMER, the context carried in the Redis job) -> the session's ``invoke_agent`` span and
its model calls: one trace id, each span the child of the one before.
"""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
import trio
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from claude_trio import ExecuteParams
from claude_trio.client import ClientConfig, connect_gateway
from claude_trio.testing import RedisServer
from claude_trio.testing.processes import command_env, open_gateway_process, open_worker_process

pytestmark = pytest.mark.e2e

TOKEN = "trace-e2e-token-0123456789"
CLIENT = ClientConfig(backoff_base=0.05, backoff_max=0.5, close_timeout=2.0)


def otel_env(service: str) -> dict[str, str]:
    """Each command exports its spans and metrics to standard error, as ``service``."""
    env = {k: v for k, v in command_env().items() if not k.startswith("OTEL_")}
    env |= {
        "CLAUDE_TRIO_TOKEN": TOKEN,
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_METRICS_EXPORTER": "console",
        "OTEL_SERVICE_NAME": service,
    }
    return env


def spans_in(path: Path) -> list[dict[str, Any]]:
    spans = []
    for line in path.read_text().splitlines():
        if line.startswith("{") and '"context"' in line:
            obj = json.loads(line)
            if "span_id" in obj.get("context", {}):
                spans.append(obj)
    return spans


def metrics_in(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Metric name -> its data points, from the console exporter's lines (the last export)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for line in path.read_text().splitlines():
        if line.startswith("{") and '"resource_metrics"' in line:
            for resource in json.loads(line)["resource_metrics"]:
                for scope in resource["scope_metrics"]:
                    for metric in scope["metrics"]:
                        out[metric["name"]] = metric["data"]["data_points"]
    return out


def one(spans: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (span,) = [span for span in spans if span["name"] == name]
    return span


async def test_a_trace_spans_the_client_the_gateway_and_the_worker(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    url = redis_server.url
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    before = trace._TRACER_PROVIDER
    trace._TRACER_PROVIDER = provider  # the client's, for this test only
    try:
        async with AsyncExitStack() as stack:
            # Stopped with Ctrl-C at the end: each flushes its spans and metrics.
            await stack.enter_async_context(
                open_worker_process(
                    tmp_path, "worker", url, "--offline", "--max-live", "1", env=otel_env("worker")
                )
            )
            gateway = await stack.enter_async_context(
                open_gateway_process(
                    tmp_path, "gateway", url, "--cwd-root", str(tmp_path), env=otel_env("gateway")
                )
            )
            ws = gateway.url
            client = await stack.enter_async_context(
                connect_gateway(ws, token=TOKEN, config=CLIENT)
            )
            with trio.fail_after(120):
                with trace.get_tracer("test").start_as_current_span("caller"):
                    session = await client.open(ExecuteParams(prompt="say hello"))
                transcript = await session.result()
            assert transcript.events[-1].kind == "result"
    finally:
        trace._TRACER_PROVIDER = before
        provider.shutdown()
    (caller,) = exporter.get_finished_spans()
    trace_id = f"0x{caller.context.trace_id:032x}"
    gateway_spans = spans_in(tmp_path / "gateway.stderr")
    worker_spans = spans_in(tmp_path / "worker.stderr")
    opened = one(gateway_spans, "gateway open")
    run = one(worker_spans, "worker run")
    agent = one(worker_spans, "invoke_agent claude-code")
    assert [span["context"]["trace_id"] for span in (opened, run, agent)] == [trace_id] * 3
    assert opened["parent_id"] == f"0x{caller.context.span_id:016x}"
    assert opened["kind"] == "SpanKind.SERVER"
    assert opened["resource"]["attributes"]["service.name"] == "gateway"
    assert run["parent_id"] == opened["context"]["span_id"]
    assert run["kind"] == "SpanKind.CONSUMER"
    assert run["attributes"] == {"claude_trio.session.id": session.id, "claude_trio.execution": 1}
    assert agent["parent_id"] == run["context"]["span_id"]
    assert agent["resource"]["attributes"]["service.name"] == "worker"
    chats = [span for span in worker_spans if span["name"].startswith("chat")]
    assert chats
    assert {chat["parent_id"] for chat in chats} == {agent["context"]["span_id"]}

    # The same processes' metrics (exported when they stopped).
    worker = metrics_in(tmp_path / "worker.stderr")
    (published,) = worker["claude_trio.cluster.publish.lag"]
    assert published["count"] >= 1  # a batch per round trip
    assert published["min"] == 0  # the last batch leaves nothing behind
    (round_trips,) = worker["claude_trio.cluster.publish.duration"]
    assert round_trips["count"] == published["count"]
    (starts,) = worker["claude_trio.session.starts"]
    assert starts["value"] == 1
    tokens = {p["attributes"]["gen_ai.token.type"]: p for p in worker["gen_ai.client.token.usage"]}
    assert tokens["output"]["sum"] == transcript.results[-1].execution_usage.output_tokens
    gateway_metrics = metrics_in(tmp_path / "gateway.stderr")
    (lag,) = gateway_metrics["claude_trio.gateway.lag"]
    assert lag["count"] == len(transcript.events)
