"""A cluster's gateway reads each session's stream once and fans it out in memory
(``actors/cluster/follower.py``): every subscription gets the same entries (with the text the
stream holds; a delta's is framed by the gateway and never decoded, unless a subscriber reads
or merges it), a subscription behind the follower catches up exactly and then joins it, a slow
one is dropped alone, the follower stops when its last subscription leaves and is still there
for the clients that follow on at an execution's end; and a worker stores a burst in batches
that start small."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
from cluster_kit import TOKEN, RunningWorker, open_gateway, open_worker

from claude_trio import ExecuteParams
from claude_trio.actors.cluster import follower as follower_module
from claude_trio.actors.cluster.fleet import RedisFleet, RedisSession, open_redis_fleet
from claude_trio.actors.cluster.worker import BATCH_FIRST
from claude_trio.actors.cluster.writes import FencedWrites
from claude_trio.actors.fanout.subscription import Subscription
from claude_trio.client import ClientConfig, connect_gateway
from claude_trio.errors import RemoteProtocolError, SlowSubscriberError
from claude_trio.protocol.cluster.records import stored_entry
from claude_trio.protocol.fanout.codec import event_text, event_to_json
from claude_trio.protocol.fanout.replay import Entry
from claude_trio.protocol.session.events import Event, Result, TextDelta
from claude_trio.redis_url import open_redis
from claude_trio.testing import FakeCLI, FakeTurn, RedisServer

CLIENT = ClientConfig(backoff_base=0.05, backoff_max=0.5, close_timeout=2.0)


def gated(
    parts_before: int, parts_after: int, gate: trio.Event, end: trio.Event | None = None
) -> FakeCLI:
    """A turn of ``parts_before`` deltas, then ``parts_after`` once ``gate`` is set; with
    ``end``, the turn's result waits for it too."""

    async def turn(turn: FakeTurn) -> None:
        for i in range(parts_before):
            await turn.text(f"a{i} ")
        await gate.wait()
        for i in range(parts_after):
            await turn.text(f"b{i} ")
        if end is not None:
            await end.wait()

    return FakeCLI(turn)


@asynccontextmanager
async def one_session(
    url: str, fake: FakeCLI, block: float = 0.2, **fleet: Any
) -> AsyncIterator[tuple[RedisFleet, RedisSession, RunningWorker]]:
    """A worker running ``fake`` and a gateway's fleet (``block``, ``fleet`` options) with one
    session opened through it, its record read as a gateway reads it; and the worker."""
    async with (
        open_worker(url, fake) as worker,
        open_redis(url) as redis,
        open_redis_fleet(redis, block=block, **fleet) as fleet_,
    ):
        session = await fleet_.open(ExecuteParams(prompt="go"))
        await fleet_.refresh(session.id)
        yield fleet_, session, worker


async def entries(subscription: Subscription, got: list[Entry] | None = None) -> list[Entry]:
    """Every entry until the subscription ends, into ``got`` as they come (polling: a
    subscription never waits for its reader)."""
    got = [] if got is None else got
    while True:
        try:
            got.append(subscription.receive_entry_nowait())
        except trio.WouldBlock:
            pass
        except trio.EndOfChannel:
            return got
        await trio.sleep(0.001 if subscription.queued else 0.005)


def subscribe(fleet: RedisFleet, sid: str, last_seq: int | None, **options: Any) -> Subscription:
    options.setdefault("max_queue", 1000)
    subscription = fleet.get_nowait(sid).subscribe_nowait(last_seq, **options)
    assert isinstance(subscription, Subscription)
    return subscription


async def wait_until(condition: object) -> None:
    while not condition():  # type: ignore[operator]  # noqa: ASYNC110 (another task's state)
        await trio.sleep(0.01)


