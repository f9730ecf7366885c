"""The fleet: many sessions under one nursery, a cap on live CLIs, and fan-out to subscribers.

::

    async with open_fleet(max_live=4, transport_factory=...) as fleet:
        fs = await fleet.open(ExecuteParams(prompt="..."))       # never waits for a slot
        async with fs.subscribe() as events:                     # replay, then live events
            async for event in events:
                ...
        transcript = await fs.result()                           # once its final event is out
        fs.push_nowait("more"); await fs.answer(request_id, answer); await fs.abort()

A fleet is a session host (``actors/hosts.py``): ``open``, ``continue_``, ``get``, ``list``,
and on each session ``push``, ``answer``, ``abort``, ``subscribe``, ``result``, ``usage``, as
on a Redis cluster's fleet and a gateway client. (``start`` is ``open`` with per-session
options; ``subscribe_nowait`` is the subscription a serving layer uses, decided at once.)

Why it is built this way:

* **The cap.** Each session runs in its own task in the fleet's nursery and holds one of
  ``max_live`` slots for as long as its CLI exists (``open_session`` from connect to
  disconnect). ``start()`` asks for the slot synchronously and only spawns the task, so it never
  waits. A freed slot is handed straight to a waiting session: the owners that wait take turns
  (``start(params, owner=...)``; the gateway passes its client), and each owner's sessions go
  in ``start()`` order (``protocol/slots.py``). With one owner that is simply start order.
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
  ``protocol/replay.py``: events are kept without their ``raw`` field (subscribers get
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
"""

from __future__ import annotations

import collections
import contextlib
import logging
import math
import time
import uuid as uuid_module
from collections.abc import AsyncIterator, Callable, Hashable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal, Protocol

import attrs
import trio

from claude_trio.protocol.checks import (
    check_env,
    check_int,
    check_text,
    finite_float,
    is_int,
    is_number,
)
from claude_trio.protocol.custom_tools import check_custom_tools
from claude_trio.protocol.errors import (
    ControlRefusedError,
    InvalidParamsError,
    LocalProtocolError,
    ReplayGapError,
    SlowSubscriberError,
    UnknownSessionError,
)
from claude_trio.protocol.events import (
    Aborted,
    Error,
    Event,
    Result,
    TurnStarted,
    UserInputRequest,
    UserInputResolved,
    is_terminal,
)
from claude_trio.protocol.hooks import check_hooks
from claude_trio.protocol.images import ImageInput
from claude_trio.protocol.lifecycle import Accepted, Rejected
from claude_trio.protocol.params import ExecuteParams
from claude_trio.protocol.permissions import PermissionMode
from claude_trio.protocol.replay import Entry, ReplayBuffer, SubscriberQueue
from claude_trio.protocol.slots import SlotQueue
from claude_trio.protocol.transcript import Transcript, ends_execution
from claude_trio.protocol.usage import ZERO_USAGE, Usage, add_usage
from claude_trio.protocol.wire import SessionInfo

from .boundary import open_block_nursery
from .broker import AnswerAccepted, AnswerRejected
from .channel import BaseReceiveChannel
from .driver import DriverConfig
from .owners import principal_of
from .pool import CLIPool
from .session import MIN_BUFFER_SIZE, Session, check_session_store, open_session

log = logging.getLogger(__name__)

SESSION_OPTIONS: frozenset[str] = frozenset(
    {
        "transport_factory",
        "env",
        "cli_path",
        "stderr",
        "max_buffer_size",
        "config",
        "pool",
        "custom_tools",
        "hooks",
        "session_store",
    }
)
"""The ``open_session`` keywords a fleet passes through (``on_user_input`` is always manual).
``custom_tools`` and ``hooks`` are the operator's code: a fleet served by the gateway gives
them to remote sessions too, but no client can send any."""

DEFAULT_REPLAY_BYTES = 8 * 2**20
"""Counted bytes a session's replay buffer keeps by default (``protocol/replay.py``)."""
DEFAULT_SUBSCRIBER_BYTES = 8 * 2**20
"""Counted bytes a subscriber's queue may hold by default before it is dropped."""
DEFAULT_SUBSCRIBER_QUEUE = 1000
"""Live events a ``subscribe()`` channel queues before its consumer is dropped and served a
replay from its last seq (it sees a pause, not an error)."""

SessionState = Literal["waiting", "live", "ended"]


@attrs.frozen(kw_only=True)
class ResyncRequired:
    """``last_seq`` is older than the replay buffer: events after it were evicted.

    ``oldest_seq`` is the oldest seq the buffer still holds; subscribe again with ``None`` (or
    ``oldest_seq - 1``) to get what is left.
    """

    session_id: str
    oldest_seq: int


