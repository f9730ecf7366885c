"""Benchmark 1, the hot path: CPU per SDK message, bare SDK loop vs ``open_session``.

Both sides read the same recording through the same :class:`ReplayTransport`, so the only
difference is what happens to a frame once the SDK's reader task has it: (a) the SDK queues it
in its own stream and ``ClaudeSDKClient.receive_messages()`` parses it in the consumer's task;
(b) the adapter's tap parses and maps it right there in the reader task (mapper, lifecycle) and
appends the events to the ``EventStream`` the consumer iterates.
The clock (``time.process_time``, the whole process's CPU) starts once the session is set up and
stops at the turn's last message, so setup and teardown are not in the ratio; they are reported
on their own line (``setup+teardown``).
"""

from __future__ import annotations

import cProfile
import gc
import io
import pstats
import statistics
import time
from collections.abc import Callable, Coroutine
from typing import Any

import attrs
import trio
from bench_replay import Recording, ReplayTransport, replay_factory
from claude_agent_sdk import ClaudeSDKClient, ResultMessage, StreamEvent

from claude_trio import ExecuteParams, open_session
from claude_trio.actors.session.event_stream import EventStream
from claude_trio.actors.session.sdk_private import parse_message
from claude_trio.actors.session.tap import TapTransport
from claude_trio.protocol.config.options import build_options
from claude_trio.protocol.session.frames import rewrite_unknown_frame
from claude_trio.protocol.session.mapper import Mapper

TARGET_RATIO = 1.3
PARAMS = ExecuteParams(prompt="Summarize the workspace.")


@attrs.frozen(kw_only=True)
class Run:
    """One replay of the recording through one side."""

    stream_cpu: float  # seconds of CPU from the first frame to the last message
    total_cpu: float  # the same, plus connect/setup and disconnect/teardown
    messages: int  # SDK messages (the bare loop's count; the same frames for both)
    events: int  # unified events the consumer received (0 for the bare SDK)


async def bare_sdk(recording: Recording) -> Run:
    """(a) ``ClaudeSDKClient`` on the replay transport; loop until the result."""
    release = trio.Event()
    start = time.process_time()
    client = ClaudeSDKClient(
        build_options(PARAMS), transport=ReplayTransport(recording, release=release)
    )
    await client.connect()
    await client.query(PARAMS.prompt)
    t0 = time.process_time()
    release.set()
    messages = 0
    async for message in client.receive_messages():
        messages += 1
        if isinstance(message, ResultMessage):
            break
    t1 = time.process_time()
    await client.disconnect()
    end = time.process_time()
    return Run(stream_cpu=t1 - t0, total_cpu=end - start, messages=messages, events=0)


async def adapter(recording: Recording) -> Run:
    """(b) ``open_session`` on the replay transport; consume ``session.events`` to the end."""
    release = trio.Event()
    start = time.process_time()
    events = 0
    last = None
    async with open_session(
        PARAMS, transport_factory=replay_factory(recording, release=release)
    ) as session:
        t0 = time.process_time()
        release.set()
        async for event in session.events:
            events += 1
            last = event
        t1 = time.process_time()
    end = time.process_time()
    if last is None or last.kind != "result":
        raise RuntimeError(f"the session did not end with a result: {last!r}")
    return Run(stream_cpu=t1 - t0, total_cpu=end - start, messages=0, events=events)


async def first_delta_bare(recording: Recording) -> tuple[float, float]:
    """(wall, CPU) seconds from building the client to the first text-delta ``StreamEvent``."""
    start = time.perf_counter()
    cpu = time.process_time()
    client = ClaudeSDKClient(build_options(PARAMS), transport=ReplayTransport(recording))
    await client.connect()
    await client.query(PARAMS.prompt)
    async for message in client.receive_messages():
        if isinstance(message, StreamEvent) and message.event.get("delta", {}).get("type") == (
            "text_delta"
        ):
            break
    first = time.perf_counter()
    first_cpu = time.process_time()
    await client.disconnect()
    return first - start, first_cpu - cpu


async def first_delta_session(recording: Recording) -> tuple[float, float]:
    """(wall, CPU) seconds from entering ``open_session`` to its first ``text_delta`` event."""
    start = time.perf_counter()
    cpu = time.process_time()
    async with open_session(PARAMS, transport_factory=replay_factory(recording)) as session:
        async for event in session.events:
            if event.kind == "text_delta":
                break
        first = time.perf_counter()
        first_cpu = time.process_time()
    return first - start, first_cpu - cpu


async def _timed(side: Callable[[Recording], Coroutine[Any, Any, Run]], rec: Recording) -> Run:
    gc.collect()
    return await side(rec)


