"""Benchmarks of fan-out: many real CLI sessions through ``open_fleet``, and the gateway's latency.

* **fleet**: ``--sessions`` (10) real ``claude`` CLIs against the Messages API double at once,
  through ``open_fleet(max_live=10)`` against the raw SDK (``ClaudeSDKClient`` per session, all
  in one nursery) with the same options (``build_options`` of the same params, a
  ``can_use_tool`` and a ``PreToolUse`` hook as the fleet's sessions have, the same env).
  Each side runs in a fresh Python process of its own; measured: wall time from the first
  start to the last final result, and the peak memory of
  that process tree (the Python process plus its CLIs: RSS summed over the tree, sampled every
  25 ms from here). Sides interleaved over the rounds; medians and ratios (target <= 1.1).
* **sweep**: ``open_fleet(max_live=N)`` for N in 1, 2, 4, 8 running the same number of short
  sessions: finished sessions per minute, and what that is per CPU core of this machine.
* **latency**: one session whose CLI (a paced transport standing in for it) offers 10,000 text
  deltas per second, each carrying the time it was handed to the SDK, served by
  ``serve_gateway`` in a process of its own to a ``connect_gateway`` client here: p50, p99 and
  max latency from the CLI's frame to the client's ``session.events``, and the rate delivered.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import psutil
import trio
from bench_gateway import fake_recording
from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    PermissionResultAllow,
    ResultMessage,
    Transport,
)

from claude_trio import ExecuteParams, serve_gateway
from claude_trio.actors.children import run_child_process
from claude_trio.actors.fanout.fleet import open_fleet
from claude_trio.client import connect_gateway
from claude_trio.protocol.config.options import build_options
from claude_trio.protocol.fanout.remote import GatewayLimits
from claude_trio.protocol.session.events import Result, TextDelta
from claude_trio.testing.hermetic import hermetic_env
from claude_trio.testing.model_double import ModelDouble, ModelRequest, Reply, ReplyUsage

TARGET = 1.1
TOKEN = "bench-fanout-token-0123456789"
PROMPT = "Say something."
_HERE = os.path.abspath(__file__)
# About a second of streaming per session: 1,200 characters in 150 deltas, 5 ms apart.
REPLY = Reply.text(
    ("Many sessions at once, each with its own CLI. " * 30)[:1200],
    chunk_size=8,
    event_delay=0.005,
    usage=ReplyUsage(input_tokens=100, output_tokens=150),
)


def _reply(request: ModelRequest) -> Reply:
    return REPLY


# -- fleet vs raw SDK, each side in a process of its own ------------------------------------------


async def _allow(*_: Any) -> PermissionResultAllow:
    return PermissionResultAllow()


async def _no_opinion(*_: Any) -> dict[str, Any]:
    return {}


async def fleet_side(mode: str, sessions: int, base_url: str) -> None:
    """The measured side (a child process): print ``{"wall": s, "ok": n}``."""
    with tempfile.TemporaryDirectory(prefix="bench-fanout-") as tmp:
        root = Path(tmp)
        work = root / "work"
        work.mkdir()
        env = hermetic_env(base_url, root / "cli", sandbox=True)
        params = ExecuteParams(prompt=PROMPT, cwd=str(work))
        ok = 0
        start = time.perf_counter()
        last = start
        if mode == "fleet":
            # governor=None: against the raw SDK, which spaces no starts either.
            async with open_fleet(max_live=sessions, env=env, governor=None) as fleet:
                started = [await fleet.start(params) for _ in range(sessions)]
                for session in started:
                    subscription = session.subscribe_nowait(None, max_queue=100_000)
                    with subscription:  # type: ignore[union-attr]
                        async for event in subscription:  # type: ignore[union-attr]
                            if isinstance(event, Result) and event.final and not event.is_error:
                                ok += 1
                last = time.perf_counter()
        else:
            # The fleet's sessions answer permission prompts (can_use_tool) and register a
            # PreToolUse hook (the stop gate): the same CLI flags and initialize here.
            options = build_options(
                params, can_use_tool=_allow, extra_env=env, pre_tool_use=_no_opinion
            )
            done: list[float] = []

            async def one() -> None:
                nonlocal ok
                client = ClaudeSDKClient(options)
                try:
                    await client.connect()
                    await client.query(PROMPT)
                    async for message in client.receive_messages():
                        if isinstance(message, ResultMessage):
                            ok += not message.is_error
                            done.append(time.perf_counter())
                            break
                finally:
                    with trio.move_on_after(15, shield=True):
                        await client.disconnect()

            async with trio.open_nursery() as nursery:
                for _ in range(sessions):
                    nursery.start_soon(one)
            last = max(done, default=time.perf_counter())
        print(json.dumps({"wall": last - start, "ok": ok}), flush=True)


def _tree_rss(pid: int) -> int:
    try:
        process = psutil.Process(pid)
        tree = [process, *process.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for member in tree:
        try:
            total += member.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return total


async def _run_fleet_side(mode: str, sessions: int, double: ModelDouble) -> tuple[float, int, int]:
    """``(wall seconds, sessions ok, peak RSS bytes of the process tree)``."""
    command = [sys.executable, _HERE, "fleet-side", mode, str(sessions), double.base_url]
    peak = 0
    async with trio.open_nursery() as nursery:
        process = await nursery.start(
            partial(run_child_process, command, stdout=-1, check=True)
        )
        output = b""

        async def read() -> None:
            nonlocal output
            while chunk := await process.stdout.receive_some():
                output += chunk

        nursery.start_soon(read)
        while process.returncode is None:
            peak = max(peak, _tree_rss(process.pid))
            await trio.sleep(0.025)
    result = json.loads(output.decode().strip().splitlines()[-1])
    if result["ok"] != sessions:
        raise RuntimeError(f"{mode}: only {result['ok']} of {sessions} sessions ended well")
    return result["wall"], result["ok"], peak


async def _fleet(rounds: int, sessions: int) -> dict[str, float]:
    double = ModelDouble(_reply, keep_requests=16)
    runs: dict[str, list[tuple[float, int, int]]] = {"raw": [], "fleet": []}
    async with trio.open_nursery() as nursery:
        await nursery.start(double.serve)
        for _ in range(rounds):
            for mode in ("raw", "fleet"):
                runs[mode].append(await _run_fleet_side(mode, sessions, double))
        nursery.cancel_scope.cancel()
    out: dict[str, float] = {}
    for mode, results in runs.items():
        out[f"{mode}_wall"] = statistics.median(r[0] for r in results)
        out[f"{mode}_peak_mib"] = statistics.median(r[2] for r in results) / 2**20
        print(
            f"  {mode:5s}: all {sessions} results in {out[f'{mode}_wall']:.2f} s, process tree "
            f"peak {out[f'{mode}_peak_mib']:.0f} MiB (medians of {rounds})"
        )
    out["wall_ratio"] = out["fleet_wall"] / out["raw_wall"]
    out["memory_ratio"] = out["fleet_peak_mib"] / out["raw_peak_mib"]
    met = out["wall_ratio"] <= TARGET and out["memory_ratio"] <= TARGET
    print(
        f"  ratios fleet/raw: wall {out['wall_ratio']:.2f}, peak memory "
        f"{out['memory_ratio']:.2f} (target <= {TARGET} each: {'met' if met else 'NOT met'})"
    )
    return out


def run_fleet(*, rounds: int, sessions: int) -> dict[str, float]:
    warnings.simplefilter("ignore")
    return trio.run(_fleet, rounds, sessions)


# -- the max_live sweep ----------------------------------------------------------------------------


async def _sweep(sessions: int, caps: tuple[int, ...]) -> dict[int, float]:
    double = ModelDouble(_reply, keep_requests=16)
    rates: dict[int, float] = {}
    cores = os.cpu_count() or 1
    async with trio.open_nursery() as nursery:
        await nursery.start(double.serve)
        for cap in caps:
            with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
                root = Path(tmp)
                work = root / "work"
                work.mkdir()
                env = hermetic_env(double.base_url, root / "cli", sandbox=True)
                params = ExecuteParams(prompt=PROMPT, cwd=str(work))
                start = time.perf_counter()
                async with open_fleet(max_live=cap, env=env, governor=None) as fleet:
                    started = [await fleet.start(params) for _ in range(sessions)]
                    for session in started:
                        await session.wait_ended()
                wall = time.perf_counter() - start
                good = sum(
                    isinstance(e, Result) and e.final and not e.is_error
                    for s in started
                    for e in _final(s)
                )
                if good != sessions:
                    raise RuntimeError(f"max_live={cap}: {good} of {sessions} ended well")
            rates[cap] = sessions / wall * 60
            print(
                f"  max_live={cap}: {sessions} sessions in {wall:5.1f} s = "
                f"{rates[cap]:5.1f} finished/min ({rates[cap] / cores:4.1f} per core)"
            )
        nursery.cancel_scope.cancel()
    best = max(rates, key=lambda c: rates[c])
    print(f"  best here: max_live={best} on {cores} cores ({best / cores:g} per core)")
    return rates


def _final(session: Any) -> list[Any]:
    subscription = session.subscribe_nowait(None, max_queue=100_000)
    events = []
    while True:
        try:
            events.append(subscription.receive_nowait())
        except (trio.WouldBlock, trio.EndOfChannel):
            break
    subscription.close()
    return events[-1:]


def run_sweep(*, sessions: int, caps: tuple[int, ...] = (1, 2, 4, 8)) -> dict[int, float]:
    warnings.simplefilter("ignore")
    return trio.run(_sweep, sessions, caps)


# -- gateway latency at a paced rate ---------------------------------------------------------------


class PacedTransport(Transport):
    """A stand-in CLI: answers ``initialize`` and, for the prompt, sends ``count`` text
    deltas at ``rate`` per second, each one's text the ``time.perf_counter()`` at which it
    was handed to the SDK (the recorded turn's other frames around them)."""

    def __init__(self, recording: Any, *, count: int, rate: float) -> None:
        self._recording = recording
        self._count = count
        self._rate = rate
        self._queue: list[dict[str, Any]] = []
        self._wake = trio.Event()
        self._closed = False

    async def connect(self) -> None:
        await trio.lowlevel.checkpoint()

    async def write(self, data: str) -> None:
        await trio.lowlevel.checkpoint()
        message = json.loads(data)
        if message.get("type") == "control_request":
            request = message.get("request", {})
            answer = (
                self._recording.initialize_response
                if request.get("subtype") == "initialize"
                else {}
            )
            self._queue.append(
                {
                    "type": "control_response",
                    "response": {
                        "subtype": "success",
                        "request_id": message["request_id"],
                        "response": answer,
                    },
                }
            )
        elif message.get("type") == "user":
            self._queue.append({"turn": message.get("uuid")})
        self._wake.set()

    def read_messages(self) -> AsyncIterator[dict[str, Any]]:
        return self._read()

    async def _read(self) -> AsyncIterator[dict[str, Any]]:
        while not self._closed:
            if not self._queue:
                self._wake = trio.Event()
                await self._wake.wait()
                continue
            item = self._queue.pop(0)
            if "turn" not in item:
                yield item
                continue
            async for frame in self._turn(item["turn"]):
                yield frame

    async def _turn(self, uuid: str | None) -> AsyncIterator[dict[str, Any]]:
        recording = self._recording
        frames = [
            json.loads(json.dumps(f).replace(recording.prompt_uuid, uuid))
            if uuid and i in recording.mentions
            else f
            for i, f in enumerate(recording.turn)
        ]
        delta = next(
            f
            for f in frames
            if f.get("type") == "stream_event"
            and f["event"].get("delta", {}).get("type") == "text_delta"
        )
        first = frames.index(delta)
        rest = [
            f
            for f in frames[first:]
            if not (
                f.get("type") == "stream_event"
                and f["event"].get("delta", {}).get("type") == "text_delta"
            )
        ]
        for frame in frames[:first]:
            yield frame
        start = trio.current_time()
        for i in range(self._count):
            due = start + i / self._rate
            if trio.current_time() < due:
                await trio.sleep_until(due)
            event = dict(delta["event"])
            event["delta"] = {"type": "text_delta", "text": f"{time.perf_counter():.7f}|"}
            yield {**delta, "event": event}
        for frame in rest:
            yield frame

    async def close(self) -> None:
        self._closed = True
        self._wake.set()
        await trio.lowlevel.checkpoint()

    def is_ready(self) -> bool:
        return not self._closed

    async def end_input(self) -> None:
        await trio.lowlevel.checkpoint()


async def latency_server(count: int, rate: float) -> None:
    """The server side (a child process): prints its port, serves until killed."""
    recording = await fake_recording(4)

    def factory(options: ClaudeAgentOptions) -> Transport:
        return PacedTransport(recording, count=count, rate=rate)

    limits = GatewayLimits(ping_interval=3600)
    async with (
        open_fleet(
            transport_factory=factory, max_live=1, replay_buffer=count + 100, governor=None
        ) as fleet,
        trio.open_nursery() as nursery,
    ):
        port = await nursery.start(
            partial(
                serve_gateway,
                fleet,
                token=TOKEN,
                allowed_origins=None,
                client_queue=count + 100,
                limits=limits,
            )
        )
        print(port, flush=True)
        await trio.sleep_forever()


async def _latency(count: int, rate: float) -> dict[str, float]:
    command = [sys.executable, _HERE, "latency-server", str(count), str(rate)]
    latencies: list[float] = []
    async with trio.open_nursery() as nursery:
        process = await nursery.start(partial(run_child_process, command, stdout=-1, check=False))
        line = b""
        while not line.endswith(b"\n"):
            line += await process.stdout.receive_some(64)
        port = int(line)
        async with connect_gateway(f"ws://127.0.0.1:{port}/", token=TOKEN) as client:
            session = await client.open(ExecuteParams(prompt="go"))
            first = last = 0.0
            async for event in session.events:
                if isinstance(event, TextDelta) and event.text.endswith("|"):
                    now = time.perf_counter()
                    sent = float(event.text.split("|")[0])
                    latencies.append(now - sent)
                    first = first or sent
                    last = now
        process.kill()
    latencies.sort()
    n = len(latencies)
    out = {
        "p50_ms": latencies[n // 2] * 1000,
        "p99_ms": latencies[min(n - 1, int(n * 0.99))] * 1000,
        "max_ms": latencies[-1] * 1000,
        "delivered_per_s": n / (last - first) if last > first else 0.0,
        "events": float(n),
    }
    print(
        f"  {n:,} deltas offered at {rate:,.0f}/s: delivered at {out['delivered_per_s']:,.0f}/s;"
        f" latency CLI frame -> client p50 {out['p50_ms']:.2f} ms, p99 {out['p99_ms']:.2f} ms,"
        f" max {out['max_ms']:.1f} ms"
    )
    return out


def run_latency(*, seconds: float = 3.0, rate: float = 10_000.0) -> dict[str, float]:
    warnings.simplefilter("ignore")
    return trio.run(_latency, int(seconds * rate), rate)


def main(argv: list[str]) -> int:
    warnings.simplefilter("ignore")
    if argv[:1] == ["fleet-side"]:
        trio.run(fleet_side, argv[1], int(argv[2]), argv[3])
        return 0
    if argv[:1] == ["latency-server"]:
        trio.run(latency_server, int(argv[1]), float(argv[2]))
        return 0
    parser = argparse.ArgumentParser(prog="bench_fanout.py", description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="fleet,sweep,latency")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--sweep-sessions", type=int, default=16)
    args = parser.parse_args(argv)
    only = args.only.split(",")
    if "fleet" in only:
        run_fleet(rounds=args.rounds, sessions=args.sessions)
    if "sweep" in only:
        run_sweep(sessions=args.sweep_sessions)
    if "latency" in only:
        run_latency()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