@attrs.frozen(kw_only=True)
class FleetStatistics:
    """``live``: sessions holding a slot (their CLI exists); ``waiting``: for a slot;
    ``finished``: executions whose task is done (their CLI gone; remembered or not)."""

    live: int
    waiting: int
    finished: int


@attrs.frozen(kw_only=True)
class OwnerStatistics:
    """One owner's sessions: ``live`` (holding a slot), ``waiting`` (for one), and ``active``
    (started and not ended yet: live, waiting, or between the two)."""

    live: int
    waiting: int
    active: int


@attrs.frozen(kw_only=True)
class HostLoad:
    """How busy a served host is, overall (``total``) and for one owner (``owner``): what a
    gateway's per-client and server limits count."""

    total: FleetStatistics
    owner: OwnerStatistics


@attrs.frozen(kw_only=True)
class HostDescription:
    """What a gateway's ``hello`` says of the host it serves: its bounds by name (``limits``)
    and, for a cluster, the summary of its workers (``cluster``; ``None`` for one process)."""

    limits: Mapping[str, int]
    cluster: Mapping[str, Any] | None = None


@attrs.frozen(kw_only=True)
class ReplayStatistics:
    """A session's replay buffer: events held, their counted bytes, the limits."""

    events: int
    bytes: int
    max_events: int
    max_bytes: int


def _check_session_options(options: Mapping[str, Any]) -> None:
    """Refuse an unknown key or a value of the wrong type by name, before any session starts
    (a wrong value would otherwise fail every session later, each with a misleading error)."""
    for key, value in options.items():
        if key == "on_user_input":
            raise InvalidParamsError(
                "on_user_input",
                value,
                "not an option of a fleet: its sessions are answered with FleetSession.answer()",
            )
        if key not in SESSION_OPTIONS:
            raise InvalidParamsError(
                "session option", key, "one of " + ", ".join(sorted(SESSION_OPTIONS))
            )
        if value is None:
            continue
        if key == "pool":
            if not isinstance(value, CLIPool):
                raise InvalidParamsError("pool", value, "a CLIPool (open_cli_pool) or None")
            # Fleet sessions answer user input with FleetSession.answer(): say it now, not
            # as a failure of every session.
            value.check(user_input=True)
            continue
        match key:
            case "transport_factory" | "stderr":
                if not callable(value):
                    raise InvalidParamsError(key, value, "a callable or None")
            case "env":
                check_env("env", value)
            case "cli_path":
                check_text("cli_path", value)
            case "max_buffer_size":
                check_int("max_buffer_size", value, MIN_BUFFER_SIZE)
            case "config":
                if not isinstance(value, DriverConfig):
                    raise InvalidParamsError("config", value, "a DriverConfig or None")
            case "custom_tools":
                check_custom_tools(value)
            case "hooks":
                check_hooks(value)
            case "session_store":
                check_session_store(value)
    _check_together(options)


def _check_together(options: Mapping[str, Any]) -> None:
    """Options that cannot go together (checked again on the merged options of a start)."""
    if options.get("pool") is not None and options.get("custom_tools"):
        raise InvalidParamsError(
            "pool", options["pool"], "None with custom_tools (a warm CLI has no custom tools)"
        )
    if options.get("pool") is not None and options.get("hooks"):
        raise InvalidParamsError(
            "pool", options["pool"], "None with hooks (a warm CLI has no hooks)"
        )


class SubscriptionSource(Protocol):
    """What a :class:`Subscription` follows: a :class:`FleetSession`, or a session of a Redis
    cluster (``actors/redis_fleet.py``)."""

    @property
    def id(self) -> str: ...

    def _detach(self, subscription: Subscription) -> None: ...


