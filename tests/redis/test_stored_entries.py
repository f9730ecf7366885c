"""How a worker stores a session's events (``actors/cluster/writes.py``, ``STORE_SCRIPT``;
``protocol/cluster/records.py`` rule 2): a batch of ready events becomes as few stream entries
as consecutive seqs and ``ENTRY_CHARS`` allow, each with the seq of its last event as its id;
what is stored already is skipped, also at the head of an entry; the stream keeps its last
``stream_max`` seqs; a stale token writes nothing. Checked against a real ``redis-server`` and
a three-master Redis Cluster, reading the stream back by hand."""

from __future__ import annotations

from typing import Any

import coredis
import pytest

from claude_trio.actors.cluster.fleet import open_redis_fleet
from claude_trio.actors.cluster.writes import FencedWrites, _FencedOut
from claude_trio.actors.fanout.subscription import ResyncRequired
from claude_trio.protocol.cluster.keys import RedisKeys
from claude_trio.protocol.cluster.records import (
    ENTRY_CHARS,
    SessionRecord,
    entry_texts,
    stored_events,
)
from claude_trio.protocol.fanout.codec import event_text
from claude_trio.protocol.session.events import Event, TextDelta
from claude_trio.redis_url import open_redis
from claude_trio.testing import RedisServer

KEYS = RedisKeys()
SID = "s-stored"


def delta(seq: int, text: str | None = None) -> TextDelta:
    return TextDelta(text=f"part {seq} " if text is None else text, seq=seq, turn=1)


async def retrying(what: str, call: Any) -> Any:
    return await call()


async def layout(redis: coredis.Redis[str]) -> list[tuple[int, int]]:
    """The stream's entries as (first seq, last seq)."""
    entries = await redis.xrange(KEYS.events(SID))
    shown = []
    for entry in entries:
        seqs = [seq for seq, _ in entry_texts(entry.identifier, entry.field_values)]
        shown.append((seqs[0], seqs[-1]))
    return shown


async def stream_events(redis: coredis.Redis[str]) -> list[Event]:
    return stored_events(await redis.xrange(KEYS.events(SID)))


