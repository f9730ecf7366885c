"""A fleet's session: one conversation, run one execution at a time, and its replay buffer.

A :class:`FleetSession` is what ``Fleet.start`` returns (``actors/fanout/fleet.py``). Each execution
(``start``, then each ``Fleet.continue_``) has an :class:`_Execution` of its own (its cancel
scope, its slot, its ``open_session``, its end) and runs in one task of the fleet's nursery
(``_run``): it waits for a slot, runs the session, and drains its events (everything ready at
each wake-up) into the replay buffer and to the subscriptions (``actors/fanout/subscription.py``),
shifting their ``seq`` so that one buffer spans the conversation. The slots themselves are the
fleet's: a session asks for, releases and withdraws them through :class:`SlotKeeper`.

Channels: owns its replay buffer and offers events to its subscriptions (which their
subscribers own), never waiting. Cancellation: the fleet cancels an execution's task when the
fleet closes, or when an execution still waiting for a slot is aborted or drained; either way
it ends with one ``aborted`` event. Error handling: an exception out of ``open_session`` ends
the execution with one fatal ``error`` event (code ``internal``); nothing propagates to the
fleet.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid as uuid_module
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import Any, Literal, Protocol

import attrs
import trio
from opentelemetry import context as otel_context

from claude_trio.actors.extensions.broker import AnswerAccepted, AnswerRejected
from claude_trio.actors.fanout.inbox import InboxHub
from claude_trio.actors.fanout.owners import principal_of
from claude_trio.actors.fanout.subscription import (
    DEFAULT_SUBSCRIBER_BYTES,
    ResyncRequired,
    Subscription,
    execution_transcript,
    open_following,
)
from claude_trio.actors.session.open import Session, open_session
from claude_trio.protocol.checks import check_int, is_int
from claude_trio.protocol.config.images import ImageInput
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.config.permissions import PermissionMode
from claude_trio.protocol.errors import ControlRefusedError, InvalidParamsError
from claude_trio.protocol.fanout.inbox import InboxItem
from claude_trio.protocol.fanout.pending import PendingQuestions
from claude_trio.protocol.fanout.replay import Entry, ReplayBuffer
from claude_trio.protocol.fanout.wire import SessionInfo
from claude_trio.protocol.session.events import (
    Aborted,
    Error,
    Event,
    Passthrough,
    Result,
    Retry,
    TurnStarted,
    UserInputRequest,
    UserInputResolved,
    WarningEvent,
    copy_event,
    is_final,
)
from claude_trio.protocol.session.lifecycle import Accepted, Rejected
from claude_trio.protocol.session.outcomes import Outcome
from claude_trio.protocol.session.transcript import Transcript
from claude_trio.protocol.session.usage import ZERO_USAGE, Usage, add_usage

__all__ = ["FleetSession", "ReplayStatistics", "SessionState", "SlotKeeper"]

log = logging.getLogger("claude_trio.actors.fanout.fleet")

SessionState = Literal["waiting", "live", "ended"]


@attrs.frozen(kw_only=True)
class ReplayStatistics:
    """A session's replay buffer: events held, their counted bytes, the limits."""

    events: int
    bytes: int
    max_events: int
    max_bytes: int


