"""The fleet: many sessions under one nursery, a cap on live CLIs, and fan-out to subscribers.

::

    async with open_fleet(max_live=4, transport_factory=...) as fleet:
        fs = await fleet.open(ExecuteParams(prompt="..."))       # never waits for a slot
        async with fs.subscribe() as events:                     # replay, then live events
            async for event in events:
                ...
        transcript = await fs.result()                           # once its final event is out
        fs.push_nowait("more"); await fs.answer(request_id, answer); await fs.abort()

A fleet is a session host (``actors/fanout/hosts.py``): ``open``, ``continue_``, ``get``, ``list``,
and on each session ``push``, ``answer``, ``abort``, ``subscribe``, ``result``, ``usage``, as
on a Redis cluster's fleet and a gateway client. (``start`` is ``open`` with per-session
options; ``subscribe_nowait`` is the subscription a serving layer uses, decided at once.)

Why it is built this way:

* **The cap.** Each session runs in its own task in the fleet's nursery and holds one of
  ``max_live`` slots for as long as its CLI exists (``open_session`` from connect to
  disconnect). ``start()`` asks for the slot synchronously, so it never waits; the session's
  task is spawned when it gets its slot (a session waiting in the queue is only its
  ``FleetSession``, not a suspended task). A freed slot is handed straight to a waiting
  session: the owners that wait take turns (``start(params, owner=...)``; the gateway passes
  its client), and each owner's sessions go in ``start()`` order (``protocol/fanout/slots.py``).
  With one owner that is simply start order.
  (Not ``trio.CapacityLimiter``: it is FIFO in the order its waiters *ran*, and trio
  deliberately shuffles the order in which newly spawned tasks first run.)
* **Fan-out never slows a session.** The session task drains ``session.events`` (everything
  ready at each wake-up, so a busy scheduler costs it one turn per batch, not per event) into
  a replay buffer bounded in events and in bytes, and offers each event to every subscriber
  without waiting. A subscriber's queue is bounded (``max_queue`` events, ``max_bytes``);
  when it is full, adjacent deltas of one message are merged; when that does not make room,
  the subscriber is dropped (``SlowSubscriberError``). The session and the other subscribers
  are unaffected, and the dropped client can re-subscribe with its last seq for an exact
  replay. What is kept, merged and dropped, and how bytes are counted, is decided by
  ``protocol/fanout/replay.py``: events are kept without their ``raw`` field (subscribers get
  ``raw=None``). Memory per session is bounded by ``replay_bytes`` plus ``max_bytes`` per
  subscriber.
* **Reattach.** ``subscribe_nowait(last_seq)`` replays exactly the buffered events after
  ``last_seq`` (or says ``ResyncRequired`` when some were evicted), preceded by the user-input
  requests still pending that the replay would not include, so a reconnecting client sees its
  open questions again.
* **Isolation.** A session that fails (its ``open_session`` raises) ends with one ``error``
  event; the other sessions go on.
* **Conversations outlive a CLI.** A session is a conversation; each ``start`` or
  ``continue_`` runs one execution of it with its own CLI, and between executions it holds
  none. ``continue_(session_id, prompt)`` resumes the conversation by the CLI's session id
  with the session's own parameters and options (so the same config folder), and its events
  continue the session's ``seq``. ``keep_finished`` bounds how many idle sessions are kept:
  the longest idle is forgotten first, and a forgotten id is unknown (``UnknownSessionError``).
* **Leaving the block.** ``open_fleet`` is a nursery: leaving it ends every session still
  waiting or running (each with one ``aborted``, its CLI stopped as ``abort()`` stops it), as
  leaving ``open_session`` does, and nothing started here outlives the block. That is the
  choice because a block that waited for running agents could hang for as long as they run
  (and an exception or Ctrl-C must get out promptly). To let running executions finish,
  call ``await fleet.drain(deadline)`` before leaving: it stops accepting, waits until the
  deadline, then aborts what is left.

Sessions always run with ``on_user_input="manual"``: remote clients answer through
:meth:`FleetSession.answer`.

This module holds the fleet itself (:class:`Fleet`, :func:`open_fleet`: the slots, the
sessions it knows, draining) and its statistics. A session and its executions are in
``actors/fanout/fleet_session.py``, subscriptions and what follows them in
``actors/fanout/subscription.py``, the checks of the session options in
``actors/fanout/fleet_options.py``; their names are importable from here too.
"""

