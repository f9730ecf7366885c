"""The Redis mode on a real three-master Redis Cluster (``redis_cluster``, through
``coredis.RedisCluster``): the SDK's session-store conformance suite on ``RedisSessionStore``
and the session-host conformance suite on ``RedisFleet``, their keys spread over the masters."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import coredis
import trio
from claude_agent_sdk.testing.session_store_conformance import run_session_store_conformance
from cluster_kit import open_worker

from claude_trio.actors.cluster.fleet import RedisFleet, open_redis_fleet
from claude_trio.actors.cluster.store import RedisSessionStore
from claude_trio.redis_url import open_redis
from claude_trio.testing import RedisClusterNodes, conformance_cli, run_host_conformance


async def _keys_per_master(cluster: RedisClusterNodes) -> list[int]:
    counts = []
    for node in cluster.nodes:
        async with coredis.Redis.from_url(node.url, decode_responses=True) as one:
            counts.append(await one.dbsize())
    return counts


async def test_the_url_opens_a_cluster_client(redis_cluster: RedisClusterNodes) -> None:
    async with open_redis(redis_cluster.url) as redis:
        assert isinstance(redis, coredis.RedisCluster)
        for i in range(30):
            await redis.set(f"k{i}", str(i))
    # The keys went to every master (each serves a third of the slots).
    assert all(count > 0 for count in await _keys_per_master(redis_cluster))


async def test_session_store_conformance_on_a_cluster(redis_cluster: RedisClusterNodes) -> None:
    made = 0
    with trio.fail_after(120):
        async with open_redis(redis_cluster.url) as redis:

            async def fresh() -> RedisSessionStore:
                nonlocal made
                made += 1
                return RedisSessionStore(redis, prefix=f"conf{made}")

            await run_session_store_conformance(fresh)
    assert made > 0
    assert all(count > 0 for count in await _keys_per_master(redis_cluster))


async def test_a_redis_fleet_keeps_every_host_contract_on_a_cluster(
    redis_cluster: RedisClusterNodes,
) -> None:
    url = redis_cluster.url
    with trio.fail_after(300):
        async with open_worker(url, conformance_cli(), max_live=4):

            @asynccontextmanager
            async def cluster() -> AsyncIterator[RedisFleet]:
                redis: Any
                async with (
                    open_redis(url) as redis,
                    open_redis_fleet(redis, command_timeout=5.0, block=0.2) as fleet,
                ):
                    yield fleet

            await run_host_conformance(cluster)
    assert all(count > 0 for count in await _keys_per_master(redis_cluster))
