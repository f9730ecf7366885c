"""``list`` on a cluster reads past 1,000 sessions (in pages), on a real three-master Redis
Cluster: the records are written directly, as a cluster's gateways would have."""

from __future__ import annotations

import trio

from claude_trio.actors.cluster.fleet import LISTING_PAGE, open_redis_fleet
from claude_trio.protocol.cluster.keys import RedisKeys
from claude_trio.protocol.cluster.records import SessionRecord
from claude_trio.protocol.session.usage import Usage
from claude_trio.redis_url import open_redis
from claude_trio.testing import RedisClusterNodes

KEYS = RedisKeys()
COUNT = 2 * LISTING_PAGE + 500


async def test_list_reads_every_session_past_one_page(redis_cluster: RedisClusterNodes) -> None:
    records = [
        SessionRecord(
            session=f"s{i:05d}",
            principal=None,
            host="",
            label=f"item {i}",
            state="ended",
            last_seq=3,
            created_at=1_000_000.0 + i,
            usage=Usage(input_tokens=i, output_tokens=1),
        )
        for i in range(COUNT)
    ]
    with trio.fail_after(120):
        async with open_redis(redis_cluster.url) as redis:
            for start in range(0, COUNT, 500):
                async with redis.pipeline(transaction=False) as pipe:
                    for record in records[start : start + 500]:
                        pipe.hset(KEYS.session(record.session), record.to_fields())
                        pipe.zadd(KEYS.sessions_index, {record.session: record.created_at})
            async with open_redis_fleet(redis, block=0.2) as fleet:
                listed = await fleet.list()
    assert [info.session for info in listed] == [r.session for r in records]  # oldest first
    assert [info.label for info in listed] == [r.label for r in records]
    assert [info.usage for info in listed] == [r.usage for r in records]
