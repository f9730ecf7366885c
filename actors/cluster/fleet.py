"""``RedisFleet``: a cluster's sessions as one session host (``actors/fanout/hosts.py``), so code
written for a local :class:`~.fleet.Fleet` (``serve_gateway``, ``run_batch``, yours) runs on a
Redis cluster unchanged.

It holds no session state of its own: ``get``, ``list`` and every op on a session read the
session's record (or the listing) from Redis first, and what a session says after that is what
was just read. ``open`` and ``continue_`` append a job for the workers
(``protocol/cluster/records.py`` rule 1); ``subscribe`` follows the session's event stream from any
seq (rule 2), so a client may reconnect to any gateway and get an exact replay; ``push``, ``answer``
and ``abort`` go to the worker running the session (rule 4) and wait for its outcome at most
``command_timeout``; so do the live controls (``set_model``, ``set_permission_mode``).

Channels: each subscription is fed by a follower task in the fleet's nursery, which reads the
stream only while the subscriber's queue is below half full (so a replay never overflows it)
and stops when the subscription is closed, dropped or ends. Cancellation: leaving
``open_redis_fleet`` cancels the followers. Error handling: Redis unavailable ->
:class:`ClusterUnavailableError` out of ``get``/``list``/``open``/``continue_`` and the ops (the
gateway answers the op with an error frame), a follower drops its subscription with the reason
(the client reconnects and attaches again with its last seq).
"""
from __future__ import annotations

import logging
import time
import uuid as uuid_module
from collections.abc import AsyncIterator, Callable, Hashable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import attrs
import coredis
import trio

from claude_trio.actors.cluster.controls import ClusterControls
from claude_trio.actors.cluster.enqueue import Claim, IdempotentEnqueue, continuation
from claude_trio.actors.cluster.follower import StreamFollowers
from claude_trio.actors.cluster.governor import shared_figures
from claude_trio.actors.cluster.inbox import ClusterInbox
from claude_trio.actors.cluster.owned import cluster_load, own, owner_load
from claude_trio.actors.cluster.reads import RecordReads
from claude_trio.actors.extensions.broker import AnswerAccepted, AnswerRejected
from claude_trio.actors.fanout.fleet import (
    FleetStatistics,
    HostDescription,
    HostLoad,
    OwnerStatistics,
)
from claude_trio.actors.fanout.inbox import InboxChannel
from claude_trio.actors.fanout.owners import GatewayOwner
from claude_trio.actors.fanout.subscription import (
    DEFAULT_SUBSCRIBER_BYTES,
    ResyncRequired,
    Subscription,
    execution_transcript,
    open_following,
)
from claude_trio.actors.session.trace_context import current_traceparent
from claude_trio.protocol.checks import check_int, check_number
from claude_trio.protocol.cluster.keys import RedisKeys
from claude_trio.protocol.cluster.records import (
    MOVED_REASON,
    Command,
    Job,
    Outcome,
    SessionRecord,
    SessionState,
    WorkerStatus,
    cluster_summary,
    decode_event_text,
    is_final,
    last_stored,
)
from claude_trio.protocol.config.images import ImageInput
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.config.permissions import PermissionMode
from claude_trio.protocol.config.resume import ContinueOptions, check_continuable
from claude_trio.protocol.config.resume import continuation as resume_continuation
from claude_trio.protocol.errors import (
    ClusterUnavailableError,
    InvalidParamsError,
    LocalProtocolError,
    RemoteProtocolError,
    UnknownSessionError,
)
from claude_trio.protocol.fanout.idempotency import (
    DEFAULT_IDEMPOTENCY_TTL,
    check_idempotency_key,
    continue_digest,
    open_digest,
)
from claude_trio.protocol.fanout.wire import SessionInfo, params_from_json, params_to_json
from claude_trio.protocol.session.events import Event
from claude_trio.protocol.session.lifecycle import Accepted, Rejected
from claude_trio.protocol.session.transcript import Transcript
from claude_trio.protocol.session.usage import Usage

__all__ = ["ClusterUnavailableError", "RedisFleet", "RedisSession", "open_redis_fleet"]

log = logging.getLogger("claude_trio.cluster")

# A live session whose final event is stored already is marked ended by its worker's next
# write: continue_() waits for that this long at most, reading the record this often.
SETTLE_WAIT = 5.0
SETTLE_POLL = 0.01


