"""The governor shared across a cluster, as a user runs it: one ``redis-server``, two
``claude-trio worker`` processes (the real CLI, each worker ``--max-live 2``) and one
``claude-trio serve --redis``, against the rate-limited Messages API double that answers 429
above two requests at once. The workers share one pause, one concurrency limit and one count
of running executions in Redis: every item completes, and few requests meet a 429."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import attrs
import pytest
import trio

from claude_trio import ExecuteParams
from claude_trio.actors.children import open_child_process
from claude_trio.client import ClientConfig, connect_gateway
from claude_trio.errors import RemoteOpError
from claude_trio.protocol.cluster.keys import RedisKeys
from claude_trio.protocol.fanout.governor import GovernorFigures
from claude_trio.protocol.session.events import Result
from claude_trio.redis_url import open_redis
from claude_trio.testing import open_redis_server
from claude_trio.testing.model_double import ModelDouble, RateLimits, Reply, Rule, Script

pytestmark = pytest.mark.e2e

COMMAND = (sys.executable, "-m", "claude_trio.cli")
TOKEN = "governor-e2e-token-0123456789"
CLIENT = ClientConfig(backoff_base=0.05, backoff_max=0.5, close_timeout=2.0)
ITEMS = 10


@asynccontextmanager
async def node(
    tmp_path: Path, name: str, env: dict[str, str], *argv: str, ready: bytes
) -> AsyncIterator[str]:
    """A ``claude-trio`` process, up once its stdout says ``ready`` (what it printed)."""
    stderr_path = tmp_path / f"{name}.stderr"
    with stderr_path.open("wb") as stderr:
        process = await open_child_process(  # dies with the test run
            [*COMMAND, *argv, "--log-json"],
            env=env,
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
        yield seen.decode()
        process.send_signal(signal.SIGINT)
        with trio.fail_after(60):
            code = await process.wait()
        assert code == 0, stderr_path.read_text()
    finally:
        if process.returncode is None:
            process.kill()
            with trio.move_on_after(10, shield=True):
                await process.wait()


async def test_two_workers_share_one_limit_against_two_requests_at_once(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    # Turns of about a second (a few SSE events 0.15 s apart): concurrency matters.
    model_double.responder = Script(
        [Rule(reply=attrs.evolve(Reply.text("done"), event_delay=0.15), times=None)]
    )
    model_double.rate_limits = RateLimits(max_concurrent=2, retry_after=0.5)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")},
        **hermetic,
        "CLAUDE_CODE_MAX_RETRIES": "10",
        "CLAUDE_TRIO_TOKEN": TOKEN,
    }
    work = tmp_path / "work"
    work.mkdir()
    async with open_redis_server(tmp_path / "redis") as server, AsyncExitStack() as stack:
        url = server.url
        for i in range(2):
            await stack.enter_async_context(
                node(
                    tmp_path, f"w{i}", env,
                    "worker", "--redis", url, "--max-live", "2", "--worker-id", f"w{i}",
                    "--starts-per-second", "20", "--drain-grace", "30",
                    ready=b"running up to",
                )
            )  # fmt: skip
        gateway = await stack.enter_async_context(
            node(
                tmp_path, "g", env,
                "serve", "--redis", url, "--port", "0", "--cwd-root", str(work),
                ready=b"listening on ws://",
            )
        )  # fmt: skip
        address = next(li for li in gateway.splitlines() if "listening on" in li).split("on ")[1]
        client = await stack.enter_async_context(
            connect_gateway(address, token=TOKEN, config=CLIENT)
        )
        # A client following the shared figures as the workers change them (pushed by the
        # gateway, which reads them from Redis).
        pushed: list[GovernorFigures | None] = []
        async with client.follow_governor() as feed, trio.open_nursery() as watcher:

            async def collect() -> None:
                async for got in feed:
                    pushed.append(got)

            watcher.start_soon(collect)
            with trio.fail_after(240):
                sessions = []
                for i in range(ITEMS):
                    while True:  # a client may have only so many sessions waiting
                        try:
                            params = ExecuteParams(prompt=f"item {i}", model="claude-sonnet-4-5")
                            sessions.append(await client.open(params))
                            break
                        except RemoteOpError as exc:
                            if "limit_reached" not in str(exc):
                                raise
                            await trio.sleep(0.1)
                results = [await session.result() for session in sessions]
                figures = await client.governor()  # the gateway reads the shared figures
                while not pushed or pushed[-1] != figures:  # the last change, pushed too
                    await trio.sleep(0.1)
                    figures = await client.governor()
            watcher.cancel_scope.cancel()
        async with open_redis(url) as redis:
            shared = await redis.hgetall(RedisKeys().governor("state"))
            leases = await redis.zcard(RedisKeys().governor("leases"))
    stats = model_double.rate_limit_statistics()
    finals = [t.terminal for t in results]
    print(
        f"{ITEMS} items over 2 workers: {stats.admitted} requests answered, "
        f"{stats.rejected_429} 429s, max {stats.max_in_flight} at once, shared state {shared}"
    )
    assert all(isinstance(r, Result) and not r.is_error for r in finals), finals
    # Both workers took leases from one count (every start went through Redis)...
    assert int(shared["starts"]) >= ITEMS
    assert leases == 0  # ...and gave them all back
    assert figures is not None
    assert figures.starts == int(shared["starts"])
    assert figures.max_live == 4  # the two workers' max_live
    assert figures.rejections == int(shared.get("rejections", "0"))
    # The follower saw the workers busy, then the figures as they were left.
    assert any(f is not None and f.cluster_running for f in pushed)
    assert pushed[-1] == figures
    # Few 429s: at most one request in five meets one (the in-process governor's run of
    # 40 items against 3 at once stays under this bound too).
    assert stats.rejected_429 <= max(2, stats.admitted // 5)
