"""One accepted connection of the gateway: the per-connection half of
:func:`~claude_trio.actors.fanout.gateway.serve_gateway`. ``actors/fanout/gateway.py`` holds the
listener (the options, the accept loop, shedding, the handshake, authentication and principals) and
describes the policy both halves apply (close codes, backpressure); this module serves one
websocket once its handshake was accepted.

A connection (``_Client``) runs three tasks: a reader (ops in, at the peer's op rate, each
decoded by ``decode_op`` and handled in order), a writer (the replies waiting, then the
inbox's changes and the governor's figures it follows, then the events of each attached
session in turn) and a pinger; plus the close policy (a close frame after
the frame being sent, or TCP cut). The op handlers apply ``protocol/fanout/remote.py``: which
sessions a principal may see, the per-client limits, the folder a session runs in (resolved
on the server's disk by ``remote_paths.py``) and what a remote session may do.

Channels: the connection's reply queue (``limits.max_pending_replies``; the reader waits for
room before it reads the next op) and each attached session's
:class:`~claude_trio.actors.fanout.fleet.Subscription` (closed on detach, re-attach, or when the
connection ends; closing it detaches it from the session).

Cancellation: cancelling ``_Client.run`` ends its three tasks and closes every subscription;
the sessions go on (they belong to the host, not to a connection). The listener sends the
final close frame (1001 on shutdown).

Error handling: an op that does not decode, or that the host or the policy refuses, gets an
``error`` frame and the connection goes on; a closed websocket ends the connection quietly;
a slow subscriber or a binary message closes it with a close frame naming why. Anything else
propagates to the listener, which logs it and closes that connection only (1011).
"""

from __future__ import annotations

import collections
import logging
from functools import partial
from typing import assert_never

import trio
from opentelemetry.trace import SpanKind
from trio_websocket import ConnectionClosed, WebSocketConnection

from claude_trio.actors.extensions.broker import AnswerAccepted
from claude_trio.actors.fanout._websocket_private import clip_reason, send_texts, text_frame
from claude_trio.actors.fanout.fleet import ResyncRequired
from claude_trio.actors.fanout.gateway_governor import GovernorFollower
from claude_trio.actors.fanout.gateway_inbox import InboxFollower
from claude_trio.actors.fanout.gateway_records import (
    POLICY_VIOLATION,
    PROTOCOL_ERROR,
    TURN_FRAMES,
    WRITE_CHARS,
    WRITE_FRAMES,
    _Attached,
    _Listener,
    hello_frame,
)
from claude_trio.actors.fanout.hosts import ServedSession
from claude_trio.actors.fanout.owners import GatewayOwner, principal_of
from claude_trio.actors.fanout.remote_paths import resolve_cwd, resolve_scope
from claude_trio.actors.session.metrics import instruments
from claude_trio.actors.session.trace_context import hop_span
from claude_trio.protocol.errors import (
    ClusterUnavailableError,
    ControlFailedError,
    ControlRefusedError,
    IdempotencyConflictError,
    InvalidParamsError,
    LocalProtocolError,
    SlowSubscriberError,
    UnknownSessionError,
    WireError,
)
from claude_trio.protocol.fanout.listing import page
from claude_trio.protocol.fanout.remote import (
    Principal,
    open_refusal,
    permission_mode_refusal,
    remote_params,
)
from claude_trio.protocol.fanout.replay import Entry
from claude_trio.protocol.fanout.wire import (
    AbortOp,
    AnswerOp,
    AttachOp,
    ContinuedFrame,
    ContinueOp,
    DetachOp,
    ErrorFrame,
    Frame,
    GovernorFrame,
    GovernorOp,
    HelloOp,
    InboxOp,
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
    decode_op,
    encode_frame,
    error_frame,
    quote,
    remote_entry_frame,
)
from claude_trio.protocol.session.lifecycle import Accepted

# A connection's lines are the gateway's: one logger for operators to configure.
log = logging.getLogger("claude_trio.actors.fanout.gateway")

