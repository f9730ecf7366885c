"""A session on the gateway as the client follows it: :class:`RemoteSession` (its ops, its
queue of events, what the connection feeds it) and :class:`RemoteEvents` (one execution's
events, a view of that queue).

A session is created and fed by the client that follows it (``connection.py``'s
``GatewayClient``); what it asks of that client is :class:`_Client`, so this module does not
import the connection. What to queue, drop and re-attach is ``protocol/fanout/follow.py``'s.

Channels: each session holds one queue of events, bounded by ``ClientConfig.max_queue``
(a consumer that falls behind gets the session detached, then attached again from its last
seq: see :mod:`claude_trio.client`). It starts no task.
Cancellation: an op's caller cancelled abandons the op (its reply, if any, is dropped).
Error handling: see :class:`RemoteEvents`; ops raise :class:`RemoteOpError` with the
server's code and message.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import uuid
import weakref
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, Protocol, TypeVar

import trio

from claude_trio.actors.channel import BaseReceiveChannel
from claude_trio.actors.extensions.broker import AnswerAccepted, AnswerRejected
from claude_trio.actors.session.trace_context import current_traceparent
from claude_trio.client.config import ClientConfig
from claude_trio.protocol.config.images import ImageInput, check_images
from claude_trio.protocol.config.permissions import PermissionMode
from claude_trio.protocol.config.resume import ContinueOptions
from claude_trio.protocol.errors import (
    ConnectionLostError,
    GatewayError,
    InvalidParamsError,
    LocalProtocolError,
    ResyncRequiredError,
    SessionLostError,
)
from claude_trio.protocol.extensions.approvals import ApprovalAnswer
from claude_trio.protocol.fanout.follow import Follow, FollowError
from claude_trio.protocol.fanout.idempotency import check_idempotency_key
from claude_trio.protocol.fanout.wire import (
    AbortOp,
    AnswerOp,
    AttachOp,
    ContinuedFrame,
    ContinueOp,
    ErrorFrame,
    Frame,
    Op,
    PushOp,
    ReplyFrame,
    ResyncRequiredFrame,
    SessionInfo,
    SetModelOp,
    SetPermissionModeOp,
)
from claude_trio.protocol.session.events import Aborted, Event, Result, is_terminal
from claude_trio.protocol.session.lifecycle import Accepted, Rejected
from claude_trio.protocol.session.transcript import Transcript
from claude_trio.protocol.session.usage import ZERO_USAGE, Usage, add_usage

__all__ = ["RemoteEvents", "RemoteSession"]

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Frame)


class _Client(Protocol):
    """What a :class:`RemoteSession` asks of the client that follows it (``GatewayClient``)."""

    _config: ClientConfig
    _sessions: weakref.WeakValueDictionary[str, RemoteSession]
    _gave_up: GatewayError | None

    async def list(self) -> tuple[SessionInfo, ...]: ...

    async def _info(self, session_id: str) -> SessionInfo | None: ...

    def _op_id(self) -> str: ...

    async def _request(
        self,
        op: Op,
        expected: type[F],
        *,
        accept_errors: bool = False,
        on_reply: Callable[[Frame], None] | None = None,
    ) -> F: ...

    def _attach_again(self, session: RemoteSession) -> None: ...

    def _detach_for_room(self, session: RemoteSession) -> None: ...

    def _forget(self, session: RemoteSession) -> None: ...


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
    """A session on the gateway, as this client follows it. See :mod:`claude_trio.client`."""

    def __init__(
        self,
        client: _Client,
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
        end of the current execution (:class:`~claude_trio.actors.fanout.hosts.SessionHandle`).

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
        :class:`~claude_trio.protocol.session.transcript.Transcript`. The events this client has
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

    async def continue_(
        self,
        prompt: str,
        *,
        idempotency_key: str | None = None,
        model: str | None = None,
        permission_mode: PermissionMode | None = None,
        images: Sequence[ImageInput] = (),
    ) -> None:
        """Run ``prompt`` as the next execution of this conversation (its execution must
        have ended); :attr:`events` is then the new execution's channel. Raises
        :class:`RemoteOpError` with code ``cannot_continue`` while it still runs.
        ``model`` and ``permission_mode`` replace the session's (``None``: kept; a mode the
        server does not allow is refused with code ``forbidden_field``), ``images`` go with
        ``prompt``.

        Exactly once across a dropped connection: when the answer is lost, the client asks
        the server (``list``, on the next connection) whether the execution started; if it
        did, it follows it, otherwise it sends the ``continue`` again (an op on a connection
        that is gone can no longer reach the server). Every send carries one idempotency
        key (``idempotency_key``, or a fresh one), so the server never runs it twice."""
        if not (isinstance(prompt, str) and prompt.strip()):
            raise InvalidParamsError("prompt", prompt, "a non-empty string")
        options = ContinueOptions(model=model, permission_mode=permission_mode, images=images)
        key = str(uuid.uuid4()) if idempotency_key is None else idempotency_key
        check_idempotency_key(key)
        client = self._client
        while True:
            try:
                continued = await client._request(
                    ContinueOp(
                        id=client._op_id(),
                        session=self.id,
                        prompt=prompt,
                        idempotency_key=key,
                        traceparent=current_traceparent(),
                        model=options.model,
                        permission_mode=options.permission_mode,
                        images=options.images,
                    ),
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
            # It was accepted: follow on from the last event (protocol/fanout/follow.py, rule 5).
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
