"""Enqueueing an ``open`` or ``continue`` under an idempotency key, on one Redis or a Redis
Cluster (``RedisFleet``'s part that writes across hash slots).

The key's claim, the session record, the sessions index and the jobs stream live in four
hash slots, so no one script writes them together. The steps and the recovery rule are those
of ``protocol/cluster/scripts.py``: claim the key; write the record with the job it waits for
(``pending_job``); add it to the index and append the job; clear ``pending_job``. A retry that
finds the claim does the steps the first request did not finish. A job may be appended twice
(never lost); the workers run one copy (``TAKE_SCRIPT``).

Channels: none. Cancellation: each step is one Redis call; a request cancelled between steps
is finished by its retry. Error handling: Redis errors are turned into
``ClusterUnavailableError`` by the fleet's ``call``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import coredis

from claude_trio.protocol.cluster.keys import RedisKeys
from claude_trio.protocol.cluster.records import Job, SessionRecord
from claude_trio.protocol.cluster.scripts import (
    APPENDED_SCRIPT,
    CLAIM_SCRIPT,
    PENDING_SCRIPT,
    UNCLAIM_SCRIPT,
)
from claude_trio.protocol.config.resume import START_ONLY, ContinueOptions
from claude_trio.protocol.errors import IdempotencyConflictError, RemoteProtocolError
from claude_trio.protocol.fanout.wire_checks import images_to_json

__all__ = ["Claim", "IdempotentEnqueue", "continuation"]


@attrs.frozen(kw_only=True)
class Claim:
    """An idempotency key of a request, whose it is, and the request's digest."""

    key: str
    scope: str
    op: str
    digest: str

    def claim(self, sid: str, expected: str) -> str:
        """What the key's claim stores: ``"<sid> <op> <digest> <expected>"`` (``expected``:
        the executions a continue found ended, ``""`` for an open)."""
        return f"{sid} {self.op} {self.digest} {expected}"

    def session_of(self, stored: str) -> tuple[str, str]:
        """The session of a stored claim of this key and the executions it expected;
        ``IdempotencyConflictError`` when it was made by another request."""
        sid, op, digest, expected = ([*stored.split(" "), ""])[:4]
        if (op, digest) != (self.op, self.digest):
            raise IdempotencyConflictError(self.key, self.op)
        return sid, expected


def continuation(
    record: SessionRecord,
    prompt: str,
    options: ContinueOptions | None = None,
    *,
    traceparent: str = "",
) -> tuple[SessionRecord, Job]:
    """The record and job of the next execution of an ended session, with ``prompt`` and
    ``options`` (checked already; the record keeps their model and permission mode for the
    executions after; ``traceparent``: the trace context of the op that asked for it)."""
    options = options or ContinueOptions()
    changes: dict[str, Any] = {}
    if options.model is not None:
        changes["model"] = options.model
    if options.permission_mode is not None:
        changes["permission_mode"] = options.permission_mode
    params = {
        **record.params,
        **changes,
        "prompt": prompt,
        "resume_session_id": record.claude_session_id,
        # As a local fleet's continue (resume.continuation): a fork, a chosen id, a
        # truncation address the first start only, and the first prompt's images are in
        # the conversation already.
        **START_ONLY,
        "images": images_to_json(options.images),
    }
    record = attrs.evolve(
        record,
        params={**record.params, **changes},
        state="waiting",
        executions=record.executions + 1,
        first_seq=record.last_seq + 1,
        ended_at=None,
        abort_requested=False,
        worker="",
    )
    job = Job(
        kind="continue",
        session=record.session,
        params=params,
        after_seq=record.last_seq,
        execution=record.executions,
        traceparent=traceparent,
    )
    return record, job


class IdempotentEnqueue:
    """The scripts and steps of an enqueue under an idempotency key."""

    def __init__(
        self,
        redis: coredis.Redis[str],
        keys: RedisKeys,
        call: Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]],
        ttl: float,
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.ttl = ttl
        self._call = call
        self._claim_script = redis.register_script(CLAIM_SCRIPT)
        self._unclaim_script = redis.register_script(UNCLAIM_SCRIPT)
        self._pending_script = redis.register_script(PENDING_SCRIPT)
        self._appended_script = redis.register_script(APPENDED_SCRIPT)

    async def claimed(self, claim: Claim) -> tuple[str, str] | None:
        """The session the claim's key created and the executions it expected, or None when
        the key is new."""
        key = self.keys.idempotency(claim.scope, claim.key)
        stored = await self._call(lambda: self.redis.get(key))
        return None if stored is None else claim.session_of(stored)

    async def once(
        self, record: SessionRecord, job: Job, claim: Claim, *, expected: str
    ) -> tuple[bool, str] | None:
        """Enqueue under an idempotency key (the steps and the recovery rule of
        ``protocol/cluster/scripts.py``): ``(True, record's id)`` when the key was new (then
        all is written), ``(False, the session the key created)`` when it was not (and what
        its first request left undone is done now), None when the session changed meanwhile
        (nothing written, the key not kept)."""
        keys = self.keys
        idem = keys.idempotency(claim.scope, claim.key)
        mine = claim.claim(record.session, expected)
        ttl_ms = max(1, int(self.ttl * 1000))
        code, stored = await self._call(
            lambda: self._claim_script(keys=[idem], args=[mine, ttl_ms])
        )
        sid, expected = claim.session_of(str(stored))
        fresh = int(code) == 1
        if not fresh and sid != record.session:
            record = attrs.evolve(record, session=sid)
            job = attrs.evolve(job, session=sid, params=record.params)
        written = await self._write_pending(record, job, expected)
        if written == 0:
            if fresh:  # the session changed meanwhile: nothing written, the key forgotten
                await self._call(lambda: self._unclaim_script(keys=[idem], args=[mine]))
                return None
            return False, sid  # the first request finished: nothing left to do
        await self.append_pending(sid)
        return fresh, sid

    async def _write_pending(self, record: SessionRecord, job: Job, expected: str) -> int:
        """Step 2: the record with the job it waits for, if the session is as expected
        (``PENDING_SCRIPT``'s code)."""
        pending = json.dumps({"job": job.to_fields(), "score": record.created_at})
        fields = record.to_fields()
        args: list[str | int | float] = [expected, pending, len(fields)]
        for name, value in fields.items():
            args += [name, value]
        key = self.keys.session(record.session)
        written, _ = await self._call(lambda: self._pending_script(keys=[key], args=args))
        return int(written)

    async def _appended(self, sid: str, pending: str) -> None:
        """Step 4: the record no longer waits for ``pending`` (it is in the jobs stream)."""
        key = self.keys.session(sid)
        await self._call(lambda: self._appended_script(keys=[key], args=[pending]))

    async def append_pending(self, sid: str) -> None:
        """Append the job the session's record waits for (``pending_job``), if any: steps 3
        and 4 of ``protocol/cluster/scripts.py``."""
        keys = self.keys
        pending = await self._call(lambda: self.redis.hget(keys.session(sid), "pending_job"))
        if pending is None:
            return
        try:
            decoded = json.loads(pending)
            job_fields = {str(k): str(v) for k, v in decoded["job"].items()}
            score = float(decoded["score"])
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise RemoteProtocolError(f"session {sid}: a broken pending job: {exc}") from None

        async def append() -> None:
            await self.redis.zadd(keys.sessions_index, {sid: score})
            await self.redis.xadd(keys.jobs, job_fields)

        await self._call(append)
        await self._appended(sid, pending)