from __future__ import annotations

import collections
import math
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from claude_trio.actors.extensions.broker import AnswerAccepted, AnswerRejected
from claude_trio.actors.fanout.fleet_figures import (
    FleetStatistics,
    HostDescription,
    HostLoad,
    OwnerStatistics,
)
from claude_trio.actors.fanout.fleet_options import (
    SESSION_OPTIONS,
    check_pool,
    check_session_options,
    check_together,
    fleet_governor,
)
from claude_trio.actors.fanout.fleet_session import (
    FleetSession,
    ReplayStatistics,
    SessionState,
    _Execution,
)
from claude_trio.actors.fanout.governor import Governor, GovernorStateFactory, budget_refusal
from claude_trio.actors.fanout.inbox import InboxChannel, InboxHub, MaySee
from claude_trio.actors.fanout.owners import key_scope, principal_of
from claude_trio.actors.fanout.subscription import (
    DEFAULT_SUBSCRIBER_BYTES,
    DEFAULT_SUBSCRIBER_QUEUE,
    ResyncRequired,
    Subscription,
    SubscriptionSource,
    execution_transcript,
    open_following,
)
from claude_trio.actors.session.boundary import open_block_nursery
from claude_trio.actors.session.metrics import unwatch_fleet, watch_fleet
from claude_trio.actors.session.pool import CLIPool
from claude_trio.protocol.checks import (
    check_int,
    check_number,
    check_text,
    finite_float,
    is_number,
)
from claude_trio.protocol.config.images import ImageInput
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.config.permissions import PermissionMode
from claude_trio.protocol.config.resume import ContinueOptions, check_continuable, continuation
from claude_trio.protocol.errors import (
    InvalidParamsError,
    LocalProtocolError,
    UnknownSessionError,
)
from claude_trio.protocol.fanout.governor import (
    DEFAULT_GOVERNOR,
    BudgetFigures,
    DefaultGovernor,
    GovernorConfig,
    GovernorRules,
)
from claude_trio.protocol.fanout.idempotency import (
    DEFAULT_IDEMPOTENCY_TTL,
    IdempotencyRecords,
    check_idempotency_key,
    continue_digest,
    open_digest,
)
from claude_trio.protocol.fanout.inbox import DEFAULT_INBOX_CHANGES
from claude_trio.protocol.fanout.slots import SlotQueue
from claude_trio.protocol.fanout.wire import SessionInfo, params_to_json
from claude_trio.protocol.session.events import (
    Error,
    Event,
    Result,
    UserInputRequest,
    UserInputResolved,
)

__all__ = [
    "DEFAULT_GOVERNOR",
    "DEFAULT_REPLAY_BYTES",
    "DEFAULT_SUBSCRIBER_BYTES",
    "DEFAULT_SUBSCRIBER_QUEUE",
    "SESSION_OPTIONS",
    "Fleet",
    "FleetSession",
    "FleetStatistics",
    "HostDescription",
    "HostLoad",
    "OwnerStatistics",
    "ReplayStatistics",
    "ResyncRequired",
    "SessionState",
    "Subscription",
    "SubscriptionSource",
    "execution_transcript",
    "open_fleet",
    "open_following",
]


DEFAULT_REPLAY_BYTES = 8 * 2**20
"""Counted bytes a session's replay buffer keeps by default (``protocol/fanout/replay.py``)."""


