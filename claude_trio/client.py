"""``connect_gateway``: a client of ``serve_gateway`` that gives remote sessions the shape of
local ones, and survives dropped connections.

::

    async with connect_gateway("ws://127.0.0.1:8765/", token=token) as gw:
        session = await gw.open(ExecuteParams(prompt="review a.py"))
        async for event in session.events:        # the classes a local session yields
            ...
        await session.continue_("now the tests")  # the next execution of the conversation
        async for event in session.events:
            ...

``session.events`` yields the event classes of :mod:`claude_trio.protocol.events` (decoded with
the codec; ``raw`` is ``None``) and ends after the execution's final terminal event, as a local
session's does. ``push``, ``answer``, ``abort`` and ``continue_`` are the gateway's ops.

**Dropped connections.** When the connection drops (the server went away, a proxy cut it, a
ping went unanswered within ``ping_timeout``), the client reconnects with exponential backoff
(with jitter) and attaches every session it follows again from the last ``seq`` it queued, so
the consumer sees every event exactly once, in order: no gap, no duplicate
(``protocol/follow.py`` decides what to queue, drop and re-attach). If the server no longer holds
the events after that seq (its replay buffer evicted them), ``session.events`` raises
:class:`ResyncRequiredError`; if it no longer knows the session (it restarted, or forgot it),
:class:`SessionLostError`. An op whose reply was lost with the connection is sent again when it
is safe to repeat (``hello``, ``list``, ``abort``, ``set_model``, ``set_permission_mode``);
otherwise (``open``, ``push``, ``answer``,
``continue``) it raises :class:`ConnectionLostError`, as the server may or may not have acted on
it. An op sent while there is no connection waits for the next one. After
``reconnect_attempts`` failed attempts in a row (or a refused handshake: a revoked token), the
client gives up: every waiting op and every session's events raise
:class:`GatewayUnavailableError` (or :class:`GatewayRefusedError`).

**Backpressure.** Each session queues at most ``max_queue`` events for its consumer. When a
consumer falls that far behind, the client detaches that session and attaches it again from
its last seq once the consumer has caught up to half the queue: a slow consumer costs a replay
from the server's buffer, never unbounded memory, and never holds up the connection's other
sessions.

Channels and tasks: ``connect_gateway``'s nursery runs one connection manager; each connection
runs a reader (frames in, decoded and routed: replies to the op waiting for them, events to
their session's queue), a writer (ops out, from an outbox bounded by the ops in flight: one per
waiting caller, at most one ``attach`` or ``detach`` per session) and a pinger. Nothing outlives
the ``async with``: leaving it closes the websocket (bounded by ``close_timeout``) and ends
every task.

Cancellation: cancelling an op's caller abandons the op (its reply, if any, is dropped).
Error handling: errors the server sends for an op raise :class:`RemoteOpError` with the code
of ``protocol/wire.py`` and the server's message.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import logging
import random
import weakref
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, TypeVar
from urllib.parse import urlsplit

import attrs
import trio
from trio_websocket import (
    ConnectionClosed,
    ConnectionRejected,
    HandshakeError,
    WebSocketConnection,
    connect_websocket_url,
)

from claude_trio.actors.boundary import raise_unwrapped
from claude_trio.actors.broker import AnswerAccepted, AnswerRejected
from claude_trio.actors.channel import BaseReceiveChannel
from claude_trio.protocol.approvals import ApprovalAnswer
from claude_trio.protocol.checks import positive_int, seconds
from claude_trio.protocol.errors import (
    ConnectionLostError,
    GatewayError,
    GatewayRefusedError,
    GatewayUnavailableError,
    InvalidParamsError,
    LocalProtocolError,
    RemoteOpError,
    ResyncRequiredError,
    SessionLostError,
    UnknownSessionError,
    WireError,
)
from claude_trio.protocol.events import Aborted, Event, Result, is_terminal
from claude_trio.protocol.follow import Follow, FollowError
from claude_trio.protocol.images import ImageInput, check_images
from claude_trio.protocol.lifecycle import Accepted, Rejected
from claude_trio.protocol.params import ExecuteParams
from claude_trio.protocol.permissions import PermissionMode
from claude_trio.protocol.remote import check_token
from claude_trio.protocol.transcript import Transcript
from claude_trio.protocol.usage import ZERO_USAGE, Usage, add_usage
from claude_trio.protocol.wire import (
    AbortOp,
    AnswerOp,
    AttachOp,
    ContinuedFrame,
    ContinueOp,
    DetachOp,
    ErrorFrame,
    EventFrame,
    Frame,
    HelloFrame,
    HelloOp,
    ListOp,
    Op,
    OpenedFrame,
    OpenOp,
    PushOp,
    ReplyFrame,
    ResyncRequiredFrame,
    SessionInfo,
    SessionsFrame,
    SetModelOp,
    SetPermissionModeOp,
    decode_frame,
    encode_op,
)

__all__ = [
    "ClientConfig",
    "GatewayClient",
    "RemoteEvents",
    "RemoteSession",
    "connect_gateway",
]

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Frame)

#: Handshake refusals that say "not now" (a gateway over its connection cap answers 503):
#: the client tries again; any other refusal (401 wrong token, 403 Origin) is final.
_TRANSIENT_STATUSES = frozenset({429, 502, 503, 504})

#: Ops that may be sent again when their reply was lost with the connection.
_REPEATABLE = (HelloOp, ListOp, AbortOp, SetModelOp, SetPermissionModeOp)


# -- configuration ------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ClientConfig:
    """The client's bounds and deadlines (seconds).

    ``max_queue``: events per session waiting for the consumer (backpressure, see the module
    docstring). ``connect_attempts`` / ``reconnect_attempts``: failed attempts in a row
    before the first connection, or a reconnection, gives up; between attempts the client
    waits ``backoff_base * 2**n`` seconds (at most ``backoff_max``), times a random factor
    from 0.5 to 1 (so clients that lost one server do not all come back at once).
    ``connect_timeout``: for one TCP connect and handshake (also what a server that closes
    the TCP connection without answering the handshake costs: trio-websocket 0.12 waits
    for the answer until then). ``ping_interval`` /
    ``ping_timeout``: a ping every interval; no pong within the timeout -> the connection is
    presumed dead and replaced. ``close_timeout``: for the closing handshake.
    ``max_message_size``: the largest frame accepted, in characters.
    """

    max_queue: int = attrs.field(default=1000, validator=positive_int)
    connect_attempts: int = attrs.field(default=3, validator=positive_int)
    reconnect_attempts: int = attrs.field(default=10, validator=positive_int)
    backoff_base: float = attrs.field(default=0.2, validator=seconds)
    backoff_max: float = attrs.field(default=5.0, validator=seconds)
    connect_timeout: float = attrs.field(default=10.0, validator=seconds)
    ping_interval: float = attrs.field(default=20.0, validator=seconds)
    ping_timeout: float = attrs.field(default=20.0, validator=seconds)
    close_timeout: float = attrs.field(default=5.0, validator=seconds)
    max_message_size: int = attrs.field(default=64 * 2**20, validator=positive_int)

    def backoff(self, failures: int) -> float:
        """Seconds to wait after ``failures`` failed attempts in a row (at least 1)."""
        delay: float = min(self.backoff_max, self.backoff_base * 2.0 ** min(failures - 1, 30))
        return delay * random.uniform(0.5, 1.0)


@attrs.frozen(kw_only=True)
class ClientStatistics:
    """``connections``: websocket connections made so far (1 + reconnections);
    ``sessions``: sessions followed now; ``replayed``: events dropped to be replayed (a
    consumer behind, or in flight when a connection dropped)."""

    connections: int
    sessions: int
    replayed: int


# -- one op in flight ---------------------------------------------------------------------------


@attrs.define(eq=False)
class _Pending:
    op: Op
    text: str
    #: Resend after a reconnect when the reply was lost (a repeatable op).
    repeatable: bool
    #: For the follow machinery's own attach/detach: called with the reply, and dropped (not
    #: resent) with the connection.
    internal: Callable[[Frame], None] | None = None
    #: Called with the reply in the task that read it, before the frames after it are read
    #: (unless the caller gave up waiting): what it sets up sees those frames.
    on_reply: Callable[[Frame], None] | None = None
    done: trio.Event = attrs.field(factory=trio.Event)
    frame: Frame | None = None
    error: BaseException | None = None
    abandoned: bool = False

    def resolve(self, frame: Frame) -> None:
        if self.on_reply is not None and not self.abandoned:
            self.on_reply(frame)
        if self.internal is not None:
            self.internal(frame)
        self.frame = frame
        self.done.set()

    def fail(self, error: BaseException) -> None:
        self.error = error
        self.done.set()


@attrs.define(eq=False)
class _Connection:
    ws: WebSocketConnection
    number: int
    lost: trio.Event = attrs.field(factory=trio.Event)
    #: Set when it is lost, or when the client closes it.
    stop: trio.Event = attrs.field(factory=trio.Event)
    #: Sent and not answered yet, by op id.
    pending: dict[str, _Pending] = attrs.field(factory=dict)
    #: To send, in order (bounded: see the module docstring).
    outbox: collections.deque[_Pending] = attrs.field(factory=collections.deque)
    wake: trio.Event = attrs.field(factory=trio.Event)

    def submit(self, pending: _Pending) -> None:
        self.outbox.append(pending)
        self.wake.set()


# -- sessions -------------------------------------------------------------------------------------


def _ends_execution(event: Event) -> bool:
    return is_terminal(event) and bool(getattr(event, "final", True))


class RemoteEvents(BaseReceiveChannel[Event]):
    """One execution's events of a :class:`RemoteSession`; ends after its final terminal
    event (the first one with a seq of at least ``from_seq``).

    Channels: a view of the session's queue (bounded by ``max_queue``); the session owns it.
    Cancellation: ``receive()`` is a plain checkpoint; cancelling it loses nothing.
    Error handling: once the queue is empty, a session that cannot be followed any more
    raises its error (:class:`ResyncRequiredError`, :class:`SessionLostError`,
    :class:`GatewayUnavailableError`, ``trio.ClosedResourceError`` after the session's
    ``close()``). Closing this channel (``aclose()``) stops reading it: ``receive()`` then
    raises ``trio.ClosedResourceError``; the session goes on.
    """

    _closed_message = "this execution's events were closed by their reader"

    def __init__(self, session: RemoteSession, from_seq: int) -> None:
        super().__init__()
        self._session = session
        self._from_seq = from_seq
        self._done = False

    def _take(self) -> Event:
        if self._done:
            raise trio.EndOfChannel
        event = self._session._take()
        if _ends_execution(event) and event.seq >= self._from_seq:
            self._done = True
        return event

    async def _wait_readable(self) -> None:
        await self._session._wait_readable()

    def _wake(self) -> None:
        self._session._wake()

    def _queued(self) -> int:
        return 0 if self._done else len(self._session._queue)


class RemoteSession:
    """A session on the gateway, as this client follows it. See the module docstring."""

    def __init__(
        self,
        client: GatewayClient,
        session_id: str,
        follow: Follow,
        first_seq: int,
        executions: int = 1,
        *,
        following: bool = True,
    ):
        self.id = session_id
        self._client = client
        self._executions = executions
        self._first_seq = first_seq
        self._follow = follow
        self._queue: collections.deque[Event] = collections.deque()
        self._readable = trio.Event()
        self._closed = False
        self._events = RemoteEvents(self, first_seq)
        #: The server sends this session's events to this client (it was opened, attached,
        #: subscribed or continued here; a handle from ``get`` is not, until subscribed).
        self._following = following
        #: Where the consumer is: the seq of the last event taken from the queue (the one
        #: the follow started after, None for "all the server held", until one is taken).
        self._position: int | None = follow.last_seq
        self._subscribed = False
        #: Usage as of ``_usage_seq``: the server's figure when it was last listed, plus what
        #: the events queued since reported.
        self._usage = ZERO_USAGE
        self._usage_seq = 0

    # -- the consumer's side -------------------------------------------------------------------

    @property
    def events(self) -> RemoteEvents:
        """The current execution's events (a new channel after :meth:`continue_` and
        :meth:`subscribe`)."""
        return self._events

    @property
    def usage(self) -> Usage:
        """Every turn of every execution so far, interrupted turns included: the server's
        figure (as ``list`` shows it) as of the last event this client received."""
        return self._usage

    def subscribe(
        self, last_seq: int | None = None
    ) -> contextlib.AbstractAsyncContextManager[RemoteEvents]:
        """``async with session.subscribe(last_seq) as events:``: the events after
        ``last_seq`` (all the server still holds for ``None``), then live ones, until the
        end of the current execution (:class:`~claude_trio.actors.hosts.SessionHandle`).

        A client follows a session once: the channel replaces :attr:`events`, and the
        session is attached again from ``last_seq`` unless what this client has queued
        already starts there (right after ``open``, say). One subscription at a time
        (``LocalProtocolError`` for a second). Raises :class:`ResyncRequiredError` when the
        server no longer holds the events after ``last_seq``, :class:`SessionLostError`
        when it no longer knows the session.
        """
        if last_seq is not None and (
            isinstance(last_seq, bool) or not isinstance(last_seq, int) or last_seq < 0
        ):
            raise InvalidParamsError("last_seq", last_seq, "an int >= 0 or None")
        return self._subscription(last_seq, execution_start=False)

    async def result(self) -> Transcript:
        """Wait for the current execution's final event; its
        :class:`~claude_trio.protocol.transcript.Transcript`. The events this client has
        queued are used when they start the execution (right after ``open``); otherwise the
        execution is replayed from its first event (what is left of it when the server no
        longer holds them all)."""
        try:
            async with self._subscription(None, execution_start=True) as events:
                first = events._from_seq
                collected = [event async for event in events]
        except ResyncRequiredError:
            async with self._subscription(None, execution_start=False) as events:
                first = events._from_seq
                collected = [event async for event in events]
        return Transcript.of([event for event in collected if event.seq >= first])

    @asynccontextmanager
    async def _subscription(
        self, last_seq: int | None, *, execution_start: bool
    ) -> AsyncIterator[RemoteEvents]:
        await trio.lowlevel.checkpoint()
        if self._closed:
            raise trio.ClosedResourceError(f"session {self.id} was closed by this client")
        if self._subscribed:
            raise LocalProtocolError(
                f"session {self.id} is already subscribed on this client: leave that "
                "subscription first (a client follows a session once; connect another "
                "client to follow it twice)"
            )
        self._subscribed = True
        try:
            channel = await self._channel(last_seq, execution_start)
            self._events = channel
            yield channel
        finally:
            self._subscribed = False

    async def _channel(self, last_seq: int | None, execution_start: bool) -> RemoteEvents:
        wanted = self._first_seq - 1 if execution_start else last_seq
        if self._reusable(wanted):
            await trio.lowlevel.checkpoint()
            return RemoteEvents(self, self._first_seq)
        info = await self._client._info(self.id)
        if info is None:
            raise SessionLostError(self.id)
        self._apply_info(info)
        if execution_start:
            wanted = info.first_seq - 1
        channel = RemoteEvents(self, info.first_seq)
        if info.state == "ended" and wanted is not None and wanted >= info.last_seq:
            channel._done = True  # nothing comes after its final event until it is continued
            return channel
        await self._refollow(wanted)
        return channel

    def _reusable(self, wanted: int | None) -> bool:
        """Does what this client queues start right after ``wanted``, and will it go on?"""
        follow = self._follow
        if not self._following or follow.error is not None:
            return False
        if follow.state == "idle" and not self._queue:
            return False  # ended here: whether it was continued since, the server says
        position = self._position
        return wanted == position or (wanted is None and position == 0)

    async def _refollow(self, last_seq: int | None) -> None:
        """Follow the session afresh from ``last_seq``: what was queued is dropped, and the
        replies to what the previous follow sent are ignored (they are for it)."""
        client = self._client
        follow = Follow(
            max_queue=client._config.max_queue, state="attaching", last_seq=last_seq or 0
        )
        self._follow = follow
        self._queue.clear()
        self._position = last_seq
        self._following = True
        client._sessions[self.id] = self
        await client._request(
            AttachOp(id=client._op_id(), session=self.id, last_seq=last_seq),
            ReplyFrame,
            accept_errors=True,
            on_reply=partial(self._on_attach_reply, follow=follow),
        )
        if follow.error is not None:
            raise _follow_error(self.id, follow.error)

    def _apply_info(self, info: SessionInfo) -> None:
        """What the server's ``list`` says of the session: its execution, and its usage
        when that is newer than what the events queued here summed."""
        self._first_seq = info.first_seq
        self._executions = max(self._executions, info.executions)
        if info.last_seq >= self._usage_seq:
            self._usage = info.usage
            self._usage_seq = info.last_seq

    @property
    def last_seq(self) -> int:
        """The highest seq received so far (queued for the consumer)."""
        return self._follow.last_seq

    def _take(self) -> Event:
        if self._queue:
            event = self._queue.popleft()
            self._position = event.seq
            if self._follow.taken():
                self._client._attach_again(self)
            return event
        error = self._error()
        if error is not None:
            raise error
        raise trio.WouldBlock

    def _error(self) -> BaseException | None:
        if self._closed:
            return trio.ClosedResourceError(f"session {self.id} was closed by this client")
        failure = self._follow.error
        if failure is not None:
            return _follow_error(self.id, failure)
        return self._client._gave_up

    async def _wait_readable(self) -> None:
        self._readable = trio.Event()
        await self._readable.wait()

    def _wake(self) -> None:
        self._readable.set()

    # -- the connection's side ------------------------------------------------------------------

    def _on_event(self, event: Event) -> None:
        match self._follow.event(event.seq, final=_ends_execution(event)):
            case "queue":
                self._queue.append(event)
                usage = event.usage if isinstance(event, Result | Aborted) else None
                if usage is not None and event.seq > self._usage_seq:
                    self._usage = add_usage(self._usage, usage)
                    self._usage_seq = event.seq
                self._wake()
            case "pause":
                self._client._detach_for_room(self)
            case "drop":
                pass

    def _on_attach_reply(self, frame: Frame, follow: Follow | None = None) -> None:
        if follow is not None and follow is not self._follow:
            return  # the answer to an earlier follow's attach: that follow was replaced
        match frame:
            case ReplyFrame(ok=True):
                self._follow.attached()
            case ResyncRequiredFrame():
                self._follow.resync_required(frame.oldest_seq)
            case ErrorFrame(code="unknown_session"):
                self._follow.unknown_session()
            case _:
                # limit_reached (this connection follows too many sessions): say so.
                self._follow.unknown_session()
                log.warning("claude-trio client: attaching %s failed: %r", self.id, frame)
        self._wake()

    def _on_detach_reply(self, frame: Frame, follow: Follow | None = None) -> None:
        if follow is not None and follow is not self._follow:
            return
        if self._follow.detached():
            self._client._attach_again(self)

    # -- actions --------------------------------------------------------------------------------

    async def push(self, text: str, *, images: Sequence[ImageInput] = ()) -> Accepted | Rejected:
        """Offer a user message (and ``images``): ``Accepted`` (it will be delivered in this
        execution) or ``Rejected(reason)``. The ``UserMessage`` event in the stream carries
        its uuid."""
        pictures = tuple(check_images(images))
        reply = await self._client._request(
            PushOp(id=self._client._op_id(), session=self.id, text=text, images=pictures),
            ReplyFrame,
        )
        if reply.ok:
            return Accepted(uuid=reply.uuid or "")
        return Rejected(reason=reply.reason or "refused")

    async def answer(self, request_id: str, answer: Any) -> AnswerAccepted | AnswerRejected:
        """Answer a pending ``user_input_request`` (a tool approval: an ``ApprovalAnswer`` or
        its JSON form)."""
        if isinstance(answer, ApprovalAnswer):
            answer = answer.to_json()
        reply = await self._client._request(
            AnswerOp(id=self._client._op_id(), session=self.id, request=request_id, answer=answer),
            ReplyFrame,
        )
        if reply.ok:
            return AnswerAccepted(request_id=request_id)
        return AnswerRejected(request_id=request_id, reason=reply.reason or "refused")

    async def abort(self) -> None:
        """Abort the execution; returns once the server has its ``aborted`` event."""
        await self._client._request(AbortOp(id=self._client._op_id(), session=self.id), ReplyFrame)

    async def set_model(self, model: str | None) -> None:
        """Switch the session's model (``Session.set_model``); returns once the server's CLI
        confirmed it (a ``control_applied`` event follows in the stream). Raises
        :class:`RemoteOpError`: ``invalid_field`` (an unknown alias), ``control_refused``
        (the execution has stopped), ``control_failed`` (the CLI refused or did not answer)."""
        await self._client._request(
            SetModelOp(id=self._client._op_id(), session=self.id, model=model), ReplyFrame
        )

    async def set_permission_mode(self, mode: PermissionMode) -> None:
        """Switch the session's permission mode (``Session.set_permission_mode``). Raises as
        :meth:`set_model` does, and ``forbidden_field`` when the server's read-only policy
        does not allow the mode (one that runs tools without asking)."""
        await self._client._request(
            SetPermissionModeOp(id=self._client._op_id(), session=self.id, mode=mode),
            ReplyFrame,
        )

    async def continue_(self, prompt: str) -> None:
        """Run ``prompt`` as the next execution of this conversation (its execution must
        have ended); :attr:`events` is then the new execution's channel. Raises
        :class:`RemoteOpError` with code ``cannot_continue`` while it still runs.

        Exactly once across a dropped connection: when the answer is lost, the client asks
        the server (``list``, on the next connection) whether the execution started; if it
        did, it follows it, otherwise it sends the ``continue`` again (an op on a connection
        that is gone can no longer reach the server)."""
        if not (isinstance(prompt, str) and prompt.strip()):
            raise InvalidParamsError("prompt", prompt, "a non-empty string")
        client = self._client
        while True:
            try:
                continued = await client._request(
                    ContinueOp(id=client._op_id(), session=self.id, prompt=prompt),
                    ContinuedFrame,
                )
            except ConnectionLostError:
                pass
            else:
                first_seq = continued.first_seq
                self._follow.continued(first_seq)
                break
            info = {s.session: s for s in await client.list()}.get(self.id)
            if info is None:
                raise SessionLostError(self.id)
            if info.executions <= self._executions:
                continue  # it never reached the server: send it again
            # It was accepted: follow on from the last event (protocol/follow.py, rule 5).
            first_seq = info.first_seq
            if self._follow.continue_lost(first_seq):
                client._attach_again(self)
            break
        self._executions += 1
        self._following = True  # the server follows a continued session on
        self._first_seq = first_seq
        self._events = RemoteEvents(self, first_seq)

    def close(self) -> None:
        """Stop following the session (it goes on on the server); what was queued is
        dropped and :attr:`events` raises ``trio.ClosedResourceError``. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._queue.clear()
        self._client._forget(self)
        self._wake()


