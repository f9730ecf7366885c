"""Idempotency keys on a cluster (a real redis-server, workers of fake CLIs, gateways over
``RedisFleet``): the same key through two gateways is one session and one job; the key with
other params is refused; a continue sent again with its key runs one execution; the key
expires after ``idempotency_ttl``; a remote batch over two gateways, one of which dies with an
open's reply in flight, runs every item exactly once."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import coredis
import pytest
import trio
from cluster_kit import STEADY, TOKEN, open_gateway, open_worker

from claude_trio import ExecuteParams, serve_gateway
from claude_trio.actors.cluster.fleet import open_redis_fleet
from claude_trio.actors.fanout import gateway as gateway_module
from claude_trio.actors.fanout.owners import GatewayOwner
from claude_trio.batch import BatchItem, RetryPolicy, run_batch
from claude_trio.client import ClientConfig, connect_gateway
from claude_trio.errors import IdempotencyConflictError, RemoteOpError
from claude_trio.protocol.cluster.keys import RedisKeys
from claude_trio.protocol.session.events import Event, Result
from claude_trio.testing import FakeCLI, FakeTurn, RedisServer

CLIENT = ClientConfig(backoff_base=0.05, backoff_max=0.5, close_timeout=2.0)
QUICK_RETRY = RetryPolicy(retries=30, base=0.01, cap=0.05)
KEYS = RedisKeys()


class Counted:
    """A FakeCLI script that counts the turns the workers ran (one per CLI start)."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    async def __call__(self, turn: FakeTurn) -> None:
        self.prompts.append(turn.prompt)
        await turn.text(f"ran {turn.prompt}")


async def read_all(session: object) -> list[Event]:
    return [event async for event in session.events]  # type: ignore[attr-defined]


async def test_one_key_through_two_gateways_is_one_session_and_one_job(
    redis_server: RedisServer,
) -> None:
    script = Counted()
    url = redis_server.url
    params = ExecuteParams(prompt="go")
    with trio.fail_after(30):
        async with (
            coredis.Redis.from_url(url, decode_responses=True) as redis,
            open_worker(url, FakeCLI(script)),
            open_gateway(url) as (_one, port_one),
            open_gateway(url) as (_two, port_two),
            connect_gateway(f"ws://127.0.0.1:{port_one}/", token=TOKEN, config=CLIENT) as one,
            connect_gateway(f"ws://127.0.0.1:{port_two}/", token=TOKEN, config=CLIENT) as two,
        ):
            first = await one.open(params, label="item", idempotency_key="item-1")
            again = await two.open(params, label="item", idempotency_key="item-1")
            events = await read_all(first)
            replayed = await read_all(again)
            with pytest.raises(RemoteOpError) as refused:
                await two.open(ExecuteParams(prompt="other"), idempotency_key="item-1")
            jobs = await redis.xlen(KEYS.jobs)
            sessions = await redis.zcard(KEYS.sessions_index)
            (claim,) = await redis.keys("ct:idem:*")
            ttl_ms = await redis.pttl(claim)
    assert again.id == first.id
    assert jobs == 1
    assert sessions == 1
    assert script.prompts == ["go"]
    assert isinstance(events[-1], Result)
    assert replayed == events
    assert refused.value.code == "idempotency_conflict"
    assert claim.endswith(":item-1}")
    assert 0 < ttl_ms <= 24 * 3600 * 1000


async def test_a_continue_sent_again_with_its_key_runs_once(redis_server: RedisServer) -> None:
    script = Counted()
    url = redis_server.url
    owner = GatewayOwner("alice", "10.0.0.1")
    with trio.fail_after(30):
        async with (
            coredis.Redis.from_url(url, decode_responses=True) as redis,
            open_worker(url, FakeCLI(script)),
            open_redis_fleet(redis, block=0.2) as fleet,
            open_redis_fleet(redis, block=0.2) as other,
        ):
            session = await fleet.open(ExecuteParams(prompt="one"), owner=owner)
            await session.result()
            continued = await fleet.continue_(session.id, "two", idempotency_key="c-1")
            # sent again, on the other gateway, while it runs: no second execution
            again = await other.continue_(session.id, "two", idempotency_key="c-1")
            await continued.result()
            after_end = await other.continue_(session.id, "two", idempotency_key="c-1")
            with pytest.raises(IdempotencyConflictError, match="different continue request"):
                await other.continue_(session.id, "three", idempotency_key="c-1")
            jobs = await redis.xlen(KEYS.jobs)
            final = await fleet.get(session.id)
    assert again.id == after_end.id == session.id
    assert jobs == 2  # the open and one continue
    assert final.executions == 2
    assert script.prompts == ["one", "two"]


async def test_a_key_expires_after_the_fleets_ttl(redis_server: RedisServer) -> None:
    url = redis_server.url
    with trio.fail_after(30):
        async with (
            coredis.Redis.from_url(url, decode_responses=True) as redis,
            open_redis_fleet(redis, block=0.2, idempotency_ttl=0.2) as fleet,
        ):
            first = await fleet.open(ExecuteParams(prompt="go"), idempotency_key="k")
            assert (await fleet.open(ExecuteParams(prompt="go"), idempotency_key="k")).id == (
                first.id
            )
            await trio.sleep(0.3)  # Redis expires the key 0.2 s after it was written
            assert not await redis.exists([KEYS.idempotency("", "k")])
            later = await fleet.open(ExecuteParams(prompt="go"), idempotency_key="k")
            jobs = await redis.xlen(KEYS.jobs)
    assert later.id != first.id
    assert jobs == 2