async def test_a_batch_is_stored_as_few_entries(redis_url: str) -> None:
    async with open_redis(redis_url) as redis:
        await redis.hset(KEYS.session(SID), {"epoch": "1"})
        writes = FencedWrites(redis, keys=KEYS, worker_id="w", stream_max=1000, retrying=retrying)
        first = [delta(seq) for seq in range(1, 6)]
        await writes.store_many(SID, 1, first)
        assert await layout(redis) == [(1, 5)]
        assert await redis.hget(KEYS.session(SID), "oldest") == "1"
        await writes.store_many(SID, 1, first)  # stored twice: nothing changes (rule 2)
        assert await layout(redis) == [(1, 5)]
        # A batch whose head is stored already: only the rest, as one entry.
        await writes.store_many(SID, 1, [delta(seq) for seq in range(4, 9)])
        assert await layout(redis) == [(1, 5), (6, 8)]
        # A long event has an entry of its own; a gap in the seqs starts a new entry.
        long = delta(10, "x" * ENTRY_CHARS)
        await writes.store_many(SID, 1, [delta(9), long, delta(11), delta(12), delta(14)])
        assert await layout(redis) == [(1, 5), (6, 8), (9, 9), (10, 10), (11, 12), (14, 14)]
        # Entries of at most ENTRY_CHARS of text.
        big = [delta(seq, "y" * (ENTRY_CHARS // 4)) for seq in range(15, 25)]
        await writes.store_many(SID, 1, big)
        runs = (await layout(redis))[6:]
        assert (runs[0][0], runs[-1][1]) == (15, 24)
        assert len(runs) >= 3
        for entry in (await redis.xrange(KEYS.events(SID)))[6:]:
            texts = entry_texts(entry.identifier, entry.field_values)
            assert sum(len(text) + 1 for _, text in texts) - 1 <= ENTRY_CHARS
        # Every event back, in order, exactly as stored.
        expected = [*first, *[delta(seq) for seq in range(6, 10)], long, delta(11), delta(12)]
        assert await stream_events(redis) == [*expected, delta(14), *big]
        # A stream whose record does not say what it holds (written before the record kept
        # it): the stream's last entry says it.
        await redis.hdel(KEYS.session(SID), ["stored"])
        await writes.store_many(SID, 1, [delta(seq) for seq in range(23, 27)])
        assert (await layout(redis))[-1] == (25, 26)
        assert await redis.hget(KEYS.session(SID), "stored") == "26"
        # A stale token writes nothing (rule 7).
        with pytest.raises(_FencedOut):
            await writes.store_many(SID, 2, [delta(27)])
        assert (await layout(redis))[-1] == (25, 26)


async def test_the_stream_keeps_its_last_stream_max_seqs(redis_server: RedisServer) -> None:
    async with open_redis(redis_server.url) as redis:
        await redis.hset(KEYS.session(SID), {"epoch": "1"})
        writes = FencedWrites(redis, keys=KEYS, worker_id="w", stream_max=50, retrying=retrying)
        for at in range(0, 3000, 100):  # bursts of 100 events of 100 characters
            await writes.store_many(
                SID, 1, [delta(seq, "z" * 100) for seq in range(at + 1, at + 101)]
            )
        for seq in range(3001, 3101):  # then one at a time
            await writes.store_many(SID, 1, [delta(seq)])
        shown = await layout(redis)
        assert shown[-1] == (3100, 3100)
        # Every seq of the last 50 is there; whole entries go, a listpack node at a time
        # ("~"), so somewhat more is kept, never all.
        assert shown[0][0] <= 3100 - 50 + 1
        assert shown[0][0] > 2000
        held = [event.seq for event in await stream_events(redis)]
        assert held == list(range(shown[0][0], 3101))
        # The record says the stream's oldest seq (a listing reads no stream for it).
        assert await redis.hget(KEYS.session(SID), "oldest") == str(shown[0][0])


async def test_a_gateway_reads_the_oldest_seq_from_the_record_or_the_stream(
    redis_server: RedisServer,
) -> None:
    record = SessionRecord(session=SID, principal=None, host="", label=None, state="live")
    async with open_redis(redis_server.url) as redis:
        await redis.hset(KEYS.session(SID), {**record.to_fields(), "epoch": "1"})
        await redis.zadd(KEYS.sessions_index, {SID: 1})
        writes = FencedWrites(redis, keys=KEYS, worker_id="w", stream_max=50, retrying=retrying)
        await writes.store_many(SID, 1, [delta(seq) for seq in range(1, 4)])
        assert await redis.hget(KEYS.session(SID), "oldest") == "1"
        for at in range(3, 1003, 100):
            await writes.store_many(
                SID, 1, [delta(seq, "z" * 200) for seq in range(at + 1, at + 101)]
            )
        oldest = (await layout(redis))[0][0]
        assert oldest > 1
        async with open_redis_fleet(redis) as fleet:
            session = await fleet.get(SID)
            assert session.oldest_seq == oldest
            resync = session.subscribe_nowait(1, max_queue=10)
            assert isinstance(resync, ResyncRequired)
            assert resync.oldest_seq == oldest
            assert [info.session for info in await fleet.list()] == [SID]
            assert fleet.get_nowait(SID).oldest_seq == oldest
            # What the record says is what a gateway takes: it reads no stream for it.
            await redis.hset(KEYS.session(SID), {"oldest": str(oldest + 7)})
            await fleet.list()
            assert fleet.get_nowait(SID).oldest_seq == oldest + 7
            assert (await fleet.get(SID)).oldest_seq == oldest + 7
            # A record that does not say it (its stream stored before records kept it): the
            # stream's first entry does, for one session and for a listing.
            await redis.hdel(KEYS.session(SID), ["oldest"])
            assert (await fleet.get(SID)).oldest_seq == oldest
            fleet._oldest.clear()
            await fleet.list()
            assert fleet.get_nowait(SID).oldest_seq == oldest


def test_every_event_text_is_one_line() -> None:
    # Entries join their events' texts with newlines: a compact JSON text holds none, even
    # for a text that does.
    assert "\n" not in event_text(delta(1, "two\nlines\r\n"))
