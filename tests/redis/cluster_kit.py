"""An in-process cluster for the Redis mode's tests: a real redis-server, workers (each with
its own fleet of fake CLIs), and gateways over ``RedisFleet``, all in the test's nursery."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import attrs
import coredis
import trio

from claude_trio import serve_gateway
from claude_trio.actors.fleet import open_fleet
from claude_trio.actors.redis_fleet import RedisFleet, open_redis_fleet
from claude_trio.actors.redis_worker import Worker, WorkerConfig, serve_worker
from claude_trio.testing import FakeCLI

TOKEN = "cluster-test-token-0123456789"
FAST = WorkerConfig(heartbeat=0.2, dead_after=1.0, block=0.2)


@attrs.define(eq=False)
class RunningWorker:
    worker: Worker
    scope: trio.CancelScope


@asynccontextmanager
async def open_worker(
    url: str, fake: FakeCLI, *, max_live: int = 2, config: WorkerConfig = FAST, **fleet: Any
) -> AsyncIterator[RunningWorker]:
    """One worker with its own Redis client and fleet; cancel ``.scope`` to kill it."""
    async with (
        coredis.Redis.from_url(url, decode_responses=True) as redis,
        open_fleet(max_live=max_live, transport_factory=fake, **fleet) as fleet_,
        trio.open_nursery() as nursery,
    ):
        scope = trio.CancelScope()

        started: list[Worker] = []
        ready = trio.Event()

        async def run() -> None:
            with scope:
                async with trio.open_nursery() as inner:
                    started.append(
                        await inner.start(partial(serve_worker, redis, fleet_, config=config))
                    )
                    ready.set()

        nursery.start_soon(run)
        await ready.wait()
        worker = started[0]
        yield RunningWorker(worker=worker, scope=scope)
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def open_gateway(
    url: str, *, command_timeout: float = 5.0, **options: Any
) -> AsyncIterator[tuple[RedisFleet, int]]:
    """A gateway over the cluster; yields ``(fleet, port)``."""
    options.setdefault("allowed_origins", None)
    if "tokens" not in options:
        options.setdefault("token", TOKEN)
    async with (
        coredis.Redis.from_url(url, decode_responses=True) as redis,
        open_redis_fleet(redis, command_timeout=command_timeout, block=0.2) as fleet,
        trio.open_nursery() as nursery,
    ):
        port = await nursery.start(partial(serve_gateway, fleet, **options))
        yield fleet, port
        nursery.cancel_scope.cancel()
