"""An in-process cluster for the Redis mode's tests: a real redis-server, workers (each with
its own fleet of fake CLIs), and gateways over ``RedisFleet``, all in the test's nursery; and
``node``, one ``claude-trio worker``/``serve`` process as a user runs it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
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


COMMAND = (sys.executable, "-m", "claude_trio.cli")


def command_env() -> dict[str, str]:
    """The environment of a cluster process: no API key, the gateway token set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["CLAUDE_TRIO_TOKEN"] = TOKEN
    return env


@attrs.define
class Node:
    process: trio.Process
    stdout: str
    stderr_path: Path


@asynccontextmanager
async def node(tmp_path: Path, name: str, *argv: str, ready: bytes) -> AsyncIterator[Node]:
    """A ``claude-trio`` process (``--log-json``, stderr to ``tmp_path/name.stderr``), yielded
    once its stdout shows ``ready``; stopped with SIGINT after the block (it must exit 0)."""
    stderr_path = tmp_path / f"{name}.stderr"
    with stderr_path.open("wb") as stderr:
        process = await trio.lowlevel.open_process(
            [*COMMAND, *argv, "--log-json"],
            env=command_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
    try:
        assert process.stdout is not None
        seen = b""
        with trio.fail_after(60):
            while ready not in seen:
                chunk = await process.stdout.receive_some()
                assert chunk, f"{name} exited early: {stderr_path.read_text()}"
                seen += chunk
        yield Node(process=process, stdout=seen.decode(), stderr_path=stderr_path)
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
            with trio.fail_after(60):
                code = await process.wait()
            assert code == 0, stderr_path.read_text()
    finally:
        if process.returncode is None:
            process.kill()
            with trio.move_on_after(10, shield=True):
                await process.wait()