class Subscription(BaseReceiveChannel[Event]):
    """One subscriber's view of a session: re-shown questions, then the replay, then live events.

    Channels: the subscriber owns it; ``close()`` (or ``with sub:``) detaches it from the session.
    The session side only offers events (never waits) and ends it after the final event.
    Cancellation: ``receive()`` is a plain checkpoint; cancelling it loses nothing.
    Error handling: after a drop every ``receive()`` raises :class:`SlowSubscriberError`; after
    the session's final event (and everything queued before it) ``trio.EndOfChannel``.
    """

    _closed_message = "this subscription was closed"

    def __init__(
        self,
        owner: SubscriptionSource,
        head: list[Entry],
        *,
        max_queue: int,
        max_bytes: int,
        notify: Callable[[], None] | None,
    ) -> None:
        super().__init__()
        self._owner = owner
        # Re-shown questions and the replay: references to the buffer's entries (bounded by
        # it, plus one pending question per open CLI control request), never merged.
        self._head: list[Entry] = head
        self._head_next = 0
        # Live events not yet received: the slow-subscriber policy (protocol/replay.py).
        self._live = SubscriberQueue(max_events=max_queue, max_bytes=max_bytes)
        self._notify = notify
        self._ended = False
        #: Why the subscription was dropped (``None`` while it is not).
        self.dropped_reason: str | None = None

    @property
    def session_id(self) -> str:
        return self._owner.id

    @property
    def coalesced(self) -> int:
        """How many deltas were merged into an earlier one to make room."""
        return self._live.coalesced

    @property
    def queued_bytes(self) -> int:
        """Counted bytes of the live events not received yet (``protocol/replay.py``)."""
        return self._live.bytes

    @property
    def queued(self) -> int:
        """Live events (merged runs count once) and replayed ones not received yet."""
        return len(self._live) + len(self._head) - self._head_next

    # -- the session's side ------------------------------------------------------------------

    def _offer(self, entry: Entry) -> None:
        if self._closed or self.dropped_reason is not None:
            return
        if not self._live.offer(entry):
            assert self._live.dropped_reason is not None
            self._drop(self._live.dropped_reason)
            return
        self._ready()

    def _ready(self) -> None:
        self._wake()
        if self._notify is not None:
            self._notify()

    def _drop(self, reason: str) -> None:
        self.dropped_reason = reason
        self._head = []
        self._live.clear()
        self._owner._detach(self)
        self._ready()

    def _end(self) -> None:
        self._ended = True
        self._ready()

    @property
    def closed(self) -> bool:
        """True once the subscriber closed it, or it was dropped."""
        return self._closed or self.dropped_reason is not None

    # -- the subscriber's side ---------------------------------------------------------------

    def receive_entry_nowait(self) -> Entry:
        """Like ``receive_nowait``, with the event's :class:`~claude_trio.protocol.replay.Entry`
        (a serving layer caches the event's wire encoding in ``entry.wire``)."""
        self._check_open()
        return self._take_entry()

    def _take_entry(self) -> Entry:
        if self.dropped_reason is not None:
            raise SlowSubscriberError(self.dropped_reason)
        if self._head_next < len(self._head):
            entry = self._head[self._head_next]
            self._head_next += 1
            if self._head_next == len(self._head):
                self._head, self._head_next = [], 0
            return entry
        entry_or_none = self._live.take()
        if entry_or_none is not None:
            return entry_or_none
        if self._ended:
            raise trio.EndOfChannel
        raise trio.WouldBlock

    def _take(self) -> Event:
        return self._take_entry().event

    def _discard(self) -> None:
        # close(): detach from the session and discard what is queued.
        self._head = []
        self._live.clear()
        self._owner._detach(self)

    def _queued(self) -> int:
        return self.queued



class FollowSource(SubscriptionSource, Protocol):
    """What ``subscribe()`` and ``result()`` follow: a session that hands out subscriptions
    decided at once (:class:`FleetSession`, a cluster's ``RedisSession``)."""

    @property
    def first_seq(self) -> int: ...

    def subscribe_nowait(
        self,
        last_seq: int | None,
        *,
        max_queue: int,
        max_bytes: int = DEFAULT_SUBSCRIBER_BYTES,
        notify: Callable[[], None] | None = None,
    ) -> Subscription | ResyncRequired: ...


class FollowingChannel(trio.abc.ReceiveChannel[Event]):
    """The channel of ``subscribe()``: one execution's events, from a subscription that is
    renewed from the last seq received whenever its consumer fell behind and was dropped, so
    the consumer sees a pause, never a :class:`SlowSubscriberError`.

    Channels: owns its subscription (closed with it). Cancellation: ``receive()`` is the
    subscription's (cancelling it loses nothing). Error handling: ``ReplayGapError`` when a
    renewal finds the events after the last one received evicted; ``trio.EndOfChannel``
    after the final event of the execution current when it was made.
    """

    def __init__(
        self, source: FollowSource, subscription: Subscription, last_seq: int | None
    ) -> None:
        self._source = source
        self._subscription = subscription
        self._last = last_seq
        self._first_seq = source.first_seq
        self._renewed = False
        self._done = False

    async def receive(self) -> Event:
        while True:
            if self._done:
                await trio.lowlevel.checkpoint()
                raise trio.EndOfChannel
            try:
                event = await self._subscription.receive()
            except SlowSubscriberError:
                self._renew()
                await trio.lowlevel.checkpoint()
                continue
            last = self._last
            if self._renewed and last is not None and event.seq <= last:
                continue  # a question shown again by the renewed subscription: seen already
            self._last = event.seq if last is None else max(last, event.seq)
            if ends_execution(event) and event.seq >= self._first_seq:
                self._done = True
            return event

    def _renew(self) -> None:
        subscribed = self._source.subscribe_nowait(
            self._last, max_queue=DEFAULT_SUBSCRIBER_QUEUE
        )
        if isinstance(subscribed, ResyncRequired):
            raise ReplayGapError(self._source.id, self._last or 0, subscribed.oldest_seq)
        self._subscription.close()
        self._subscription = subscribed
        self._renewed = True

    def close(self) -> None:
        self._done = True
        self._subscription.close()

    async def aclose(self) -> None:
        self.close()
        await trio.lowlevel.checkpoint()


