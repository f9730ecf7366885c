"""The gateway client's connection: :func:`connect_gateway` and the :class:`GatewayClient` it
yields, which keeps one websocket to ``serve_gateway`` up (reconnecting with backoff), sends
ops and routes what comes back: replies to the op waiting for them, events to their
:class:`~claude_trio.client.session.RemoteSession`'s queue. What happens when a connection
drops, and how a slow consumer is handled, is told in :mod:`claude_trio.client`.

Channels: ``connect_gateway``'s nursery runs one connection manager; each connection runs a
reader (frames in, decoded and routed), a writer (ops out, from an outbox bounded by the ops in
flight: one per waiting caller, at most one ``attach`` or ``detach`` per session) and a
pinger. Nothing outlives the ``async with``: leaving it closes the websocket (bounded by
``close_timeout``) and ends every task.
Cancellation: cancelling an op's caller abandons the op (its reply, if any, is dropped).
Error handling: errors the server sends for an op raise :class:`RemoteOpError` with the code
of ``protocol/fanout/wire.py`` and the server's message; a connection lost is retried (see
:mod:`claude_trio.client`), and after too many failed attempts every waiting op and every
session's events raise :class:`GatewayUnavailableError` (or :class:`GatewayRefusedError`).
"""

from __future__ import annotations

import collections
import itertools
import logging
import uuid
import weakref
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import TypeVar

import trio
from trio_websocket import (
    ConnectionClosed,
    ConnectionRejected,
    HandshakeError,
    WebSocketConnection,
    connect_websocket_url,
)

from claude_trio.actors.fanout.inbox import InboxChannel
from claude_trio.actors.session.boundary import raise_unwrapped
from claude_trio.actors.session.trace_context import current_traceparent
from claude_trio.client.config import (
    TOKEN_ENV,
    ClientConfig,
    ClientStatistics,
    ConnectionNotice,
    GaveUp,
    Reconnected,
    Reconnecting,
    connect_arguments,
)
from claude_trio.client.governor import GovernorFeed, RemoteGovernor
from claude_trio.client.inbox import RemoteInbox
from claude_trio.client.inflight import _Connection, _Pending
from claude_trio.client.session import RemoteSession, _follow_error
from claude_trio.protocol.config.images import ImageInput
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.config.permissions import PermissionMode
from claude_trio.protocol.errors import (
    ConnectionLostError,
    GatewayError,
    GatewayRefusedError,
    GatewayUnavailableError,
    InvalidParamsError,
    RemoteOpError,
    UnknownSessionError,
    WireError,
)
from claude_trio.protocol.fanout.follow import Follow
from claude_trio.protocol.fanout.governor import GovernorFigures
from claude_trio.protocol.fanout.idempotency import check_idempotency_key
from claude_trio.protocol.fanout.inbox import DEFAULT_INBOX_CHANGES
from claude_trio.protocol.fanout.listing import LIST_PAGE_MAX
from claude_trio.protocol.fanout.wire import (
    AbortOp,
    AttachOp,
    DetachOp,
    ErrorFrame,
    EventFrame,
    Frame,
    GovernorFrame,
    GovernorOp,
    HelloFrame,
    HelloOp,
    InboxArrivedFrame,
    InboxFrame,
    InboxOp,
    InboxResolvedFrame,
    ListOp,
    Op,
    OpenedFrame,
    OpenOp,
    ReplyFrame,
    SessionInfo,
    SessionsFrame,
    SetModelOp,
    SetPermissionModeOp,
    decode_frame,
    encode_op,
)

__all__ = ["TOKEN_ENV", "GatewayClient", "connect_gateway"]

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Frame)

#: Handshake refusals that say "not now" (a gateway over its connection cap answers 503):
#: the client tries again; any other refusal (401 wrong token, 403 Origin) is final.
_TRANSIENT_STATUSES = frozenset({429, 502, 503, 504})

#: Ops that may be sent again when their reply was lost with the connection.
_REPEATABLE = (HelloOp, ListOp, AbortOp, SetModelOp, SetPermissionModeOp, InboxOp, GovernorOp)


# -- the client ---------------------------------------------------------------------------------