class SlotKeeper(Protocol):
    """What a :class:`FleetSession` asks of its fleet (``actors/fanout/fleet.py``'s ``Fleet``): the
    slots, and to be told when an execution ended and when its task is done."""

    def _request_slot(self, session: FleetSession, x: _Execution) -> None: ...

    def _release_slot(self, session: FleetSession) -> None: ...

    def _withdraw(self, session: FleetSession) -> None: ...

    def _session_ended(self, session: FleetSession) -> None: ...

    def _finished_session(self, session: FleetSession, x: _Execution) -> None: ...

    def _governed(self, x: _Execution, event: Event) -> None: ...

    def _position(self, x: _Execution) -> int | None: ...

    #: The fleet's inbox, told of each request asked and resolved (``actors/fanout/inbox.py``).
    _inbox: InboxHub
    def _budget_refusal(self, session: FleetSession) -> Error | None: ...

    def _admission(
        self, session: FleetSession, x: _Execution
    ) -> Callable[[], Awaitable[object]] | None: ...


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
    #: The fleet's governor let its prompt go to the model (``Fleet._admission``).
    admitted: trio.Event = attrs.field(factory=trio.Event)
    requested: bool = False  # asked the fleet for a start (its governor, or its SlotQueue)
    slot_asked: bool = False  # asked the fleet's SlotQueue for a slot
    #: The governor refused to start it: its final event (code ``budget_exhausted``).
    refusal: Error | None = None
    #: Its task was spawned: at once for a continued execution that waits for the previous
    #: one's CLI, else when it is granted a slot (a session waiting in the queue has no task).
    has_task: bool = False
    ended: trio.Event = attrs.field(factory=trio.Event)  # its final event is in the buffer
    done: trio.Event = attrs.field(factory=trio.Event)  # its CLI is gone, its slot released
    session: Session | None = None
    state: SessionState = "waiting"
    cancel_reason: str = "the fleet was closed"
    cancel_outcome: Outcome = Outcome.CLOSED
    final_seen: bool = False
    last_turn: int = 0
    #: How it ended, for the log: ``result``, ``result_error``, ``aborted``, ``error:<code>``.
    outcome: str = ""
    #: The trace context ``start`` / ``continue_`` was called in: the parent of the
    #: execution's spans (it may start later, in the fleet's task).
    trace_context: otel_context.Context = attrs.field(factory=otel_context.get_current)


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
        fleet: SlotKeeper,
        params: ExecuteParams,
        options: Mapping[str, Any],
        *,
        owner: Hashable,
        label: str | None,
        replay_buffer: int,
        replay_bytes: int,
        priority: int = 0,
    ) -> None:
        self.id = str(uuid_module.uuid4())
        #: The parameters of the current execution (a continued one resumes the conversation).
        self.params = params
        #: Who started it (``Fleet.start(owner=...)``): slots are granted fairly between owners.
        self.owner = owner
        #: The starter's name for it (``Fleet.start(label=...)``), for listings.
        self.label = label
        #: Its priority for the fleet's governor (higher starts first).
        self.priority = priority
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
        self._pending: PendingQuestions[Entry] = PendingQuestions()
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
    def queue_position(self) -> int | None:
        """Its place among the executions waiting for the fleet's governor to start them
        (0: next); None when it does not wait there (running, ended, no governor)."""
        return self._fleet._position(self._x)

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
        return tuple(e.event for e in self._pending.items())  # type: ignore[misc]

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
            self._cancel_waiting(x, "aborted before it started", Outcome.ABORTED)
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

    def _cancel_waiting(
        self, x: _Execution, reason: str, outcome: Outcome = Outcome.CLOSED
    ) -> None:
        x.cancel_reason = reason
        x.cancel_outcome = outcome
        if x.has_task:
            x.scope.cancel()
            return
        # Still in the slot queue, with no task: it ends here and now.
        self._fleet._withdraw(self)
        self._close_execution(x)

    def _refuse(self, x: _Execution, refusal: Error) -> None:
        """The fleet's governor refused to start ``x``: it ends with ``refusal``."""
        x.refusal = refusal
        if x.has_task:  # a continued execution whose task waits for its start
            x.scope.cancel()
            return
        self._close_execution(x)

    def subscribe(
        self, last_seq: int | None = None
    ) -> contextlib.AbstractAsyncContextManager[trio.abc.ReceiveChannel[Event]]:
        """``async with session.subscribe(last_seq) as events:``: the events after
        ``last_seq`` (all the replay buffer holds for ``None``), then live ones, until the
        end of the current execution (:class:`~claude_trio.actors.fanout.hosts.SessionHandle`).
        Pending questions the replay does not include come first. A consumer that falls
        behind is served a replay from its last seq; ``ReplayGapError`` when the events after
        ``last_seq`` were evicted."""
        return open_following(self, last_seq)

    async def result(self) -> Transcript:
        """Wait for the current execution's final event; its
        :class:`~claude_trio.protocol.session.transcript.Transcript`."""
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
        when the subscription becomes readable (an event arrives while none is queued
        unread: the events queued behind it are not told, so read until ``trio.WouldBlock``),
        was dropped or ended; for a consumer that waits on several subscriptions at once.
        After ``Fleet.continue_``, subscribe again with the last seq you saw to follow the
        next execution.
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
        head = self._pending.asked_through(covered_through)
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
        x.final_seen = is_final(event)
        if x.final_seen:
            x.outcome = _outcome(event)
        self._pending.feed(event, entry)
        match event:
            case UserInputRequest():
                self._fleet._inbox.arrived(
                    InboxItem(
                        session=self.id,
                        label=self.label,
                        owner=principal_of(self.owner),
                        request=event,
                        asked_at=InboxHub.now(),
                    )
                )
                self._fleet._governed(x, event)
            case UserInputResolved():
                self._fleet._inbox.resolved(self.id, event.request_id, event.outcome)
                self._fleet._governed(x, event)
            case Result():
                if event.session_id:
                    self.claude_session_id = event.session_id
                self._usage = add_usage(self._usage, event.usage)
                self._fleet._governed(x, event)
            case Aborted():
                if event.session_id:
                    self.claude_session_id = event.session_id
                if event.usage is not None:
                    self._usage = add_usage(self._usage, event.usage)
            case TurnStarted() if event.session_id:
                self.claude_session_id = event.session_id
            case Retry() | WarningEvent() | Passthrough():
                self._fleet._governed(x, event)
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
        self._fleet._inbox.session_ended(self.id)
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
                    x.refusal = fleet._budget_refusal(self)
                    if x.refusal is None:  # else the budget was spent while it waited
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
            self._close_execution(x)

    def _close_execution(self, x: _Execution) -> None:
        """The execution is over and its CLI gone (or it never had one): its final event if
        it has none yet, its end, and its slot's bookkeeping."""
        never_ran = x.session is None
        if x.refusal is not None:
            self._publish_final(x, x.refusal)
        self._publish_final(
            x,
            Aborted(
                reason=x.cancel_reason,
                outcome=x.cancel_outcome,
                phase="starting" if never_ran else None,
            ),
        )
        self._end(x)
        # Let go of the execution's session (its mapper, stream, broker, options...), which
        # an ended execution never uses again.
        x.session = None
        x.done.set()
        self._fleet._finished_session(self, x)

    async def _run_session(self, x: _Execution) -> None:
        otel_context.attach(x.trace_context)  # this task's own context: no detach needed
        async with open_session(
            self.params,
            on_user_input="manual",
            before_prompt=self._fleet._admission(self, x),
            **self._options,
        ) as session:
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
        # raw goes too: the buffer would drop it anyway (protocol/fanout/replay.py, rule 1).
        return copy_event(event, seq=event.seq + offset, raw=None)

    def _publish_final(self, x: _Execution, event: Error | Aborted) -> None:
        """Close the execution's stream with a synthesized terminal event unless it already
        has one (an execution that ended before a later one began never gets one here)."""
        if not x.final_seen and not x.ended.is_set():
            self._publish(x, copy_event(event, turn=x.last_turn, seq=self._last_seq + 1))
