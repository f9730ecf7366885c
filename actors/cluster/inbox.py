"""A cluster gateway's inbox (``RedisFleet.inbox``): the requests waiting across the cluster's
sessions, read from their event streams in Redis.

While anyone follows the inbox, one task in the fleet's nursery polls (every ``block`` seconds
of ``open_redis_fleet``): it reads the listing and, for each session not ended (and each it
followed that ended since), the events stored after the last one it read, from the current
execution's first on for a session it sees first. A ``user_input_request`` arrives, a
``user_input_resolved`` resolves it with its outcome, and a session's end resolves what it
left open (``ended``). The task stops, and forgets what it read, when the last consumer
leaves. ``asked_at`` is when this gateway first read the request.

Channels: the consumers' channels are theirs (``actors/fanout/inbox.py``). Cancellation:
leaving ``open_redis_fleet`` cancels the task. Error handling: Redis unavailable costs a poll
(the consumers keep the list they have; the fleet logs it) and the next poll tries again.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Protocol

import coredis
import trio

from claude_trio.actors.cluster.questions import QUESTION_KINDS
from claude_trio.actors.extensions.broker import AnswerAccepted, AnswerRejected
from claude_trio.actors.fanout.inbox import InboxChannel, InboxHub, MaySee
from claude_trio.protocol.cluster.keys import RedisKeys
from claude_trio.protocol.cluster.records import (
    SessionRecord,
    decode_event_text,
    entry_texts,
    event_id,
    is_final,
)
from claude_trio.protocol.errors import ClusterUnavailableError, UnknownSessionError
from claude_trio.protocol.fanout.codec import text_kind
from claude_trio.protocol.fanout.inbox import DEFAULT_INBOX_CHANGES, InboxItem
from claude_trio.protocol.session.events import UserInputRequest, UserInputResolved

__all__ = ["ClusterInbox"]

class _Cluster(Protocol):
    """What the inbox reads of its ``RedisFleet`` (``actors/cluster/fleet.py``)."""

    redis: coredis.Redis[str]
    keys: RedisKeys
    _records: dict[str, SessionRecord]

    async def get(self, session_id: str) -> _Answerable: ...

    async def refresh(self, session_id: str | None) -> None: ...

    async def _call(self, call: Callable[[], Any]) -> Any: ...


class _Answerable(Protocol):
    async def answer(self, request_id: str, answer: Any) -> AnswerAccepted | AnswerRejected: ...


#: Events read from one session's stream per request.
READ_BATCH = 500


class ClusterInbox:
    """The inbox of a :class:`~claude_trio.actors.cluster.fleet.RedisFleet` (module docstring)."""

    def __init__(self, fleet: _Cluster, nursery: trio.Nursery, poll: float) -> None:
        self._fleet = fleet
        self._nursery = nursery
        self._poll_every = poll
        self._hub = InboxHub(self._answer)
        self._running = False
        self._polled = trio.Event()  # the running task read Redis once
        #: Per session followed: the seq of the last event read.
        self._cursors: dict[str, int] = {}

    def watch(
        self,
        *,
        may_see: MaySee | None = None,
        max_changes: int = DEFAULT_INBOX_CHANGES,
        notify: Callable[[], None] | None = None,
    ) -> InboxChannel:
        channel = self._hub.watch(may_see=may_see, max_changes=max_changes, notify=notify)
        if not self._running:
            self._running = True
            self._polled = trio.Event()
            self._nursery.start_soon(self._follow, name="cluster inbox")
        return channel

    @asynccontextmanager
    async def open(self, **options: Any) -> AsyncIterator[InboxChannel]:
        """A consumer whose first snapshot is what Redis holds (the first poll is done)."""
        with self.watch(**options) as channel:
            await self._polled.wait()
            yield channel

    async def _answer(
        self, session_id: str, request_id: str, answer: Any
    ) -> AnswerAccepted | AnswerRejected:
        try:
            session = await self._fleet.get(session_id)
        except UnknownSessionError:
            await trio.lowlevel.checkpoint()
            return AnswerRejected(request_id=request_id, reason=f"unknown session {session_id!r}")
        return await session.answer(request_id, answer)

    async def _follow(self) -> None:
        await trio.lowlevel.checkpoint()
        try:
            while self._hub.watches:
                # Redis unavailable: logged by the fleet; the consumers keep what they have.
                with contextlib.suppress(ClusterUnavailableError):
                    await self._poll()
                self._polled.set()
                await trio.sleep(self._poll_every)
        finally:
            self._running = False
            self._polled.set()
            self._cursors.clear()
            self._hub.close()  # cancelled with consumers left (the fleet closes): they end
            self._hub = InboxHub(self._answer)  # nobody follows: what it knew goes stale

    async def _poll(self) -> None:
        fleet = self._fleet
        await fleet.refresh(None)
        records = fleet._records
        live = {sid for sid, record in records.items() if record.state != "ended"}
        for sid in live - self._cursors.keys():
            self._cursors[sid] = records[sid].first_seq - 1
        for sid in list(self._cursors):
            if await self._read(sid):
                self._hub.session_ended(sid)
            if sid not in live:  # its record says it ended (or it is gone): read to its end
                self._hub.session_ended(sid)
                del self._cursors[sid]

    async def _read(self, sid: str) -> bool:
        """Take in the events of ``sid`` after its cursor; True when its execution ended."""
        fleet = self._fleet
        stream = fleet.keys.events(sid)
        record = fleet._records.get(sid)
        while True:
            start = event_id(self._cursors[sid] + 1)

            async def read(start: str = start) -> Any:
                return await fleet.redis.xrange(stream, start, "+", count=READ_BATCH)

            entries = await fleet._call(read)
            stored = [
                (seq, text)
                for entry in entries
                for seq, text in entry_texts(str(entry.identifier), entry.field_values)
                if seq > self._cursors[sid]
            ]
            for seq, text in stored:
                self._cursors[sid] = seq
                kind = text_kind(text)
                if kind is not None and kind not in QUESTION_KINDS:
                    continue  # a delta, a tool call...: nothing to decode for the inbox
                event = decode_event_text(text)
                match event:
                    case UserInputRequest():
                        self._hub.arrived(
                            InboxItem(
                                session=sid,
                                label=None if record is None else record.label,
                                owner=None if record is None else record.principal,
                                request=event,
                                asked_at=InboxHub.now(),
                            )
                        )
                    case UserInputResolved():
                        self._hub.resolved(sid, event.request_id, event.outcome)
                    case _ if is_final(event):
                        return True
            if len(entries) < READ_BATCH:
                return False
