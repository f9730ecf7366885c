"""``list`` on a cluster reads past 1,000 sessions (in pages), on a real three-master Redis
Cluster: the records are written directly, as a cluster's gateways would have. The wire
``list`` op pages too: ``GatewayClient.list()`` follows its cursor."""

from __future__ import annotations

import json
from typing import Any

import trio
from cluster_kit import TOKEN, open_gateway
from trio_websocket import open_websocket_url

from claude_trio.actors.cluster.fleet import open_redis_fleet
from claude_trio.actors.cluster.reads import LISTING_PAGE
from claude_trio.client import connect_gateway
from claude_trio.protocol.cluster.keys import RedisKeys
from claude_trio.protocol.cluster.records import SessionRecord
from claude_trio.protocol.fanout.listing import LIST_PAGE_MAX
from claude_trio.protocol.session.usage import Usage
from claude_trio.redis_url import open_redis
from claude_trio.testing import RedisClusterNodes

KEYS = RedisKeys()
COUNT = 2 * LISTING_PAGE + 500


def make_records() -> list[SessionRecord]:
    return [
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


async def write(redis: Any, records: list[SessionRecord]) -> None:
    for start in range(0, COUNT, 500):
        async with redis.pipeline(transaction=False) as pipe:
            for record in records[start : start + 500]:
                pipe.hset(KEYS.session(record.session), record.to_fields())
                pipe.zadd(KEYS.sessions_index, {record.session: record.created_at})


async def test_list_reads_every_session_past_one_page(redis_cluster: RedisClusterNodes) -> None:
    records = make_records()
    with trio.fail_after(120):
        async with open_redis(redis_cluster.url) as redis:
            await write(redis, records)
            async with open_redis_fleet(redis, block=0.2) as fleet:
                listed = await fleet.list()
    assert [info.session for info in listed] == [r.session for r in records]  # oldest first
    assert [info.label for info in listed] == [r.label for r in records]
    assert [info.usage for info in listed] == [r.usage for r in records]


async def test_the_wire_list_op_pages_and_the_client_follows_the_pages(
    redis_cluster: RedisClusterNodes,
) -> None:
    records = make_records()
    url = redis_cluster.url
    with trio.fail_after(120):
        async with open_redis(url) as redis, open_gateway(url) as (_, port):
            await write(redis, records)
            ws_url = f"ws://127.0.0.1:{port}/"
            async with connect_gateway(ws_url, token=TOKEN) as client:
                listed = await client.list()
            # The op itself: pages of at most the limit, each with the cursor of the next.
            pages: list[dict[str, Any]] = []
            headers = [(b"authorization", f"Bearer {TOKEN}".encode())]
            async with open_websocket_url(
                ws_url, extra_headers=headers, max_message_size=2**26
            ) as ws:
                await ws.send_message(json.dumps({"op": "hello", "id": "h"}))
                json.loads(await ws.get_message())  # hello
                await ws.send_message(json.dumps({"op": "list", "id": "all"}))
                whole = json.loads(await ws.get_message())
                cursor = None
                while cursor is not None or not pages:
                    op = {"op": "list", "id": f"p{len(pages)}", "limit": LIST_PAGE_MAX}
                    if cursor is not None:
                        op["cursor"] = cursor
                    await ws.send_message(json.dumps(op))
                    pages.append(json.loads(await ws.get_message()))
                    cursor = pages[-1]["next_cursor"]
                await ws.send_message(json.dumps({"op": "list", "id": "x", "limit": 0}))
                refused = json.loads(await ws.get_message())
    assert [info.session for info in listed] == [r.session for r in records]
    # Without a limit the whole listing in one frame (what clients before paging ask for).
    assert [s["session"] for s in whole["sessions"]] == [r.session for r in records]
    assert whole["next_cursor"] is None
    assert [len(p["sessions"]) for p in pages] == [LIST_PAGE_MAX, LIST_PAGE_MAX, 500]
    assert [s["session"] for p in pages for s in p["sessions"]] == [r.session for r in records]
    assert (refused["type"], refused["code"]) == ("error", "invalid_field")
    assert "limit=0: expected a whole number, 1 to 1000" in refused["message"]
