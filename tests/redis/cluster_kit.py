"""An in-process cluster for the Redis mode's tests: a real redis-server, workers (each with
its own fleet of fake CLIs), and gateways over ``RedisFleet``, all in the test's nursery."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import attrs
import trio

from claude_trio import serve_gateway
from claude_trio.actors.cluster.fleet import RedisFleet, open_redis_fleet
from claude_trio.actors.cluster.worker import Worker, WorkerConfig, serve_worker
from claude_trio.actors.fanout.fleet import open_fleet
from claude_trio.redis_url import open_redis
from claude_trio.testing import FakeCLI

TOKEN = "cluster-test-token-0123456789"
FAST = WorkerConfig(heartbeat=0.2, dead_after=1.0, block=0.2)
#: For tests where no worker dies: a loaded machine can hold a heartbeat back for over a second,
#: and FAST's peers would then take a live worker's session over.
STEADY = WorkerConfig(heartbeat=0.2, dead_after=15.0, block=0.2)


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
        open_redis(url) as redis,
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
        open_redis(url) as redis,
        open_redis_fleet(redis, command_timeout=command_timeout, block=0.2) as fleet,
        trio.open_nursery() as nursery,
    ):
        port = await nursery.start(partial(serve_gateway, fleet, **options))
        yield fleet, port
        nursery.cancel_scope.cancel()


@attrs.define(eq=False)
class PauseProxy:
    """A TCP proxy on 127.0.0.1 in front of Redis: while paused it forwards nothing either
    way and closes nothing (what Redis sees of a worker whose process is stopped)."""

    target_port: int
    port: int = 0
    _go: trio.Event = attrs.field(factory=trio.Event)

    def __attrs_post_init__(self) -> None:
        self._go.set()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def pause(self) -> None:
        self._go = trio.Event()

    def resume(self) -> None:
        self._go.set()

    async def _pipe(self, source: trio.SocketStream, sink: trio.SocketStream) -> None:
        while data := await source.receive_some(65536):
            await self._go.wait()
            await sink.send_all(data)

    async def _handle(self, client: trio.SocketStream) -> None:
        # A connection reset by either side ends that connection only.
        with contextlib.suppress(trio.BrokenResourceError, OSError):
            upstream = await trio.open_tcp_stream("127.0.0.1", self.target_port)
            async with client, upstream, trio.open_nursery() as nursery:
                nursery.start_soon(self._pipe, client, upstream)
                await self._pipe(upstream, client)
                nursery.cancel_scope.cancel()


@asynccontextmanager
async def pause_proxy(target_port: int) -> AsyncIterator[PauseProxy]:
    proxy = PauseProxy(target_port)
    async with trio.open_nursery() as nursery:
        (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
        proxy.port = listener.socket.getsockname()[1]
        await nursery.start(trio.serve_listeners, proxy._handle, [listener])
        yield proxy
        nursery.cancel_scope.cancel()
