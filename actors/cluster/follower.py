"""The followers of a cluster's gateway: each session's event stream is read once per gateway
and fanned out in memory to its subscriptions (``actors/fanout/subscription.py``), as a local
fleet's session fans its events out.

A :class:`StreamFollower` reads one session's stream (a blocking ``XREAD`` from the last seq it
read; while a burst lasts, ``READ_SCRIPT``, whose reply is a batch as one string) and
keeps what it read in a :class:`~claude_trio.protocol.fanout.replay.ReplayBuffer` of the
gateway's ``replay_buffer``; every event enters once, as one ``Entry`` shared by every
subscription (so a serving layer encodes it once per gateway, not once per client). A
subscription joins it:

* at once, when the follower has read past the subscriber's ``last_seq`` and still holds every
  event after it (the replay is its buffer's entries after ``last_seq``), or when the
  subscriber is at or ahead of it (events it already saw are skipped); a subscriber that
  skips part of the current execution first gets the questions still pending in it, found
  in the follower's buffer when that holds the execution from its first event (none when
  the follower read the execution's final event);
* after a catch-up of its own otherwise: a task that reads the stream after ``last_seq`` only
  while the subscription's queue is below half full (so a replay never overflows it), first
  re-showing the questions still pending when ``last_seq`` is inside the current execution,
  and joins the follower as soon as the follower holds what comes next.

Live events are offered to every member without waiting: a member that falls behind by more
than its queue is dropped (the slow-subscriber policy of ``protocol/fanout/replay.py``) and its
client attaches again with its last seq, which costs that client a replay and nobody else
anything. A member ends after the final event of the execution that was current when it
subscribed.

Channels: the followers only offer events to subscriptions, which their subscribers own.
Cancellation: the follower and catch-up tasks live in the ``RedisFleet``'s nursery; a follower
stops one read after its last member left (that read waits at most ``LINGER_MS``: the
clients whose members an execution's final event ended renew them for the next execution
moments later, and find it there), a catch-up when its subscription is closed, dropped or ended.
Error handling: Redis unavailable, or a stream trimmed past what a follower read, drops the
subscriptions with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import coredis
import coredis.exceptions
import trio
from coredis.commands.constants import CommandName
from coredis.tokens import PrefixToken
from coredis.typing import Key

from claude_trio.actors.cluster.questions import pending_questions
from claude_trio.actors.fanout.subscription import Subscription
from claude_trio.protocol.cluster.keys import RedisKeys
from claude_trio.protocol.cluster.records import entry_texts, event_id, stored_entry
from claude_trio.protocol.cluster.scripts import READ_SCRIPT, read_run
from claude_trio.protocol.fanout import codec
from claude_trio.protocol.fanout.pending import still_pending
from claude_trio.protocol.fanout.replay import Entry, ReplayBuffer, entry_size, is_final_entry
from claude_trio.protocol.session.events import Event

__all__ = ["FOLLOWER_READ", "REDIS_ERRORS", "StreamFollower", "StreamFollowers"]

REDIS_ERRORS = (coredis.exceptions.ConnectionError, TimeoutError, OSError)
FOLLOWER_READ = 512
"""Stream entries a follower reads per round trip at most."""
LINGER_MS = 250
"""How long a follower's read after its last member left waits at most (each blocking read
holds a Redis connection while it waits)."""
FOLLOWER_BYTES = 8 * 2**20
"""Counted bytes a follower's buffer holds at most (besides ``replay_buffer`` events)."""
GAP_REASON = "slow consumer: the session moved on past the replay (attach again with your last seq)"


@attrs.define(eq=False)
class _Member:
    skip_through: int
    """Events up to this seq were offered already (the replay, or what the client saw)."""
    first_seq: int
    """The first seq of the execution it follows: its final event ends the member."""


def _event_of(entry: Entry) -> Event:
    return entry.event


