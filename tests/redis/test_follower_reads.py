"""How a cluster gateway's follower reads a session's stream (``actors/cluster/follower.py``):
a blocking ``XREAD`` waits for the next events; once one finds more than one, ``READ_SCRIPT``
reads on, a batch as one string, until it finds one or none, or an entry it must leave to
``XREAD`` (a gap, an entry of another shape); a subscription's own catch-up reads the same
way. Checked here against a real ``redis-server`` with the stream written by hand, so every
shape and gap is exactly as the test says."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import coredis
import pytest
import trio

from claude_trio.actors.cluster import follower as follower_module
from claude_trio.actors.cluster.follower import GAP_REASON, StreamFollowers
from claude_trio.actors.fanout.subscription import Subscription
from claude_trio.errors import SlowSubscriberError
from claude_trio.protocol.cluster.keys import RedisKeys
from claude_trio.protocol.cluster.scripts import READ_SCRIPT, read_run
from claude_trio.protocol.errors import RemoteProtocolError
from claude_trio.protocol.fanout.codec import event_text
from claude_trio.protocol.session.events import TextDelta
from claude_trio.redis_url import open_redis
from claude_trio.testing import RedisServer

KEYS = RedisKeys()
SID = "s-reads"


def delta(seq: int) -> str:
    return event_text(TextDelta(text=f"part {seq} ", seq=seq, turn=1, message_id="m", index=0))


async def add(redis: coredis.Redis[str], seq: int, *fields: str) -> None:
    """Store the event of ``seq`` as the worker's store script does (``e``, its text, then
    the token), or with ``fields`` as given."""
    await redis.xadd(KEYS.events(SID), dict(zip(fields[0::2], fields[1::2], strict=True)) if fields
                     else {"e": delta(seq), "t": "1"}, identifier=f"{seq}-0")  # fmt: skip


def run(first: int, last: int) -> tuple[str, ...]:
    """``add``'s fields for the entry of the events ``first`` to ``last`` (its id is the
    last one's seq), as the worker's store script writes one."""
    texts = "\n".join(delta(seq) for seq in range(first, last + 1))
    return ("e", texts, "t", "1", "s", str(first))


async def test_the_read_script_returns_the_run_of_next_events_as_one_string(
    redis_url: str,
) -> None:
    async with open_redis(redis_url) as redis:
        for seq in (1, 2):
            await add(redis, seq)
        await add(redis, 3, "t", "1", "e", delta(3))  # another shape: the token first
        await add(redis, 4)
        await add(redis, 6)  # 5 is missing
        await add(redis, 9, *run(7, 9))  # entries of several events
        await add(redis, 12, *run(10, 12))
        await add(redis, 15, "e", delta(13), "t", "1", "s", "13")  # says 3 events, holds 1
        script = redis.register_script(READ_SCRIPT)

        async def read(after: int, count: int) -> list[Any]:
            return list(await script(keys=[KEYS.events(SID)], args=[after, count]))

        def texts(first: int, last: int) -> str:
            return "\n".join(delta(seq) for seq in range(first, last + 1))

        # [events in the run, 1 if an entry that breaks it came next, their texts joined]
        assert await read(0, 10) == [2, 1, texts(1, 2)]
        assert await read(0, 1) == [1, 0, delta(1)]
        assert await read(2, 10) == [0, 1, ""]  # the next entry has another shape
        assert await read(3, 10) == [1, 1, delta(4)]  # then 5 is missing
        assert await read(4, 10) == [0, 1, ""]
        assert await read(6, 10) == [6, 1, texts(7, 12)]  # then an entry that lies
        assert await read(7, 10) == [5, 1, texts(8, 12)]  # 7 is left out of its entry
        assert await read(8, 2) == [2, 0, texts(9, 10)]  # at most count: cut in an entry
        assert await read(7, 3) == [3, 0, texts(8, 10)]
        assert await read(11, 1) == [1, 0, delta(12)]
        assert await read(12, 10) == [0, 1, ""]
        assert await read(15, 10) == [0, 0, ""]
        # What the follower takes from a reply: the run's texts, and whether XREAD must read on.
        assert read_run(await read(0, 10)) == ([delta(1), delta(2)], True)
        assert read_run(await read(7, 3)) == ([delta(8), delta(9), delta(10)], False)
        assert read_run(await read(2, 10)) == ([], True)
        assert read_run(await read(15, 10)) == ([], False)
        with pytest.raises(RemoteProtocolError, match="1 event texts for 2 events"):
            read_run([2, 0, delta(1)])


class _Owner:
    """What a subscription follows (a ``RedisSession`` in a gateway)."""

    def __init__(self, followers: StreamFollowers) -> None:
        self.followers = followers

    @property
    def id(self) -> str:
        return SID

    def _detach(self, subscription: Subscription) -> None:
        self.followers.detach(SID, subscription)


@asynccontextmanager
async def following(
    url: str,
    monkeypatch: pytest.MonkeyPatch,
    reads: list[tuple[str, int]],
    stored: list[tuple[int, tuple[str, ...]]],
    gate: trio.Event | None = None,
    *,
    behind: int = 0,
) -> AsyncIterator[tuple[StreamFollowers, Subscription]]:
    """A subscription from seq 0 through a gateway's followers that read at most 2 entries a
    time (so a stream of a few entries takes several reads), each read noted in ``reads``
    as ``("xread" | "script", entries got)``; the stream holds ``stored`` (``add``'s
    arguments) before the follower starts; each script read waits for ``gate`` first. With
    ``behind`` (the entries the stream holds, more than 2), the subscription starts with a
    catch-up of its own that reads 2 entries a time."""
    monkeypatch.setattr(follower_module, "FOLLOWER_READ", 2)
    xread, script = StreamFollowers._read, StreamFollowers._read_texts

    async def noted_xread(self: StreamFollowers, *args: Any) -> Any:
        got = await xread(self, *args)
        reads.append(("xread", len(got)))
        return got

    async def noted_script(self: StreamFollowers, *args: Any) -> Any:
        if gate is not None:
            await gate.wait()
        texts, other = await script(self, *args)
        reads.append(("script", len(texts)))
        return texts, other

    monkeypatch.setattr(StreamFollowers, "_read", noted_xread)
    monkeypatch.setattr(StreamFollowers, "_read_texts", noted_script)
    async with open_redis(url) as redis, trio.open_nursery() as nursery:
        for seq, fields in stored:
            await add(redis, seq, *fields)
        followers = StreamFollowers(redis, KEYS, nursery, block_ms=50, replay_buffer=100)
        subscription = Subscription(
            _Owner(followers), [], max_queue=100, max_bytes=1 << 20, notify=None
        )
        head = followers.subscribe(subscription, SID, 0, 1, batch=2, behind=behind)
        assert head == (None if behind > 2 else [])  # None: a catch-up task was started
        try:
            yield followers, subscription
        finally:
            subscription.close()
            nursery.cancel_scope.cancel()


async def received(subscription: Subscription, count: int) -> list[str]:
    """The next ``count`` entries' texts (as the stream holds them)."""
    texts: list[str] = []
    with trio.fail_after(10):
        while True:
            await trio.sleep(0.005)  # a subscription never waits for its reader: poll
            while len(texts) < count and subscription.queued:
                entry = subscription.receive_entry_nowait()
                assert entry.text is not None
                texts.append(entry.text)
            if len(texts) == count:
                return texts