def _follow_error(session_id: str, failure: FollowError) -> GatewayError:
    if failure.kind == "resync_required":
        return ResyncRequiredError(session_id, failure.last_seq, failure.oldest_seq)
    return SessionLostError(session_id)


# -- the client ---------------------------------------------------------------------------------


class GatewayClient:
    """The handle inside :func:`connect_gateway`. See the module docstring."""

    def __init__(self, url: str, headers: list[tuple[bytes, bytes]], config: ClientConfig):
        self._url = url
        self._headers = headers
        self._config = config
        self._ids = itertools.count(1)
        # Weak: a session nobody holds any more (nor its events) is nobody's to read; its
        # frames are dropped and the server forgets it at the end of its execution.
        self._sessions: weakref.WeakValueDictionary[str, RemoteSession] = (
            weakref.WeakValueDictionary()
        )
        self._conn: _Connection | None = None
        self._connections = 0
        #: Ops submitted while no connection was up (or to resend), in order.
        self._waiting: collections.deque[_Pending] = collections.deque()
        self._gave_up: GatewayError | None = None
        self._closing = False
        self._managed = trio.Event()  # the connection manager returned
        self._backoff = trio.CancelScope()  # cancelled by close(): no reconnection then
        #: The server's ``hello``, from the latest connection.
        self.hello: HelloFrame | None = None

    # -- public ops ------------------------------------------------------------------------------

    async def open(self, params: ExecuteParams, *, label: str | None = None) -> RemoteSession:
        """Start a session on the server (it runs as soon as the server has a slot) and
        follow it from its first event."""
        if not isinstance(params, ExecuteParams):
            raise InvalidParamsError("params", params, "an ExecuteParams")
        sessions: list[RemoteSession] = []

        def follow(frame: Frame) -> None:
            # In the reader, before it reads on: the session's first events come right after.
            if isinstance(frame, OpenedFrame):
                state = Follow(max_queue=self._config.max_queue)
                sessions.append(self._follow_new(frame.session, state, 1))

        await self._request(
            OpenOp(id=self._op_id(), params=params, label=label), OpenedFrame, on_reply=follow
        )
        return sessions[0]

    async def attach(self, session_id: str, *, last_seq: int | None = None) -> RemoteSession:
        """Follow a session that exists on the server (yours, or any as an admin): the
        events after ``last_seq`` (all it still holds for None), then live ones.
        :attr:`RemoteSession.events` ends after the final event of the execution current
        when you attached."""
        if session_id in self._sessions:
            raise InvalidParamsError(
                "session_id", session_id, "a session this client does not follow yet"
            )
        info = await self._info(session_id)
        first_seq = info.first_seq if info is not None else 1
        follow = Follow(max_queue=self._config.max_queue, state="attaching", last_seq=last_seq or 0)
        session = self._follow_new(
            session_id, follow, first_seq, info.executions if info is not None else 1
        )
        session._position = last_seq
        if info is not None:
            session._apply_info(info)
        try:
            # The reply is applied in the reader, before the replay right behind it is read.
            await self._request(
                AttachOp(id=self._op_id(), session=session_id, last_seq=last_seq),
                ReplyFrame,
                accept_errors=True,
                on_reply=session._on_attach_reply,
            )
        except BaseException:
            session.close()  # not followed after all: nothing of it is kept
            raise
        failure = follow.error
        if failure is not None:
            session.close()
            raise _follow_error(session_id, failure)
        return session

    async def list(self) -> tuple[SessionInfo, ...]:
        """The sessions the server lets this client's principal see, oldest first."""
        listing = await self._request(ListOp(id=self._op_id()), SessionsFrame)
        return listing.sessions

    async def get(self, session_id: str) -> RemoteSession:
        """The handle of a session on the server (``SessionHost.get``): the one this client
        follows, or a new one that follows nothing until :meth:`RemoteSession.subscribe`
        (or ``result``, ``continue_``). :class:`UnknownSessionError` when the server knows
        no session by that id that this client's principal may see."""
        session = self._sessions.get(session_id)
        if session is not None and not session._closed:
            await trio.lowlevel.checkpoint()
            return session
        info = await self._info(session_id)
        if info is None:
            raise UnknownSessionError(session_id)
        follow = Follow(max_queue=self._config.max_queue, state="idle", last_seq=info.last_seq)
        session = self._follow_new(session_id, follow, info.first_seq, info.executions)
        session._following = False
        session._apply_info(info)
        if info.state == "ended":
            session._events._done = True  # its execution's events are all sent
        return session

    async def continue_(self, session_id: str, prompt: str) -> RemoteSession:
        """Run ``prompt`` as the next execution of a session's conversation
        (``SessionHost.continue_``): :meth:`get`, then :meth:`RemoteSession.continue_`."""
        session = await self.get(session_id)
        await session.continue_(prompt)
        return session

    async def _info(self, session_id: str) -> SessionInfo | None:
        """The session as the server's ``list`` shows it (None: it shows no such session)."""
        return {info.session: info for info in await self.list()}.get(session_id)

    def statistics(self) -> ClientStatistics:
        return ClientStatistics(
            connections=self._connections,
            sessions=len(self._sessions),
            replayed=sum(s._follow.dropped for s in list(self._sessions.values())),
        )

    # -- ops on the wire -------------------------------------------------------------------------

    def _stopping(self) -> bool:
        """True once the ``connect_gateway`` block is being left (a call: mypy would narrow
        an attribute read across the awaits that change it)."""
        return self._closing

    def _op_id(self) -> str:
        return f"c{next(self._ids)}"

    async def _request(
        self,
        op: Op,
        expected: type[F],
        *,
        accept_errors: bool = False,
        on_reply: Callable[[Frame], None] | None = None,
    ) -> F:
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._gave_up is not None:
            raise self._gave_up
        pending = _Pending(
            op=op, text=encode_op(op), repeatable=isinstance(op, _REPEATABLE), on_reply=on_reply
        )
        self._submit(pending)
        try:
            await pending.done.wait()
        finally:
            if not pending.done.is_set():
                pending.abandoned = True
        if pending.error is not None:
            raise pending.error
        frame = pending.frame
        if isinstance(frame, expected):
            return frame
        if accept_errors:
            return frame  # type: ignore[return-value]  # the caller matches on it
        if isinstance(frame, ErrorFrame):
            raise RemoteOpError(op.op, frame.code, frame.message)
        raise RemoteOpError(op.op, "unexpected_reply", repr(frame))

    def _submit(self, pending: _Pending) -> None:
        conn = self._conn
        if conn is not None and not conn.lost.is_set():
            conn.submit(pending)
        elif pending.internal is None:
            self._waiting.append(pending)

    def _attach_again(self, session: RemoteSession) -> None:
        """The follow machinery wants an attach from the last seq (room came, reconnected)."""
        follow = session._follow
        op = AttachOp(id=self._op_id(), session=session.id, last_seq=follow.last_seq)
        reply = partial(session._on_attach_reply, follow=follow)
        self._submit(_Pending(op=op, text=encode_op(op), repeatable=False, internal=reply))

    def _detach_for_room(self, session: RemoteSession) -> None:
        op = DetachOp(id=self._op_id(), session=session.id)
        reply = partial(session._on_detach_reply, follow=session._follow)
        self._submit(_Pending(op=op, text=encode_op(op), repeatable=False, internal=reply))

    def _follow_new(
        self, session_id: str, follow: Follow, first_seq: int, executions: int = 1
    ) -> RemoteSession:
        """A new handle for ``session_id`` (it replaces one this client had: a handle that
        was closed, or that nobody holds any more)."""
        session = RemoteSession(self, session_id, follow, first_seq, executions)
        self._sessions[session_id] = session
        return session

    def _forget(self, session: RemoteSession) -> None:
        if self._sessions.get(session.id) is session:
            del self._sessions[session.id]
            if session._follow.state in ("live", "attaching"):
                op = DetachOp(id=self._op_id(), session=session.id)
                self._submit(
                    _Pending(op=op, text=encode_op(op), repeatable=False, internal=_ignore)
                )

    # -- connections -----------------------------------------------------------------------------

    async def _manage(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Connect, serve the connection until it drops, reconnect with backoff; give up
        after too many failed attempts in a row. ``started()`` once the first connection
        is up (its ``hello`` answered)."""
        started = False

        def ready() -> None:
            nonlocal started
            if not started:
                started = True
                task_status.started()

        try:
            await self._connect_until_given_up(ready, lambda: started)
        finally:
            self._managed.set()

    async def _connect_until_given_up(
        self, ready: Callable[[], None], started: Callable[[], bool]
    ) -> None:
        config = self._config
        failures = 0
        while True:
            outcome = await self._connect_once(ready)
            if self._stopping():
                return
            if outcome is None:  # served, then lost: start counting again
                failures = 0
                continue
            if isinstance(outcome, GatewayRefusedError):
                self._give_up(outcome)
                if not started():
                    raise outcome
                return
            failures += 1
            limit = config.reconnect_attempts if started() else config.connect_attempts
            if failures >= limit:
                error = GatewayUnavailableError(
                    f"could not {'reconnect' if started() else 'connect'} to the gateway at "
                    f"{self._url} ({failures} attempts): {outcome!r}"
                )
                self._give_up(error)
                if not started():
                    raise error
                return
            delay = config.backoff(failures)
            log.info(
                "claude-trio client: connection failed (%r), retrying in %.2f s", outcome, delay
            )
            self._backoff = trio.CancelScope()
            with self._backoff:
                await trio.sleep(delay)
            if self._stopping():
                return

    async def _connect_once(self, ready: Callable[[], None]) -> BaseException | None:
        """One connection, served until it is lost (None), or why it could not be made."""
        await trio.lowlevel.checkpoint()
        failure: BaseException | None = None
        try:
            failure = await self._connect_in_nursery(ready)
        except* ConnectionRejected as group:
            # trio-websocket raises a refused handshake in its reader task, a task of our
            # nursery; one connection has one reader, so the group holds exactly one.
            (rejected,) = group.exceptions
            assert isinstance(rejected, ConnectionRejected)
            body = (rejected.body or b"").decode("utf-8", "replace").strip()
            failure = GatewayRefusedError(self._url, rejected.status_code, body)
            if rejected.status_code in _TRANSIENT_STATUSES:
                failure = GatewayUnavailableError(str(failure))  # try again later
        return failure

    async def _connect_in_nursery(self, ready: Callable[[], None]) -> BaseException | None:
        config = self._config
        failure: BaseException | None = None
        async with trio.open_nursery() as nursery:
            ws: WebSocketConnection | None = None
            try:
                with trio.fail_after(config.connect_timeout):
                    ws = await connect_websocket_url(
                        nursery,
                        self._url,
                        extra_headers=self._headers,
                        max_message_size=config.max_message_size,
                    )
            except (OSError, HandshakeError, trio.TooSlowError, ConnectionClosed) as exc:
                failure = exc
            if ws is not None:
                failure = await self._serve(nursery, ws, ready)
            nursery.cancel_scope.cancel()
        return failure

    async def _serve(
        self, nursery: trio.Nursery, ws: WebSocketConnection, ready: Callable[[], None]
    ) -> BaseException | None:
        """Serve one connection until it is lost; why it failed before ``hello``, if so."""
        config = self._config
        self._connections += 1
        conn = _Connection(ws=ws, number=self._connections)
        nursery.start_soon(self._reader, conn)
        nursery.start_soon(self._writer, conn)
        nursery.start_soon(self._pinger, conn)
        self._conn = conn
        failure: BaseException | None = None
        try:
            self.hello = await self._hello_on(conn)
        except GatewayError as exc:
            failure = exc
        else:
            self._connected(conn)
            ready()
            await conn.stop.wait()
        finally:
            # A closing handshake when the client closes; otherwise the peer is gone or
            # dead (a missed pong): the connection is cut at once (aclose under an expired
            # deadline closes the socket), so the next one is not held up.
            grace = config.close_timeout if self._closing else 0
            with trio.move_on_after(grace, shield=True):
                await ws.aclose()
            self._lost(conn)
        return failure

    async def _hello_on(self, conn: _Connection) -> HelloFrame:
        op = HelloOp(id=self._op_id())
        pending = _Pending(op=op, text=encode_op(op), repeatable=False)
        conn.submit(pending)
        async with trio.open_nursery() as race:

            async def lost() -> None:
                await conn.lost.wait()
                race.cancel_scope.cancel()

            async def answered() -> None:
                await pending.done.wait()
                race.cancel_scope.cancel()

            race.start_soon(lost)
            race.start_soon(answered)
        if not isinstance(pending.frame, HelloFrame):
            raise GatewayUnavailableError(
                f"the connection to {self._url} dropped before the server said hello"
                if pending.frame is None
                else f"the server at {self._url} answered hello with {pending.frame!r}"
            )
        return pending.frame

    def _connected(self, conn: _Connection) -> None:
        for session in list(self._sessions.values()):
            if session._follow.connected():
                self._attach_again(session)
        waiting, self._waiting = self._waiting, collections.deque()
        for pending in waiting:
            if not pending.abandoned:
                conn.submit(pending)

    def _lost(self, conn: _Connection) -> None:
        """The connection dropped: sessions stop taking events until re-attached; ops sent
        and unanswered are sent again (repeatable) or fail; unsent ones wait. Idempotent."""
        if conn.lost.is_set():
            return
        conn.lost.set()
        conn.stop.set()
        if self._conn is conn:
            self._conn = None
        for session in list(self._sessions.values()):
            session._follow.connection_lost()
        sent = list(conn.pending.values())
        conn.pending.clear()
        unsent = list(conn.outbox)
        conn.outbox.clear()
        requeue: list[_Pending] = []
        for pending in sent:
            if pending.internal is not None or pending.abandoned:
                continue
            if pending.repeatable:
                requeue.append(pending)
            else:
                pending.fail(
                    ConnectionLostError(
                        f"{pending.op.op}: the connection to the gateway dropped before its "
                        "reply; the server may or may not have acted on it"
                    )
                )
        requeue.extend(p for p in unsent if p.internal is None and not p.abandoned)
        self._waiting.extendleft(reversed(requeue))

    def _give_up(self, error: GatewayError) -> None:
        self._gave_up = error
        waiting, self._waiting = self._waiting, collections.deque()
        for pending in waiting:
            pending.fail(error)
        for session in list(self._sessions.values()):
            session._wake()

    async def _reader(self, conn: _Connection) -> None:
        await trio.lowlevel.checkpoint()
        try:
            while True:
                message = await conn.ws.get_message()
                if isinstance(message, bytes):
                    log.warning("claude-trio client: a binary message from the gateway, ignored")
                    continue
                try:
                    frame = decode_frame(message)
                except WireError as exc:
                    log.warning("claude-trio client: a frame it cannot read: %s", exc)
                    continue
                self._dispatch(conn, frame)
        except ConnectionClosed as exc:
            log.debug("claude-trio client: connection %d closed: %s", conn.number, exc.reason)
        finally:
            self._lost(conn)

    def _dispatch(self, conn: _Connection, frame: Frame) -> None:
        if isinstance(frame, EventFrame):
            session = self._sessions.get(frame.session)
            if session is not None:
                session._on_event(frame.event)
            return
        op_id = frame.id
        if op_id is None:
            log.warning("claude-trio client: the gateway could not read an op: %r", frame)
            return
        pending = conn.pending.pop(op_id, None)
        if pending is not None:
            pending.resolve(frame)

    async def _writer(self, conn: _Connection) -> None:
        try:
            while True:
                await trio.lowlevel.checkpoint()
                while not conn.outbox:
                    conn.wake = trio.Event()
                    await conn.wake.wait()
                pending = conn.outbox.popleft()
                if pending.abandoned:
                    continue
                conn.pending[pending.op.id] = pending  # before: the reply may come at once
                try:
                    await conn.ws.send_message(pending.text)
                except ConnectionClosed:
                    return  # _lost() decides what becomes of it, as of a sent op
        finally:
            self._lost(conn)

    async def _pinger(self, conn: _Connection) -> None:
        config = self._config
        await trio.lowlevel.checkpoint()
        for count in itertools.count(1):
            await trio.sleep(config.ping_interval)
            with trio.move_on_after(config.ping_timeout) as deadline:
                await trio.lowlevel.checkpoint()
                try:
                    await conn.ws.ping(count.to_bytes(8, "big"))
                except ConnectionClosed:
                    break
            if deadline.cancelled_caught:
                log.info(
                    "claude-trio client: no pong within %g s: replacing the connection",
                    config.ping_timeout,
                )
                break
        self._lost(conn)

    async def _close(self) -> None:
        """Close the connection with a closing handshake and stop the manager (the caller
        bounds and shields this)."""
        self._closing = True
        self._backoff.cancel()
        conn = self._conn
        if conn is not None:
            conn.stop.set()
        await self._managed.wait()
        if self._gave_up is None:
            self._give_up(
                GatewayUnavailableError("this client is closed: its connect_gateway block ended")
            )


def _ignore(frame: Frame) -> None:
    pass


def _check_url(url: object) -> str:
    if not isinstance(url, str):
        raise InvalidParamsError("url", url, "a ws:// or wss:// URL")
    parts = urlsplit(url)
    if parts.scheme not in ("ws", "wss") or not parts.hostname:
        raise InvalidParamsError(
            "url", url, "a ws:// or wss:// URL with a host, e.g. ws://127.0.0.1:8765/"
        )
    return url


@asynccontextmanager
async def connect_gateway(
    url: str, *, token: str, config: ClientConfig | None = None
) -> AsyncIterator[GatewayClient]:
    """Connect to a ``serve_gateway`` at ``url`` (``ws://host:port/``) with ``token``; yield
    the :class:`GatewayClient` once the server said hello.

    Raises :class:`GatewayRefusedError` when the handshake is refused (a wrong token: 401),
    :class:`GatewayUnavailableError` when no connection could be made in
    ``config.connect_attempts`` attempts. See the module docstring for what happens when the
    connection drops later. Nothing started here outlives the block.
    """
    url = _check_url(url)
    check_token(token)
    config = config or ClientConfig()
    if not isinstance(config, ClientConfig):
        raise InvalidParamsError("config", config, "a ClientConfig or None")
    client = GatewayClient(url, [(b"authorization", f"Bearer {token}".encode())], config)
    caller: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(client._manage)
            try:
                yield client
            except BaseException as exc:
                caller = exc
                raise
            finally:
                with trio.move_on_after(config.close_timeout, shield=True):
                    await client._close()
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        raise_unwrapped(group, caller)