async def test_subscriptions_of_one_session_share_one_follower_and_its_entries(
    redis_server: RedisServer,
) -> None:
    gate = trio.Event()
    url = redis_server.url
    with trio.fail_after(30):
        async with one_session(url, gated(0, 30, gate)) as (fleet, session, _):
            subscriptions = [subscribe(fleet, session.id, None) for _ in range(10)]
            follower = fleet._followers.following(session.id)
            assert follower is not None
            assert set(follower.members) == set(subscriptions)
            got: list[list[Entry]] = []

            async def read(subscription: Subscription) -> None:
                got.append(await entries(subscription))

            async with trio.open_nursery() as nursery:
                for subscription in subscriptions:
                    nursery.start_soon(read, subscription)
                gate.set()
            # Every member ended at the final event: the follower stops.
            await wait_until(lambda: fleet._followers.following(session.id) is None)

    first = got[0]
    assert [e.seq for e in first] == list(range(1, len(first) + 1))
    assert isinstance(first[-1].event, Result)
    for other in got[1:]:
        # The very same entries: read, decoded (and encoded by a gateway) once per gateway.
        assert len(other) == len(first)
        assert all(a is b for a, b in zip(other, first, strict=True))
    # Each carries the text the stream holds, which a gateway frames without encoding again.
    assert [json.loads(e.text or "null") for e in first] == [event_to_json(e.event) for e in first]


async def test_a_subscription_behind_the_follower_catches_up_exactly_then_joins_it(
    redis_server: RedisServer,
) -> None:
    gate = trio.Event()
    url = redis_server.url
    with trio.fail_after(30):
        # The follower holds the last 5 events only: a replay from seq 3 is read from Redis.
        async with one_session(url, gated(40, 10, gate), replay_buffer=5) as (fleet, session, _):
            early = subscribe(fleet, session.id, None)
            early_got: list[Entry] = []

            async def read_early() -> None:
                await entries(early, early_got)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(read_early)
                await wait_until(lambda: len(early_got) >= 40)
                follower = fleet._followers.following(session.id)
                assert follower is not None
                assert (follower.buffer.oldest_seq or 0) > 4
                await fleet.refresh(session.id)
                late = subscribe(fleet, session.id, 3, max_queue=64)  # reads 32 per round
                assert late not in follower.members  # not servable from the follower's buffer
                late_got: list[Entry] = []

                async def read_late() -> None:
                    await entries(late, late_got)

                nursery.start_soon(read_late)
                await wait_until(lambda: late in follower.members)
                gate.set()

    assert [e.seq for e in early_got] == list(range(1, len(early_got) + 1))
    assert [e.seq for e in late_got] == list(range(4, len(early_got) + 1))
    assert [e.event for e in late_got] == [e.event for e in early_got[3:]]
    assert isinstance(late_got[-1].event, Result)


async def test_a_slow_subscription_is_dropped_alone_and_the_follower_stops_when_all_leave(
    redis_server: RedisServer,
) -> None:
    gate, end = trio.Event(), trio.Event()
    url = redis_server.url
    with trio.fail_after(30):
        async with one_session(url, gated(0, 20, gate, end)) as (fleet, session, _):
            reader = subscribe(fleet, session.id, None)
            stuck = subscribe(fleet, session.id, None, max_bytes=1)  # one entry fills it
            follower = fleet._followers.following(session.id)
            assert follower is not None
            got: list[Entry] = []
            async with trio.open_nursery() as nursery:

                async def read() -> None:
                    while len(got) < 10:
                        try:
                            got.append(reader.receive_entry_nowait())
                        except trio.WouldBlock:
                            await trio.sleep(0.005)

                nursery.start_soon(read)
                gate.set()
            assert stuck.dropped_reason is not None
            assert stuck not in follower.members
            try:
                stuck.receive_nowait()
            except SlowSubscriberError:
                pass
            else:
                raise AssertionError("a dropped subscription must say so")
            assert set(follower.members) == {reader}  # (the turn's end is held)
            end.set()
            reader.close()
            # Its last member left: the follower stops after the read in flight.
            await wait_until(lambda: fleet._followers.following(session.id) is None)
            assert not follower.members
    assert [e.seq for e in got] == list(range(1, 11))