async def _bare_with_mapper(recording: Recording) -> float:
    """The bare loop plus ``Mapper.feed`` inline (no extra task): the mapper's own cost."""
    release = trio.Event()
    client = ClaudeSDKClient(
        build_options(PARAMS), transport=ReplayTransport(recording, release=release)
    )
    await client.connect()
    await client.query(PARAMS.prompt)
    mapper = Mapper()
    mapper.start_execution()
    t0 = time.process_time()
    release.set()
    async for message in client.receive_messages():
        mapper.feed(message)
        mapper.pop_consumed_uuids()
        if isinstance(message, ResultMessage):
            break
    t1 = time.process_time()
    await client.disconnect()
    return t1 - t0


@attrs.define(eq=False)
class _ParseOnlySink:
    """A tap sink that parses each frame into an ``EventStream`` without mapping it."""

    stream: EventStream

    def deliver(self, frame: dict[str, Any]) -> bool:
        if self.stream.closed:
            return False  # frames after the result (``command_lifecycle``), as the session does
        message = parse_message(frame)
        if message is not None:
            self.stream.send_nowait([message])
            if isinstance(message, ResultMessage):
                self.stream.close()
        return self.stream.over_capacity

    async def wait_writable(self) -> None:
        await self.stream.wait_writable()


async def _tap_without_mapper(recording: Recording) -> float:
    """The adapter's structure with no mapper: the tap hands each parsed frame to an
    ``EventStream`` from inside the SDK's reader task, and the consumer iterates it. What the
    structure costs (or saves) against the bare loop, apart from the mapping."""
    release = trio.Event()
    sink = _ParseOnlySink(EventStream())
    tap = TapTransport(ReplayTransport(recording, release=release), sink=sink)
    client = ClaudeSDKClient(build_options(PARAMS), transport=tap)
    await client.connect()
    await client.query(PARAMS.prompt)
    t0 = time.process_time()
    release.set()
    async for _ in sink.stream:
        pass
    t1 = time.process_time()
    await client.disconnect()
    return t1 - t0


def _mapper_alone(recording: Recording) -> float:
    """``Mapper.feed`` over the parsed messages in a plain loop: seconds per run."""
    messages = [parse_message(rewrite_unknown_frame(f)) for f in recording.turn]
    mapper = Mapper()
    mapper.start_execution()
    t0 = time.process_time()
    for message in messages:
        if message is not None:
            mapper.feed(message)
            mapper.pop_consumed_uuids()
    return time.process_time() - t0


def breakdown(recording: Recording, rounds: int, messages: int) -> str:
    """Where the adapter's extra time goes: variants between the bare loop and open_session."""
    samples: dict[str, list[float]] = {
        "bare SDK loop": [],
        "bare loop + Mapper.feed inline": [],
        "tap -> EventStream, no mapper": [],
        "open_session": [],
        "Mapper.feed alone (sync loop)": [],
    }

    async def side(fn: Callable[[Recording], Coroutine[Any, Any, Any]]) -> float:
        gc.collect()
        result = await fn(recording)
        return result.stream_cpu if isinstance(result, Run) else float(result)

    for _ in range(rounds):
        samples["bare SDK loop"].append(trio.run(side, bare_sdk))
        samples["bare loop + Mapper.feed inline"].append(trio.run(side, _bare_with_mapper))
        samples["tap -> EventStream, no mapper"].append(trio.run(side, _tap_without_mapper))
        samples["open_session"].append(trio.run(side, adapter))
        gc.collect()
        samples["Mapper.feed alone (sync loop)"].append(_mapper_alone(recording))
    lines = ["breakdown (CPU-us per SDK message, median):"]
    base = statistics.median(samples["bare SDK loop"]) / messages * 1e6
    for name, values in samples.items():
        us = statistics.median(values) / messages * 1e6
        extra = "" if name.startswith(("bare SDK", "Mapper")) else f"  ({us - base:+.1f})"
        lines.append(f"  {name:<36} {us:6.1f}{extra}")
    return "\n".join(lines)


async def _first(
    side: Callable[[Recording], Coroutine[Any, Any, tuple[float, float]]], rec: Recording
) -> tuple[float, float]:
    gc.collect()
    return await side(rec)