async def test_a_burst_is_read_on_by_the_script_and_an_entry_of_another_shape_by_xread(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[tuple[str, int]] = []
    stored = [(seq, ("t", "1", "e", delta(seq)) if seq == 6 else ()) for seq in range(1, 10)]
    async with following(redis_server.url, monkeypatch, reads, stored) as (_, subscription):
        assert await received(subscription, 9) == [delta(seq) for seq in range(1, 10)]
        await trio.sleep(0.2)  # the follower waits on, with a blocking read
        assert subscription.queued == 0
    got = [(how, n) for how, n in reads if n]
    # XREAD found two: the script read on (3-4, then 5 only: 6 has another shape, which
    # XREAD read with 7), then the script again (8-9).
    assert got == [("xread", 2), ("script", 2), ("script", 1), ("xread", 2), ("script", 2)]
    # Once the script found nothing more, the follower waits with XREAD again.
    assert reads[-1][0] == "xread"


async def test_entries_of_several_events_are_read_an_event_at_a_time_where_asked(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[tuple[str, int]] = []
    stored = [(3, run(1, 3)), (7, run(4, 7)), (8, ())]
    async with following(redis_server.url, monkeypatch, reads, stored) as (_, subscription):
        assert await received(subscription, 8) == [delta(seq) for seq in range(1, 9)]
        await trio.sleep(0.2)
        assert subscription.queued == 0
    # XREAD's two entries hold seven events: two are taken (its count); the script reads on
    # two at a time, from inside an entry, across two, then finds nothing more.
    got = [(how, n) for how, n in reads if n]
    assert got == [("xread", 2), ("script", 2), ("script", 2), ("script", 2)]


async def test_a_gap_found_by_the_script_drops_the_subscriptions_as_xread_does(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[tuple[str, int]] = []
    stored: list[tuple[int, tuple[str, ...]]] = [(seq, ()) for seq in (1, 2, 3, 5)]
    async with following(redis_server.url, monkeypatch, reads, stored) as (_, subscription):
        with trio.fail_after(10):
            await trio.sleep(0.005)
            while subscription.dropped_reason is None:  # noqa: ASYNC110 (the follower's doing)
                await trio.sleep(0.005)
        assert subscription.dropped_reason == GAP_REASON
        with pytest.raises(SlowSubscriberError, match="moved on past the replay"):
            subscription.receive_entry_nowait()
    # XREAD found 1-2, the script 3 (and stopped before 5), XREAD then 5: the gap.
    assert [(how, n) for how, n in reads if n] == [("xread", 2), ("script", 1), ("xread", 1)]


async def test_a_subscriber_ahead_of_the_follower_gets_only_the_events_after_its_own(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[tuple[str, int]] = []
    stored: list[tuple[int, tuple[str, ...]]] = [(seq, ()) for seq in range(1, 7)]
    gate = trio.Event()
    async with following(redis_server.url, monkeypatch, reads, stored, gate) as (
        followers,
        first,
    ):
        assert await received(first, 2) == [delta(1), delta(2)]
        follower = followers.following(SID)
        assert follower is not None
        assert follower.last == 2  # its next read waits for the gate
        # A client that saw up to 4, the end of an execution (from another gateway, say),
        # attaches here for the next one (5 on): it joins the follower at once.
        ahead = Subscription(_Owner(followers), [], max_queue=100, max_bytes=1 << 20, notify=None)
        assert followers.subscribe(ahead, SID, 4, 5, batch=50, behind=0) == []
        gate.set()
        assert await received(first, 4) == [delta(seq) for seq in range(3, 7)]
        assert await received(ahead, 2) == [delta(5), delta(6)]
        await trio.sleep(0.1)
        assert ahead.queued == 0
        ahead.close()


async def test_a_catch_up_reads_its_replay_with_the_script_then_joins_the_follower(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[tuple[str, int]] = []
    stored: list[tuple[int, tuple[str, ...]]] = [(seq, ()) for seq in range(1, 7)]
    async with following(redis_server.url, monkeypatch, reads, stored, behind=6) as (
        followers,
        subscription,
    ):
        assert followers.following(SID) is None  # the catch-up reads alone first
        assert await received(subscription, 6) == [delta(seq) for seq in range(1, 7)]
        await wait_for_follower(followers)
        follower = followers.following(SID)
        assert follower is not None
        assert subscription in follower.members
    # Two at a time (its batch), each batch one string, then nothing: at the tip.
    assert reads[:4] == [("script", 2), ("script", 2), ("script", 2), ("script", 0)]
    assert [how for how, _ in reads[4:]] == ["xread"] * len(reads[4:])  # the follower's


async def wait_for_follower(followers: StreamFollowers) -> None:
    with trio.fail_after(10):
        await trio.sleep(0.005)
        while followers.following(SID) is None:  # noqa: ASYNC110 (the catch-up's doing)
            await trio.sleep(0.005)
