"""``RedisSessionStore``: the SDK's ``SessionStore`` on Redis, so a conversation can continue on
any machine that reaches the same Redis.

Pass it as ``ClaudeAgentOptions(session_store=...)`` (``open_session(session_store=...)``): the
SDK mirrors every transcript line the CLI writes to it, and a resume on a machine whose config
folder never saw the session loads the transcript from it.

Layout (``protocol/cluster/keys.py``; every key of a session is hash-tagged by its id):

* ``ct:tx:{sid}:<project>:<subpath>``: a list of JSON entries in append order, and
  ``...:uuids`` the set of the uuids it holds. One Lua script appends a batch: an entry whose
  uuid is already there is skipped (the SDK retries a failed batch, so an append may be
  replayed), an entry without a uuid is always appended.
* ``ct:txsub:{sid}:<project>``: the session's subpaths; ``ct:txmtime:{sid}:<project>``: its
  last write time, in epoch milliseconds from the *server's* clock (so every worker stamps
  with one clock), strictly increasing.
* ``ct:proj:{<project>}:sessions`` (sorted set, score = mtime) and ``...:summaries`` (hash of
  the SDK's folded summaries). These index many sessions, so on Redis Cluster they live in
  the project's slot, written after the session's own keys.

The summary is a read-fold-write; appends to one session are serialized by a lock in this
process (the SDK calls ``append`` from its own tasks, one batch at a time per session, and a
session is written by the one process that runs its CLI).

Calls run in whatever task the SDK calls from (its mirror task, a trio system task); coredis is
built on anyio, so they run under trio. The client must stay open while sessions use the store.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

import coredis
import trio
from claude_agent_sdk import SessionStore
from claude_agent_sdk.types import (
    SessionKey,
    SessionListSubkeysKey,
    SessionStoreEntry,
    SessionStoreListEntry,
    SessionSummaryEntry,
)

from claude_trio.actors.session.sdk_private import fold_session_summary
from claude_trio.protocol.cluster.keys import DEFAULT_PREFIX, RedisKeys

__all__ = ["RedisSessionStore"]

# KEYS: transcript list, uuid set, subkeys set, mtime; ARGV: subpath ('' for main), then
# (uuid or '', json) pairs. Returns the new mtime (server clock, ms, strictly increasing).
_APPEND = """
local n = 0
for i = 2, #ARGV, 2 do
  local u = ARGV[i]
  if u == '' or redis.call('SADD', KEYS[2], u) == 1 then
    redis.call('RPUSH', KEYS[1], ARGV[i + 1])
    n = n + 1
  end
end
if ARGV[1] ~= '' then
  redis.call('SADD', KEYS[3], ARGV[1])
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local last = tonumber(redis.call('GET', KEYS[4]) or '0')
if now <= last then
  now = last + 1
end
redis.call('SET', KEYS[4], now)
return now
"""


class RedisSessionStore(SessionStore):
    """A ``SessionStore`` on one Redis (or Redis Cluster) through a coredis client.

    ``client`` must decode responses (``coredis.Redis(..., decode_responses=True)``); the
    caller opens and closes it. ``prefix`` starts every key (default ``ct``).
    """

    def __init__(self, client: coredis.Redis[str], *, prefix: str = DEFAULT_PREFIX) -> None:
        if not isinstance(client, coredis.Redis | coredis.RedisCluster):
            raise TypeError(
                f"RedisSessionStore needs a coredis.Redis client, got {type(client).__name__}"
            )
        self._client = client
        self._keys = RedisKeys(prefix)
        self._append_script = client.register_script(_APPEND)
        self._locks: dict[tuple[str, str], trio.Lock] = {}

    @property
    def keys(self) -> RedisKeys:
        return self._keys

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        if not entries:
            await trio.lowlevel.checkpoint()
            return
        project, sid, subpath = _parts(key)
        args: list[str] = [subpath or ""]
        for entry in entries:
            uuid = entry.get("uuid")
            args += [uuid if isinstance(uuid, str) else "", json.dumps(entry)]
        k = self._keys
        lock = self._locks.setdefault((project, sid), trio.Lock())
        async with lock:
            mtime = int(
                cast(
                    Any,
                    await self._append_script(
                        keys=[
                            k.transcript(project, sid, subpath),
                            k.transcript_uuids(project, sid, subpath),
                            k.subkeys(project, sid),
                            k.mtime(project, sid),
                        ],
                        args=args,
                    ),
                )
            )
            if subpath:
                return
            summaries = k.project_summaries(project)
            previous = await self._client.hget(summaries, sid)
            prev = cast(SessionSummaryEntry, json.loads(previous)) if previous else None
            folded = fold_session_summary(prev, key, entries)
            folded["mtime"] = mtime
            await self._client.hset(summaries, {sid: json.dumps(folded)})
            await self._client.zadd(k.project_sessions(project), {sid: mtime})

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        project, sid, subpath = _parts(key)
        lines = await self._client.lrange(self._keys.transcript(project, sid, subpath), 0, -1)
        if not lines:
            return None
        return [cast(SessionStoreEntry, json.loads(line)) for line in lines]

    async def list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        scored = await self._client.zrange(
            self._keys.project_sessions(project_key), 0, -1, withscores=True
        )
        return [{"session_id": str(m.member), "mtime": int(m.score)} for m in scored]

    async def list_session_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        found: Mapping[str, str] = await self._client.hgetall(
            self._keys.project_summaries(project_key)
        )
        return [cast(SessionSummaryEntry, json.loads(v)) for v in found.values()]

    async def delete(self, key: SessionKey) -> None:
        project, sid, subpath = _parts(key)
        k = self._keys
        if subpath:
            await self._client.delete(
                [k.transcript(project, sid, subpath), k.transcript_uuids(project, sid, subpath)]
            )
            await self._client.srem(k.subkeys(project, sid), [subpath])
            return
        subpaths = await self._client.smembers(k.subkeys(project, sid))
        doomed = [k.subkeys(project, sid), k.mtime(project, sid)]
        for sub in [None, *subpaths]:
            doomed += [k.transcript(project, sid, sub), k.transcript_uuids(project, sid, sub)]
        await self._client.delete(doomed)
        await self._client.zrem(k.project_sessions(project), [sid])
        await self._client.hdel(k.project_summaries(project), [sid])

    async def list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        subkeys = self._keys.subkeys(key["project_key"], key["session_id"])
        found = await self._client.smembers(subkeys)
        return sorted(found)


def _parts(key: SessionKey) -> tuple[str, str, str | None]:
    try:
        project, sid = key["project_key"], key["session_id"]
    except (KeyError, TypeError):
        raise ValueError(
            f"a session key needs 'project_key' and 'session_id', got {key!r}"
        ) from None
    subpath = key.get("subpath") or None
    if not isinstance(project, str) or not isinstance(sid, str) or not sid:
        raise ValueError(f"a session key's project_key and session_id are strings, got {key!r}")
    return project, sid, subpath
