"""``RedisSessionStore`` against a real ``redis-server``: the SDK's own conformance suite, and
what the suite does not check (idempotent replays, keys that would collide or change slot)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import coredis
import pytest
from claude_agent_sdk.testing.session_store_conformance import run_session_store_conformance

from claude_trio.actors.cluster.store import RedisSessionStore
from claude_trio.testing import RedisServer


@pytest.fixture
async def redis(redis_server: RedisServer) -> AsyncIterator[coredis.Redis[str]]:
    async with coredis.Redis.from_url(redis_server.url, decode_responses=True) as client:
        yield client


async def test_conformance(redis: coredis.Redis[str]) -> None:
    made = 0

    async def fresh() -> RedisSessionStore:
        # Each contract gets its own store, isolated by prefix in the one server.
        nonlocal made
        made += 1
        return RedisSessionStore(redis, prefix=f"conf{made}")

    await run_session_store_conformance(fresh)
    assert made == 15  # one probe + 14 contracts: none was skipped


def entry(**fields: Any) -> Any:
    return {"type": "user", **fields}


async def test_replayed_batch_is_not_duplicated(redis: coredis.Redis[str]) -> None:
    store = RedisSessionStore(redis)
    key: Any = {"project_key": "p", "session_id": "s"}
    batch = [entry(uuid="u1", n=1), entry(n=2), entry(uuid="u2", n=3)]
    await store.append(key, batch)
    await store.append(key, batch)  # the SDK retries a batch whose reply was lost
    assert await store.load(key) == [*batch, entry(n=2)]


async def test_parts_with_separators_do_not_collide(redis: coredis.Redis[str]) -> None:
    store = RedisSessionStore(redis)
    a: Any = {"project_key": "p:x", "session_id": "s"}
    b: Any = {"project_key": "p", "session_id": "x:s"}
    c: Any = {"project_key": "p", "session_id": "{s}", "subpath": "a:b"}
    await store.append(a, [entry(n="a")])
    await store.append(b, [entry(n="b")])
    await store.append(c, [entry(n="c")])
    assert await store.load(a) == [entry(n="a")]
    assert await store.load(b) == [entry(n="b")]
    assert await store.load(c) == [entry(n="c")]
    key = store.keys.transcript("p", "{s}", "a:b")
    # One hash tag, the quoted session id: the key hashes to the session's slot.
    assert key.count("{") == 1
    assert key.count("}") == 1
    assert "{%7Bs%7D}" in key


async def test_mtimes_strictly_increase_on_the_server_clock(redis: coredis.Redis[str]) -> None:
    store = RedisSessionStore(redis)
    key: Any = {"project_key": "p", "session_id": "s"}
    seen = []
    for n in range(5):
        await store.append(key, [entry(n=n)])
        (listed,) = await store.list_sessions("p")
        seen.append(listed["mtime"])
    assert seen == sorted(set(seen))
    server_ms = (await redis.time()).timestamp() * 1000
    assert abs(server_ms - seen[-1]) < 60_000


async def test_bad_key_is_a_clear_error(redis: coredis.Redis[str]) -> None:
    store = RedisSessionStore(redis)
    with pytest.raises(ValueError, match="project_key"):
        await store.load({"session_id": "s"})  # type: ignore[typeddict-item]
    with pytest.raises(TypeError, match=r"coredis\.Redis"):
        RedisSessionStore(object())  # type: ignore[arg-type]
