"""A cluster gateway's view of a session while many clients attach at once: every
``refresh`` of a session replaces its record without ever leaving it out, so a client whose
attach runs while another client's refresh waits on Redis still finds the session (once, one
client in five of 50 attaching at the same moment got ``unknown_session``)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import coredis
import pytest
import trio

from claude_trio import ExecuteParams
from claude_trio.actors.cluster.fleet import RedisFleet, open_redis_fleet
from claude_trio.protocol.cluster.keys import RedisKeys
from claude_trio.testing import RedisServer


async def hammer(fleet: RedisFleet, refresh: Callable[[], Coroutine[Any, Any, None]],
                 sid: str, misses: list[int]) -> None:  # fmt: skip
    for _ in range(20):
        await refresh()
        try:
            fleet.get_nowait(sid)  # what the gateway's attach does right after its refresh
        except KeyError:
            misses.append(1)


async def test_concurrent_refreshes_never_hide_a_session(redis_server: RedisServer) -> None:
    async with (
        coredis.Redis.from_url(redis_server.url, decode_responses=True) as redis,
        open_redis_fleet(redis, block=0.2) as fleet,
    ):
        session = await fleet.open(ExecuteParams(prompt="attach to me"))
        misses: list[int] = []
        async with trio.open_nursery() as nursery:
            for i in range(20):
                one = lambda: fleet.refresh(session.id)  # noqa: E731
                listing = lambda: fleet.refresh(None)  # noqa: E731
                nursery.start_soon(hammer, fleet, listing if i % 5 == 0 else one, session.id,
                                   misses)  # fmt: skip
        assert misses == []
        assert fleet.get_nowait(session.id).id == session.id

        # A session Redis no longer holds is forgotten by the next refresh of it.
        await redis.delete([RedisKeys().session(session.id)])
        await fleet.refresh(session.id)
        assert session.id not in {s.id for s in fleet.sessions()}
        with pytest.raises(KeyError):
            fleet.get_nowait(session.id)