@asynccontextmanager
async def open_following(
    source: FollowSource, last_seq: int | None
) -> AsyncIterator[trio.abc.ReceiveChannel[Event]]:
    """``subscribe(last_seq)`` of a :class:`FollowSource`; ``ReplayGapError`` at once when the
    events after ``last_seq`` are no longer held."""
    await trio.lowlevel.checkpoint()
    subscribed = source.subscribe_nowait(last_seq, max_queue=DEFAULT_SUBSCRIBER_QUEUE)
    if isinstance(subscribed, ResyncRequired):
        raise ReplayGapError(source.id, last_seq or 0, subscribed.oldest_seq)
    channel = FollowingChannel(source, subscribed, last_seq)
    try:
        yield channel
    finally:
        channel.close()


async def execution_transcript(source: FollowSource) -> Transcript:
    """``result()``: the current execution's transcript, once its final event is out. When
    its first events are no longer held (a replay buffer smaller than the execution), the
    transcript holds what is left of it (its ``text`` and ``usage`` come from the final
    event all the same)."""
    first_seq = source.first_seq
    events: list[Event] = []
    try:
        async with open_following(source, first_seq - 1) as channel:
            events.extend([event async for event in channel])
    except ReplayGapError:
        async with open_following(source, None) as channel:
            events = [event async for event in channel if event.seq >= first_seq]
    return Transcript.of(events)


def _outcome(event: Event) -> str:
    match event:
        case Result():
            return "result_error" if event.is_error else "result"
        case Aborted():
            return "aborted"
        case Error():
            return f"error:{event.code}"
        case _:
            return event.kind


@attrs.define(eq=False)
class _Execution:
    """What one execution of a fleet session has of its own. The session's task holds the one
    it runs, so a task still closing an ended execution's CLI never touches the next one's."""

    number: int
    #: A continued execution's session numbers its events from 1 again: they are shifted by
    #: this so that seq keeps increasing over the fleet session (its replay spans executions).
    seq_offset: int
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    slot: trio.Event = attrs.field(factory=trio.Event)  # granted a slot
    requested: bool = False  # asked the fleet's SlotQueue for a slot
    ended: trio.Event = attrs.field(factory=trio.Event)  # its final event is in the buffer
    done: trio.Event = attrs.field(factory=trio.Event)  # its CLI is gone, its slot released
    session: Session | None = None
    state: SessionState = "waiting"
    cancel_reason: str = "the fleet was closed"
    final_seen: bool = False
    last_turn: int = 0
    #: How it ended, for the log: ``result``, ``result_error``, ``aborted``, ``error:<code>``.
    outcome: str = ""