class _Client:
    """One accepted websocket: a reader (ops in), a writer (replies, then events, out), a
    pinger, and the close policy. See the module docstring for the backpressure policy."""

    def __init__(
        self,
        server: _Listener,
        ws: WebSocketConnection,
        stream: trio.abc.Stream,
        peer: str,
        host: str,
        principal: Principal,
    ) -> None:
        self._server = server
        self._config = server.config
        self._limits = server.config.limits
        self._metrics = instruments()  # None without an SDK
        self._fleet = server.config.fleet
        self._ws = ws
        self._stream = stream
        self._peer = peer
        self._host = host
        self._principal = principal
        #: The key sessions are counted under (``ServedHost.open(owner=...)``).
        self._owner = GatewayOwner(principal.name, host)
        # Bounded: the reader waits for room before it handles the next op.
        self._replies: collections.deque[str] = collections.deque()
        self._reply_room = trio.Event()
        self._attached: dict[str, _Attached] = {}
        self._ready: collections.deque[_Attached] = collections.deque()
        self._wake = trio.Event()
        self._sending = False
        self._writer_done = trio.Event()
        self._close_code: int | None = None
        self._close_text = ""
        self._close_wanted = trio.Event()
        self._inbox: InboxFollower | None = None  # the ``inbox`` op (gateway_inbox.py)
        self._governor: GovernorFollower | None = None  # ``governor`` (gateway_governor.py)

    async def run(self) -> None:
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._writer)
                nursery.start_soon(self._reader)
                nursery.start_soon(self._pinger)
                await self._close_wanted.wait()
                await self._close_connection()
                nursery.cancel_scope.cancel()
        finally:
            for attached in self._attached.values():
                attached.subscription.close()
            self._attached.clear()
            self._ready.clear()
            for follower in (self._inbox, self._governor):
                if follower is not None:
                    follower.close()

    async def _close_connection(self) -> None:
        """Send the close frame after the frame being sent, or cut TCP (module docstring)."""
        await trio.lowlevel.checkpoint()
        code = self._close_code
        if code is None:
            return
        log.debug("gateway: closing %s: %d %s", self._peer, code, self._close_text)
        grace = self._limits.close_grace
        with trio.move_on_after(grace):
            await self._writer_done.wait()  # the writer stops before its next frame
        if not self._writer_done.is_set():
            await self._stream.aclose()  # stuck mid-frame: a close frame cannot follow it
            return
        with trio.move_on_after(grace):
            await self._ws.aclose(code, self._close_text)
        if self._ws.closed is None or not self._writer_done.is_set():
            await self._stream.aclose()

    def _close(self, code: int | None, reason: str = "", *, cut: bool = False) -> None:
        """Ask ``run`` to end the connection: with a close frame ``code``, or with None when
        the connection is already closed (or is to be cut). The first request wins."""
        if self._close_wanted.is_set():
            return
        self._close_code = None if cut else code
        self._close_text = clip_reason(reason)
        self._close_wanted.set()
        self._wake.set()
        self._reply_room.set()
        if code == POLICY_VIOLATION:
            self._server.notices.note(
                f"closing clients: {reason.split(':')[0]}", self._peer, level=logging.INFO
            )

    # -- the writer -----------------------------------------------------------------------------

    async def _writer(self) -> None:
        """Send replies first, then one event per attached session in turn; every frame ready
        goes out in one write (``_next_frames``). Stops before the next write once a close is
        wanted (trio-websocket serializes sends on a lock, so the close frame follows whole
        frames)."""
        try:
            await trio.lowlevel.checkpoint()
            while not self._close_wanted.is_set():
                texts = self._next_frames()
                if not texts:
                    if self._close_wanted.is_set():
                        return
                    self._wake = trio.Event()
                    await self._wake.wait()
                    continue
                self._sending = True
                try:
                    await send_texts(self._ws, texts)
                except ConnectionClosed:
                    self._close(None)
                    return
                finally:
                    self._sending = False
        finally:
            self._writer_done.set()

    def _next_frames(self) -> list[str | bytes]:
        """The frames ready now as one write: replies first, then the inbox's changes and the
        governor's figures, then the attached sessions' events, each session up to
        ``TURN_FRAMES`` of them in its turn; at most ``WRITE_FRAMES`` frames or about
        ``WRITE_CHARS`` characters (whole frames)."""
        texts: list[str | bytes] = []
        size = 0
        while len(texts) < WRITE_FRAMES and size < WRITE_CHARS:
            if self._replies:
                text = self._replies.popleft()
                self._reply_room.set()
            elif (followed := self._followed_frame()) is not None:
                text = followed
            else:
                frames = self._session_frames(
                    min(TURN_FRAMES, WRITE_FRAMES - len(texts)), WRITE_CHARS - size
                )
                if frames is None:
                    break
                texts += frames
                size += sum(map(len, frames))
                continue
            texts.append(text)
            size += len(text)
        return texts

    def _followed_frame(self) -> str | None:
        """The next frame of what the client follows besides its sessions: the inbox's
        changes, then the governor's figures."""
        for follower in (self._inbox, self._governor):
            if follower is not None and (text := follower.next_frame()) is not None:
                return text
        return None

    def _session_frames(self, limit: int, max_size: int) -> list[bytes] | None:
        """The next ready session's events (at most ``limit``, about ``max_size`` counted
        bytes) as frames; that session then waits for the others' turn. None when no session
        has any (or the connection is closing for a slow subscriber)."""
        ready = self._ready
        while ready:
            attached = ready.popleft()
            try:
                entries = attached.subscription.receive_entries_nowait(limit, max_size)
            except trio.WouldBlock:
                attached.ready = False
                continue
            except trio.EndOfChannel:
                attached.ready = False
                if not self._follow_next_execution(attached):
                    self._forget(attached)
                continue
            except SlowSubscriberError as exc:
                self._close(POLICY_VIOLATION, exc.reason)
                return None
            except trio.ClosedResourceError:
                attached.ready = False
                continue
            ready.append(attached)  # its next events wait for the other sessions' turn
            attached.last_sent = entries[-1].seq
            session_id = attached.session_id
            if self._metrics is not None:  # how far behind the session (as last read)
                last_seq = attached.session.last_seq
                for entry in entries:
                    self._metrics.gateway_lag.record(max(0, last_seq - entry.seq))
            return [self._frame(session_id, entry) for entry in entries]
        return None

    def _frame(self, session_id: str, entry: Entry) -> bytes:
        """The event's websocket frame, made once per session (cached on the buffer's entry)."""
        frame = entry.wire
        if not isinstance(frame, bytes):
            frame = entry.wire = text_frame(remote_entry_frame(session_id, entry))
            entry.text = None  # the frame holds it now
        return frame

    def _notify(self, attached: _Attached) -> None:
        """Called by the fleet (in the session's task) when the subscription has something."""
        subscription = attached.subscription
        if subscription.dropped_reason is not None:
            self._close(POLICY_VIOLATION, subscription.dropped_reason)
            return
        if not attached.ready:
            attached.ready = True
            self._ready.append(attached)
        self._wake.set()

    def _follow_next_execution(self, attached: _Attached) -> bool:
        """A subscription ended with its execution; if the session was continued meanwhile,
        follow the next execution from the last event sent. False when there is none."""
        session = attached.session
        if session.ended and session.last_seq <= attached.last_sent:
            return False
        attached.subscription.close()
        subscribed = session.subscribe_nowait(
            attached.last_sent,
            max_queue=self._config.client_queue,
            max_bytes=self._limits.client_queue_bytes,
            notify=partial(self._notify, attached),
        )
        if isinstance(subscribed, ResyncRequired):
            # What followed its end was evicted before this connection got to it: it is as
            # far behind as a slow consumer; it reconnects and attaches with its last seq.
            self._close(POLICY_VIOLATION, "slow consumer: the session moved on past the replay")
            return True
        attached.subscription = subscribed
        self._notify(attached)
        return True

    def _wake_writer(self) -> None:
        self._wake.set()

    def _forget(self, attached: _Attached) -> None:
        if self._attached.get(attached.session_id) is attached:
            del self._attached[attached.session_id]
        attached.subscription.close()

    def _reply(self, frame: Frame) -> None:
        """Queue a reply/error/opened frame (bounded: the reader waits for room first)."""
        if self._close_wanted.is_set():
            return
        self._replies.append(encode_frame(frame))
        self._wake.set()

    # -- the pinger -------------------------------------------------------------------------------

    async def _pinger(self) -> None:
        limits = self._limits
        count = 0
        while True:
            await trio.sleep(limits.ping_interval)
            count += 1
            with trio.move_on_after(limits.ping_timeout) as deadline:
                await trio.lowlevel.checkpoint()
                try:
                    await self._ws.ping(count.to_bytes(8, "big"))
                except ConnectionClosed:
                    self._close(None)
                    return
            if deadline.cancelled_caught:
                self._server.notices.note(
                    f"cutting clients that did not answer a ping in {limits.ping_timeout:g} s",
                    self._peer,
                    level=logging.INFO,
                )
                self._close(None, cut=True)
                await self._stream.aclose()
                return

    # -- the reader -----------------------------------------------------------------------------

    async def _reader(self) -> None:
        await trio.lowlevel.checkpoint()
        limit = self._limits.max_pending_replies
        bucket = self._server.bucket(self._host)
        while True:
            while len(self._replies) >= limit and not self._close_wanted.is_set():
                self._reply_room = trio.Event()
                await self._reply_room.wait()
            wait = bucket.take(trio.current_time())
            if wait:
                await trio.sleep(wait)  # a client faster than its op rate waits (TCP slows it)
            try:
                message = await self._ws.get_message()
            except ConnectionClosed as exc:
                reason = exc.reason
                if reason is not None:
                    log.debug(
                        "gateway: %s closed: %d %s", self._peer, reason.code, reason.reason or ""
                    )
                self._close(None)
                return
            if isinstance(message, bytes):
                self._close(
                    PROTOCOL_ERROR, "binary messages are not part of the protocol: send JSON text"
                )
                return
            await self._handle(message)

    async def _handle(self, text: str) -> None:
        # Ops are handled one at a time, in order, so replies come back in the order of the
        # ops (an abort waits for its terminal event; a client wanting parallel aborts can
        # open a second connection).
        await trio.lowlevel.checkpoint()
        policy = self._config.policy
        try:
            op = decode_op(text, allow_cwd=policy.allow_cwd, allow_env=policy.allow_env)
        except WireError as exc:
            self._reply(error_frame(exc))
            return
        except Exception as exc:
            # A value decode_op should have refused by name: our bug, not the client's. The
            # log gets the traceback; the client an error frame, and its connection lives on.
            log.error("an op could not be decoded: %s", type(exc).__name__, exc_info=True)
            message = "the op holds a value this server cannot read; check its fields' types"
            self._reply(error_frame(WireError("invalid_params", message, None)))
            return
        try:
            await self._dispatch(op)
        except ClusterUnavailableError as exc:
            self._reply(ErrorFrame(id=op.id, code="unavailable", message=str(exc)[:1000]))

    async def _dispatch(self, op: Op) -> None:
        await trio.lowlevel.checkpoint()
        # Every look at the host is awaited: a cluster's reads Redis then (a local one
        # looks at once).
        match op:
            case HelloOp():
                self._reply(
                    hello_frame(op.id, await self._fleet.describe(), self._config, self._principal)
                )
            case ListOp():
                shown, after = page(await self._listing(), op.cursor, op.limit)
                self._reply(SessionsFrame(id=op.id, sessions=shown, next_cursor=after))
            case OpenOp():
                await self._open(op)
            case ContinueOp():
                await self._continue(op)
            case AttachOp():
                session = await self._session(op.id, op.session)
                if session is not None:
                    self._attach(op.id, session, op.last_seq)
            case DetachOp():
                attached = self._attached.pop(op.session, None)
                if attached is None:
                    self._reply(ReplyFrame(id=op.id, ok=False, reason="not attached"))
                else:
                    attached.subscription.close()
                    self._reply(ReplyFrame(id=op.id, ok=True))
            case PushOp():
                session = await self._session(op.id, op.session)
                if session is not None:
                    pushed = await session.push(op.text, images=op.images)
                    if isinstance(pushed, Accepted):
                        self._reply(ReplyFrame(id=op.id, ok=True, uuid=pushed.uuid))
                    else:
                        self._reply(ReplyFrame(id=op.id, ok=False, reason=pushed.reason))
            case AnswerOp():
                session = await self._session(op.id, op.session)
                if session is not None:
                    answered = await session.answer(op.request, op.answer)
                    if isinstance(answered, AnswerAccepted):
                        self._reply(ReplyFrame(id=op.id, ok=True))
                    else:
                        self._reply(ReplyFrame(id=op.id, ok=False, reason=answered.reason))
            case AbortOp():
                session = await self._session(op.id, op.session)
                if session is not None:
                    await session.abort()
                    self._reply(ReplyFrame(id=op.id, ok=True))
            case SetModelOp() | SetPermissionModeOp():
                session = await self._session(op.id, op.session)
                if session is not None:
                    await self._control(op, session)
            case InboxOp():
                if self._inbox is not None:
                    self._inbox.close()
                channel = self._fleet.inbox_nowait(
                    may_see=self._principal.may_see, notify=self._wake_writer
                )
                self._inbox = InboxFollower(channel, op.id, follow=op.follow)
                self._wake_writer()
            case GovernorOp():
                if self._governor is not None:
                    self._governor.close()
                    self._governor = None
                watch = self._server.governor
                figures = await watch.figures()
                self._reply(GovernorFrame(id=op.id, governor=figures))
                if op.follow:
                    self._governor = watch.follow(figures, self._wake_writer)
            case _:
                assert_never(op)

    async def _control(
        self, op: SetModelOp | SetPermissionModeOp, session: ServedSession
    ) -> None:
        """A live control (``protocol/fanout/remote.py``, rule 8): ``reply`` once the CLI confirmed
        it; otherwise an error frame saying why (the policy, a bad value, the session has
        stopped, the CLI refused or did not answer, its host offers no live controls)."""
        await trio.lowlevel.checkpoint()
        controls = session.live_controls()
        if controls is None:
            message = f"{op.op} is not available for a session that runs on a cluster's worker"
            self._reply(ErrorFrame(id=op.id, code="control_refused", message=message))
            return
        try:
            if isinstance(op, SetModelOp):
                await controls.set_model(op.model)
            else:
                refusal = permission_mode_refusal(self._config.policy, op.mode)
                if refusal is not None:
                    self._reply(ErrorFrame(id=op.id, code="forbidden_field", message=refusal))
                    return
                await controls.set_permission_mode(op.mode)
        except InvalidParamsError as exc:
            self._reply(ErrorFrame(id=op.id, code="invalid_field", message=str(exc)))
        except ControlRefusedError as exc:
            self._reply(ErrorFrame(id=op.id, code="control_refused", message=str(exc)))
        except ControlFailedError as exc:
            self._reply(ErrorFrame(id=op.id, code="control_failed", message=str(exc)))
        else:
            self._reply(ReplyFrame(id=op.id, ok=True))

    async def _session(self, op_id: str, session_id: str) -> ServedSession | None:
        """The session if this principal may see it; else an ``unknown_session`` error, the
        same whether it does not exist or is another principal's (no existence leak)."""
        session: ServedSession | None
        try:
            session = await self._fleet.get(session_id)
        except UnknownSessionError:
            await trio.lowlevel.checkpoint()
            session = None
        if session is None or not self._principal.may_see(principal_of(session.owner)):
            self._reply(
                ErrorFrame(
                    id=op_id,
                    code="unknown_session",
                    message=f"unknown session {quote(session_id)} (never opened, or forgotten)",
                )
            )
            return None
        return session

    async def _listing(self) -> tuple[SessionInfo, ...]:
        principal = self._principal
        return tuple(info for info in await self._fleet.list() if principal.may_see(info.owner))

    async def _limit_reached(self, *, attaching: bool = True) -> str | None:
        limits = self._limits
        if attaching and len(self._attached) >= limits.max_attached_per_client:
            await trio.lowlevel.checkpoint()
            return (
                f"this connection already follows {limits.max_attached_per_client} sessions "
                "(the limit); detach one first"
            )
        load = await self._fleet.load(self._owner)
        mine = load.owner
        if mine.active >= limits.max_sessions_per_client:
            return (
                f"this client already has {mine.active} sessions not ended "
                f"(the limit is {limits.max_sessions_per_client}); abort one or wait"
            )
        if mine.waiting >= limits.max_waiting_per_client:
            return (
                f"this client already has {mine.waiting} sessions waiting for a slot "
                f"(the limit is {limits.max_waiting_per_client}); wait for one to start"
            )
        total = load.total
        if total.live + total.waiting >= limits.max_sessions:
            return f"the server runs its limit of {limits.max_sessions} sessions; try later"
        return None

    async def _open(self, op: OpenOp) -> None:
        await trio.lowlevel.checkpoint()
        refused = await self._limit_reached()
        if refused is not None:
            self._reply(ErrorFrame(id=op.id, code="limit_reached", message=refused))
            return
        policy = self._config.policy
        cwd: str | None = None
        if policy.cwd_root is not None:
            cwd = await resolve_cwd(policy.cwd_root, op.params.cwd)
            if cwd is None:
                self._reply(
                    ErrorFrame(
                        id=op.id,
                        code="invalid_params",
                        message=f"params.cwd={quote(op.params.cwd)}: not a directory inside "
                        "the folder this server runs sessions in",
                    )
                )
                return
        requested = op.params
        refusal = open_refusal(requested, policy)
        if refusal is not None:
            self._reply(ErrorFrame(id=op.id, code="forbidden_field", message=refusal))
            return
        if policy.cwd_root is not None:
            scoped = await resolve_scope(policy.cwd_root, requested)
            if isinstance(scoped, str):
                self._reply(ErrorFrame(id=op.id, code="invalid_params", message=scoped))
                return
            requested = scoped
        params = remote_params(requested, policy, cwd)
        try:
            with hop_span("gateway open", op.traceparent, kind=SpanKind.SERVER) as span:
                session = await self._fleet.open(
                    params, label=op.label, owner=self._owner, idempotency_key=op.idempotency_key
                )
                span.set_attribute("claude_trio.session.id", session.id)
        except IdempotencyConflictError as exc:
            self._reply(ErrorFrame(id=op.id, code="idempotency_conflict", message=str(exc)))
            return
        except UnknownSessionError:  # the key's session was forgotten since
            self._reply(
                ErrorFrame(
                    id=op.id,
                    code="unknown_session",
                    message="the session this idempotency key opened is no longer known",
                )
            )
            return
        except InvalidParamsError as exc:
            self._reply(ErrorFrame(id=op.id, code="invalid_params", message=str(exc)[:1000]))
            return
        except LocalProtocolError:  # the fleet is closing or draining
            self._reply(ErrorFrame(id=op.id, code="internal", message="the server is closing"))
            return
        log.info(
            "gateway: %s opened session %s",
            self._principal.name,
            session.id,
            extra={"event": "opened", "principal": self._principal.name, "session": session.id},
        )
        self._reply(OpenedFrame(id=op.id, session=session.id))
        self._attach(None, session, None)

    async def _continue(self, op: ContinueOp) -> None:
        await trio.lowlevel.checkpoint()
        session = await self._session(op.id, op.session)
        if session is None:
            return
        # With a key, the host decides (a retry of a continue that started is no error).
        if not session.ended and op.idempotency_key is None:
            self._reply(
                ErrorFrame(
                    id=op.id,
                    code="cannot_continue",
                    message=f"session {quote(op.session)} is still running ({session.state}): "
                    "push to it, or wait for its final event",
                )
            )
            return
        refused = await self._limit_reached(attaching=op.session not in self._attached)
        if refused is not None:
            self._reply(ErrorFrame(id=op.id, code="limit_reached", message=refused))
            return
        mode = op.permission_mode  # refused as in open (remote.py, rule 8)
        refusal = None if mode is None else permission_mode_refusal(self._config.policy, mode)
        if refusal is not None:
            message = "permission_mode" + refusal.removeprefix("set_permission_mode")
            self._reply(ErrorFrame(id=op.id, code="forbidden_field", message=message))
            return
        try:
            with hop_span(
                "gateway continue",
                op.traceparent,
                kind=SpanKind.SERVER,
                attributes={"claude_trio.session.id": session.id},
            ):
                session = await self._fleet.continue_(
                    session.id,
                    op.prompt,
                    idempotency_key=op.idempotency_key,
                    model=op.model,
                    permission_mode=op.permission_mode,
                    images=op.images,
                )
        except IdempotencyConflictError as exc:
            self._reply(ErrorFrame(id=op.id, code="idempotency_conflict", message=str(exc)))
            return
        except InvalidParamsError as exc:
            self._reply(ErrorFrame(id=op.id, code="invalid_params", message=str(exc)[:1000]))
            return
        except UnknownSessionError:  # forgotten meanwhile
            await self._session(op.id, op.session)
            return
        except LocalProtocolError as exc:
            if self._fleet.accepting:
                # no conversation to resume (its first execution failed before a turn)
                self._reply(ErrorFrame(id=op.id, code="cannot_continue", message=str(exc)))
            else:
                self._reply(
                    ErrorFrame(id=op.id, code="internal", message="the server is closing")
                )
            return
        log.info(
            "gateway: %s continued session %s",
            self._principal.name,
            session.id,
            extra={
                "event": "continued",
                "principal": self._principal.name,
                "session": session.id,
                "execution": session.executions,
            },
        )
        self._reply(ContinuedFrame(id=op.id, session=session.id, first_seq=session.first_seq))
        if session.id not in self._attached:
            # Followed from here on; an attached one follows it when its old execution's
            # events are all sent (_follow_next_execution).
            self._attach(None, session, session.first_seq - 1)

    def _attach(self, op_id: str | None, session: ServedSession, last_seq: int | None) -> None:
        """Subscribe to ``session``; ``op_id`` None for the attach that ``open`` implies (it
        gets no reply: ``opened`` is the reply)."""
        limit = self._limits.max_attached_per_client
        if session.id not in self._attached and len(self._attached) >= limit:
            self._reply(
                ErrorFrame(
                    id=op_id,
                    code="limit_reached",
                    message=f"this connection already follows {limit} sessions (the limit); "
                    "detach one first",
                )
            )
            return
        attached = _Attached(
            session_id=session.id,
            session=session,
            subscription=None,  # type: ignore[arg-type]
        )
        try:
            subscribed = session.subscribe_nowait(
                last_seq,
                max_queue=self._config.client_queue,
                max_bytes=self._limits.client_queue_bytes,
                notify=partial(self._notify, attached),
            )
        except InvalidParamsError as exc:
            self._reply(ErrorFrame(id=op_id, code="invalid_field", message=str(exc)[:1000]))
            return
        if isinstance(subscribed, ResyncRequired):
            assert op_id is not None  # last_seq=None never needs a resync
            self._reply(
                ResyncRequiredFrame(id=op_id, session=session.id, oldest_seq=subscribed.oldest_seq)
            )
            return
        attached.subscription = subscribed
        previous = self._attached.pop(session.id, None)
        if previous is not None:  # re-attach replaces the old subscription
            previous.subscription.close()
        if op_id is not None:
            self._reply(ReplyFrame(id=op_id, ok=True))
        self._attached[session.id] = attached
        self._notify(attached)  # the replay is ready now
