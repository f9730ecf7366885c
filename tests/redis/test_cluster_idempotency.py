"""Idempotency keys on a cluster (a real redis-server, workers of fake CLIs, gateways over
``RedisFleet``): the same key through two gateways is one session and one job; the key with
other params is refused; a continue sent again with its key runs one execution; the key
expires after ``idempotency_ttl``."""

from __future__ import annotations

import coredis
import pytest
import trio
from cluster_kit import TOKEN, open_gateway, open_worker

from claude_trio import ExecuteParams
from claude_trio.actors.cluster.fleet import open_redis_fleet
from claude_trio.actors.fanout.owners import GatewayOwner
from claude_trio.client import ClientConfig, connect_gateway
from claude_trio.errors import IdempotencyConflictError, RemoteOpError
from claude_trio.protocol.cluster.keys import RedisKeys
from claude_trio.protocol.session.events import Event, Result
from claude_trio.testing import FakeCLI, FakeTurn, RedisServer

CLIENT = ClientConfig(backoff_base=0.05, backoff_max=0.5, close_timeout=2.0)
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