class FleetSession:
    """One session (one conversation) of a fleet, from ``start()`` on until it is forgotten.

    It runs one execution at a time (``start``, then each ``Fleet.continue_``), each with its
    own CLI; between executions it holds none.

    Channels: owns its replay buffer and offers events to its subscriptions (which their
    subscribers own). Cancellation: the fleet cancels an execution's task when the fleet
    closes, or when an execution still waiting for a slot is aborted or drained; either way
    it ends with one ``aborted`` event. Error handling: an exception out of ``open_session``
    ends the execution with one fatal ``error`` event (code ``internal``); nothing propagates
    to the fleet.
    """

    def __init__(
        self,
        fleet: Fleet,
        params: ExecuteParams,
        options: Mapping[str, Any],
        *,
        owner: Hashable,
        label: str | None,
        replay_buffer: int,
        replay_bytes: int,
    ) -> None:
        self.id = str(uuid_module.uuid4())
        #: The parameters of the current execution (a continued one resumes the conversation).
        self.params = params
        #: Who started it (``Fleet.start(owner=...)``): slots are granted fairly between owners.
        self.owner = owner
        #: The starter's name for it (``Fleet.start(label=...)``), for listings.
        self.label = label
        #: The CLI's own session id once it reported one (for ``resume_session_id``).
        self.claude_session_id: str | None = None
        #: Wall-clock seconds since the epoch: when it was started, when its last execution
        #: ended (None while one runs or waits).
        self.created_at = time.time()
        self.ended_at: float | None = None
        #: The seq of the current execution's first event.
        self.first_seq = 1
        self._fleet = fleet
        self._options = dict(options)
        self._buffer = ReplayBuffer(max_events=replay_buffer, max_bytes=replay_bytes)
        self._usage = ZERO_USAGE
        self._last_seq = 0
        self._subscribers: dict[Subscription, None] = {}  # insertion-ordered set
        self._pending: dict[str, Entry] = {}
        self._x = _Execution(number=1, seq_offset=0)

    # -- state ---------------------------------------------------------------------------------

    @property
    def state(self) -> SessionState:
        """``waiting`` for a slot, ``live`` (its CLI exists), or ``ended`` (its execution ended;
        it holds no CLI once its old one is closed, and ``Fleet.continue_`` may run the next)."""
        return self._x.state

    @property
    def ended(self) -> bool:
        """True once the current execution's final event is in the buffer."""
        return self._x.ended.is_set()

    @property
    def executions(self) -> int:
        """Executions started so far (``Fleet.continue_`` starts the next one)."""
        return self._x.number

    @property
    def usage(self) -> Usage:
        """Every turn of every execution so far (interrupted turns included)."""
        return self._usage

    @property
    def last_seq(self) -> int:
        """The highest seq published so far (0 before the first event)."""
        return self._last_seq

    @property
    def pending_requests(self) -> tuple[UserInputRequest, ...]:
        """User-input requests asked and not yet resolved, oldest first."""
        return tuple(e.event for e in self._pending.values())  # type: ignore[misc]

    @property
    def subscribers(self) -> int:
        """How many subscriptions follow the session now (dropped and closed ones do not)."""
        return len(self._subscribers)

    def replay_statistics(self) -> ReplayStatistics:
        buffer = self._buffer
        return ReplayStatistics(
            events=len(buffer),
            bytes=buffer.bytes,
            max_events=buffer.max_events,
            max_bytes=buffer.max_bytes,
        )

    async def wait_ended(self) -> None:
        """Until the current execution's final event is in the buffer."""
        await self._x.ended.wait()

    async def wait_closed(self) -> None:
        """Until the current execution's CLI is gone and its slot released (after its end)."""
        await self._x.done.wait()

    # -- actions -------------------------------------------------------------------------------

    def push_nowait(self, text: str, *, images: Sequence[ImageInput] = ()) -> Accepted | Rejected:
        """Offer a user message (and ``images``); decided at once (see
        ``Session.push_nowait``)."""
        x = self._x
        if x.ended.is_set():
            return Rejected(reason="the execution has ended")
        if x.session is None:
            return Rejected(reason="the session has not started yet: it is waiting for a slot")
        return x.session.push_nowait(text, images=images)

    async def push(self, text: str, *, images: Sequence[ImageInput] = ()) -> Accepted | Rejected:
        await trio.lowlevel.checkpoint_if_cancelled()
        outcome = self.push_nowait(text, images=images)
        await trio.lowlevel.cancel_shielded_checkpoint()
        return outcome

    async def answer(self, request_id: str, answer: Any) -> AnswerAccepted | AnswerRejected:
        """Answer a pending ``user_input_request``; a bad or late answer is ``AnswerRejected``."""
        x = self._x
        if x.session is None or x.ended.is_set():
            await trio.lowlevel.checkpoint()
            return AnswerRejected(
                request_id=request_id, reason=f"no user-input request {request_id!r} is pending"
            )
        return await x.session.answer(request_id, answer)

    async def abort(self) -> None:
        """Abort the current execution: exactly one ``aborted`` event, then it ends.
        Idempotent.

        Returns once the execution's final event is in the buffer. An execution still waiting
        for a slot never starts its CLI.
        """
        x = self._x
        if x.ended.is_set():
            await trio.lowlevel.checkpoint()
            return
        if x.session is None:
            self._cancel_waiting(x, "aborted before it started")
        else:
            await x.session.abort()
        await x.ended.wait()

    def live_controls(self) -> FleetSession:
        """The session itself: a local session takes live controls (``set_model``,
        ``set_permission_mode``)."""
        return self

    def running(self, control: str) -> Session:
        """The current execution's session, for a live control (``Session.set_model``, ...);
        ``ControlRefusedError`` when it has ended or not started yet."""
        x = self._x
        if x.ended.is_set():
            raise ControlRefusedError(f"{control}: the execution has ended")
        if x.session is None:
            raise ControlRefusedError(
                f"{control}: the session has not started yet: it is waiting for a slot"
            )
        return x.session

    async def set_model(self, model: str | None) -> None:
        """``Session.set_model`` on the current execution."""
        await self.running("set_model").set_model(model)

    async def set_permission_mode(self, mode: PermissionMode) -> None:
        """``Session.set_permission_mode`` on the current execution."""
        await self.running("set_permission_mode").set_permission_mode(mode)

    def _cancel_waiting(self, x: _Execution, reason: str) -> None:
        x.cancel_reason = reason
        x.scope.cancel()

    def subscribe(
        self, last_seq: int | None = None
    ) -> contextlib.AbstractAsyncContextManager[trio.abc.ReceiveChannel[Event]]:
        """``async with session.subscribe(last_seq) as events:``: the events after
        ``last_seq`` (all the replay buffer holds for ``None``), then live ones, until the
        end of the current execution (:class:`~claude_trio.actors.hosts.SessionHandle`).
        Pending questions the replay does not include come first. A consumer that falls
        behind is served a replay from its last seq; ``ReplayGapError`` when the events after
        ``last_seq`` were evicted."""
        return open_following(self, last_seq)

    async def result(self) -> Transcript:
        """Wait for the current execution's final event; its
        :class:`~claude_trio.protocol.transcript.Transcript`."""
        return await execution_transcript(self)

    def info(self) -> SessionInfo:
        """The session as ``Fleet.list()`` shows it."""
        return SessionInfo(
            session=self.id,
            label=self.label,
            owner=principal_of(self.owner),
            state=self.state,
            executions=self.executions,
            first_seq=self.first_seq,
            last_seq=self.last_seq,
            usage=self.usage,
            created_at=self.created_at,
            ended_at=self.ended_at,
        )

    def subscribe_nowait(
        self,
        last_seq: int | None,
        *,
        max_queue: int,
        max_bytes: int = DEFAULT_SUBSCRIBER_BYTES,
        notify: Callable[[], None] | None = None,
    ) -> Subscription | ResyncRequired:
        """A new subscription, decided at once: the events after ``last_seq``, then live ones,
        until the end of the current execution.

        ``last_seq=None``: everything the replay buffer still holds (a new client; never a
        resync). Otherwise exactly the events with ``seq > last_seq``, or
        :class:`ResyncRequired` when some of them were evicted. Either way, the pending
        user-input requests the replay does not include come first, with their own seq.
        ``max_queue`` / ``max_bytes``: how far the subscriber may lag behind the live events
        before it is dropped. ``notify``: called (synchronously, from the session's task)
        whenever the subscription becomes readable, was dropped or ended; for a consumer that
        waits on several subscriptions at once. After ``Fleet.continue_``, subscribe again
        with the last seq you saw to follow the next execution.
        """
        check_int("max_queue", max_queue, 1)
        check_int("max_bytes", max_bytes, 1)
        if notify is not None and not callable(notify):
            raise InvalidParamsError("notify", notify, "a callable or None")
        buffer = self._buffer
        if last_seq is not None:
            if not is_int(last_seq):
                raise InvalidParamsError("last_seq", last_seq, "an int >= 0 or None")
            if not 0 <= last_seq <= self._last_seq:
                raise InvalidParamsError(
                    "last_seq", last_seq, f"between 0 and the session's last seq {self._last_seq}"
                )
        covered_through = buffer.evicted_through if last_seq is None else last_seq
        replay = buffer.after(covered_through)
        if replay is None:
            assert buffer.oldest_seq is not None
            return ResyncRequired(session_id=self.id, oldest_seq=buffer.oldest_seq)
        head = [r for r in self._pending.values() if r.seq <= covered_through]
        head.extend(replay)
        subscription = Subscription(
            self, head, max_queue=max_queue, max_bytes=max_bytes, notify=notify
        )
        if self.ended:
            subscription._ended = True
        else:
            self._subscribers[subscription] = None
        return subscription

    # -- the session task ----------------------------------------------------------------------

    def _detach(self, subscription: Subscription) -> None:
        self._subscribers.pop(subscription, None)

    def _next_execution(self, params: ExecuteParams) -> _Execution:
        """Make the next execution current (``Fleet.continue_``); the previous one's."""
        previous = self._x
        self.params = params
        self.first_seq = self._last_seq + 1
        self.ended_at = None
        self._x = _Execution(number=previous.number + 1, seq_offset=self._last_seq)
        return previous

    def _publish(self, x: _Execution, event: Event) -> None:
        entry = self._buffer.append(event)
        event = entry.event
        self._last_seq = event.seq
        x.last_turn = event.turn
        x.final_seen = is_terminal(event) and getattr(event, "final", True)
        if x.final_seen:
            x.outcome = _outcome(event)
        match event:
            case UserInputRequest():
                self._pending[event.request_id] = entry
            case UserInputResolved():
                self._pending.pop(event.request_id, None)
            case Result() | Aborted():
                if event.session_id:
                    self.claude_session_id = event.session_id
                if event.usage is not None:
                    self._usage = add_usage(self._usage, event.usage)
            case TurnStarted() if event.session_id:
                self.claude_session_id = event.session_id
            case _:
                pass
        for subscription in list(self._subscribers):
            subscription._offer(entry)

    def _end(self, x: _Execution) -> None:
        if x.ended.is_set():
            return
        x.state = "ended"
        self.ended_at = time.time()
        self._pending.clear()
        for subscription in list(self._subscribers):
            subscription._end()
        self._subscribers.clear()
        x.ended.set()
        self._fleet._session_ended(self)
        log.info(
            "fleet: session %s execution %d ended: %s",
            self.id,
            x.number,
            x.outcome or "ended",
            extra={
                "event": "ended",
                "session": self.id,
                "execution": x.number,
                "outcome": x.outcome or "ended",
                "cost_usd": self._usage.cost_usd,
            },
        )

    # ASYNC910: every path goes through ``await x.slot.wait()`` (a checkpoint, even when the
    # scope is already cancelled); the linter cannot see that past ``except Exception``.
    async def _run(self, x: _Execution, previous: trio.Event | None) -> None:  # noqa: ASYNC910
        """Run execution ``x``: wait for the previous execution's CLI to be gone
        (``previous``, when its slot was not asked for yet), then for a slot, then run."""
        fleet = self._fleet
        try:
            with x.scope:
                try:
                    if previous is not None:
                        await previous.wait()
                        fleet._request_slot(self, x)
                    await x.slot.wait()
                    x.state = "live"
                    await self._run_session(x)
                finally:
                    if x.slot.is_set():
                        fleet._release_slot(self)
                    elif x.requested:
                        fleet._withdraw(self)
        except Exception as exc:  # one session's failure must not take the fleet down
            self._publish_final(
                x, Error(message=f"the session failed: {exc!r}", code="internal", fatal=True)
            )
        finally:
            self._publish_final(x, Aborted(reason=x.cancel_reason))
            self._end(x)
            x.done.set()
            fleet._finished_session(self, x)

    async def _run_session(self, x: _Execution) -> None:
        async with open_session(self.params, on_user_input="manual", **self._options) as session:
            x.session = session
            events = session.events
            offset = x.seq_offset
            async for event in events:
                self._publish(x, self._shifted(event, offset))
                # Everything else already queued, without a checkpoint per event: with many
                # busy clients the scheduler runs this task once per batch, not per event.
                while True:
                    try:
                        event = events.receive_nowait()
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                    self._publish(x, self._shifted(event, offset))
            # The final event is published: end now, not after the CLI is closed (the slot is
            # held until then, but subscribers and abort() need not wait for it).
            self._end(x)

    @staticmethod
    def _shifted(event: Event, offset: int) -> Event:
        if not offset:
            return event
        # raw goes too: the buffer would drop it anyway (protocol/replay.py, rule 1).
        return attrs.evolve(event, seq=event.seq + offset, raw=None)

    def _publish_final(self, x: _Execution, event: Error | Aborted) -> None:
        """Close the execution's stream with a synthesized terminal event unless it already
        has one (an execution that ended before a later one began never gets one here)."""
        if not x.final_seen and not x.ended.is_set():
            self._publish(x, attrs.evolve(event, turn=x.last_turn, seq=self._last_seq + 1))


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
    ) -> None:
        self._nursery = nursery
        self._max_live = max_live
        # A pool's warm CLIs are CLIs too: sessions get what the pool leaves of the cap.
        pool = session_options.get("pool")
        session_slots = max_live - (pool.size if isinstance(pool, CLIPool) else 0)
        self._slots: SlotQueue[FleetSession] = SlotQueue(session_slots)
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

    async def start(
        self,
        params: ExecuteParams,
        *,
        owner: Hashable = None,
        label: str | None = None,
        **session_options: Any,
    ) -> FleetSession:
        """Start a session; it runs as soon as a slot is free. Never waits for the slot.

        ``owner``: who asks (any hashable; the gateway passes its client's key). Waiting
        sessions of different owners get slots in turn, so one owner's long queue does not
        hold up another's first session. ``label``: your name for the session, kept on it
        (``FleetSession.label``) for listings. ``session_options`` override the fleet's
        ``open_session`` keywords for this session.
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
        _check_session_options(session_options)
        self._check_accepting()
        _check_together(self._options | session_options)
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
        )
        self._sessions[session.id] = session
        self._active[owner] = self._active.get(owner, 0) + 1
        self._request_slot(session, session._x)
        self._nursery.start_soon(
            session._run, session._x, None, name=f"fleet session {session.id}"
        )
        return session

    async def continue_(self, session_id: str, prompt: str) -> FleetSession:
        """Run ``prompt`` as the next execution of an ended session's conversation.

        The CLI resumes the conversation by its session id (``resume_session_id``) with the
        session's own parameters and options - the same working directory and environment,
        so the same config folder holding its transcript - and the model sees the earlier
        turns. Between executions a session holds no CLI: this asks for a slot again, like
        ``start`` (it never waits for it), once the previous execution's CLI is gone. The
        new execution's events continue the session's ``seq`` from ``first_seq``; existing
        subscriptions ended with the previous execution, so subscribe again (with the last
        seq seen) to follow it. Returns the session.

        Raises :class:`UnknownSessionError` for an id this fleet does not know (or forgot),
        ``LocalProtocolError`` while the session's execution still runs (push to it
        instead), when its CLI never said a session id (there is no conversation to resume),
        or once the fleet is draining or closed; ``InvalidParamsError`` for a bad prompt.
        """
        await trio.lowlevel.checkpoint()
        session = self.get_nowait(session_id)
        if not session.ended:
            raise LocalProtocolError(
                f"session {session_id!r} is still running ({session.state}): push to it, or "
                "wait for its end (wait_ended) before continuing it"
            )
        if session.claude_session_id is None:
            raise LocalProtocolError(
                f"session {session_id!r} has no conversation to continue: its CLI never "
                "reported a session id (its first execution failed before a turn started); "
                "start a new session instead"
            )
        self._check_accepting()
        params = attrs.evolve(
            session.params,
            prompt=prompt,
            resume_session_id=session.claude_session_id,
            fork_session=False,  # a fork happens once, at the start; then it is its own
            images=(),  # the first prompt's images are in the conversation already
        )  # validates the prompt (InvalidParamsError)
        previous = session._next_execution(params)
        x = session._x
        self._idle.pop(session.id, None)
        self._active[session.owner] = self._active.get(session.owner, 0) + 1
        if previous.done.is_set():
            self._request_slot(session, x)
            wait_for: trio.Event | None = None
        else:  # the previous CLI is still being closed: ask for the slot once it is gone
            wait_for = previous.done
        self._nursery.start_soon(
            session._run, x, wait_for, name=f"fleet session {session.id} execution {x.number}"
        )
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

    # -- the session-host interface (actors/hosts.py) ---------------------------------------

    async def open(
        self,
        params: ExecuteParams,
        *,
        label: str | None = None,
        owner: Hashable = None,
        **session_options: Any,
    ) -> FleetSession:
        """Start a session (``SessionHost.open``): :meth:`start` under the interface's name."""
        return await self.start(params, owner=owner, label=label, **session_options)

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
            }
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
        x.requested = True
        if self._slots.request(session, session.owner):
            x.slot.set()

    def statistics(self) -> FleetStatistics:
        return FleetStatistics(
            live=self._slots.live, waiting=self._slots.waiting, finished=self._finished
        )

    def owner_statistics(self, owner: Hashable) -> OwnerStatistics:
        """How many sessions of ``owner`` are live, waiting, and not ended."""
        return OwnerStatistics(
            live=self._slots.live_of(owner),
            waiting=self._slots.waiting_of(owner),
            active=self._active.get(owner, 0),
        )

    def _release_slot(self, session: FleetSession) -> None:
        granted = self._slots.release(session)
        if granted is not None:
            granted._x.slot.set()  # handed over: the count of used slots stays

    def _withdraw(self, session: FleetSession) -> None:
        """A waiting session gave up (aborted, or the fleet closed) before it got a slot."""
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
    **session_options: Any,
) -> AsyncIterator[Fleet]:
    """A fleet of sessions with at most ``max_live`` CLIs at once.

    ``replay_buffer`` / ``replay_bytes``: events, and counted bytes, kept per session for
    replay (the oldest are evicted first; see ``protocol/replay.py``). ``keep_finished``:
    idle sessions (their execution ended) still reachable with ``get()`` and
    ``continue_()``; the longest idle is forgotten first.
    ``session_options``: ``open_session`` keywords for every session (see
    :data:`SESSION_OPTIONS`), checked by name and type here. With ``pool=``, the pool's warm
    CLIs count against ``max_live`` (the pool must be smaller, and opened with
    ``user_input=True``: fleet sessions answer user input with ``FleetSession.answer()``).
    An exception raised in the block comes out as itself.
    Leaving the block ends every session still waiting or running (aborted); to let running
    executions finish first, ``await fleet.drain(deadline)`` before leaving.
    """
    check_int("max_live", max_live, 1)
    check_int("replay_buffer", replay_buffer, 1)
    check_int("replay_bytes", replay_bytes, 1)
    check_int("keep_finished", keep_finished, 0)
    _check_session_options(session_options)
    pool = session_options.get("pool")
    if isinstance(pool, CLIPool) and pool.size >= max_live:
        raise InvalidParamsError(
            "pool",
            f"a pool of {pool.size}",
            f"fewer warm CLIs than max_live={max_live}: they count against it (together never "
            "more CLIs than the cap), and sessions need at least one slot",
        )
    async with open_block_nursery() as nursery:
        fleet = Fleet(
            nursery,
            max_live=max_live,
            replay_buffer=replay_buffer,
            replay_bytes=replay_bytes,
            keep_finished=keep_finished,
            session_options=session_options,
        )
        try:
            yield fleet
        finally:
            fleet._closed = True
