"""A cluster's session counts, kept in Redis so that every gateway counts the same (the
per-client limits and the server-wide ``max_sessions`` of ``serve --redis`` hold across
gateways).

Each client (a ``GatewayOwner``: principal and address) has a set of the sessions it opened or
continued (``RedisKeys.owned``), and the cluster one of all of them (``RedisKeys.active``). A
session joins both once its record is written; a count reads the record state of every member
and removes the members that ended (or whose record is gone), so a set holds at most the
sessions not ended plus those that ended since its last count.

Channels: none. Cancellation: each step is one Redis call (or one pipeline). Error handling:
Redis errors become ``ClusterUnavailableError`` through the fleet's ``call``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import coredis
import trio

from claude_trio.actors.fanout.fleet import FleetStatistics, OwnerStatistics
from claude_trio.actors.fanout.owners import GatewayOwner
from claude_trio.protocol.cluster.keys import RedisKeys
from claude_trio.protocol.cluster.records import SessionRecord

__all__ = ["cluster_load", "own", "owner_load"]

Call = Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]


async def owner_load(
    redis: coredis.Redis[str], keys: RedisKeys, call: Call, owner: GatewayOwner
) -> OwnerStatistics:
    """The client's sessions not ended, counted from its set in Redis: each member's record
    state is read; the ended (or gone) ones leave the set."""
    states = await _states(redis, keys, call, keys.owned(owner.principal, owner.host))
    return OwnerStatistics(
        live=sum(state == "live" for state in states),
        waiting=sum(state == "waiting" for state in states),
        active=sum(state in ("live", "waiting") for state in states),
    )


async def cluster_load(
    redis: coredis.Redis[str], keys: RedisKeys, call: Call, finished: int
) -> FleetStatistics:
    """The cluster's sessions not ended (what the server-wide ``max_sessions`` counts on every
    gateway), counted as :func:`owner_load` does, from the set of all of them; ``finished``
    is passed through (the ended ones are not counted)."""
    states = await _states(redis, keys, call, keys.active)
    return FleetStatistics(
        live=sum(state == "live" for state in states),
        waiting=sum(state == "waiting" for state in states),
        finished=finished,
    )


async def _states(
    redis: coredis.Redis[str], keys: RedisKeys, call: Call, members_key: str
) -> list[str | None]:
    """The record states of the set's members; the ended (or gone) ones leave the set."""

    async def read() -> tuple[list[str], list[str | None]]:
        members = sorted(await redis.smembers(members_key))
        async with redis.pipeline(transaction=False) as pipe:
            got = [pipe.hget(keys.session(sid), "state") for sid in members]
        return members, [await request for request in got]

    members: list[str]
    states: list[str | None]
    members, states = await call(read)
    done = [sid for sid, state in zip(members, states, strict=True) if state in (None, "ended")]
    if done:
        await call(lambda: redis.srem(members_key, done))
    return states


async def own(
    redis: coredis.Redis[str], keys: RedisKeys, call: Call, record: SessionRecord
) -> None:
    """Count the session as the cluster's and its client's, once its record is written (a
    count that reads no record would remove it)."""
    await trio.lowlevel.checkpoint()
    await call(lambda: redis.sadd(keys.active, [record.session]))
    if record.principal is None:
        return
    owned = keys.owned(record.principal, record.host)
    await call(lambda: redis.sadd(owned, [record.session]))
