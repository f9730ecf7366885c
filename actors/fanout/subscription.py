"""A subscription to a session's events, and ``subscribe()``/``result()`` built on it.

A :class:`Subscription` is one subscriber's view of a session: the user-input requests still
pending that the replay would not include, then the replay (the buffered events after the
subscriber's ``last_seq``), then live events, each offered by the session without waiting. The
subscriber's queue is bounded (``max_queue`` events, ``max_bytes``); when it is full, adjacent
deltas of one message are merged, and when that does not make room the subscriber is dropped
(``SlowSubscriberError``). What is kept, merged and dropped is decided by
``protocol/fanout/replay.py``; this module only wires it to a channel.

What follows a subscription: :func:`open_following` (a session's ``subscribe()``: a channel that
renews a dropped subscription from the last seq received, so its consumer sees a pause, never an
error) and :func:`execution_transcript` (a session's ``result()``). Both the local fleet's
sessions (``actors/fanout/fleet_session.py``) and a Redis cluster's (``actors/cluster/fleet.py``)
hand out subscriptions and use them.

Channels: a subscription is owned by its subscriber; the session only offers events to it and
ends it. Cancellation: every ``receive()`` here is a plain checkpoint; cancelling it loses
nothing. Error handling: see each class.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Protocol

import attrs
import trio

from claude_trio.actors.channel import BaseReceiveChannel
from claude_trio.protocol.errors import ReplayGapError, SlowSubscriberError
from claude_trio.protocol.fanout.replay import Entry, SubscriberQueue
from claude_trio.protocol.session.events import Event
from claude_trio.protocol.session.transcript import Transcript, ends_execution

__all__ = [
    "DEFAULT_SUBSCRIBER_BYTES",
    "DEFAULT_SUBSCRIBER_QUEUE",
    "FollowSource",
    "FollowingChannel",
    "ResyncRequired",
    "Subscription",
    "SubscriptionSource",
    "execution_transcript",
    "open_following",
]

DEFAULT_SUBSCRIBER_BYTES = 8 * 2**20
"""Counted bytes a subscriber's queue may hold by default before it is dropped."""
DEFAULT_SUBSCRIBER_QUEUE = 1000
"""Live events a ``subscribe()`` channel queues before its consumer is dropped and served a
replay from its last seq (it sees a pause, not an error)."""


@attrs.frozen(kw_only=True)
class ResyncRequired:
    """``last_seq`` is older than the replay buffer: events after it were evicted.

    ``oldest_seq`` is the oldest seq the buffer still holds; subscribe again with ``None`` (or
    ``oldest_seq - 1``) to get what is left.
    """

    session_id: str
    oldest_seq: int



class SubscriptionSource(Protocol):
    """What a :class:`Subscription` follows: a :class:`FleetSession`, or a session of a Redis
    cluster (``actors/cluster/fleet.py``)."""

    @property
    def id(self) -> str: ...

    def _detach(self, subscription: Subscription) -> None: ...


class Subscription(BaseReceiveChannel[Event]):
    """One subscriber's view of a session: re-shown questions, then the replay, then live events.

    Channels: the subscriber owns it; ``close()`` (or ``with sub:``) detaches it from the session.
    The session side only offers events (never waits) and ends it after the final event.
    Cancellation: ``receive()`` is a plain checkpoint; cancelling it loses nothing.
    Error handling: after a drop every ``receive()`` raises :class:`SlowSubscriberError`; after
    the session's final event (and everything queued before it) ``trio.EndOfChannel``.
    """

    _closed_message = "this subscription was closed"

    def __init__(
        self,
        owner: SubscriptionSource,
        head: list[Entry],
        *,
        max_queue: int,
        max_bytes: int,
        notify: Callable[[], None] | None,
    ) -> None:
        super().__init__()
        self._owner = owner
        # Re-shown questions and the replay: references to the buffer's entries (bounded by
        # it, plus one pending question per open CLI control request), never merged.
        self._head: list[Entry] = head
        self._head_next = 0
        # Live events not yet received: the slow-subscriber policy (protocol/fanout/replay.py).
        self._live = SubscriberQueue(max_events=max_queue, max_bytes=max_bytes)
        self._notify = notify
        self._ended = False
        #: Why the subscription was dropped (``None`` while it is not).
        self.dropped_reason: str | None = None

    @property
    def session_id(self) -> str:
        return self._owner.id

    @property
    def coalesced(self) -> int:
        """How many deltas were merged into an earlier one to make room."""
        return self._live.coalesced

    @property
    def queued_bytes(self) -> int:
        """Counted bytes of the live events not received yet (``protocol/fanout/replay.py``)."""
        return self._live.bytes

    @property
    def queued(self) -> int:
        """Live events (merged runs count once) and replayed ones not received yet."""
        return len(self._live) + len(self._head) - self._head_next

    # -- the session's side ------------------------------------------------------------------

    def _offer(self, entry: Entry) -> None:
        if self._closed or self.dropped_reason is not None:
            return
        live = self._live
        readable = len(live) > 0  # the subscriber was told, and has not emptied it since
        if not live.offer(entry):
            assert live.dropped_reason is not None
            self._drop(live.dropped_reason)
            return
        if not readable:
            self._ready()

    def _ready(self) -> None:
        self._wake()
        if self._notify is not None:
            self._notify()

    def _drop(self, reason: str) -> None:
        self.dropped_reason = reason
        self._head = []
        self._live.clear()
        self._owner._detach(self)
        self._ready()

    def _end(self) -> None:
        self._ended = True
        self._ready()

    @property
    def closed(self) -> bool:
        """True once the subscriber closed it, or it was dropped."""
        return self._closed or self.dropped_reason is not None

    # -- the subscriber's side ---------------------------------------------------------------

    def receive_entry_nowait(self) -> Entry:
        """Like ``receive_nowait``, with the event's
        :class:`~claude_trio.protocol.fanout.replay.Entry` (a serving layer caches the event's wire
        encoding in ``entry.wire``)."""
        self._check_open()
        return self._take_entry()

    def receive_entries_nowait(self, limit: int, max_size: int) -> list[Entry]:
        """Like :meth:`receive_entry_nowait` for up to ``limit`` entries ready now, in order
        (at least one; the live ones stop once their counted sizes reach ``max_size``): what
        a serving layer writes at once. Raises as ``receive_nowait`` does when none is
        ready."""
        self._check_open()
        if self.dropped_reason is None and self._head_next == len(self._head):
            entries = self._live.take_many(limit, max_size)
            if entries:
                return entries
        return [self._take_entry()]  # the head, one at a time, or what ends the wait

    def _take_entry(self) -> Entry:
        if self.dropped_reason is not None:
            raise SlowSubscriberError(self.dropped_reason)
        if self._head_next < len(self._head):
            entry = self._head[self._head_next]
            self._head_next += 1
            if self._head_next == len(self._head):
                self._head, self._head_next = [], 0
            return entry
        entry_or_none = self._live.take()
        if entry_or_none is not None:
            return entry_or_none
        if self._ended:
            raise trio.EndOfChannel
        raise trio.WouldBlock

    def _take(self) -> Event:
        return self._take_entry().event

    def _discard(self) -> None:
        # close(): detach from the session and discard what is queued.
        self._head = []
        self._live.clear()
        self._owner._detach(self)

    def _queued(self) -> int:
        return self.queued


