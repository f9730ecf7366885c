"""Benchmarks of the Redis mode (``claude-trio worker`` / ``serve --redis``), on a real
``redis-server`` started here, with fake CLIs (so what is measured is the coordination).

* **latency**: one session whose fake CLI emits ``--events`` text deltas back to back, followed
  by ``--clients`` (50) subscribers: in-process (``Fleet`` subscriptions) and through Redis (a
  worker stores each event, ``RedisFleet`` subscriptions read the stream, as a gateway does).
  Measured: events/s delivered over all subscribers, and p50/p99 latency from the CLI's frame to
  the subscriber (what Redis adds is the difference).
* **workers**: ``--executions`` (60) short executions (a 50 ms turn) with 1, 2 and 3 workers of
  ``max_live=4`` each: executions per minute.
* **memory**: Redis ``used_memory`` per finished session (record, events, job), after the runs.

    .venv/bin/python scripts/bench_redis.py [--events 2000] [--clients 50] [--executions 60]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import coredis
import trio

from claude_trio import ExecuteParams
from claude_trio.actors.fleet import Fleet, Subscription, open_fleet
from claude_trio.actors.redis_fleet import RedisFleet, open_redis_fleet
from claude_trio.actors.redis_worker import WorkerConfig, serve_worker
from claude_trio.protocol.events import TextDelta
from claude_trio.testing import FakeCLI, FakeTurn, open_redis_server

CONFIG = WorkerConfig(heartbeat=0.5, dead_after=5.0, block=0.5, stream_max=100_000)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def emitter(count: int, emitted: dict[str, float]) -> Any:
    async def turn(turn: FakeTurn) -> None:
        for i in range(count):
            emitted[f"{i} "] = time.perf_counter()
            await turn.text(f"{i} ")

    return turn


async def collect(sub: Subscription | Any, got: list[tuple[str, float]]) -> None:
    async for event in sub:
        if isinstance(event, TextDelta):
            got.append((event.text, time.perf_counter()))


def summarize(
    name: str, emitted: dict[str, float], received: list[list[tuple[str, float]]]
) -> None:
    latencies = [
        (at - emitted[text]) * 1000 for got in received for text, at in got if text in emitted
    ]
    start = min(emitted.values())
    end = max(at for got in received for _, at in got)
    print(
        f"  {name:<12} {len(latencies) / (end - start):>10,.0f} events/s   "
        f"p50 {percentile(latencies, 0.5):7.2f} ms   p99 {percentile(latencies, 0.99):7.2f} ms"
    )


async def latency_in_process(events: int, clients: int) -> None:
    emitted: dict[str, float] = {}
    received: list[list[tuple[str, float]]] = [[] for _ in range(clients)]
    fake = FakeCLI(emitter(events, emitted))
    async with open_fleet(max_live=2, transport_factory=fake, replay_buffer=events * 2) as fleet:
        session = await fleet.start(ExecuteParams(prompt="go"))
        async with trio.open_nursery() as nursery:
            for got in received:
                sub = session.subscribe(None, max_queue=events * 2, max_bytes=2**30)
                assert isinstance(sub, Subscription)
                nursery.start_soon(collect, sub, got)
    summarize("in-process", emitted, received)


@asynccontextmanager
async def worker(url: str, fake: FakeCLI, max_live: int) -> AsyncIterator[Fleet]:
    async with (
        coredis.Redis.from_url(url, decode_responses=True) as redis,
        open_fleet(max_live=max_live, transport_factory=fake, replay_buffer=100_000) as fleet,
        trio.open_nursery() as nursery,
    ):
        await nursery.start(partial(serve_worker, redis, fleet, config=CONFIG))
        yield fleet
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def gateway_fleet(url: str) -> AsyncIterator[RedisFleet]:
    async with (
        coredis.Redis.from_url(url, decode_responses=True, max_connections=500) as redis,
        open_redis_fleet(redis, block=0.5) as fleet,
    ):
        yield fleet


async def latency_redis(url: str, events: int, clients: int) -> None:
    emitted: dict[str, float] = {}
    received: list[list[tuple[str, float]]] = [[] for _ in range(clients)]
    async with worker(url, FakeCLI(emitter(events, emitted)), 2), gateway_fleet(url) as fleet:
        session = await fleet.start(ExecuteParams(prompt="go"))
        await fleet.refresh(session.id)
        async with trio.open_nursery() as nursery:
            for got in received:
                sub = fleet.get(session.id).subscribe(None, max_queue=events * 2, max_bytes=2**30)
                assert isinstance(sub, Subscription)
                nursery.start_soon(collect, sub, got)
    summarize("via Redis", emitted, received)


async def run_executions(url: str, workers: int, executions: int) -> float:
    async def short(turn: FakeTurn) -> None:
        await turn.sleep(0.05)
        await turn.text("done")

    async with AsyncExitStack() as stack:
        for _ in range(workers):
            await stack.enter_async_context(worker(url, FakeCLI(short), 4))
        fleet = await stack.enter_async_context(gateway_fleet(url))
        started = time.perf_counter()
        sessions = [await fleet.start(ExecuteParams(prompt=f"p{i}")) for i in range(executions)]
        async with trio.open_nursery() as nursery:
            for session in sessions:
                sub = session.subscribe(None, max_queue=1000)
                assert isinstance(sub, Subscription)
                nursery.start_soon(collect, sub, [])
        return executions / (time.perf_counter() - started) * 60


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-redis-") as tmp:
        async with open_redis_server(Path(tmp)) as server:
            url = server.url
            print(f"latency: 1 session, {args.events} deltas, {args.clients} subscribers")
            await latency_in_process(args.events, args.clients)
            await latency_redis(url, args.events, args.clients)
            async with coredis.Redis.from_url(url, decode_responses=True) as redis:
                await redis.flushall()
                before = int((await redis.info("memory"))["used_memory"])
            print(f"workers: {args.executions} executions of a 50 ms turn, max_live=4 each")
            total = 0
            for count in (1, 2, 3):
                rate = await run_executions(url, count, args.executions)
                total += args.executions
                print(f"  {count} worker(s)   {rate:8.0f} executions/min")
            async with coredis.Redis.from_url(url, decode_responses=True) as redis:
                after = int((await redis.info("memory"))["used_memory"])
            print(f"memory: {(after - before) / total:,.0f} bytes of Redis per finished session")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--executions", type=int, default=60)
    trio.run(main, parser.parse_args())
    sys.exit(0)
