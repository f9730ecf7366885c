"""Benchmark 1b, the traced hot path: CPU per SDK message of ``open_session`` with its
OpenTelemetry spans and metrics recorded through an SDK, against tracing off.

The same replay as the hot path (``bench_hot``), three sides interleaved A B C per round:

* off: ``tracer_provider=NoOpTracerProvider()`` (tracing off: no tracer is made);
* API, no SDK: the defaults, the global provider the API's proxy (what an application that
  configured nothing runs: the session looks at the provider once and does no tracing work);
* SDK: an SDK ``TracerProvider`` whose ``SimpleSpanProcessor`` exports to an in-memory
  exporter, and an SDK ``MeterProvider`` with an in-memory reader (every span and point is
  made and kept, as an application exporting them would).

Targets: SDK / off at most 1.05, API / off at most 1.01.
"""

from __future__ import annotations

import gc
import statistics
import time
from typing import Any

import trio
from bench_replay import Recording, replay_factory
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from claude_trio import ExecuteParams, open_session

TARGET_SDK = 1.05
TARGET_API = 1.01
PARAMS = ExecuteParams(prompt="Summarize the workspace.")


async def side(recording: Recording, options: dict[str, Any]) -> tuple[float, int]:
    """CPU seconds from the first frame to the session's last event, and the events."""
    gc.collect()
    release = trio.Event()
    events = 0
    async with open_session(
        PARAMS, transport_factory=replay_factory(recording, release=release), **options
    ) as session:
        t0 = time.process_time()
        release.set()
        async for _ in session.events:
            events += 1
        t1 = time.process_time()
    return t1 - t0, events


def run(recording: Recording, *, rounds: int) -> dict[str, float]:
    exporter = InMemorySpanExporter()
    tracers = TracerProvider()
    tracers.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    sides: dict[str, dict[str, Any]] = {
        "off": {"tracer_provider": trace.NoOpTracerProvider()},
        "api": {},
        "sdk": {"tracer_provider": tracers, "meter_provider": meters},
    }
    for options in sides.values():  # warm-up
        trio.run(side, recording, options)
    samples: dict[str, list[float]] = {name: [] for name in sides}
    events = 0
    for _ in range(rounds):
        for name, options in sides.items():
            cpu, events = trio.run(side, recording, options)
            samples[name].append(cpu)
        exporter.clear()
    spans_per_run = len(exporter.get_finished_spans())
    trio.run(side, recording, sides["sdk"])
    spans_per_run = len(exporter.get_finished_spans()) - spans_per_run
    frames = len(recording.turn)
    us = {name: statistics.median(values) / frames * 1e6 for name, values in samples.items()}
    sdk_ratio = us["sdk"] / us["off"]
    api_ratio = us["api"] / us["off"]
    print(f"  frames replayed per run:     {frames} ({events} unified events)")
    print(f"  rounds (A B C interleaved):  {rounds}")
    print(f"  spans per execution (SDK):   {spans_per_run}")
    print(f"  tracing off:                 {us['off']:7.1f} CPU-us per frame (median)")
    print(f"  API, no SDK:                 {us['api']:7.1f}  ratio {api_ratio:.3f} "
          f"(target <= {TARGET_API})")
    print(f"  SDK + in-memory exporter:    {us['sdk']:7.1f}  ratio {sdk_ratio:.3f} "
          f"(target <= {TARGET_SDK})")
    tracers.shutdown()
    meters.shutdown()
    return {"off_us": us["off"], "api_us": us["api"], "sdk_us": us["sdk"],
            "sdk_ratio": sdk_ratio, "api_ratio": api_ratio}
