"""What a cluster's gateway last read of the session records (``RecordReads``, the base of
``RedisFleet``): one session's record, a page of them, the listing.

A gateway keeps no session state of its own (``protocol/cluster/records.py`` rule 3): every op
reads the record it acts on first (``refresh(session_id)``), and ``list`` reads the newest
sessions' records a page per round trip (``refresh(None)``). With each record it keeps the
oldest seq the session's stream holds: the record's ``oldest`` (the store script keeps it), or
for a stream stored before records kept it, the stream's first entry.

Channels: none. Cancellation: each read is one Redis round trip (or one pipeline). Error
handling: Redis unavailable -> :class:`ClusterUnavailableError` (its cause logged, not shown to
a remote client); a record that does not decode is logged and forgotten.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import coredis
import trio

from claude_trio.actors.cluster.follower import REDIS_ERRORS
from claude_trio.protocol.cluster.keys import RedisKeys
from claude_trio.protocol.cluster.records import SessionRecord, entry_first_seq
from claude_trio.protocol.errors import ClusterUnavailableError, RemoteProtocolError

__all__ = ["LISTING_MAX", "LISTING_PAGE", "RecordReads"]

log = logging.getLogger("claude_trio.cluster")

LISTING_MAX = 100_000
"""The most sessions ``list`` shows (the newest), read from Redis in pages of ``LISTING_PAGE``."""
LISTING_PAGE = 1000


class RecordReads:
    """The session records a gateway read last, and how it reads them."""

    def __init__(self, redis: coredis.Redis[str], keys: RedisKeys) -> None:
        self.redis = redis
        self.keys = keys
        self._records: dict[str, SessionRecord] = {}
        self._oldest: dict[str, int | None] = {}
        self._listed: tuple[str, ...] = ()

    async def _call(self, call: Callable[[], Any]) -> Any:
        try:
            return await call()
        except REDIS_ERRORS as exc:
            # The cause names hosts and ports: the log gets it, a remote client does not.
            log.warning("Redis is unavailable: %s", type(exc).__name__)
            raise ClusterUnavailableError(
                "the cluster's Redis is unavailable: try again later"
            ) from exc

    async def refresh(self, session_id: str | None) -> None:
        """Read the session's record (or, for ``None``, the listing) from Redis."""
        if session_id is None:
            # Each record is replaced in place, never dropped first: an attach whose own refresh
            # ended while this one waits on Redis must still find its session (test:
            # test_concurrent_refreshes_never_hide_a_session). At the end, the records known
            # before that are not listed go; one added meanwhile (a start) stays.
            before = set(self._records)
            listed = await self._read_listing()
            self._listed = listed
            unlisted = before - set(listed)
            self._records = {s: r for s, r in self._records.items() if s not in unlisted}
            return
        await self._read(session_id)

    async def _read_listing(self) -> tuple[str, ...]:
        """The newest ``LISTING_MAX`` sessions, oldest first, their records read in pages of
        ``LISTING_PAGE`` (one round trip a page)."""
        await trio.lowlevel.checkpoint()
        keys = self.keys
        newest_first: list[str] = []
        seen: set[str] = set()
        start = 0
        while len(newest_first) < LISTING_MAX:
            page = await self._call(
                partial(
                    self.redis.zrange,
                    keys.sessions_index,
                    start,
                    start + LISTING_PAGE - 1,
                    rev=True,
                )
            )
            # A session opened meanwhile moves the ranks by one: seen ones are skipped.
            fresh = [sid for sid in page if sid not in seen][: LISTING_MAX - len(newest_first)]
            seen.update(fresh)
            await self._read_page(fresh)
            newest_first += fresh
            if len(page) < LISTING_PAGE:
                break
            start += LISTING_PAGE
        return tuple(reversed(newest_first))

    async def _read_page(self, sids: list[str]) -> None:
        """``_read`` for many sessions in one round trip (and one more for the records that
        do not say their stream's oldest seq)."""
        keys = self.keys

        async def read(command: Callable[[Any, str], Any], of: list[str]) -> list[Any]:
            async with self.redis.pipeline(transaction=False) as pipe:
                got = [command(pipe, sid) for sid in of]
            return [await request for request in got]

        records = await self._call(lambda: read(lambda p, s: p.hgetall(keys.session(s)), sids))
        unsaid = [s for s, f in zip(sids, records, strict=True) if f and "oldest" not in f]
        heads: dict[str, Any] = {}
        if unsaid:  # streams stored before their records kept their oldest seq
            firsts = await self._call(
                lambda: read(lambda p, s: p.xrange(keys.events(s), count=1), unsaid)
            )
            heads = dict(zip(unsaid, firsts, strict=True))
        for sid, fields in zip(sids, records, strict=True):
            self._keep(sid, fields, heads.get(sid))

    async def _refresh_active(self) -> None:
        """Read again the records of the sessions this gateway saw not ended (what the
        per-client limits count)."""
        await trio.lowlevel.checkpoint()
        for sid, record in list(self._records.items()):
            if record.state != "ended":
                await self._read(sid)

    async def _read(self, sid: str) -> None:
        keys = self.keys
        fields = await self._call(lambda: self.redis.hgetall(keys.session(sid)))
        first = None
        if fields and "oldest" not in fields:
            first = await self._call(lambda: self.redis.xrange(keys.events(sid), count=1))
        self._keep(sid, fields, first)

    def _keep(self, sid: str, fields: Mapping[str, str], first: Any) -> None:
        """Keep the record read for ``sid`` (forget it when Redis holds none) and its
        stream's oldest seq: the record's ``oldest``, or else that of ``first`` (``XRANGE``'s
        reply for the stream's first entry)."""
        if not fields:
            self._records.pop(sid, None)  # gone from Redis: forgotten here too
            return
        try:
            self._records[sid] = SessionRecord.from_fields(fields)
        except RemoteProtocolError as exc:
            log.error("cluster: session %s has a broken record: %s", sid, exc)
            self._records.pop(sid, None)
            return
        said = fields.get("oldest", "")
        if said.isdigit():
            self._oldest[sid] = int(said)
        else:
            self._oldest[sid] = (
                entry_first_seq(first[0].identifier, first[0].field_values) if first else None
            )