class Fleet:
    """The handle inside ``open_fleet``. See the module docstring."""

    def __init__(
        self,
        nursery: trio.Nursery,
        *,
        max_live: int,
        replay_buffer: int,
        replay_bytes: int,
        keep_finished: int,
        session_options: Mapping[str, Any],
        idempotency_ttl: float = DEFAULT_IDEMPOTENCY_TTL,
        governor: GovernorConfig | None = None,
        governor_random: Callable[[], float] = random.random,
        governor_state: GovernorStateFactory | None = None,
    ) -> None:
        self._nursery = nursery
        self._keys = IdempotencyRecords(ttl=idempotency_ttl)
        self._max_live = max_live
        # A pool's warm CLIs are CLIs too: sessions get what the pool leaves of the cap.
        pool = session_options.get("pool")
        session_slots = max_live - (pool.size if isinstance(pool, CLIPool) else 0)
        self._slots: SlotQueue[FleetSession] = SlotQueue(session_slots)
        self._governor: Governor[_Execution] | None = None
        self._governed_sessions: dict[_Execution, FleetSession] = {}
        self._governor_waiting: collections.Counter[Hashable] = collections.Counter()
        if governor is not None:
            config = attrs.evolve(
                governor,
                max_live=session_slots,
                initial_limit=None
                if governor.initial_limit is None
                else min(governor.initial_limit, session_slots),
            )
            make = governor_state or GovernorRules
            self._governor = Governor(
                make(config, now=trio.current_time(), random=governor_random),
                start=self._governor_start,
                refuse=self._governor_refuse,
                abort=self._governor_abort,
            )
        self._replay_buffer = replay_buffer
        self._replay_bytes = replay_bytes
        self._keep_finished = keep_finished
        self._options = dict(session_options)
        self._sessions: dict[str, FleetSession] = {}
        self._active: dict[Hashable, int] = {}  # owner -> sessions started and not ended
        # Sessions between executions (their task done), the longest idle first.
        self._idle: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._finished = 0
        self._closed = False
        self._draining = False
        #: The user-input requests waiting across the sessions (``inbox``), fed by them.
        self._inbox = InboxHub(self._answer_from_inbox)

    async def start(
        self,
        params: ExecuteParams,
        *,
        owner: Hashable = None,
        label: str | None = None,
        idempotency_key: str | None = None,
        priority: int = 0,
        **session_options: Any,
    ) -> FleetSession:
        """Start a session; it runs as soon as a slot is free. Never waits for the slot.

        ``owner``: who asks (any hashable; the gateway passes its client's key). Waiting
        sessions of different owners get slots in turn, so one owner's long queue does not
        hold up another's first session. ``label``: your name for the session, kept on it
        (``FleetSession.label``) for listings. ``session_options`` override the fleet's
        ``open_session`` keywords for this session. ``idempotency_key``: a start with a key
        this fleet recorded for the same owner (a gateway's principal) returns the session
        that start created, and starts nothing; with other params or label it raises
        ``IdempotencyConflictError`` (``protocol/fanout/idempotency.py``). Keys are kept
        ``idempotency_ttl`` seconds (``open_fleet``). ``priority``: with a governor, waiting
        opens of a higher priority start first (``FleetSession.queue_position``).
        """
        await trio.lowlevel.checkpoint()
        if not isinstance(params, ExecuteParams):
            raise InvalidParamsError("params", params, "an ExecuteParams")
        try:
            hash(owner)
        except TypeError:
            raise InvalidParamsError("owner", owner, "a hashable value or None") from None
        if label is not None:
            check_text("label", label)
        check_int("priority", priority, -(2**31))
        digest = ""
        if idempotency_key is not None:
            check_idempotency_key(idempotency_key)
            digest = open_digest(params_to_json(params), label)
            replayed = self._replayed(key_scope(owner), idempotency_key, digest, "open")
            if replayed is not None:
                return replayed
        check_session_options(session_options)
        self._check_accepting()
        check_together(self._options | session_options)
        pool = (self._options | session_options).get("pool")
        if isinstance(pool, CLIPool):
            pool.check(params, user_input=True)
        session = FleetSession(
            self,
            params,
            self._options | session_options,
            owner=owner,
            label=label,
            replay_buffer=self._replay_buffer,
            replay_bytes=self._replay_bytes,
            priority=priority,
        )
        self._sessions[session.id] = session
        if idempotency_key is not None:  # no checkpoint since _replayed (rule 1)
            self._keys.record(
                key_scope(owner), idempotency_key, session.id, digest, "open", trio.current_time()
            )
        self._active[owner] = self._active.get(owner, 0) + 1
        self._request_slot(session, session._x)  # its task starts with its slot
        return session

    async def continue_(
        self,
        session_id: str,
        prompt: str,
        *,
        idempotency_key: str | None = None,
        model: str | None = None,
        permission_mode: PermissionMode | None = None,
        images: Sequence[ImageInput] = (),
    ) -> FleetSession:
        """Run ``prompt`` as the next execution of an ended session's conversation.

        The CLI resumes the conversation by its session id (``resume_session_id``) with the
        session's own parameters and options - the same working directory and environment,
        so the same config folder holding its transcript - and the model sees the earlier
        turns. Between executions a session holds no CLI: this asks for a slot again, like
        ``start`` (it never waits for it), once the previous execution's CLI is gone. The
        new execution's events continue the session's ``seq`` from ``first_seq``; existing
        subscriptions ended, so subscribe again (with the last seq seen) to follow it.
        ``model`` and ``permission_mode`` replace the session's from this execution on
        (``None``: kept); ``images`` go with ``prompt``. Returns the session.

        Raises :class:`UnknownSessionError` for an id this fleet does not know (or forgot),
        ``LocalProtocolError`` while the session's execution still runs (push to it
        instead), when its CLI never said a session id (there is no conversation to resume),
        or once the fleet is draining or closed; ``InvalidParamsError`` for a bad prompt.
        ``idempotency_key``: as for :meth:`start`; a continue with a key recorded for the same
        session, prompt and options returns the session (running or not) and runs nothing.
        """
        await trio.lowlevel.checkpoint()
        session = self.get_nowait(session_id)
        options = ContinueOptions(model=model, permission_mode=permission_mode, images=images)
        digest = ""
        if idempotency_key is not None:
            check_idempotency_key(idempotency_key)
            digest = continue_digest(session_id, prompt, options)
            scope = key_scope(session.owner)
            if self._replayed(scope, idempotency_key, digest, "continue") is not None:
                return session
        conversation = check_continuable(
            session_id,
            state=session.state,
            ended=session.ended,
            claude_session_id=session.claude_session_id,
        )
        self._check_accepting()
        # A fork, a chosen id, a truncation address the first start only; the first prompt's
        # images are in the conversation already. Validates the prompt (InvalidParamsError).
        params = continuation(session.params, prompt, conversation, options)
        previous = session._next_execution(params)
        if idempotency_key is not None:
            self._keys.record(
                key_scope(session.owner),
                idempotency_key,
                session.id,
                digest,
                "continue",
                trio.current_time(),
            )
        x = session._x
        self._idle.pop(session.id, None)
        self._active[session.owner] = self._active.get(session.owner, 0) + 1
        if previous.done.is_set():
            self._request_slot(session, x)  # its task starts with its slot
        else:  # the previous CLI is still being closed: ask for the slot once it is gone
            self._spawn(session, x, previous.done)
        return session

    async def drain(self, deadline: float) -> None:
        """Stop accepting, let running executions finish until ``deadline``, abort the rest.

        ``deadline`` is a time on trio's clock, as for :func:`trio.move_on_at`
        (``trio.current_time() + 30``: thirty seconds from now). From the call on, ``start``
        and ``continue_`` raise ``LocalProtocolError``; sessions still waiting for a slot
        are ended at once with ``aborted`` (they never start a CLI). Running executions
        go on until they end by themselves or the deadline passes; then each one left is
        aborted (``FleetSession.abort``: one ``aborted`` event, its CLI stopped). Returns
        once every execution has ended and every CLI is gone: at the deadline plus the
        abort's bounds (``DriverConfig``) at worst. Calling it again is harmless; leaving
        ``open_fleet`` afterwards finds nothing left to stop.
        """
        # math.inf is a time too (wait as long as it takes); NaN and huge ints are not.
        if not is_number(deadline) or (finite_float(deadline) is None and deadline != math.inf):
            raise InvalidParamsError(
                "deadline", deadline, "a time on trio's clock (a number, not NaN)"
            )
        await trio.lowlevel.checkpoint()
        self._draining = True
        for session in list(self._sessions.values()):
            x = session._x
            if x.session is None and not x.ended.is_set():
                session._cancel_waiting(x, "the fleet is draining: it never started")
        with trio.move_on_at(deadline):
            await trio.lowlevel.checkpoint()
            for session in list(self._sessions.values()):
                await session.wait_ended()
        async with trio.open_nursery() as nursery:
            for session in list(self._sessions.values()):
                if not session.ended:
                    nursery.start_soon(session.abort)
        for session in list(self._sessions.values()):
            await session.wait_closed()

    # -- the session-host interface (actors/fanout/hosts.py) ---------------------------------------

    @asynccontextmanager
    async def inbox(
        self, *, may_see: MaySee | None = None, max_changes: int = DEFAULT_INBOX_CHANGES
    ) -> AsyncIterator[InboxChannel]:
        """``async with fleet.inbox() as inbox:``: the user-input requests waiting across
        the fleet's sessions (a snapshot first), then their arrivals and resolutions
        (``actors/fanout/inbox.py``). ``may_see``: which sessions' requests, by principal
        (every session's when None). ``max_changes``: how far the consumer may fall behind
        before it is served a fresh snapshot instead."""
        await trio.lowlevel.checkpoint()
        with self.inbox_nowait(may_see=may_see, max_changes=max_changes) as channel:
            yield channel

    def inbox_nowait(
        self,
        *,
        may_see: MaySee | None = None,
        max_changes: int = DEFAULT_INBOX_CHANGES,
        notify: Callable[[], None] | None = None,
    ) -> InboxChannel:
        """An inbox decided at once, for a consumer that waits on several things at once
        (``notify`` is called whenever it becomes readable); see :meth:`inbox`."""
        return self._inbox.watch(may_see=may_see, max_changes=max_changes, notify=notify)

    async def _answer_from_inbox(
        self, session_id: str, request_id: str, answer: Any
    ) -> AnswerAccepted | AnswerRejected:
        session = self._sessions.get(session_id)
        if session is None:
            await trio.lowlevel.checkpoint()
            return AnswerRejected(
                request_id=request_id, reason=f"unknown session {session_id!r}"
            )
        return await session.answer(request_id, answer)

    async def open(
        self,
        params: ExecuteParams,
        *,
        label: str | None = None,
        owner: Hashable = None,
        idempotency_key: str | None = None,
        **session_options: Any,
    ) -> FleetSession:
        """Start a session (``SessionHost.open``): :meth:`start` under the interface's name."""
        return await self.start(
            params, owner=owner, label=label, idempotency_key=idempotency_key, **session_options
        )

    def _replayed(self, scope: Hashable, key: str, digest: str, op: str) -> FleetSession | None:
        """The session ``key`` created, None for a new key (``protocol/fanout/idempotency.py``);
        ``UnknownSessionError`` when that session was forgotten since (``keep_finished``)."""
        sid = self._keys.find(scope, key, digest, op, trio.current_time())
        return None if sid is None else self.get_nowait(sid)

    async def get(self, session_id: str) -> FleetSession:
        """The session with this id (``SessionHost.get``); see :meth:`get_nowait`."""
        await trio.lowlevel.checkpoint()
        return self.get_nowait(session_id)

    def get_nowait(self, session_id: str) -> FleetSession:
        """The session with this id; :class:`UnknownSessionError` (a ``KeyError``) if there
        is none (or it was forgotten)."""
        try:
            return self._sessions[session_id]
        except KeyError:
            raise UnknownSessionError(session_id) from None

    async def list(self) -> tuple[SessionInfo, ...]:
        """Every session the fleet knows (not forgotten), oldest first, as ``SessionInfo``."""
        await trio.lowlevel.checkpoint()
        return tuple(session.info() for session in self._sessions.values())

    async def load(self, owner: Hashable) -> HostLoad:
        """The statistics and ``owner``'s (what a gateway's limits count)."""
        await trio.lowlevel.checkpoint()
        return HostLoad(total=self.statistics(), owner=self.owner_statistics(owner))

    async def describe(self) -> HostDescription:
        """What a gateway's ``hello`` says of this fleet: its bounds (one process: no
        cluster)."""
        await trio.lowlevel.checkpoint()
        return HostDescription(
            limits={
                "max_live": self._max_live,
                "replay_buffer": self._replay_buffer,
                "replay_bytes": self._replay_bytes,
                "keep_finished": self._keep_finished,
            },
            governor=None if self._governor is None else self._governor.figures(),
        )

    @property
    def max_live(self) -> int:
        """The cap on live CLIs (a pool's warm ones included)."""
        return self._max_live

    @property
    def replay_buffer(self) -> int:
        return self._replay_buffer

    @property
    def replay_bytes(self) -> int:
        return self._replay_bytes

    @property
    def keep_finished(self) -> int:
        return self._keep_finished

    @property
    def accepting(self) -> bool:
        """False once the fleet drains or is closed: it starts nothing new."""
        return not (self._closed or self._draining)

    def sessions(self) -> tuple[FleetSession, ...]:
        """Every session the fleet knows (not forgotten), oldest first."""
        return tuple(self._sessions.values())

    def _check_accepting(self) -> None:
        if self._closed:
            raise LocalProtocolError("the fleet is closed: start sessions inside open_fleet")
        if self._draining:
            raise LocalProtocolError(
                "the fleet is draining (drain() was called): it starts nothing new"
            )

    def _request_slot(self, session: FleetSession, x: _Execution) -> None:
        """``x`` wants to start: unless its budget is spent (refused at once), it asks for a
        CLI slot; with a governor its CLI starts (warms up) there and its prompt waits for
        the governor's start (``_admission``)."""
        x.requested = True
        refusal = self._budget_refusal(session)
        if refusal is not None:
            session._refuse(x, refusal)
            return
        self._ask_slot(session, x)

    def _budget_refusal(self, session: FleetSession) -> Error | None:
        """Why ``session`` may not start a CLI now (its budget is spent), None when it may:
        asked when it wants a slot and again when it gets one."""
        governor = self._governor
        if governor is None:
            return None
        figures = governor.check_budget(principal=principal_of(session.owner), label=session.label)
        return None if figures is None else budget_refusal(figures)

    def _ask_slot(self, session: FleetSession, x: _Execution) -> None:
        x.slot_asked = True
        if self._slots.request(session, session.owner):
            self._granted(session, x)

    # -- the governor's decisions and inputs (actors/fanout/governor.py) ---------------------------

    def _not_waiting(self, owner: Hashable) -> None:
        self._governor_waiting[owner] -= 1
        if not self._governor_waiting[owner]:
            del self._governor_waiting[owner]

    def _governor_start(self, x: _Execution) -> None:
        session = self._governed_sessions[x]
        self._not_waiting(session.owner)
        x.admitted.set()

    def _admission(
        self, session: FleetSession, x: _Execution
    ) -> Callable[[], Awaitable[object]] | None:
        """What ``x``'s session awaits once its CLI is up, before its prompt goes to the
        model: the governor's start (None without a governor). Asking only then (not with
        the CLI slot) keeps the two from waiting on each other: every execution the governor
        chooses from already holds its CLI."""
        governor = self._governor
        if governor is None:
            return None

        async def admitted() -> None:
            self._governed_sessions[x] = session
            self._governor_waiting[session.owner] += 1
            governor.submit(
                x,
                owner=session.owner,
                priority=session.priority,
                principal=principal_of(session.owner),
                label=session.label,
            )
            await x.admitted.wait()

        return admitted

    def _governor_refuse(self, x: _Execution, figures: BudgetFigures) -> None:
        session = self._governed_sessions.pop(x)
        self._not_waiting(session.owner)
        session._refuse(x, budget_refusal(figures))  # its CLI is up: it is stopped

    def _governor_abort(self, x: _Execution, figures: BudgetFigures) -> None:
        session = self._governed_sessions.get(x)
        if session is not None and session._x is x and not x.ended.is_set():
            self._nursery.start_soon(session.abort, name=f"fleet abort {session.id} (budget)")

    def _governed(self, x: _Execution, event: Event) -> None:
        """A session's event the governor may read (a turn's result, a rate-limit report)."""
        governor = self._governor
        if governor is None:
            return
        if isinstance(event, Result):
            governor.turn_ended(
                x,
                event.usage.cost_usd,
                event.api_error_status,
                event.terminal_reason if event.is_error else None,
            )
            # The governed turn is over: its place under the limit is free now, not once
            # its CLI has exited (later turns of the execution are not held back).
            governor.execution_ended(x)
        elif isinstance(event, UserInputRequest):
            governor.person_asked(x, event.request_id)
        elif isinstance(event, UserInputResolved):
            governor.person_answered(x, event.request_id)
        else:
            governor.signal(event)

    def _position(self, x: _Execution) -> int | None:
        return None if self._governor is None else self._governor.position(x)

    @property
    def governor(self) -> Governor[Any] | None:
        """The fleet's governor (``actors/fanout/governor.py``), None when it has none:
        ``notices()`` and ``figures()``."""
        return self._governor

    def _granted(self, session: FleetSession, x: _Execution) -> None:
        """``x`` holds a slot: wake its task, or start it. A session waiting in the queue has
        no task of its own (a fleet with hundreds queued holds no task for each)."""
        x.slot.set()
        if not x.has_task:
            self._spawn(session, x, None)

    def _spawn(self, session: FleetSession, x: _Execution, previous: trio.Event | None) -> None:
        x.has_task = True
        name = f"fleet session {session.id}"
        if x.number > 1:
            name += f" execution {x.number}"
        self._nursery.start_soon(session._run, x, previous, name=name)

    def _close_waiting(self) -> None:
        """The fleet closes: end every execution still queued for a slot (they have no task
        for the nursery's cancellation to reach)."""
        for session in list(self._sessions.values()):
            x = session._x
            if not x.has_task and not x.ended.is_set():
                session._cancel_waiting(x, "the fleet was closed")

    def statistics(self) -> FleetStatistics:
        governor = self._governor
        if governor is None:
            return FleetStatistics(
                live=self._slots.live, waiting=self._slots.waiting, finished=self._finished
            )
        figures = governor.figures()
        return FleetStatistics(
            live=self._slots.live,
            waiting=self._slots.waiting + figures.waiting,
            finished=self._finished,
            governor=figures,
        )

    def owner_statistics(self, owner: Hashable) -> OwnerStatistics:
        """How many sessions of ``owner`` are live, waiting (for a slot), and not ended. A
        session whose CLI is up while its first turn waits for the governor is live (it holds
        its slot; ``governor_waiting`` counts it), so a gateway's per-client limits count it
        once."""
        return OwnerStatistics(
            live=self._slots.live_of(owner),
            waiting=self._slots.waiting_of(owner),
            governor_waiting=self._governor_waiting.get(owner, 0),
            active=self._active.get(owner, 0),
        )

    def _release_slot(self, session: FleetSession) -> None:
        granted = self._slots.release(session)
        if granted is not None:
            self._granted(granted, granted._x)  # handed over: the count of used slots stays

    def _withdraw(self, session: FleetSession) -> None:
        """A waiting session gave up (aborted, or the fleet closed) before it got a slot."""
        x = session._x
        if x.slot_asked:
            self._slots.withdraw(session, session.owner)

    def _session_ended(self, session: FleetSession) -> None:
        count = self._active[session.owner] - 1
        if count:
            self._active[session.owner] = count
        else:
            del self._active[session.owner]

    def _finished_session(self, session: FleetSession, x: _Execution) -> None:
        """An execution's task is done: the session is idle unless it was continued
        meanwhile (the longest idle is forgotten first once more than ``keep_finished``)."""
        self._finished += 1
        if self._governed_sessions.pop(x, None) is not None:
            assert self._governor is not None
            if self._governor.cancel(x):  # it ended still waiting for its admission
                self._not_waiting(session.owner)
            self._governor.execution_ended(x)
        if x is not session._x:
            return
        self._idle[session.id] = None
        while len(self._idle) > self._keep_finished:
            forgotten, _ = self._idle.popitem(last=False)
            self._sessions.pop(forgotten, None)