class GatewayClient:
    """The handle inside :func:`connect_gateway`. See :mod:`claude_trio.client`."""

    def __init__(
        self, url: str | tuple[str, ...], headers: list[tuple[bytes, bytes]], config: ClientConfig
    ):
        #: The gateways, tried in turn: the next one after each failed or lost connection.
        self._urls = (url,) if isinstance(url, str) else url
        self._turn = 0
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
        #: Attempts made since the connection dropped (0 while connected).
        self._attempts = 0
        self._down_since = 0.0
        self._last_why = ""
        #: The server's ``hello``, from the latest connection.
        self.hello: HelloFrame | None = None
        self._inbox = RemoteInbox(self._op_id, lambda op: self._request(op, ReplyFrame))
        self._governor = RemoteGovernor()

    @property
    def _url(self) -> str:
        """The gateway this client connects to now."""
        return self._urls[self._turn % len(self._urls)]

    @property
    def _where(self) -> str:
        return self._url if len(self._urls) == 1 else f"any of {', '.join(self._urls)}"

    # -- public ops ------------------------------------------------------------------------------

    async def open(
        self, params: ExecuteParams, *, label: str | None = None, idempotency_key: str | None = None
    ) -> RemoteSession:
        """Start a session on the server (it runs as soon as the server has a slot) and
        follow it from its first event.

        The ``open`` carries an idempotency key (``idempotency_key``, or a fresh one): when
        its reply is lost with the connection, the client sends it again with the same key
        on the next connection, and the server answers with the session the first one
        started (a session never starts twice). Give your own key (a batch item's) to make
        a retry of your own, after a crash or on another gateway of a cluster, find the
        session too; the same key with another request raises :class:`RemoteOpError` with
        code ``idempotency_conflict``."""
        if not isinstance(params, ExecuteParams):
            raise InvalidParamsError("params", params, "an ExecuteParams")
        key = str(uuid.uuid4()) if idempotency_key is None else idempotency_key
        check_idempotency_key(key)
        sessions: list[RemoteSession] = []

        def follow(frame: Frame) -> None:
            # In the reader, before it reads on: the session's first events come right after.
            if isinstance(frame, OpenedFrame):
                state = Follow(max_queue=self._config.max_queue)
                sessions.append(self._follow_new(frame.session, state, 1))

        await self._request(
            OpenOp(
                id=self._op_id(),
                params=params,
                label=label,
                idempotency_key=key,
                traceparent=current_traceparent(),
            ),
            OpenedFrame,
            on_reply=follow,
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

    async def governor(self) -> GovernorFigures | None:
        """The figures of the server's fleet governor now (its pause and when it resumes, the
        effective concurrency, the budget spent), asked with a fresh ``hello``; None when the
        server has no governor. A cluster's gateway (``serve --redis``) answers the figures
        its workers share in Redis (``cluster_running``: executions counted on every worker),
        None when none shares one or Redis is down. ``follow_governor`` has them pushed."""
        hello = await self._request(HelloOp(id=self._op_id()), HelloFrame)
        self.hello = hello
        return hello.governor

    async def list(self) -> tuple[SessionInfo, ...]:
        """The sessions the server lets this client's principal see, oldest first (read in
        pages of ``LIST_PAGE_MAX``, one ``list`` op each, however many there are)."""
        sessions: list[SessionInfo] = []
        cursor: str | None = None
        while True:
            op = ListOp(id=self._op_id(), cursor=cursor, limit=LIST_PAGE_MAX)
            listing = await self._request(op, SessionsFrame)
            sessions += listing.sessions
            cursor = listing.next_cursor
            if cursor is None:
                return tuple(sessions)

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

    async def continue_(
        self,
        session_id: str,
        prompt: str,
        *,
        idempotency_key: str | None = None,
        model: str | None = None,
        permission_mode: PermissionMode | None = None,
        images: Sequence[ImageInput] = (),
    ) -> RemoteSession:
        """Run ``prompt`` as the next execution of a session's conversation
        (``SessionHost.continue_``): :meth:`get`, then :meth:`RemoteSession.continue_`."""
        session = await self.get(session_id)
        await session.continue_(
            prompt,
            idempotency_key=idempotency_key,
            model=model,
            permission_mode=permission_mode,
            images=images,
        )
        return session

    @asynccontextmanager
    async def inbox(
        self, *, max_changes: int = DEFAULT_INBOX_CHANGES
    ) -> AsyncIterator[InboxChannel]:
        """``SessionHost.inbox``: the requests waiting across the sessions the server lets
        this client's principal see, a snapshot first, then their arrivals and resolutions
        (the ``inbox`` op; ``client/inbox.py``). From the first call on, the client follows
        the server's inbox for as long as it is connected."""
        if not self._inbox.following:
            op = InboxOp(id=self._op_id())
            await self._request(op, InboxFrame, on_reply=self._inbox.on_reply)
            self._inbox.following = True
        with self._inbox.channel(max_changes) as channel:
            yield channel

    @asynccontextmanager
    async def follow_governor(self) -> AsyncIterator[GovernorFeed]:
        """The server's governor figures (as ``governor()``) now, then each change, pushed
        by the server within about half a second (the ``governor`` op; ``client/governor.py``).
        From the first call on, the client follows them for as long as it is connected."""
        remote = self._governor
        if not remote.following:
            await self._request(remote.op(self._op_id()), GovernorFrame, on_reply=remote.on_reply)
            remote.following = True
        yield remote.feed()

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
        # An open with its idempotency key is answered with the same session however often
        # it reaches the server.
        repeatable = isinstance(op, _REPEATABLE) or (
            isinstance(op, OpenOp) and op.idempotency_key is not None
        )
        pending = _Pending(op=op, text=encode_op(op), repeatable=repeatable, on_reply=on_reply)
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
            url = self._url
            self._turn += 1  # the next gateway (the same when there is one)
            if outcome is None:  # served, then lost: start counting again
                failures = 0
                self._attempts = 1
                self._down_since = trio.current_time()
                why = self._last_why
                log.warning(
                    "claude-trio client: the connection to %s dropped (%s): reconnecting",
                    url,
                    why,
                )
                self._notify(Reconnecting(attempt=1, delay=0.0, error=why))
                continue
            if isinstance(outcome, GatewayRefusedError):
                self._give_up(outcome)
                if not started():
                    raise outcome
                return
            failures += 1
            limit = config.reconnect_attempts if started() else config.connect_attempts
            if failures >= limit:
                if started():
                    waited = trio.current_time() - self._down_since
                    error = GatewayUnavailableError(
                        f"could not reconnect to the gateway at {self._where} ({failures} "
                        f"attempts over {waited:.1f} s): {outcome!r}; the sessions it "
                        "followed go on on the server (attach to them with a new client); "
                        "ClientConfig.reconnect_attempts makes it try longer"
                    )
                else:
                    error = GatewayUnavailableError(
                        f"could not connect to the gateway at {self._where} ({failures} "
                        f"attempts): {outcome!r}"
                    )
                self._give_up(error)
                if not started():
                    raise error
                return
            # Several gateways: the next one is tried at once; the backoff comes after each
            # round in which every one failed.
            rounds, rest = divmod(failures, len(self._urls))
            delay = 0.0 if rest else config.backoff(rounds)
            log.info(
                "claude-trio client: connection failed (%r), retrying in %.2f s", outcome, delay
            )
            if self._attempts:
                self._attempts += 1
                self._notify(Reconnecting(attempt=self._attempts, delay=delay, error=repr(outcome)))
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
            if self._attempts:
                attempts, self._attempts = self._attempts, 0
                log.warning(
                    "claude-trio client: reconnected to %s after %d attempt(s)", self._url, attempts
                )
                self._notify(Reconnected(attempts=attempts))
            await conn.stop.wait()
        finally:
            # A closing handshake when the client closes; otherwise the peer is gone or
            # dead (a missed pong): the connection is cut at once (aclose under an expired
            # deadline closes the socket), so the next one is not held up.
            grace = config.close_timeout if self._closing else 0
            with trio.move_on_after(grace, shield=True):
                await ws.aclose()
            self._lost(conn)
            self._last_why = conn.why
        return failure

    async def _hello_on(self, conn: _Connection) -> HelloFrame:
        op = HelloOp(id=self._op_id())
        pending = _Pending(op=op, text=encode_op(op), repeatable=False)
        conn.submit(pending)
        # A server that took the handshake but never says hello is as good as none.
        with trio.move_on_after(self._config.connect_timeout):
            await self._hello_race(conn, pending)
        if not isinstance(pending.frame, HelloFrame):
            raise GatewayUnavailableError(
                f"the connection to {self._url} dropped before the server said hello"
                if conn.lost.is_set()
                else f"the server at {self._url} did not say hello within "
                f"{self._config.connect_timeout:g} s"
                if pending.frame is None
                else f"the server at {self._url} answered hello with {pending.frame!r}"
            )
        return pending.frame

    async def _hello_race(self, conn: _Connection, pending: _Pending) -> None:
        async with trio.open_nursery() as race:

            async def lost() -> None:
                await conn.lost.wait()
                race.cancel_scope.cancel()

            async def answered() -> None:
                await pending.done.wait()
                race.cancel_scope.cancel()

            race.start_soon(lost)
            race.start_soon(answered)

    def _connected(self, conn: _Connection) -> None:
        for session in list(self._sessions.values()):
            if session._follow.connected():
                self._attach_again(session)
        # The inbox's list and the governor's figures again: what changed meanwhile is in them.
        for followed in (self._inbox, self._governor):
            if followed.following:
                op = followed.op(self._op_id())
                text, internal = encode_op(op), followed.on_reply
                conn.submit(_Pending(op=op, text=text, repeatable=False, internal=internal))
        waiting, self._waiting = self._waiting, collections.deque()
        for pending in waiting:
            if not pending.abandoned:
                conn.submit(pending)

    def _lost(self, conn: _Connection, why: str | None = None) -> None:
        """The connection dropped: sessions stop taking events until re-attached; ops sent
        and unanswered are sent again (repeatable) or fail; unsent ones wait. Idempotent."""
        if conn.lost.is_set():
            return
        if why is not None:
            conn.why = why
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
        self._inbox.give_up(error)
        self._governor.give_up(error)
        if self._attempts and not self._closing:
            log.error("claude-trio client: %s", error)
            self._notify(GaveUp(error=error))

    def _notify(self, notice: ConnectionNotice) -> None:
        """Tell ``ClientConfig.on_connection`` (what it raises ends the client's block)."""
        if self._config.on_connection is not None:
            self._config.on_connection(notice)

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
            why = exc.reason
            said = "" if why is None else f" {why.code} {why.name} {why.reason or ''}".rstrip()
            self._lost(conn, f"closed{said}")
        finally:
            self._lost(conn)

    def _dispatch(self, conn: _Connection, frame: Frame) -> None:
        if isinstance(frame, EventFrame):
            session = self._sessions.get(frame.session)
            if session is not None:
                session._on_event(frame.event)
            return
        if isinstance(frame, InboxArrivedFrame | InboxResolvedFrame) or (
            isinstance(frame, InboxFrame) and frame.id is None
        ):
            self._inbox.on_frame(frame)
            return
        if isinstance(frame, GovernorFrame) and frame.id is None:
            self._governor.on_frame(frame)
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
            await conn.send_ops()  # _lost() decides what becomes of an op sent as it closed
        finally:
            self._lost(conn)

    async def _pinger(self, conn: _Connection) -> None:
        config = self._config
        if await conn.ping_until_silent(config.ping_interval, pong_within=config.ping_timeout):
            log.info(
                "claude-trio client: no pong within %g s: replacing the connection",
                config.ping_timeout,
            )
            self._lost(conn, f"no pong within {config.ping_timeout:g} s")
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


@asynccontextmanager
async def connect_gateway(
    url: str | Sequence[str], *, token: str | None = None, config: ClientConfig | None = None
) -> AsyncIterator[GatewayClient]:
    """Connect to a ``serve_gateway`` at ``url`` (``ws://host:port/``) with ``token``; yield
    the :class:`GatewayClient` once the server said hello. Without ``token``, the one in
    the ``CLAUDE_TRIO_TOKEN`` environment variable (as ``claude-trio serve`` reads it); a
    token given here wins.

    ``url`` may be several URLs: the gateways of one cluster (``serve --redis``), tried in
    turn: a connection that fails or drops is made again to the next one. What was in flight
    is safe to send there: an ``open`` or ``continue`` goes again with its idempotency key
    (the cluster returns the session the first one started) and each followed session
    attaches again after the last event it received.

    Raises :class:`GatewayRefusedError` when the handshake is refused (a wrong token: 401),
    :class:`GatewayUnavailableError` when no connection could be made in
    ``config.connect_attempts`` attempts. See :mod:`claude_trio.client` for what happens when
    the connection drops later. Nothing started here outlives the block.
    """
    urls, headers, config = connect_arguments(url, token, config)
    client = GatewayClient(urls, headers, config)
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