@attrs.define(eq=False)
class RedisSession:
    """One session of the cluster (a :class:`~claude_trio.actors.fanout.hosts.SessionHandle`), as
    this gateway last read its record: each property reads the latest record the fleet read
    (``get``, ``list``, an op on it), never Redis itself."""

    fleet: RedisFleet
    record: SessionRecord

    @property
    def _now(self) -> SessionRecord:
        return self.fleet._records.get(self.record.session, self.record)

    @property
    def id(self) -> str:
        return self.record.session

    @property
    def owner(self) -> Hashable:
        record = self._now
        principal = record.principal
        return GatewayOwner(principal, record.host) if principal is not None else None

    @property
    def label(self) -> str | None:
        return self._now.label

    @property
    def state(self) -> SessionState:
        return self._now.state

    @property
    def ended(self) -> bool:
        return self._now.state == "ended"

    @property
    def executions(self) -> int:
        return self._now.executions

    @property
    def first_seq(self) -> int:
        return self._now.first_seq

    @property
    def last_seq(self) -> int:
        return self._now.last_seq

    @property
    def usage(self) -> Usage:
        """Every turn of every execution so far, as the record says (the worker writes it
        with the events that change it)."""
        return self._now.usage

    @property
    def created_at(self) -> float:
        return self._now.created_at

    @property
    def ended_at(self) -> float | None:
        return self._now.ended_at

    @property
    def claude_session_id(self) -> str | None:
        return self._now.claude_session_id

    @property
    def oldest_seq(self) -> int | None:
        """The first seq the stream held when it was last read (None: empty)."""
        return self.fleet._oldest.get(self.id)

    def info(self) -> SessionInfo:
        record = self._now
        return SessionInfo(
            session=record.session,
            label=record.label,
            owner=record.principal,
            state=record.state,
            executions=record.executions,
            first_seq=record.first_seq,
            last_seq=record.last_seq,
            usage=record.usage,
            created_at=record.created_at,
            ended_at=record.ended_at,
        )

    def _has_ended(self) -> bool:
        return self._now.state == "ended"

    def live_controls(self) -> ClusterControls:
        """The session's live controls (``set_model``, ``set_permission_mode``): each is a
        command to the worker that runs it (``actors/cluster/controls.py``)."""

        async def read() -> SessionRecord:
            await self.fleet.refresh(self.id)
            return self._now

        return ClusterControls(self.id, read, self.fleet._command)

    def _detach(self, subscription: Subscription) -> None:
        self.fleet._followers.detach(self.id, subscription)

    def subscribe_nowait(
        self,
        last_seq: int | None,
        *,
        max_queue: int,
        max_bytes: int = DEFAULT_SUBSCRIBER_BYTES,
        notify: Callable[[], None] | None = None,
    ) -> Subscription | ResyncRequired:
        """Follow the stream after ``last_seq`` (all it holds for ``None``) until the end of
        the current execution; :class:`ResyncRequired` when events after ``last_seq`` were
        trimmed. A session that has ended, followed from its last seq or later, ends at once."""
        # No upper bound: the stream may be ahead of the record read before this op.
        if last_seq is not None:
            check_int("last_seq", last_seq, 0, allowed="an int >= 0 or None")
        oldest = self.oldest_seq
        if last_seq is not None and oldest is not None and oldest > last_seq + 1:
            return ResyncRequired(session_id=self.id, oldest_seq=oldest)
        subscription = Subscription(
            self, [], max_queue=max_queue, max_bytes=max_bytes, notify=notify
        )
        record = self._now
        if record.state == "ended" and last_seq is not None and last_seq >= record.last_seq:
            # Nothing after its final event until it is continued (no notice: the subscriber
            # has not got the subscription yet).
            subscription._ended = True
            return subscription
        start = (oldest - 1 if oldest is not None else 0) if last_seq is None else last_seq
        head = self.fleet._followers.subscribe(
            subscription,
            self.id,
            start,
            record.first_seq,
            batch=max(1, max_queue // 2),
            behind=record.last_seq - start,
        )
        if head:
            subscription._head = head
        return subscription

    @asynccontextmanager
    async def subscribe(
        self, last_seq: int | None = None
    ) -> AsyncIterator[trio.abc.ReceiveChannel[Event]]:
        """``SessionHandle.subscribe``: the record and the stream's start are read first."""
        await self.fleet.refresh(self.id)
        async with open_following(self, last_seq) as channel:
            yield channel

    async def result(self) -> Transcript:
        """Wait for the current execution's final event; its transcript. The record is read
        again after it, so :attr:`usage` then counts the execution."""
        await self.fleet.refresh(self.id)
        transcript = await execution_transcript(self)
        await self.fleet.refresh(self.id)
        return transcript

    async def push(self, text: str, *, images: Sequence[ImageInput] = ()) -> Accepted | Rejected:
        await self.fleet.refresh(self.id)
        record = self._now
        if record.state == "waiting":
            return Rejected(reason="the session has not started yet: it is waiting for a slot")
        if record.state == "ended":
            return Rejected(reason="the execution has ended")
        outcome = await self.fleet._command(
            record,
            Command(kind="push", session=self.id, reply="", text=text, images=tuple(images)),
        )
        if outcome.ok:
            return Accepted(uuid=outcome.uuid)
        return Rejected(reason=outcome.reason)

    async def answer(self, request_id: str, answer: Any) -> AnswerAccepted | AnswerRejected:
        await self.fleet.refresh(self.id)
        record = self._now
        if record.state != "live":
            return AnswerRejected(
                request_id=request_id, reason=f"no user-input request {request_id!r} is pending"
            )
        outcome = await self.fleet._command(
            record,
            Command(kind="answer", session=self.id, reply="", request=request_id, answer=answer),
        )
        if outcome.ok:
            return AnswerAccepted(request_id=request_id)
        return AnswerRejected(request_id=request_id, reason=outcome.reason)

    async def abort(self) -> None:
        """Abort the current execution; returns once its final event is stored (or after
        ``command_timeout`` with a ``ClusterUnavailableError``)."""
        fleet = self.fleet
        keys = fleet.keys
        await fleet.refresh(self.id)
        if self._now.state == "ended":
            return
        await fleet._call(lambda: fleet.redis.hset(keys.session(self.id), {"abort_requested": "1"}))
        await fleet.refresh(self.id)
        record = self._now
        if record.state == "live":
            await fleet._command(record, Command(kind="abort", session=self.id, reply=""))
        with trio.move_on_after(fleet.command_timeout) as waited:
            while True:
                await fleet.refresh(self.id)
                if self._has_ended():
                    return
                await trio.sleep(0.05)
        if waited.cancelled_caught:
            raise ClusterUnavailableError(
                f"session {self.id}: no final event within {fleet.command_timeout:g} s of the abort"
            )


WORKERS_MAX = 100
"""Workers a ``hello`` looks at: the ones that heartbeated last."""


class RedisFleet(RecordReads):
    """The sessions of a Redis cluster, for ``serve_gateway`` (see the module docstring)."""

    def __init__(
        self,
        redis: coredis.Redis[str],
        nursery: trio.Nursery,
        *,
        keys: RedisKeys,
        command_timeout: float,
        block: float,
        replay_buffer: int,
        idempotency_ttl: float = DEFAULT_IDEMPOTENCY_TTL,
    ) -> None:
        super().__init__(redis, keys)
        self.idempotency_ttl = idempotency_ttl
        self._once = IdempotentEnqueue(redis, keys, self._call, idempotency_ttl)
        self.command_timeout = command_timeout
        self._nursery = nursery
        self._block_ms = max(1, int(block * 1000))
        self._replay_buffer = replay_buffer
        self._inbox = ClusterInbox(self, nursery, block)  # actors/cluster/inbox.py
        self._followers = StreamFollowers(
            redis, keys, nursery, block_ms=self._block_ms, replay_buffer=replay_buffer
        )

    # -- what the gateway reads -----------------------------------------------------------------

    accepting = True
    """A cluster's gateway always accepts: it only appends jobs (the workers drain)."""

    @property
    def replay_buffer(self) -> int:
        return self._replay_buffer

    async def _settled(self, session: RedisSession) -> SessionRecord:
        """The record of a live session whose execution's final event is stored already:
        its worker marks it ended with its next write (a client may read the final event
        first), so wait for that, at most ``SETTLE_WAIT`` seconds."""
        record = session._now
        last = last_stored(
            await self._call(
                lambda: self.redis.xrevrange(self.keys.events(session.id), "+", "-", count=1)
            )
        )
        if last is None or last[0] < record.first_seq or not is_final(decode_event_text(last[1])):
            return record
        with trio.move_on_after(SETTLE_WAIT):
            await trio.lowlevel.checkpoint()
            while record.state == "live":
                await trio.sleep(SETTLE_POLL)
                await self.refresh(session.id)
                record = session._now
        return record

    async def cluster_status(self) -> dict[str, Any] | None:
        """Rule 8: the statuses of the workers alive now (of the ``WORKERS_MAX`` that
        heartbeated last), summarized; with Redis unavailable, a summary that says so (a
        ``hello`` is answered all the same)."""
        await trio.lowlevel.checkpoint()
        keys = self.keys

        async def read() -> list[str | None]:
            ids = await self.redis.zrange(keys.workers, 0, WORKERS_MAX - 1, rev=True)
            async with self.redis.pipeline(transaction=False) as pipe:
                got = [pipe.get(keys.alive(worker)) for worker in ids]
            return [await request for request in got]

        try:
            texts = await self._call(read)
        except ClusterUnavailableError as exc:
            return {**cluster_summary(()), "unavailable": str(exc)}
        statuses = []
        for text in texts:
            if text is None:
                continue  # its heartbeat expired: not alive
            try:
                statuses.append(WorkerStatus.decode(text))
            except RemoteProtocolError as exc:
                log.error("cluster: a worker has a broken status: %s", exc)
        return cluster_summary(statuses)

    # -- the session-host interface (actors/fanout/hosts.py) ---------------------------------------

    def inbox(self, **options: Any) -> AbstractAsyncContextManager[InboxChannel]:
        """``SessionHost.inbox`` (``may_see``, ``max_changes``: as ``Fleet.inbox``), read
        from the sessions' event streams (``actors/cluster/inbox.py``)."""
        return self._inbox.open(**options)

    def inbox_nowait(self, **options: Any) -> InboxChannel:
        """``ServedHost.inbox_nowait``: as ``Fleet.inbox_nowait``."""
        return self._inbox.watch(**options)

    async def get(self, session_id: str) -> RedisSession:
        """The session's record, read from Redis now; :class:`UnknownSessionError` when Redis
        holds none by that id."""
        await self.refresh(session_id)
        return self.get_nowait(session_id)

    def get_nowait(self, session_id: str) -> RedisSession:
        """The session as this gateway last read it (``refresh``), without reading Redis."""
        try:
            record = self._records[session_id]
        except KeyError:
            raise UnknownSessionError(session_id) from None
        return RedisSession(self, record)

    async def list(self) -> tuple[SessionInfo, ...]:
        """The newest ``LISTING_MAX`` (100,000) sessions of the cluster, oldest first, read
        now, a page of ``LISTING_PAGE`` records per round trip."""
        await self.refresh(None)
        return tuple(session.info() for session in self.sessions())

    async def load(self, owner: Hashable) -> HostLoad:
        """The cluster's sessions live and waiting, and for a gateway's client (a
        ``GatewayOwner``) its own, counted over the whole cluster from Redis (every gateway
        sees the same: ``max_sessions`` and the per-client limits hold cluster-wide); for any
        other owner, over the sessions this gateway has seen, their records read again when
        they had not ended (see ``statistics``)."""
        if isinstance(owner, GatewayOwner):
            mine = await owner_load(self.redis, self.keys, self._call, owner)
        else:
            await self._refresh_active()
            mine = self.owner_statistics(owner)
        finished = self.statistics().finished
        total = await cluster_load(self.redis, self.keys, self._call, finished)
        return HostLoad(total=total, owner=mine)

    async def describe(self) -> HostDescription:
        """A ``hello``'s view of the cluster: its replay bound, its workers' summary and the
        governor they share (``actors/cluster/governor.py``; None while Redis is down)."""
        cluster = await self.cluster_status()
        try:
            governor = await self._call(lambda: shared_figures(self.redis, self.keys.prefix))
        except ClusterUnavailableError:
            governor = None
        return HostDescription(
            limits={"replay_buffer": self._replay_buffer}, cluster=cluster, governor=governor
        )

    def sessions(self) -> tuple[RedisSession, ...]:
        """The sessions of the last listing (``refresh(None)``) as last read."""
        return tuple(self.get_nowait(sid) for sid in self._listed if sid in self._records)

    def statistics(self) -> FleetStatistics:
        records = self._records.values()
        return FleetStatistics(
            live=sum(r.state == "live" for r in records),
            waiting=sum(r.state == "waiting" for r in records),
            finished=sum(r.state == "ended" for r in records),
        )

    def owner_statistics(self, owner: Hashable) -> OwnerStatistics:
        mine = [r for r in self._records.values() if self.get_nowait(r.session).owner == owner]
        return OwnerStatistics(
            live=sum(r.state == "live" for r in mine),
            waiting=sum(r.state == "waiting" for r in mine),
            active=sum(r.state != "ended" for r in mine),
        )

    # -- what the gateway does ------------------------------------------------------------------

    async def open(
        self,
        params: ExecuteParams,
        *,
        label: str | None = None,
        owner: Hashable = None,
        idempotency_key: str | None = None,
    ) -> RedisSession:
        """Record a new session and append its job; the first free worker runs it.

        ``idempotency_key``: the key's claim is written before the record and the job (each
        in its own hash slot, ``protocol/cluster/scripts.py``), so an open with a key any
        gateway of the cluster recorded (for the same principal) returns that session and
        appends nothing the first request finished (what it left undone, this one finishes);
        with other params or label it raises ``IdempotencyConflictError``. Keys expire after
        ``idempotency_ttl`` seconds."""
        if not isinstance(params, ExecuteParams):
            raise InvalidParamsError("params", params, "an ExecuteParams")
        if label is not None and not (isinstance(label, str) and label and "\x00" not in label):
            raise InvalidParamsError("label", label, "a non-empty string without NUL characters")
        if idempotency_key is not None:
            check_idempotency_key(idempotency_key)
        principal = getattr(owner, "principal", None)
        host = getattr(owner, "host", "")
        sid = str(uuid_module.uuid4())
        record = SessionRecord(
            session=sid,
            principal=principal,
            host=host,
            label=label,
            state="waiting",
            params=params_to_json(params),
            created_at=time.time(),
        )
        job = Job(
            kind="open",
            session=sid,
            params=record.params,
            traceparent=current_traceparent() or "",
        )
        if idempotency_key is None:
            await self._enqueue(record, job)
            await own(self.redis, self.keys, self._call, record)
            return RedisSession(self, record)
        claim = Claim(
            key=idempotency_key,
            scope=principal or "",
            op="open",
            digest=open_digest(record.params, label),
        )
        created = await self._enqueue_once(record, job, claim, expected="")
        if created is None:  # a record under a fresh uuid: never in practice
            raise LocalProtocolError(f"session {sid} exists already: open it again")
        await own(self.redis, self.keys, self._call, attrs.evolve(record, session=created[1]))
        if created == (True, sid):
            return RedisSession(self, record)
        return await self.get(created[1])

    async def continue_(
        self,
        session_id: str,
        prompt: str,
        *,
        idempotency_key: str | None = None,
        model: str | None = None,
        permission_mode: PermissionMode | None = None,
        images: Sequence[ImageInput] = (),
    ) -> RedisSession:
        """Append the next execution of an ended session; any worker resumes it (from the
        transcript store the workers share). ``model`` and ``permission_mode`` replace the
        session's (``None``: kept), ``images`` go with ``prompt`` (as ``Fleet.continue_``).
        ``idempotency_key``: as for :meth:`open`; a continue with a recorded key returns the
        session, running or not, and appends nothing."""
        options = ContinueOptions(model=model, permission_mode=permission_mode, images=images)
        session = await self.get(session_id)
        record = session.record
        claim: Claim | None = None
        if idempotency_key is not None:
            check_idempotency_key(idempotency_key)
            claim = Claim(
                key=idempotency_key,
                scope=record.principal or "",
                op="continue",
                digest=continue_digest(session_id, prompt, options),
            )
            stored = await self._once.claimed(claim)
            if stored is not None:
                return await self._continued(session, claim, stored, prompt, options)
        if record.state == "live":
            record = await self._settled(session)
        conversation = check_continuable(
            session_id,
            state=record.state,
            ended=record.state == "ended",
            claude_session_id=record.claude_session_id,
        )
        if options != ContinueOptions():  # as the worker will read them (InvalidParamsError)
            resumed = params_from_json(record.params, allow_cwd=True, allow_env=True)
            resume_continuation(resumed, prompt, conversation, options)
        record, job = continuation(
            record, prompt, options, traceparent=current_traceparent() or ""
        )
        if claim is None:
            await self._enqueue(record, job)
        else:
            # Written only if the record still shows the execution that ended (rule 1).
            ended = str(session.record.executions)
            if await self._enqueue_once(record, job, claim, expected=ended) is None:
                raise LocalProtocolError(
                    f"session {session_id!r} was continued by another request meanwhile: "
                    "push to it, or wait for its end before continuing it"
                )
        await own(self.redis, self.keys, self._call, record)
        return RedisSession(self, record)

    async def _continued(
        self,
        session: RedisSession,
        claim: Claim,
        stored: tuple[str, str],
        prompt: str,
        options: ContinueOptions,
    ) -> RedisSession:
        """A continue whose key was claimed before: finish what the first request left
        undone (the recovery rule of ``protocol/cluster/scripts.py``), then the session."""
        record = session.record
        expected = stored[1]
        if record.state == "ended" and str(record.executions) == expected:
            # The first request claimed the key and wrote nothing more: write it now.
            record, job = continuation(record, prompt, options)
            await self._once.once(record, job, claim, expected=expected)
        else:
            await self._once.append_pending(record.session)
        await own(self.redis, self.keys, self._call, record)
        return await self.get(record.session)

    async def _enqueue_once(
        self, record: SessionRecord, job: Job, claim: Claim, *, expected: str
    ) -> tuple[bool, str] | None:
        created = await self._once.once(record, job, claim, expected=expected)
        if created is not None and created[0]:
            self._records[record.session] = record
        return created

    async def _enqueue(self, record: SessionRecord, job: Job) -> None:
        keys = self.keys
        sid = record.session

        async def write() -> None:
            await self.redis.hset(keys.session(sid), record.to_fields())
            await self.redis.zadd(keys.sessions_index, {sid: record.created_at})
            await self.redis.xadd(keys.jobs, job.to_fields())

        await self._call(write)
        self._records[sid] = record

    async def _command(self, record: SessionRecord, command: Command) -> Outcome:
        """Send ``command`` to the worker running the session; its outcome, or a rejection
        naming the worker when it does not answer within ``command_timeout``. A worker that
        was fenced off the session (rule 7) says so: then it goes once to the new owner."""
        outcome = await self._command_once(record, command)
        if not outcome.ok and outcome.reason == MOVED_REASON:
            await self.refresh(record.session)
            now = self._records.get(record.session)
            if now is not None and now.state == "live" and now.worker != record.worker:
                outcome = await self._command_once(now, command)
        return outcome

    async def _command_once(self, record: SessionRecord, command: Command) -> Outcome:
        keys = self.keys
        reply = keys.reply(record.session, uuid_module.uuid4().hex)
        command = attrs.evolve(command, reply=reply)
        await self._call(lambda: self.redis.xadd(keys.commands(record.worker), command.to_fields()))
        got = await self._call(lambda: self.redis.blpop([reply], timeout=self.command_timeout))
        if got is None:
            return Outcome(
                ok=False,
                reason=f"worker {record.worker} did not answer within "
                f"{self.command_timeout:g} s (it may be gone; its sessions move to another "
                "worker)",
            )
        return Outcome.decode(got[1])


@asynccontextmanager
async def open_redis_fleet(
    redis: coredis.Redis[str],
    *,
    keys: RedisKeys | None = None,
    command_timeout: float = 10.0,
    block: float = 1.0,
    replay_buffer: int = 2000,
    idempotency_ttl: float = DEFAULT_IDEMPOTENCY_TTL,
) -> AsyncIterator[RedisFleet]:
    """A :class:`RedisFleet` over an open coredis client (``decode_responses=True``).
    ``idempotency_ttl``: seconds an idempotency key of ``open`` / ``continue_`` is kept."""
    check_number("idempotency_ttl", idempotency_ttl, above=0, allowed="seconds > 0")
    async with trio.open_nursery() as nursery:
        fleet = RedisFleet(
            redis,
            nursery,
            keys=keys or RedisKeys(),
            command_timeout=command_timeout,
            block=block,
            replay_buffer=replay_buffer,
            idempotency_ttl=idempotency_ttl,
        )
        try:
            yield fleet
        finally:
            nursery.cancel_scope.cancel()
