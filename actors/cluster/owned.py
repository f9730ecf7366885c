"""A cluster's per-client session counts, kept in Redis so that every gateway counts the same
(the per-client limits of ``serve --redis`` hold across gateways).

Each client (a ``GatewayOwner``: principal and address) has a set of the sessions it opened or
continued (``RedisKeys.owned``). A session joins it once its record is written; a count reads
the record state of every member and removes the members that ended (or whose record is
gone), so the set holds at most the client's sessions not ended plus those that ended since
its last count.

Channels: none. Cancellation: each step is one Redis call (or one pipeline). Error handling:
Redis errors become ``ClusterUnavailableError`` through the fleet's ``call``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import coredis
import trio

from claude_trio.actors.fanout.fleet import OwnerStatistics
from claude_trio.actors.fanout.owners import GatewayOwner
from claude_trio.protocol.cluster.keys import RedisKeys
from claude_trio.protocol.cluster.records import SessionRecord

__all__ = ["own", "owner_load"]

Call = Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]


async def owner_load(
    redis: coredis.Redis[str], keys: RedisKeys, call: Call, owner: GatewayOwner
) -> OwnerStatistics:
    """The client's sessions not ended, counted from its set in Redis: each member's record
    state is read; the ended (or gone) ones leave the set."""
    owned = keys.owned(owner.principal, owner.host)

    async def read() -> tuple[list[str], list[str | None]]:
        members = sorted(await redis.smembers(owned))
        async with redis.pipeline(transaction=False) as pipe:
            got = [pipe.hget(keys.session(sid), "state") for sid in members]
        return members, [await request for request in got]

    members, states = await call(read)
    done = [sid for sid, state in zip(members, states, strict=True) if state in (None, "ended")]
    if done:
        await call(lambda: redis.srem(owned, done))
    return OwnerStatistics(
        live=sum(state == "live" for state in states),
        waiting=sum(state == "waiting" for state in states),
        active=sum(state in ("live", "waiting") for state in states),
    )


async def own(
    redis: coredis.Redis[str], keys: RedisKeys, call: Call, record: SessionRecord
) -> None:
    """Count the session as its client's, once its record is written (a count that reads no
    record would remove it)."""
    await trio.lowlevel.checkpoint()
    if record.principal is None:
        return
    owned = keys.owned(record.principal, record.host)
    await call(lambda: redis.sadd(owned, [record.session]))
