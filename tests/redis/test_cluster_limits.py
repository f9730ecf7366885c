"""What a cluster counts in Redis rather than per gateway: a client's sessions (the per-client
limits hold across every gateway of the cluster), on a real three-master Redis Cluster."""

from __future__ import annotations

import pytest
import trio
from cluster_kit import TOKEN, open_gateway, open_worker

from claude_trio import ExecuteParams
from claude_trio.actors.cluster.fleet import open_redis_fleet
from claude_trio.actors.fanout.owners import GatewayOwner
from claude_trio.client import ClientConfig, connect_gateway
from claude_trio.errors import RemoteOpError
from claude_trio.protocol.cluster.keys import RedisKeys
from claude_trio.protocol.fanout.remote import GatewayLimits
from claude_trio.redis_url import open_redis
from claude_trio.testing import FakeCLI, FakeTurn, RedisClusterNodes

CLIENT = ClientConfig(backoff_base=0.05, backoff_max=0.5, close_timeout=2.0)
KEYS = RedisKeys()


class Held:
    """A FakeCLI script whose turns wait until released."""

    def __init__(self) -> None:
        self.release = trio.Event()

    async def __call__(self, turn: FakeTurn) -> None:
        await self.release.wait()
        await turn.text("done")


async def test_a_clients_sessions_are_counted_on_every_gateway(
    redis_cluster: RedisClusterNodes,
) -> None:
    script = Held()
    url = redis_cluster.url
    alice = GatewayOwner("alice", "10.0.0.1")
    bob = GatewayOwner("bob", "10.0.0.2")
    with trio.fail_after(60):
        async with (
            open_redis(url) as redis,
            open_worker(url, FakeCLI(script), max_live=1),
            open_redis_fleet(redis, block=0.2) as one,
            open_redis_fleet(redis, block=0.2) as two,
        ):
            first = await one.open(ExecuteParams(prompt="a"), owner=alice)
            second = await one.open(ExecuteParams(prompt="b"), owner=alice)
            await one.open(ExecuteParams(prompt="c"), owner=bob)
            seen_by_two = (await two.load(alice)).owner
            script.release.set()
            await first.result()
            await second.result()
            after = (await two.load(alice)).owner
            left = await redis.smembers(KEYS.owned("alice", "10.0.0.1"))
    # The other gateway never saw alice's sessions, yet counts both (one live, one waiting
    # for the worker's only slot).
    assert seen_by_two.active == 2
    assert seen_by_two.live + seen_by_two.waiting == 2
    assert after.active == 0
    assert left == set()  # the ended ones left the set as they were counted


async def test_the_per_client_limit_holds_across_gateways(
    redis_cluster: RedisClusterNodes,
) -> None:
    script = Held()
    url = redis_cluster.url
    limits = GatewayLimits(max_sessions_per_client=2)
    with trio.fail_after(60):
        async with (
            open_worker(url, FakeCLI(script), max_live=4),
            open_gateway(url, limits=limits) as (_, port_one),
            open_gateway(url, limits=limits) as (_, port_two),
            connect_gateway(f"ws://127.0.0.1:{port_one}/", token=TOKEN, config=CLIENT) as one,
            connect_gateway(f"ws://127.0.0.1:{port_two}/", token=TOKEN, config=CLIENT) as two,
        ):
            await one.open(ExecuteParams(prompt="a"))
            await one.open(ExecuteParams(prompt="b"))
            with pytest.raises(RemoteOpError) as refused:
                await two.open(ExecuteParams(prompt="c"))
            script.release.set()
    assert refused.value.code == "limit_reached"
    assert "already has 2 sessions not ended" in str(refused.value)