@asynccontextmanager
async def open_fleet(
    *,
    max_live: int = 4,
    replay_buffer: int = 2000,
    replay_bytes: int = DEFAULT_REPLAY_BYTES,
    keep_finished: int = 256,
    idempotency_ttl: float = DEFAULT_IDEMPOTENCY_TTL,
    governor: GovernorConfig | DefaultGovernor | None = DEFAULT_GOVERNOR,
    budget_usd: float | None = None,
    governor_random: Callable[[], float] = random.random,
    governor_state: GovernorStateFactory | None = None,
    **session_options: Any,
) -> AsyncIterator[Fleet]:
    """A fleet of sessions with at most ``max_live`` CLIs at once.

    ``replay_buffer`` / ``replay_bytes``: events, and counted bytes, kept per session for
    replay (the oldest are evicted first; see ``protocol/fanout/replay.py``). ``keep_finished``:
    idle sessions (their execution ended) still reachable with ``get()`` and
    ``continue_()``; the longest idle is forgotten first. ``idempotency_ttl``: seconds an
    idempotency key of ``start`` / ``continue_`` is kept (at most 100,000 keys, the oldest
    forgotten first).
    ``session_options``: ``open_session`` keywords for every session (see
    :data:`SESSION_OPTIONS`), checked by name and type here. With ``pool=``, the pool's warm
    CLIs count against ``max_live`` (the pool must be smaller, and opened with
    ``user_input=True``: fleet sessions answer user input with ``FleetSession.answer()``).
    ``governor``: the fleet's governor (``actors/fanout/governor.py``), on by default with
    the settings of :class:`GovernorConfig` (they suit one API key): before an execution
    starts it waits for the governor, which pauses starts for the whole fleet when the API
    pushes back (a 429/529, a rejected rate limit), lowers the number of live sessions below
    ``max_live`` while it does (and raises it again as turns succeed), spaces starts (4 a
    second by default), and refuses starts once a budget is spent (``budget_exhausted``). Pass
    a ``GovernorConfig`` to tune it (its ``max_live`` is replaced by the fleet's), or
    ``None`` to turn it off. ``budget_usd``: the fleet's budget, spent by the exact cost of
    each turn (a shortcut for ``GovernorConfig(budget_usd=...)``; needs the governor).
    ``governor_random``: the source of the resume jitter (a seeded one in a test).
    ``governor_state``: what keeps the governor's state, called with its config, ``now`` and
    ``random`` (default ``GovernorRules``, in this process; ``worker --redis`` shares it in
    Redis with ``actors/cluster/governor.py``).
    An exception raised in the block comes out as itself.
    Leaving the block ends every session still waiting or running (aborted); to let running
    executions finish first, ``await fleet.drain(deadline)`` before leaving.
    """
    check_int("max_live", max_live, 1)
    check_int("replay_buffer", replay_buffer, 1)
    check_int("replay_bytes", replay_bytes, 1)
    check_int("keep_finished", keep_finished, 0)
    check_number("idempotency_ttl", idempotency_ttl, above=0, allowed="seconds > 0")
    check_session_options(session_options)
    config = fleet_governor(governor, budget_usd, governor_random, max_live=max_live)
    check_pool(session_options, max_live)
    async with open_block_nursery() as nursery:
        fleet = Fleet(
            nursery,
            max_live=max_live,
            replay_buffer=replay_buffer,
            replay_bytes=replay_bytes,
            keep_finished=keep_finished,
            session_options=session_options,
            idempotency_ttl=idempotency_ttl,
            governor=config,
            governor_random=governor_random,
            governor_state=governor_state,
        )
        if fleet._governor is not None:
            nursery.start_soon(fleet._governor.run, name="fleet governor")
        watch_fleet(fleet)  # its live and waiting sessions in the metrics
        try:
            yield fleet
        finally:
            unwatch_fleet(fleet)
            fleet._closed = True
            fleet._close_waiting()
            fleet._inbox.close()