def _stream_entries(reply: Any) -> list[tuple[str, list[str]]]:
    """The entries of a one-stream ``XREAD`` reply (RESP3: a map; RESP2: pairs; none: ``None``)."""
    if not reply:
        return []
    streams = reply.values() if isinstance(reply, Mapping) else (pair[1] for pair in reply)
    return [(entry[0], entry[1]) for entries in streams for entry in entries]


def _texts(raw: tuple[str, list[str]], after: int) -> list[tuple[int, str]]:
    """The seq and stored text of each event after seq ``after`` of a stream entry."""
    identifier, fields = raw
    texts = entry_texts(identifier, dict(zip(fields[0::2], fields[1::2], strict=False)))
    return [(seq, text) for seq, text in texts if seq > after]


class StreamFollower:
    """One session's stream as this gateway reads it, and the subscriptions it feeds."""

    def __init__(self, sid: str, start: int, replay_buffer: int) -> None:
        self.sid = sid
        self.last = start
        """The last seq read."""
        self.buffer = ReplayBuffer(max_events=max(1, replay_buffer), max_bytes=FOLLOWER_BYTES)
        self.members: dict[Subscription, _Member] = {}
        self.final_seq = 0
        """The seq of the last final event read (0: none): no question of an execution
        that started at or before it is pending."""
        self.skipping_through = 0
        """The highest ``skip_through`` of a member that joined (events up to it may be ones
        a member was given already: past it, every member takes every event)."""

    def replay_after(self, seq: int) -> list[Entry] | None:
        """Every event after ``seq`` that this follower read, or ``None`` when it does not hold
        them all (it started later, or evicted some)."""
        if seq >= self.last:
            return []
        oldest = self.buffer.oldest_seq
        if oldest is None or seq < oldest - 1:
            return None
        return self.buffer.after(seq)

    def pending_through(self, first_seq: int, through: int) -> list[Entry] | None:
        """The questions of the execution starting at ``first_seq`` still pending as far as
        this follower read, asked at or before ``through``; ``None`` when it does not hold
        every event from ``first_seq`` to ``through`` (then the stream is read instead)."""
        if through > self.last:
            return None
        if self.final_seq >= first_seq:  # the execution has ended: nothing is pending
            return []
        oldest = self.buffer.oldest_seq
        if oldest is None or oldest > first_seq:
            return None
        held = self.buffer.after(first_seq - 1)
        if held is None:
            return None
        # Entries kept as text are deltas: they neither ask nor answer a question.
        return still_pending((e for e in held if e.decoded), _event_of, through=through)

    def _publish(self, seq: int, entry: Entry) -> None:
        self.last = seq
        self.buffer.push(entry)
        final = is_final_entry(entry)
        if not final and seq > self.skipping_through:  # every member takes it, as it is
            for subscription in list(self.members):
                subscription._offer(entry)
            return
        if final:
            self.final_seq = seq
        for subscription, member in list(self.members.items()):
            if seq <= member.skip_through or subscription not in self.members:
                continue
            subscription._offer(entry)
            if final and seq >= member.first_seq:
                self.members.pop(subscription, None)
                subscription._end()

    def _drop_all(self, reason: str) -> None:
        members, self.members = self.members, {}
        for subscription in members:
            subscription._drop(reason)


