"""``serve_worker``: a node of a Redis cluster that runs sessions in its local :class:`Fleet`.

Executions arrive as jobs on the jobs stream, read through the workers' consumer group, so each
is claimed by exactly one worker (``protocol/cluster/records.py`` rule 1). A worker claims a job
only when its fleet has a free slot (so jobs spread over the workers), runs it, appends every event
to the session's stream with its seq as the entry id (rule 2), and acknowledges the job once
the execution's final event is stored. Commands for its sessions (push, answer, abort) arrive
on its own command stream and are applied in order; each outcome is put where the command
says (rule 4).

Redis unavailable: sessions go on. Each session's publisher reads its events from the fleet
(a subscription bounded like the replay buffer) and keeps retrying the event it could not
store, with a growing pause; meanwhile the node reports degraded (``WorkerStatistics``). When
Redis is back, what was not stored is stored, in order (an event stored twice is refused by
Redis, rule 2). If the outage outlasts the replay buffer, the oldest events are gone: the
stream then carries a ``warning`` event (``events_lost``) where they were, never silently.

Fencing (rule 7): taking a session (a first claim or a move) increments the record's epoch;
the value is the worker's token for it, and every write for the session is a Lua script that
writes nothing unless the record's epoch still equals the token (the writes:
``actors/cluster/writes.py``; the scripts: ``protocol/cluster/scripts.py``). A worker that was
paused longer than ``dead_after`` finds, at its first write (or its next heartbeat, or a command for
the session), that the session moved: it aborts its CLI, stores nothing more, does not
acknowledge the job, and logs one line.

Channels: none of its own; the fleet's subscriptions, one per running session (owned and
closed by that session's publisher). Cancellation: cancelling ``serve_worker`` stops claiming,
and the fleet (the caller's) aborts what runs when its block is left; jobs not acknowledged
stay pending in the group (another worker may claim them). Error handling: a job or command
that does not decode is acknowledged and logged (it can never be run); a session's failure is
the fleet's (one terminal event); a Redis error is retried, never raised out of a publisher.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid as uuid_module
from collections.abc import Mapping
from functools import partial
from typing import Any

import attrs
import coredis
import coredis.exceptions
import trio
from opentelemetry.trace import SpanKind

from claude_trio.actors.cluster.controls import apply_control
from claude_trio.actors.cluster.move import WatchedStore, take_over
from claude_trio.actors.cluster.writes import FencedWrites, _FencedOut
from claude_trio.actors.extensions.broker import AnswerAccepted
from claude_trio.actors.fanout.fleet import Fleet, FleetSession, ResyncRequired
from claude_trio.actors.session.metrics import instruments
from claude_trio.actors.session.trace_context import hop_span
from claude_trio.protocol.cluster.keys import RedisKeys
from claude_trio.protocol.cluster.records import (
    AcceptedPush,
    Command,
    Fenced,
    Job,
    Outcome,
    SessionRecord,
    WorkerStatus,
    is_current,
    is_final,
)
from claude_trio.protocol.config.images import ImageInput
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.errors import RemoteProtocolError, SlowSubscriberError
from claude_trio.protocol.fanout import codec
from claude_trio.protocol.fanout.wire import params_from_json
from claude_trio.protocol.session.events import (
    Aborted,
    Error,
    Event,
    Result,
    ToolResult,
    WarningEvent,
)
from claude_trio.protocol.session.lifecycle import Accepted, Rejected
from claude_trio.protocol.session.outcomes import Outcome as EndOutcome
from claude_trio.protocol.session.usage import ZERO_USAGE, Usage, add_usage

__all__ = ["WorkerConfig", "WorkerStatistics", "serve_worker"]

log = logging.getLogger("claude_trio.cli.worker")

BATCH_MAX = 1024
"""Events stored per round trip at most."""
BATCH_FIRST = 16
"""Events stored by the first round trip after the session's events stopped coming; each
following one holds at most twice as many as the one before (up to ``BATCH_MAX``): the first
events of a burst reach the stream, and the gateways, without waiting for the whole burst's
encoding and store."""

REDIS_ERRORS = (coredis.exceptions.ConnectionError, TimeoutError, OSError)


@attrs.frozen(kw_only=True)
class WorkerConfig:
    """``heartbeat``: seconds between heartbeats; ``dead_after``: a worker whose heartbeat is
    older than this is dead (its jobs may be claimed). ``block``: the longest a read of a
    stream waits (seconds). ``stream_max``: events kept per session stream (its last seqs, at
    least this many: ``MINID ~`` drops whole entries). ``retry_max``: the longest pause
    between two tries of a Redis write. ``store_wait``: with a session store, the longest a
    ``tool_result`` event waits for the store to hold its result (``protocol/cluster/move.py``
    rule 9)."""

    heartbeat: float = 1.0
    dead_after: float = 5.0
    block: float = 1.0
    stream_max: int = 2000
    retry_max: float = 2.0
    reply_ttl: int = 60
    store_wait: float = 10.0


@attrs.frozen(kw_only=True)
class WorkerStatistics:
    running: int
    claimed: int
    acknowledged: int
    degraded: bool
    fenced: int = 0  # sessions this worker stopped because another worker took them
    degraded_since: float | None = None  # epoch seconds
    outages: int = 0  # times it went degraded


@attrs.define(eq=False)
class _Running:
    session_id: str
    entry_id: str
    job: Job
    local: FleetSession
    token: int  # the fencing token (rule 7)
    fenced: bool = False
    published_local: int = 0  # the last local seq stored
    redeliver: tuple[str, ...] = ()  # pushes to deliver again once the CLI runs (a move)
    claude_session_id: str | None = None  # the conversation, once known (rule 9)
    #: The session's usage as stored (the record's when it was claimed, plus what this
    #: execution's events reported since): written with the events that change it.
    usage: Usage = ZERO_USAGE


class Worker:
    """The state of one worker; built by :func:`serve_worker`."""

    def __init__(
        self,
        redis: coredis.Redis[str],
        fleet: Fleet,
        *,
        worker_id: str,
        keys: RedisKeys,
        config: WorkerConfig,
        store: WatchedStore | None = None,
    ) -> None:
        self.redis = redis
        self.store = store
        #: Tool results stored in the stream before the session store held them (rule 9).
        self.transcript_behind = 0
        self.fleet = fleet
        self.id = worker_id
        self.keys = keys
        self.config = config
        self._metrics = instruments()  # None without an SDK
        self.running: dict[str, _Running] = {}
        self.claimed = 0
        self.acknowledged = 0
        #: Acknowledgements Redis refused because the job was acknowledged already (never
        #: expected: a test checks it stays 0).
        self.acknowledged_twice = 0
        self.moved_in = 0
        self.fenced = 0
        self._writes = FencedWrites(
            redis,
            keys=keys,
            worker_id=worker_id,
            stream_max=config.stream_max,
            retrying=self._retrying,
        )
        self._nursery: trio.Nursery | None = None
        self._failing: set[str] = set()  # what is failing to reach Redis now
        self.degraded_since: float | None = None  # epoch seconds, while ``_failing``
        self.outages = 0
        self._room = trio.Event()
        self._claiming = trio.CancelScope()
        self._idle = trio.Event()

    def statistics(self) -> WorkerStatistics:
        return WorkerStatistics(
            running=len(self.running),
            claimed=self.claimed,
            acknowledged=self.acknowledged,
            degraded=bool(self._failing),
            fenced=self.fenced,
            degraded_since=self.degraded_since,
            outages=self.outages,
        )

    def status(self) -> WorkerStatus:
        """What its heartbeat publishes (``protocol/cluster/records.py`` rule 8)."""
        return WorkerStatus(
            worker=self.id,
            at=time.time(),
            running=len(self.running),
            max_live=self.fleet.max_live,
            degraded_since=self.degraded_since,
            outages=self.outages,
            fenced=self.fenced,
        )

    @property
    def degraded(self) -> bool:
        return bool(self._failing)

    # -- Redis with retries ---------------------------------------------------------------------

    async def _retrying(self, what: str, call: Any) -> Any:
        """``await call()`` until Redis answers (the pause grows up to ``retry_max``)."""
        pause = 0.05
        while True:
            try:
                result = await call()
            except REDIS_ERRORS as exc:
                if what not in self._failing:
                    log.warning("worker %s: redis unavailable (%s): %r", self.id, what, exc)
                if not self._failing:
                    self.degraded_since = time.time()
                    self.outages += 1
                self._failing.add(what)
                await trio.sleep(pause)
                pause = min(pause * 2, self.config.retry_max)
                continue
            if what in self._failing:
                self._failing.discard(what)
                if not self._failing:
                    self.degraded_since = None
                log.info("worker %s: redis is back (%s)", self.id, what)
            return result

    # -- the loops ------------------------------------------------------------------------------

    async def ensure_group(self) -> None:
        await trio.lowlevel.checkpoint()
        with contextlib.suppress(coredis.exceptions.StreamDuplicateConsumerGroupError):
            # Made by whichever worker came first.
            await self.redis.xgroup_create(
                self.keys.jobs, self.keys.workers_group, identifier="0", mkstream=True
            )

    async def heartbeat(self) -> None:
        config = self.config
        while True:
            now_ms = int(time.time() * 1000)
            # Its status is read when the write is made: a worker degraded for another
            # reason than its heartbeat says so (rule 8).
            await self._retrying(
                "heartbeat",
                lambda: self.redis.set(
                    self.keys.alive(self.id),
                    self.status().encode(),
                    px=int(config.dead_after * 1000),
                ),
            )
            await self._retrying(
                "heartbeat", partial(self.redis.zadd, self.keys.workers, {self.id: now_ms})
            )
            mine = [r.entry_id for r in await self._check_tokens()]
            if mine:
                # Re-claiming our own jobs sets their idle time back to 0: only a dead
                # worker's jobs grow idle enough to be claimed by another (rule 5).
                await self._retrying(
                    "heartbeat",
                    partial(
                        self.redis.xclaim,
                        self.keys.jobs,
                        self.keys.workers_group,
                        self.id,
                        0,
                        mine,
                        justid=True,
                    ),
                )
            await trio.sleep(config.heartbeat)

    async def _check_tokens(self) -> list[_Running]:
        """The running sessions still ours (rule 7); the others are stopped (in the
        background: an abort waits for the CLI's final event)."""
        await trio.lowlevel.checkpoint()
        ours = []
        for running in list(self.running.values()):
            if running.fenced:
                continue
            stored = await self._retrying(
                "heartbeat",
                partial(self.redis.hget, self.keys.session(running.session_id), "epoch"),
            )
            if is_current(running.token, stored):
                ours.append(running)
            elif self._nursery is not None:
                self._nursery.start_soon(self._fence, running)
        return ours

    async def _fence(self, running: _Running) -> None:
        """Rule 7: the session was taken by another worker: stop its CLI now (once)."""
        await trio.lowlevel.checkpoint()
        if running.fenced:
            return
        running.fenced = True
        self.fenced += 1
        fenced = Fenced(session=running.session_id, worker=self.id, token=running.token)
        log.warning(
            fenced.message,
            extra={"event": "fenced", "session": running.session_id, "worker": self.id},
        )
        await running.local.abort()

    def _has_room(self) -> bool:
        stats = self.fleet.statistics()
        return stats.live + stats.waiting < self.fleet.max_live

    def stop_claiming(self) -> None:
        """Claim no more jobs (what runs goes on)."""
        self._claiming.cancel()

    async def wait_idle(self, deadline: float) -> None:
        """Until nothing runs; at ``deadline`` (trio's clock) what still runs is aborted (its
        final ``aborted`` event is stored and its job acknowledged)."""
        with trio.move_on_at(deadline):
            await trio.lowlevel.checkpoint()
            while self.running:
                self._idle = trio.Event()
                await self._idle.wait()
        async with trio.open_nursery() as nursery:
            for running in list(self.running.values()):
                nursery.start_soon(running.local.abort)
        while self.running:
            self._idle = trio.Event()
            await self._idle.wait()

    async def claim(self, nursery: trio.Nursery) -> None:
        with self._claiming:
            await self._claim(nursery)

    async def _claim(self, nursery: trio.Nursery) -> None:
        keys = self.keys
        block_ms = max(1, int(self.config.block * 1000))
        while True:
            while not self._has_room():
                self._room = trio.Event()
                await self._room.wait()
            dead_ms = int(self.config.dead_after * 1000)
            orphaned = await self._retrying(
                "claim",
                partial(
                    self.redis.xautoclaim,
                    keys.jobs,
                    keys.workers_group,
                    self.id,
                    dead_ms,
                    "0-0",
                    count=1,
                ),
            )
            moved = [
                entry
                for entry in (orphaned[1] if orphaned else ())
                # Our own job, grown idle while Redis was away (the heartbeat re-claims it
                # only at its next beat): claiming it set its idle time back, nothing to take.
                if not self._runs_entry(str(entry.identifier))
            ]
            for entry in moved:
                await self._begin(nursery, str(entry.identifier), entry.field_values, moved=True)
            if moved:
                continue
            got = await self._retrying(
                "claim",
                lambda: self.redis.xreadgroup(
                    keys.workers_group, self.id, {keys.jobs: ">"}, count=1, block=block_ms
                ),
            )
            for entry in (got or {}).get(keys.jobs, ()):
                await self._begin(nursery, entry.identifier, entry.field_values)

    def _runs_entry(self, entry_id: str) -> bool:
        return any(r.entry_id == entry_id for r in self.running.values())

    async def _begin(
        self,
        nursery: trio.Nursery,
        entry_id: str,
        fields: Mapping[str, str],
        *,
        moved: bool = False,
    ) -> None:
        try:
            job = Job.from_fields(fields)
        except RemoteProtocolError as exc:  # no session to tell: acknowledge it, say why
            log.error("worker %s: job %s cannot run: %s", self.id, entry_id, exc)
            await self._ack(entry_id)
            return
        sid = job.session
        # Rule 7: the token first, so that a worker that had it before writes nothing more
        # (and, for a move, the stream read below cannot change under us).
        token = await self._writes.take(sid, job.execution, entry_id)
        if token == -2:  # a second copy of a job (an open retried): one copy runs
            log.warning("worker %s: job %s is a copy of one that ran: skipped", self.id, entry_id)
            await self._ack(entry_id)
            return
        if token < 0:  # nobody can follow a session without a record: nothing to tell
            log.error("worker %s: job %s: session %s has no record", self.id, entry_id, sid)
            await self._ack(entry_id)
            return
        try:
            await self._begin_owned(nursery, entry_id, job, token, moved=moved)
        except _FencedOut as exc:  # taken by another worker meanwhile: not ours to end
            log.warning(exc.fenced.message, extra={"event": "fenced", "session": sid})
            self.fenced += 1

    async def _begin_owned(
        self, nursery: trio.Nursery, entry_id: str, job: Job, token: int, *, moved: bool
    ) -> None:
        keys = self.keys
        sid = job.session
        try:
            params = params_from_json(job.params, allow_cwd=True, allow_env=True)
        except (RemoteProtocolError, ValueError) as exc:
            log.error("worker %s: job %s cannot run: %s", self.id, entry_id, exc)
            bad = Error(
                message=f"the session's parameters cannot run: {exc}",
                code="config",
                seq=job.after_seq + 1,
            )
            await self._writes.store(sid, token, bad)
            await self._ended(sid, token, entry_id, bad, execution=job.execution)
            return
        self.claimed += 1
        fields_now = await self._retrying("claim", lambda: self.redis.hgetall(keys.session(sid)))
        record = SessionRecord.from_fields(fields_now) if fields_now else None
        if record is None or record.abort_requested:
            reason = "aborted before it started" if record else "the session record is gone"
            event = Aborted(
                reason=reason,
                outcome=EndOutcome.ABORTED if record else EndOutcome.CLOSED,
                phase="starting",
                seq=job.after_seq + 1,
                turn=0,
            )
            await self._writes.store(sid, token, event)
            await self._ended(sid, token, entry_id, event, execution=job.execution)
            return
        redeliver: tuple[str, ...] = ()
        if moved:
            plan = await self._plan_move(sid, token, job, record, entry_id)
            if plan is None:
                return
            job, params, redeliver = plan
        try:
            attributes = {"claude_trio.session.id": sid, "claude_trio.execution": job.execution}
            with hop_span(
                "worker run", job.traceparent, kind=SpanKind.CONSUMER, attributes=attributes
            ):
                local = await self.fleet.start(params, owner=record.principal, label=record.label)
        except Exception as exc:  # the fleet refuses (draining, bad params): end it, say why
            log.error("worker %s: session %s cannot start: %r", self.id, sid, exc)
            failed = Error(
                message=f"the worker could not start the session: {exc}",
                code="internal",
                outcome=EndOutcome.NOT_STARTED,
                seq=job.after_seq + 1,
            )
            await self._writes.store(sid, token, failed)
            await self._ended(sid, token, entry_id, failed, execution=job.execution)
            return
        running = _Running(
            session_id=sid,
            entry_id=entry_id,
            job=job,
            local=local,
            token=token,
            redeliver=redeliver,
            usage=record.usage,
        )
        self.running[sid] = running
        nursery.start_soon(self._publish, running, name=f"worker publisher {sid}")
        try:
            await self._writes.record(sid, token, {"state": "live", "worker": self.id})
        except _FencedOut:
            await self._fence(running)  # its publisher stores nothing and waits for the CLI

    async def _plan_move(
        self, sid: str, token: int, job: Job, record: SessionRecord, entry_id: str
    ) -> tuple[Job, ExecuteParams, tuple[str, ...]] | None:
        return await take_over(self, sid, token, job, record, entry_id)

    # -- the end of an execution ----------------------------------------------------------------

    async def _ack(self, entry_id: str) -> None:
        done = await self._retrying(
            "ack", lambda: self.redis.xack(self.keys.jobs, self.keys.workers_group, [entry_id])
        )
        if done:
            self.acknowledged += 1
        else:
            self.acknowledged_twice += 1
            log.error("worker %s: job %s was acknowledged already", self.id, entry_id)

    async def _ended(
        self, sid: str, token: int, entry_id: str, final: Event, *, execution: int
    ) -> None:
        # The end is fenced (rule 7); the acknowledgement follows it only when the end was
        # ours. (The jobs stream is in another hash slot than the session's keys, so one
        # script cannot do both on Redis Cluster.)
        await self._writes.record(
            sid,
            token,
            {"state": "ended", "ended_at": repr(time.time()), "last_seq": str(final.seq)},
            clear_pushes=True,
        )
        await self._ack(entry_id)
        log.info(
            "worker %s: session %s execution %d ended",
            self.id,
            sid,
            execution,
            extra={"event": "ended", "session": sid, "worker": self.id},
        )

    async def _publish(self, running: _Running) -> None:
        """Store the session's events in order until its final one, then acknowledge; if the
        session was taken by another worker (rule 7), stop its CLI and store nothing more."""
        try:
            await self._publish_owned(running)
        except _FencedOut:
            await self._fence(running)
            await running.local.wait_closed()
        finally:
            if self.store is not None and running.claude_session_id is not None:
                self.store.forget(running.claude_session_id)
            self.running.pop(running.session_id, None)
            self._room.set()
            self._idle.set()

    async def _publish_owned(self, running: _Running) -> None:
        local = running.local
        offset = running.job.after_seq
        config = self.config
        sid, token = running.session_id, running.token
        while True:
            await trio.lowlevel.checkpoint()
            subscribed = local.subscribe_nowait(
                running.published_local or None,
                max_queue=config.stream_max,
                max_bytes=self.fleet.replay_bytes,
            )
            if isinstance(subscribed, ResyncRequired):
                # Redis was away longer than the replay buffer lasts: say so in the stream.
                lost = WarningEvent(
                    code="events_lost",
                    message=f"events {offset + running.published_local + 1} to "
                    f"{offset + subscribed.oldest_seq - 1} were lost while Redis was "
                    "unavailable",
                    seq=offset + subscribed.oldest_seq - 1,
                    turn=0,
                )
                await self._writes.store(sid, token, lost)
                running.published_local = subscribed.oldest_seq - 1
                continue
            with subscribed:
                try:
                    stored = 0  # events in the previous round trip
                    while True:
                        try:
                            batch = [subscribed.receive_nowait()]
                            most = min(BATCH_MAX, max(BATCH_FIRST, 2 * stored))
                        except trio.WouldBlock:  # caught up: the next burst starts small
                            batch = []
                            most = BATCH_FIRST
                        except trio.EndOfChannel:
                            break
                        if not batch:
                            try:
                                batch = [await subscribed.receive()]
                            except trio.EndOfChannel:
                                break
                        # Everything else ready (up to ``most``) goes in the same round trip.
                        while len(batch) < most:
                            try:
                                batch.append(subscribed.receive_nowait())
                            except (trio.WouldBlock, trio.EndOfChannel):
                                break
                        if running.fenced:  # found out by the heartbeat or a command
                            raise self._writes.refused(sid, token)
                        await self._await_store(running, batch)
                        shifted = (
                            [attrs.evolve(e, seq=e.seq + offset) for e in batch]
                            if offset
                            else batch
                        )
                        usage = running.usage
                        for event in shifted:
                            if isinstance(event, Result | Aborted) and event.usage is not None:
                                usage = add_usage(usage, event.usage)
                        sent_at = trio.current_time()
                        await self._writes.store_many(
                            sid, token, shifted, usage=None if usage is running.usage else usage
                        )
                        if self._metrics is not None:
                            took = trio.current_time() - sent_at
                            self._metrics.publish_duration.record(took)
                            self._metrics.publish_lag.record(local.last_seq - batch[-1].seq)
                        running.usage = usage
                        running.published_local = batch[-1].seq
                        stored = len(batch)
                        if running.redeliver:
                            again, running.redeliver = running.redeliver, ()
                            for text in again:
                                await self._push(running, text)
                        final = next((e for e in shifted if is_final(e)), None)
                        if final is not None:
                            await self._ended(
                                sid,
                                token,
                                running.entry_id,
                                final,
                                execution=running.job.execution,
                            )
                            # Its slot is free once its CLI is gone: claim the next then.
                            await local.wait_closed()
                            return
                except SlowSubscriberError:
                    continue  # Redis was slow: subscribe again from the last stored
            # The subscription ended without a final event (the fleet always gives one):
            return

    async def _await_store(self, running: _Running, batch: list[Event]) -> None:
        """Rule 9: a tool result reaches the stream only once the session store holds it."""
        await trio.lowlevel.checkpoint()
        store, sid = self.store, running.local.claude_session_id
        if store is None or sid is None:
            return
        running.claude_session_id = sid
        for event in batch:
            if not isinstance(event, ToolResult) or event.is_subagent:
                continue
            with trio.move_on_after(self.config.store_wait):
                await store.wait_stored(sid, event.tool_use_id)
                continue
            self.transcript_behind += 1
            log.warning(
                "worker %s: session %s: the session store does not hold the result of tool "
                "call %s after %.1f s; it is stored in the stream anyway (a move would resume "
                "before it, and the tool may run again)",
                self.id,
                running.session_id,
                event.tool_use_id,
                self.config.store_wait,
                extra={"event": "transcript_behind", "session": running.session_id},
            )

    async def commands(self) -> None:
        keys = self.keys
        stream = keys.commands(self.id)
        last = "0-0"
        block_ms = max(1, int(self.config.block * 1000))
        while True:
            got = await self._retrying(
                "commands", partial(self.redis.xread, {stream: last}, count=100, block=block_ms)
            )
            done: list[str] = []
            for entry in (got or {}).get(stream, ()):
                last = entry.identifier
                await self._apply(entry.field_values)
                done.append(entry.identifier)
            if done:
                await self._retrying("commands", partial(self.redis.xdel, stream, done))

    async def _push(
        self, running: _Running, text: str, images: tuple[ImageInput, ...] = ()
    ) -> Accepted | Rejected:
        """Push to the local session; an accepted push is recorded (for a move: its text is
        delivered again, its images are not) before the outcome goes back."""
        pushed = await running.local.push(text, images=images)
        if isinstance(pushed, Accepted):
            await self._writes.accepted(
                running.session_id, running.token, AcceptedPush(uuid=pushed.uuid, text=text)
            )
        return pushed

    async def _apply(self, fields: Mapping[str, str]) -> None:
        await trio.lowlevel.checkpoint()
        try:
            command = Command.from_fields(fields)
        except RemoteProtocolError as exc:
            log.error("worker %s: a command cannot be applied: %s", self.id, exc)
            return
        running = self.running.get(command.session)
        if running is not None and not running.fenced:
            # A command sent while this worker was paused may be for a session that moved.
            stored = await self._retrying(
                "commands", partial(self.redis.hget, self.keys.session(running.session_id), "epoch")
            )
            if not is_current(running.token, stored):
                await self._fence(running)
        if running is None:
            outcome = Outcome(ok=False, reason="the execution has ended")
        elif running.fenced:
            outcome = Fenced(
                session=running.session_id, worker=self.id, token=running.token
            ).outcome()
        else:
            try:
                outcome = await self._apply_to(running, command)
            except _FencedOut as exc:
                await self._fence(running)
                outcome = exc.fenced.outcome()
        reply = command.reply

        async def answer() -> None:
            await self.redis.lpush(reply, [outcome.encode()])
            await self.redis.expire(reply, self.config.reply_ttl)

        await self._retrying("replies", answer)

    async def _apply_to(self, running: _Running, command: Command) -> Outcome:
        await trio.lowlevel.checkpoint()
        local = running.local
        match command.kind:
            case "push":
                pushed = await self._push(running, command.text, command.images)
                return (
                    Outcome(ok=True, uuid=pushed.uuid)
                    if isinstance(pushed, Accepted)
                    else Outcome(ok=False, reason=pushed.reason)
                )
            case "answer":
                answered = await local.answer(command.request, command.answer)
                return (
                    Outcome(ok=True)
                    if isinstance(answered, AnswerAccepted)
                    else Outcome(ok=False, reason=answered.reason)
                )
            case "abort":
                await local.abort()
                return Outcome(ok=True)
            case "set_model" | "set_permission_mode":
                return await apply_control(local, command)


async def serve_worker(
    redis: coredis.Redis[str],
    fleet: Fleet,
    *,
    worker_id: str | None = None,
    keys: RedisKeys | None = None,
    config: WorkerConfig | None = None,
    store: WatchedStore | None = None,
    task_status: trio.TaskStatus[Worker] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run executions from the cluster's jobs stream in ``fleet`` until cancelled.

    ``redis``: an open coredis client (``decode_responses=True``). ``worker_id``: this node's
    name in the consumer group (default: a new uuid; a restarted worker is a new worker).
    ``store``: the session store ``fleet`` mirrors its CLIs' transcripts to, watched (its
    sessions' ``config`` should flush eagerly: ``DriverConfig(store_flush="eager")``); with it
    a tool result reaches the stream only once the store holds it, and a session moved from a
    dead worker continues its turn after its last stored tool result instead of starting it
    again (``protocol/cluster/move.py``). ``task_status.started(worker)`` once the consumer
    group exists.
    """
    worker = Worker(
        redis,
        fleet,
        worker_id=worker_id or f"worker-{uuid_module.uuid4().hex[:12]}",
        keys=keys or RedisKeys(),
        config=config or WorkerConfig(),
        store=store,
    )
    codec.prepare()  # the first events stored pay no plan-making
    await worker.ensure_group()
    async with trio.open_nursery() as nursery:
        worker._nursery = nursery
        nursery.start_soon(worker.heartbeat)
        nursery.start_soon(worker.commands)
        nursery.start_soon(worker.claim, nursery)
        task_status.started(worker)
