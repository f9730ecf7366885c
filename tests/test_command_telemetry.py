"""The commands' OpenTelemetry configuration (claude_trio/cli/telemetry.py), in process.

The API's global providers are put back after each test (OpenTelemetry sets them once per
process): the other tests of the worker process still see no SDK.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import metrics, trace
from opentelemetry.metrics import _internal as metrics_internal
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.util._once import Once

from claude_trio.cli import telemetry
from claude_trio.cli.telemetry import command_telemetry, wanted_exporters


@pytest.fixture(autouse=True)
def _fresh_globals() -> Iterator[None]:
    saved = (
        trace._TRACER_PROVIDER,
        trace._TRACER_PROVIDER_SET_ONCE,
        metrics_internal._METER_PROVIDER,
        metrics_internal._METER_PROVIDER_SET_ONCE,
    )
    trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE = None, Once()
    metrics_internal._METER_PROVIDER = None
    metrics_internal._METER_PROVIDER_SET_ONCE = Once()
    yield
    (
        trace._TRACER_PROVIDER,
        trace._TRACER_PROVIDER_SET_ONCE,
        metrics_internal._METER_PROVIDER,
        metrics_internal._METER_PROVIDER_SET_ONCE,
    ) = saved


def test_the_exporters_asked_for() -> None:
    assert wanted_exporters({}) == ((), ())
    assert wanted_exporters({"OTEL_TRACES_EXPORTER": "console"}) == (("console",), ())
    assert wanted_exporters({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}) == (
        ("otlp",),
        ("otlp",),
    )
    assert wanted_exporters(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_METRICS_EXPORTER": "none"}
    ) == (("otlp",), ())
    assert wanted_exporters(
        {"OTEL_TRACES_EXPORTER": "console, OTLP", "OTEL_SDK_DISABLED": "true"}
    ) == ((), ())


def test_nothing_is_configured_unless_an_export_is_asked_for() -> None:
    with command_telemetry({}):
        assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
        assert metrics_internal._METER_PROVIDER is None
    assert trace._TRACER_PROVIDER is None


def test_without_the_extra_nothing_is_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_sdk(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("opentelemetry.sdk"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_sdk)
    with command_telemetry({"OTEL_TRACES_EXPORTER": "console"}):
        assert trace._TRACER_PROVIDER is None


def test_console_prints_each_span_as_a_json_line_on_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    environ = {"OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "console"}
    with command_telemetry(environ):
        provider = trace.get_tracer_provider()
        assert isinstance(provider, TracerProvider)
        assert isinstance(metrics.get_meter_provider(), MeterProvider)
        tracer = trace.get_tracer("t")
        with tracer.start_as_current_span("outer"), tracer.start_as_current_span("inner"):
            pass
        metrics.get_meter("t").create_counter("claude_trio.test").add(2)
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = [json.loads(line) for line in captured.err.splitlines()]
    spans = [line for line in lines if "span_id" in line.get("context", {})]
    assert [span["name"] for span in spans] == ["inner", "outer"]
    assert spans[0]["parent_id"] == spans[1]["context"]["span_id"]
    assert spans[1]["resource"]["attributes"]["service.name"] == "claude-trio"
    (points,) = [line for line in lines if "resource_metrics" in line]
    names = [
        metric["name"]
        for scope in points["resource_metrics"][0]["scope_metrics"]
        for metric in scope["metrics"]
    ]
    assert names == ["claude_trio.test"]


def test_an_unknown_exporter_is_named_and_ignored(capsys: pytest.CaptureFixture[str]) -> None:
    with command_telemetry({"OTEL_TRACES_EXPORTER": "zipkin"}):
        pass
    assert "OTEL exporter 'zipkin' is not one claude-trio configures" in capsys.readouterr().err
    assert {"run", "record", "serve", "worker", "batch"} == telemetry.TELEMETRY_COMMANDS