async def test_clients_that_follow_on_after_an_execution_ends_find_the_follower_still_there(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # At an execution's end every client's subscription ends, and each client subscribes
    # again moments later for the next execution, from the last seq it got. The follower
    # reads once more after its last member left, so those find it (and what it read)
    # instead of each reading the stream, and learn from its memory that nothing is pending.
    gate = trio.Event()
    url = redis_server.url
    # The linger's read waits a quarter second; a loaded machine may take longer to get here.
    monkeypatch.setattr(follower_module, "LINGER_MS", 30_000)
    with trio.fail_after(30):
        # (its record read as a gateway read it: the execution is live)
        async with one_session(url, gated(0, 5, gate), block=1.0) as (fleet, session, _):
            assert session.first_seq == 1
            # Its follower starts after the execution's first event, so it does not hold the
            # whole execution: only the final event it read says nothing is pending.
            first = subscribe(fleet, session.id, 1)
            await wait_until(lambda: fleet._followers.following(session.id) is not None)
            follower = fleet._followers.following(session.id)
            assert follower is not None
            gate.set()
            got = await entries(first)
            assert got[0].seq == 2
            final = got[-1].seq
            assert isinstance(got[-1].event, Result)
            assert not follower.members
            assert fleet._followers.following(session.id) is follower  # still reading

            async def no_stream_read(*args: object, **kwargs: object) -> list[object]:
                raise AssertionError("the stream was read for what the follower holds")

            monkeypatch.setattr(follower_module, "pending_questions", no_stream_read)
            monkeypatch.setattr(follower_module.StreamFollowers, "_catch_up", no_stream_read)
            # From its final event: nothing pending, a member again (for the next execution).
            renewed = subscribe(fleet, session.id, final)
            assert renewed in follower.members
            assert renewed.queued == 0
            # From before it: the replay ends with the final event. The subscriber is told
            # once it holds the subscription, never while it is still subscribing.
            holder: list[Subscription] = []
            late = subscribe(fleet, session.id, final - 3, notify=lambda: holder[0])
            holder.append(late)
            assert late not in follower.members
            assert [e.seq for e in await entries(late)] == [final - 2, final - 1, final]
            renewed.close()


async def test_a_burst_reaches_the_stream_in_batches_that_start_small_and_double(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A worker stores what is ready in one round trip, but the first batch after a pause is
    # small (its events reach the gateways without waiting for the whole burst's store) and
    # each next one may be twice as large, up to BATCH_MAX.
    batches: list[list[Event]] = []
    real = FencedWrites.store_many
    workers: list[RunningWorker] = []

    async def counting(self: FencedWrites, sid: str, token: int, events: Any, **kw: Any) -> None:
        events = list(events)
        first_deltas = any(isinstance(e, TextDelta) for e in events) and not any(
            isinstance(e, TextDelta) for b in batches for e in b
        )
        batches.append(events)
        if first_deltas:
            # The burst's first store: the rest of the burst is made meanwhile, to its end
            # (as a round trip to a busy Redis would let it be).
            local = workers[0].worker.running[sid].local
            while not local.ended:  # noqa: ASYNC110 (another task's state)
                await trio.sleep(0.001)
        await real(self, sid, token, events, **kw)

    monkeypatch.setattr(FencedWrites, "store_many", counting)

    go = trio.Event()

    async def burst(turn: FakeTurn) -> None:
        await go.wait()
        await turn.text("x" * 600, chunk=1)  # 600 deltas, ready at once

    url = redis_server.url
    with trio.fail_after(30):
        async with one_session(url, FakeCLI(burst)) as (fleet, session, worker):
            workers.append(worker)
            go.set()
            got = await entries(subscribe(fleet, session.id, None, max_queue=10_000))
    assert sum(isinstance(e.event, TextDelta) for e in got) == 600
    # From the first batch that holds a delta: the burst.
    first = next(i for i, b in enumerate(batches) if any(isinstance(e, TextDelta) for e in b))
    sizes = [len(b) for b in batches[first:]]
    assert sum(sizes) >= 600
    assert sizes[0] <= BATCH_FIRST
    assert len(sizes) <= 8  # 16, 32, 64, 128, 256, 512 (and the rest): not one by one
    for before, after in itertools.pairwise(sizes):
        assert after <= max(2 * before, BATCH_FIRST)


async def test_a_gateway_frames_the_streams_deltas_as_text_and_never_decodes_them(
    redis_server: RedisServer,
) -> None:
    gate, end = trio.Event(), trio.Event()
    url = redis_server.url
    with trio.fail_after(30):
        async with (
            open_worker(url, gated(0, 30, gate, end)),
            open_gateway(url) as (fleet, port),
            connect_gateway(f"ws://127.0.0.1:{port}/", token=TOKEN, config=CLIENT) as gw,
        ):
            session = await gw.open(ExecuteParams(prompt="go"))
            events = session.events
            gate.set()
            got: list[Event] = []
            async for event in events:
                got.append(event)
                if sum(isinstance(e, TextDelta) for e in got) == 30:
                    break
            follower = fleet._followers.following(session.id)
            assert follower is not None
            held = follower.buffer.entries()
            deltas = [e for e in held if e.seq in {d.seq for d in got if isinstance(d, TextDelta)}]
            assert len(deltas) == 30
            # Framed from the stream's text (each entry holds its frame) and never decoded.
            assert all(isinstance(e.wire, bytes) and not e.decoded for e in deltas)
            # Every other event was decoded on its way (the gateway's rules read them).
            assert all(e.decoded for e in held if e not in deltas)
            # A reader of the entry's event still gets it, decoded then, once.
            assert deltas[0].event == next(e for e in got if e.seq == deltas[0].seq)
            assert deltas[0].decoded
            assert deltas[0].event is deltas[0].event
            end.set()
            async for event in events:
                got.append(event)
    assert [e.text for e in got if isinstance(e, TextDelta)] == [f"b{i} " for i in range(30)]
    assert isinstance(got[-1], Result)


async def test_a_delta_kept_as_text_is_decoded_when_a_subscriber_reads_or_merges_it(
    redis_server: RedisServer,
) -> None:
    gate = trio.Event()
    text = "the quick brown fox jumps over the lazy dog, twice over"

    async def one_block(turn: FakeTurn) -> None:
        await gate.wait()
        await turn.text(text, chunk=1)  # one delta per character, mergeable

    with trio.fail_after(30):
        async with one_session(redis_server.url, FakeCLI(one_block)) as (fleet, session, _):
            reader = subscribe(fleet, session.id, None)
            # A short queue, not read until the turn ends: the deltas merge into runs.
            lagging = subscribe(fleet, session.id, None, max_queue=8)
            gate.set()
            got = await entries(reader)
            merged = []
            while True:
                try:
                    merged.append(await lagging.receive())
                except trio.EndOfChannel:
                    break
    # The reader gets every delta's event (decoded when read, or when the other merged it).
    deltas = [e.event for e in got if isinstance(e.event, TextDelta)]
    assert "".join(d.text for d in deltas) == text  # type: ignore[attr-defined]
    # The lagging one's deltas were decoded to merge: the same text, in fewer events.
    merged_deltas = [e for e in merged if isinstance(e, TextDelta)]
    assert "".join(e.text for e in merged_deltas) == text
    assert len(merged_deltas) < len(text)


def test_a_stream_read_is_taken_from_either_reply_shape() -> None:
    text = event_text(TextDelta(text="hi", seq=2))
    entries = [["1-0", ["e", '{"kind":"x"}', "t", "3"]], ["2-0", ["t", "3", "e", text]]]
    expected = [("1-0", entries[0][1]), ("2-0", entries[1][1])]
    assert follower_module._stream_entries({"ct:s:events": entries}) == expected  # RESP3
    assert follower_module._stream_entries([["ct:s:events", entries]]) == expected  # RESP2
    assert follower_module._stream_entries(None) == []  # a blocking read that timed out
    # The event's text wherever the entry holds it; an entry without one is refused.
    assert follower_module._texts(expected[1], 0) == [(2, text)]
    assert stored_entry(2, text).event == TextDelta(text="hi", seq=2)
    with pytest.raises(RemoteProtocolError, match="no event text"):
        follower_module._texts(("3-0", ["t", "3"]), 0)
    # An entry of several events: those after the seq asked for, with their seqs.
    texts = [event_text(TextDelta(text=str(seq), seq=seq)) for seq in (3, 4, 5)]
    several = ("5-0", ["e", "\n".join(texts), "t", "3", "s", "3"])
    assert follower_module._texts(several, 3) == [(4, texts[1]), (5, texts[2])]
    with pytest.raises(RemoteProtocolError, match="3 event texts for seqs 2 to 5"):
        follower_module._texts(("5-0", ["e", "\n".join(texts), "t", "3", "s", "2"]), 0)