class FollowSource(SubscriptionSource, Protocol):
    """What ``subscribe()`` and ``result()`` follow: a session that hands out subscriptions
    decided at once (:class:`FleetSession`, a cluster's ``RedisSession``)."""

    @property
    def first_seq(self) -> int: ...

    def subscribe_nowait(
        self,
        last_seq: int | None,
        *,
        max_queue: int,
        max_bytes: int = DEFAULT_SUBSCRIBER_BYTES,
        notify: Callable[[], None] | None = None,
    ) -> Subscription | ResyncRequired: ...


class FollowingChannel(trio.abc.ReceiveChannel[Event]):
    """The channel of ``subscribe()``: one execution's events, from a subscription that is
    renewed from the last seq received whenever its consumer fell behind and was dropped, so
    the consumer sees a pause, never a :class:`SlowSubscriberError`.

    Channels: owns its subscription (closed with it). Cancellation: ``receive()`` is the
    subscription's (cancelling it loses nothing). Error handling: ``ReplayGapError`` when a
    renewal finds the events after the last one received evicted; ``trio.EndOfChannel``
    after the final event of the execution current when it was made.
    """

    def __init__(
        self, source: FollowSource, subscription: Subscription, last_seq: int | None
    ) -> None:
        self._source = source
        self._subscription = subscription
        self._last = last_seq
        self._first_seq = source.first_seq
        self._renewed = False
        self._done = False

    async def receive(self) -> Event:
        while True:
            if self._done:
                await trio.lowlevel.checkpoint()
                raise trio.EndOfChannel
            try:
                event = await self._subscription.receive()
            except SlowSubscriberError:
                self._renew()
                await trio.lowlevel.checkpoint()
                continue
            last = self._last
            if self._renewed and last is not None and event.seq <= last:
                continue  # a question shown again by the renewed subscription: seen already
            self._last = event.seq if last is None else max(last, event.seq)
            if ends_execution(event) and event.seq >= self._first_seq:
                self._done = True
            return event

    def _renew(self) -> None:
        subscribed = self._source.subscribe_nowait(
            self._last, max_queue=DEFAULT_SUBSCRIBER_QUEUE
        )
        if isinstance(subscribed, ResyncRequired):
            raise ReplayGapError(self._source.id, self._last or 0, subscribed.oldest_seq)
        self._subscription.close()
        self._subscription = subscribed
        self._renewed = True

    def close(self) -> None:
        self._done = True
        self._subscription.close()

    async def aclose(self) -> None:
        self.close()
        await trio.lowlevel.checkpoint()


@asynccontextmanager
async def open_following(
    source: FollowSource, last_seq: int | None
) -> AsyncIterator[trio.abc.ReceiveChannel[Event]]:
    """``subscribe(last_seq)`` of a :class:`FollowSource`; ``ReplayGapError`` at once when the
    events after ``last_seq`` are no longer held."""
    await trio.lowlevel.checkpoint()
    subscribed = source.subscribe_nowait(last_seq, max_queue=DEFAULT_SUBSCRIBER_QUEUE)
    if isinstance(subscribed, ResyncRequired):
        raise ReplayGapError(source.id, last_seq or 0, subscribed.oldest_seq)
    channel = FollowingChannel(source, subscribed, last_seq)
    try:
        yield channel
    finally:
        channel.close()


async def execution_transcript(source: FollowSource) -> Transcript:
    """``result()``: the current execution's transcript, once its final event is out. When
    its first events are no longer held (a replay buffer smaller than the execution), the
    transcript holds what is left of it (its ``text`` and ``usage`` come from the final
    event all the same)."""
    first_seq = source.first_seq
    events: list[Event] = []
    try:
        async with open_following(source, first_seq - 1) as channel:
            events.extend([event async for event in channel])
    except ReplayGapError:
        async with open_following(source, None) as channel:
            events = [event async for event in channel if event.seq >= first_seq]
    return Transcript.of(events)