def _profile(recording: Recording, runs: int) -> str:
    """cProfile of ``runs`` adapter replays: the top functions by own time, and by package."""
    profiler = cProfile.Profile()

    async def many() -> None:
        for _ in range(runs):
            await adapter(recording)

    profiler.enable()
    trio.run(many)
    profiler.disable()
    stats = pstats.Stats(profiler)
    out = io.StringIO()
    stats.stream = out  # type: ignore[attr-defined]
    stats.sort_stats("tottime").print_stats(25)
    by_area: dict[str, float] = {}
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = 0.0
    for (filename, _line, _name), (_cc, _nc, tottime, _ct, _callers) in raw.items():
        total += tottime
        by_area[_area(filename)] = by_area.get(_area(filename), 0.0) + tottime
    lines = ["own time by area (profiled, so inflated; compare shares):"]
    for area, seconds in sorted(by_area.items(), key=lambda kv: -kv[1]):
        lines.append(f"  {area:<28} {seconds * 1e3:8.1f} ms  {100 * seconds / total:5.1f} %")
    return "\n".join(lines) + "\n" + _trim(out.getvalue())


def _area(filename: str) -> str:
    for marker, name in (
        ("/protocol/", "claude_trio.protocol"),
        ("/actors/", "claude_trio.actors"),
        ("claude_agent_sdk", "claude_agent_sdk"),
        ("/anyio/", "anyio"),
        ("/trio/", "trio"),
        ("/attr/", "attrs"),
        ("/attrs/", "attrs"),
        ("bench_", "bench (replay transport)"),
        ("/json/", "json"),
    ):
        if marker in filename:
            return name
    return "python builtins/other"


def _trim(text: str) -> str:
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
    return "\n".join(line[:150] for line in lines[start:] if line.strip())


def run(recording: Recording, *, rounds: int, profile: bool) -> dict[str, float]:
    """Interleave A B A B for ``rounds`` rounds; print the figures; return them."""
    trio.run(_timed, bare_sdk, recording)  # warm-up: imports, caches
    trio.run(_timed, adapter, recording)
    bare: list[Run] = []
    ours: list[Run] = []
    for _ in range(rounds):
        bare.append(trio.run(_timed, bare_sdk, recording))
        ours.append(trio.run(_timed, adapter, recording))
    messages = bare[0].messages
    a = statistics.median(r.stream_cpu for r in bare) / messages * 1e6
    b = statistics.median(r.stream_cpu for r in ours) / messages * 1e6
    pair_ratios = [o.stream_cpu / s.stream_cpu for s, o in zip(bare, ours, strict=True)]
    ratio = b / a
    setup_a = statistics.median(r.total_cpu - r.stream_cpu for r in bare) * 1e3
    setup_b = statistics.median(r.total_cpu - r.stream_cpu for r in ours) * 1e3
    events = ours[0].events
    print(f"  frames replayed per run:     {len(recording.turn)} ({messages} SDK messages)")
    print(f"  rounds (A B interleaved):    {rounds}")
    print(f"  bare SDK receive loop:       {a:7.1f} CPU-us per SDK message (median)")
    print(f"  open_session events:         {b:7.1f} CPU-us per SDK message (median)")
    print(
        f"  ratio open_session / bare:   {ratio:7.2f}  (target <= {TARGET_RATIO}; per-round "
        f"min {min(pair_ratios):.2f} max {max(pair_ratios):.2f})"
    )
    print(f"  unified events per message:  {events / messages:7.3f}  ({events} events)")
    print(f"  setup+teardown per session:  bare {setup_a:.2f} CPU-ms, open_session {setup_b:.2f}")
    first_bare: list[tuple[float, float]] = []
    first_ours: list[tuple[float, float]] = []
    for _ in range(rounds):
        first_bare.append(trio.run(_first, first_delta_bare, recording))
        first_ours.append(trio.run(_first, first_delta_session, recording))
    fa = statistics.median(w for w, _ in first_bare) * 1e3
    fb = statistics.median(w for w, _ in first_ours) * 1e3
    ca = statistics.median(c for _, c in first_bare) * 1e3
    cb = statistics.median(c for _, c in first_ours) * 1e3
    print(
        f"  start -> first text delta:   bare {ca:.2f} CPU-ms / {fa:.2f} ms wall, open_session "
        f"{cb:.2f} CPU-ms / {fb:.2f} ms wall (adapter's share: {cb - ca:+.2f} CPU-ms, "
        f"{fb - fa:+.2f} ms wall)"
    )
    if profile or ratio > TARGET_RATIO:
        if ratio > TARGET_RATIO:
            print("  -- over target: where the time goes --")
        print(_indent(breakdown(recording, max(3, rounds // 2), messages)))
        print(_indent(_profile(recording, max(3, rounds // 2))))
    return {
        "bare_us_per_msg": a,
        "adapter_us_per_msg": b,
        "ratio": ratio,
        "events_per_msg": events / messages,
        "setup_bare_ms": setup_a,
        "setup_adapter_ms": setup_b,
        "first_delta_bare_ms": fa,
        "first_delta_adapter_ms": fb,
        "first_delta_bare_cpu_ms": ca,
        "first_delta_adapter_cpu_ms": cb,
    }


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())