class StreamFollowers:
    """The :class:`StreamFollower` of every session this gateway follows (one per session)."""

    def __init__(
        self,
        redis: coredis.Redis[str],
        keys: RedisKeys,
        nursery: trio.Nursery,
        *,
        block_ms: int,
        replay_buffer: int,
    ) -> None:
        self._redis = redis
        self._keys = keys
        self._nursery = nursery
        self._block_ms = block_ms
        self._replay_buffer = replay_buffer
        self._followers: dict[str, StreamFollower] = {}
        self._read_script = redis.register_script(READ_SCRIPT)
        codec.prepare()  # the first events read pay no plan-making

    def following(self, sid: str) -> StreamFollower | None:
        """The follower of ``sid``, while it has members (or its last read is in flight)."""
        return self._followers.get(sid)

    def subscribe(
        self,
        subscription: Subscription,
        sid: str,
        after: int,
        first_seq: int,
        *,
        batch: int,
        behind: int,
    ) -> list[Entry] | None:
        """Feed ``subscription`` every event after ``after`` until the final event of the
        execution starting at ``first_seq``. Returns the replay it joins a follower with at once
        (hand it to the subscription ahead of live events), or ``None`` when a catch-up task
        was started instead. ``batch``: how many events the subscription may have queued
        before its catch-up waits (half its queue). ``behind``: how many events the stream
        held after ``after`` when last read (a follower is started here only when that is at
        most ``batch``: a longer replay is read with the subscription's pace)."""
        if after < first_seq:  # no questions to re-show before the replay
            at_tip = behind <= batch
            head = self._join(subscription, sid, after, first_seq, None, at_tip=at_tip)
            if head is not None:
                return head
        else:  # its open questions first: from the follower's buffer when it holds them
            follower = self._followers.get(sid)
            asked = None if follower is None else follower.pending_through(first_seq, after)
            if asked is not None:
                head = self._join(subscription, sid, after, first_seq, None, at_tip=True)
                if head is not None:
                    return asked + head
        self._nursery.start_soon(self._catch_up, subscription, sid, after, first_seq, batch)
        return None

    def detach(self, sid: str, subscription: Subscription) -> None:
        follower = self._followers.get(sid)
        if follower is not None:
            follower.members.pop(subscription, None)

    def _join(
        self,
        subscription: Subscription,
        sid: str,
        after: int,
        first_seq: int,
        limit: int | None,
        *,
        at_tip: bool,
    ) -> list[Entry] | None:
        """Make ``subscription`` a member of the follower of ``sid`` if it can be fed from it
        (starting the follower at ``after`` when there is none and ``at_tip``); the replay it
        still needs (at most ``limit`` events), or ``None``."""
        follower = self._followers.get(sid)
        if follower is None:
            if not at_tip:
                return None
            follower = StreamFollower(sid, after, self._replay_buffer)
            self._followers[sid] = follower
            self._nursery.start_soon(self._follow, follower)
        head = follower.replay_after(after)
        if head is None or (limit is not None and len(head) > limit):
            return None
        for entry in head:
            if entry.seq >= first_seq and is_final_entry(entry):
                # Ended once its head is read; no notice now: this may run inside the
                # subscriber's own subscribe call, and handing the head over notifies it.
                subscription._ended = True
                return head
        skip_through = max(after, follower.last)
        follower.members[subscription] = _Member(skip_through=skip_through, first_seq=first_seq)
        follower.skipping_through = max(follower.skipping_through, skip_through)
        return head

    async def _read(
        self, sid: str, after: int, count: int, block: int | None
    ) -> list[tuple[str, list[str]]]:
        """The stream's entries after seq ``after`` (at most ``count`` entries; waiting at most
        ``block`` ms for one), as ``(entry id, [field, value, ...])`` the way the reply holds
        them: ``xread``'s objects for each entry (a tuple and an ordered dict) cost more than
        the rest of reading a delta."""
        args: list[Any] = [PrefixToken.COUNT, count]
        if block is not None:
            args += [PrefixToken.BLOCK, block]
        args += [PrefixToken.STREAMS, Key(self._keys.events(sid)), event_id(after)]
        return await self._redis.create_request(CommandName.XREAD, *args, callback=_stream_entries)

    async def _read_texts(self, sid: str, after: int, count: int) -> tuple[list[str], bool]:
        """The texts of the stored events after seq ``after`` (at most ``count``, the next seqs
        in order, without waiting), and whether an entry that ``XREAD`` must read came next
        (a gap, another shape): ``READ_SCRIPT``, whose reply is one string per batch."""
        return read_run(await self._read_script(keys=[self._keys.events(sid)], args=[after, count]))

    async def _entries_after(
        self, sid: str, after: int, count: int, block: int | None
    ) -> list[tuple[int, Entry]]:
        """The stored events after seq ``after`` (at most ``count``) with their seqs. With
        ``block``: one ``XREAD`` that waits at most ``block`` ms for an entry. Without:
        ``READ_SCRIPT``'s run of the next events, and ``XREAD`` for an entry that breaks
        the run (a gap, another shape) when it comes first."""
        if block is None:
            texts, other = await self._read_texts(sid, after, count)
            if texts or not other:
                return [(after + i, stored_entry(after + i, t)) for i, t in enumerate(texts, 1)]
        read = await self._read(sid, after, count, block)
        stored = [pair for raw in read for pair in _texts(raw, after)][:count]
        # As the follower's buffer and subscribers hold them (a delta kept as its text).
        return [(seq, stored_entry(seq, text)) for seq, text in stored]

    async def _follow(self, follower: StreamFollower) -> None:
        """Read the stream on while the follower has members, and for one read after the last
        left: the members an execution's final event ended are renewed by their clients for
        the next execution moments later, and find the follower (and what it read) still
        there instead of each reading the stream again. A blocking ``XREAD`` waits for the
        next events; after a read that found more than one (a burst under way), the script
        ``READ_SCRIPT`` reads on, a batch as one string, until a read finds one or none."""
        await trio.lowlevel.checkpoint()
        try:
            lingered = False
            bulk = False
            while follower.members or not lingered:
                block: int | None = None
                if not (bulk and follower.members):
                    lingered = not follower.members
                    block = min(self._block_ms, LINGER_MS) if lingered else self._block_ms
                try:
                    got = await self._entries_after(
                        follower.sid, follower.last, FOLLOWER_READ, block
                    )
                except REDIS_ERRORS as exc:
                    follower._drop_all(f"the cluster is unavailable: {exc}")
                    return
                for seq, entry in got:
                    if seq != follower.last + 1:
                        follower._drop_all(GAP_REASON)
                        return
                    follower._publish(seq, entry)
                bulk = len(got) > 1
        finally:
            if self._followers.get(follower.sid) is follower:
                del self._followers[follower.sid]

    async def _catch_up(
        self, subscription: Subscription, sid: str, after: int, first_seq: int, batch: int
    ) -> None:
        """A subscription's own replay from the stream, until a follower can feed it."""
        await trio.lowlevel.checkpoint()
        last = after
        if after >= first_seq:  # the client skips part of this execution: its open questions first
            try:
                asked = await pending_questions(
                    self._redis, self._keys, sid, first_seq=first_seq, through=after,
                    limit=self._replay_buffer,
                )  # fmt: skip
            except REDIS_ERRORS as exc:
                subscription._drop(f"the cluster is unavailable: {exc}")
                return
            for event in asked:
                subscription._offer(Entry(event=event, size=entry_size(event)))
        at_tip = False
        while not subscription.closed:
            if subscription.queued >= batch:
                await trio.sleep(0.01)  # the subscriber is behind: read on when it catches up
                continue
            head = self._join(subscription, sid, last, first_seq, batch, at_tip=at_tip)
            if head is not None:
                for entry in head:
                    subscription._offer(entry)
                return
            try:
                got = await self._entries_after(sid, last, batch, None)
            except REDIS_ERRORS as exc:
                subscription._drop(f"the cluster is unavailable: {exc}")
                return
            for seq, entry in got:
                if seq != last + 1:
                    subscription._drop(GAP_REASON)
                    return
                last = seq
                subscription._offer(entry)
                if seq >= first_seq and is_final_entry(entry):
                    subscription._end()
                    return
            at_tip = len(got) < batch
            if not got and self._followers.get(sid) is not None:
                await trio.sleep(0.01)  # the follower has not read this far yet
