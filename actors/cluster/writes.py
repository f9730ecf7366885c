"""The fenced writes of a cluster's worker (``protocol/cluster/records.py`` rule 7).

Every write a worker makes for a session it runs goes through :class:`FencedWrites`: taking
the session (its new token), storing its events, updating its record, recording an accepted
push. Each is one of the Lua scripts of ``protocol/cluster/scripts.py``, which writes nothing
unless the session record's epoch still equals the worker's token; a refused write raises
:class:`_FencedOut` (nothing was written), and the worker stops that session's CLI.

Channels: none. Cancellation: a write is one script call, retried while Redis is unavailable;
cancelling it ends the retries (a script runs whole or not at all). Error handling: a Redis
error is retried by the worker's ``retrying`` (which tracks its degraded state), never
raised; a write the token no longer allows raises ``_FencedOut``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import coredis
import trio

from claude_trio.protocol.cluster.keys import RedisKeys
from claude_trio.protocol.cluster.records import (
    AcceptedPush,
    Fenced,
    encode_usage,
    entry_runs,
)
from claude_trio.protocol.cluster.scripts import (
    PUSH_SCRIPT,
    RECORD_SCRIPT,
    STORE_SCRIPT,
    TAKE_SCRIPT,
)
from claude_trio.protocol.fanout.codec import event_text
from claude_trio.protocol.session.events import Aborted, Event, Result, TurnStarted
from claude_trio.protocol.session.usage import Usage

__all__ = ["FencedWrites"]

#: ``await retrying(what, call)``: ``await call()`` until Redis answers (the worker's).
Retrying = Callable[[str, Callable[[], Awaitable[Any]]], Awaitable[Any]]


class _FencedOut(Exception):
    """A write was refused by rule 7: nothing was written (caught where the session's work
    is done)."""

    def __init__(self, fenced: Fenced) -> None:
        super().__init__(fenced.message)
        self.fenced = fenced


class FencedWrites:
    """A worker's writes for the sessions it runs, each refused unless its token is current."""

    def __init__(
        self,
        redis: coredis.Redis[str],
        *,
        keys: RedisKeys,
        worker_id: str,
        stream_max: int,
        retrying: Retrying,
    ) -> None:
        self._keys = keys
        self._worker_id = worker_id
        self._stream_max = stream_max
        self._retrying = retrying
        self._take_script = redis.register_script(TAKE_SCRIPT)
        self._store_script = redis.register_script(STORE_SCRIPT)
        self._record_script = redis.register_script(RECORD_SCRIPT)
        self._push_script = redis.register_script(PUSH_SCRIPT)

    async def take(self, sid: str, execution: int, entry_id: str) -> int:
        """Take the session for the job ``entry_id`` of its ``execution``: its record's epoch
        grows by one and the new value is this worker's token for it (-1: the session has no
        record; -2: another copy of the job started that execution, or the session is past
        it: run nothing)."""
        keys = self._keys
        token = await self._retrying(
            "claim",
            lambda: self._take_script(keys=[keys.session(sid)], args=[execution, entry_id]),
        )
        return int(token)

    def refused(self, sid: str, token: int) -> _FencedOut:
        """The error that says this worker's ``token`` for ``sid`` is no longer current."""
        return _FencedOut(Fenced(session=sid, worker=self._worker_id, token=token))

    async def record(
        self, sid: str, token: int, update: Mapping[str, str], *, clear_pushes: bool = False
    ) -> None:
        """Update the session's record (and clear its accepted pushes), if still ours."""
        keys = self._keys
        args = [str(token), "1" if clear_pushes else "0"]
        for name, value in update.items():
            args += [name, value]
        done = await self._retrying(
            "record",
            lambda: self._record_script(keys=[keys.session(sid), keys.pushes(sid)], args=args),
        )
        if not done:
            raise self.refused(sid, token)

    async def accepted(self, sid: str, token: int, push: AcceptedPush) -> None:
        keys = self._keys
        done = await self._retrying(
            "record",
            lambda: self._push_script(
                keys=[keys.session(sid), keys.pushes(sid)], args=[str(token), push.encode()]
            ),
        )
        if not done:
            raise self.refused(sid, token)

    async def store_many(
        self, sid: str, token: int, events: list[Event], *, usage: Usage | None = None
    ) -> None:
        """Append events to the session's stream in one round trip, in as few entries as rule
        2 allows (those already there are skipped), and the record's seq with a turn's start
        or end (and ``usage``, the session's after these events, when given); if the session
        is still ours (rule 7), else ``_FencedOut`` and nothing is written."""
        await trio.lowlevel.checkpoint()
        keys = self._keys
        update: dict[str, str] = {}
        if usage is not None:
            update["usage"] = encode_usage(usage)
        for event in events:
            match event:
                case Result() | Aborted() | TurnStarted():
                    update["last_seq"] = str(event.seq)
                    if event.session_id:
                        update["claude_session_id"] = event.session_id
                case _:
                    pass
        encoded = [event_text(event) for event in events]
        texts = "\n".join(encoded)
        if texts.count("\n") != max(len(events) - 1, 0):  # compact JSON text holds none
            raise AssertionError("an event's stored text holds a newline")
        seqs = [event.seq for event in events]
        runs = entry_runs(seqs, [len(text) for text in encoded])
        lasts, at = [], -1
        for run in runs:
            at += run
            lasts.append(str(seqs[at]))
        args = [
            str(token),
            str(self._stream_max),
            str(len(runs)),
            "\n".join(lasts),
            "\n".join(map(str, runs)),
            texts,
        ]
        for name, value in update.items():
            args += [name, value]
        done = await self._retrying(
            "events",
            lambda: self._store_script(keys=[keys.session(sid), keys.events(sid)], args=args),
        )
        if not done:
            raise self.refused(sid, token)

    async def store(self, sid: str, token: int, event: Event) -> None:
        """Append one event to the session's stream (already there: nothing to do)."""
        await self.store_many(sid, token, [event])