@asynccontextmanager
async def failover_proxy(ports: list[int]) -> AsyncIterator[str]:
    """A TCP proxy on 127.0.0.1 in front of several gateways (a load balancer): each new
    connection goes to the first port that accepts it; a connection ends with either side."""

    async def pipe(source: trio.SocketStream, sink: trio.SocketStream) -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            while data := await source.receive_some(65536):
                await sink.send_all(data)

    async def handle(client: trio.SocketStream) -> None:
        for port in ports:
            try:
                upstream = await trio.open_tcp_stream("127.0.0.1", port)
            except OSError:
                continue
            async with client, upstream, trio.open_nursery() as nursery:

                async def both(a: trio.SocketStream, b: trio.SocketStream) -> None:
                    await pipe(a, b)
                    nursery.cancel_scope.cancel()

                nursery.start_soon(both, client, upstream)
                nursery.start_soon(both, upstream, client)
            return
        await client.aclose()

    async with trio.open_nursery() as nursery:
        (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listener.socket.getsockname()[1]
        await nursery.start(trio.serve_listeners, handle, [listener])
        yield f"ws://127.0.0.1:{port}/"
        nursery.cancel_scope.cancel()


async def test_a_remote_batch_over_two_gateways_runs_every_item_once_when_one_dies(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Slow(Counted):
        async def __call__(self, turn: FakeTurn) -> None:
            self.prompts.append(turn.prompt)
            await turn.sleep(0.05)
            await turn.text(f"ran {turn.prompt}")

    script = Slow()
    fake = FakeCLI(script)
    url = redis_server.url
    batch = [BatchItem(key=f"k{i}", params=ExecuteParams(prompt=f"job {i}")) for i in range(12)]
    dying = trio.CancelScope()
    opened_on: dict[str, list[str | None]] = {"a": [], "b": []}
    real = gateway_module._Client._open

    async def open_then_maybe_die(self: Any, op: Any) -> None:
        await real(self, op)
        side = "a" if self._fleet is fleet_a else "b"
        opened_on[side].append(op.idempotency_key)
        if side == "a" and len(opened_on["a"]) == 5:
            # gateway A dies right after its fifth open was recorded: its reply never leaves
            dying.cancel()

    monkeypatch.setattr(gateway_module._Client, "_open", open_then_maybe_die)
    gateway = {"token": TOKEN, "allowed_origins": None}
    with trio.fail_after(60):
        async with (
            coredis.Redis.from_url(url, decode_responses=True) as redis,
            # No worker dies here: a late heartbeat must not move a session (its prompt
            # would reach the model twice).
            open_worker(url, fake, max_live=3, config=STEADY),
            open_worker(url, fake, max_live=3, config=STEADY),
            open_redis_fleet(redis, block=0.2) as fleet_a,
            open_redis_fleet(redis, block=0.2) as fleet_b,
            trio.open_nursery() as nursery,
        ):

            ports_a: list[int] = []
            listening = trio.Event()

            async def serve_a() -> None:
                with dying:  # gateway A, until it dies
                    async with trio.open_nursery() as inner:
                        serving = partial(serve_gateway, fleet_a, **gateway)
                        ports_a.append(await inner.start(serving))
                        listening.set()

            nursery.start_soon(serve_a)
            await listening.wait()
            (port_a,) = ports_a
            port_b = await nursery.start(partial(serve_gateway, fleet_b, **gateway))
            async with (
                failover_proxy([port_a, port_b]) as proxy_url,
                connect_gateway(proxy_url, token=TOKEN, config=CLIENT) as gw,
            ):
                report = await run_batch(batch, gw, max_live=4, retry=QUICK_RETRY)
            jobs = await redis.xlen(KEYS.jobs)
            nursery.cancel_scope.cancel()
    assert dying.cancel_called
    assert sorted(r.key for r in report.results) == sorted(item.key for item in batch)
    assert all(r.ok for r in report.results), [r.error for r in report.results if not r.ok]
    # every item ran exactly once, counted where the sessions ran
    assert sorted(script.prompts) == sorted(f"job {i}" for i in range(12))
    assert jobs == 12
    # the open whose reply died with gateway A was sent again to B, which found its session
    assert opened_on["a"][-1] in opened_on["b"]
    assert len(opened_on["a"]) + len(opened_on["b"]) == 13


async def test_a_continue_right_after_the_final_event_waits_for_the_workers_end_write(
    redis_server: RedisServer,
) -> None:
    """A client may read an execution's final event before its worker's next write marks the
    record ended; a continue_() sent at once waits for that write instead of refusing a
    session that has finished. (The record is set back to live here, and ended again a
    little later, as a worker between its two writes leaves it.)"""
    script = Counted()
    url = redis_server.url
    with trio.fail_after(30):
        async with (
            coredis.Redis.from_url(url, decode_responses=True) as redis,
            open_worker(url, FakeCLI(script)),
            open_redis_fleet(redis, block=0.2) as fleet,
            trio.open_nursery() as nursery,
        ):
            session = await fleet.open(ExecuteParams(prompt="one"))
            await session.result()
            await redis.hset(KEYS.session(session.id), {"state": "live"})
            await fleet.refresh(session.id)

            async def end_write() -> None:
                await trio.sleep(0.3)
                await redis.hset(KEYS.session(session.id), {"state": "ended"})

            nursery.start_soon(end_write)
            continued = await fleet.continue_(session.id, "two")
            await continued.result()
    assert script.prompts == ["one", "two"]
