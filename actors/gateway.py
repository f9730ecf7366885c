"""``serve_gateway``: the websocket front of a :class:`~claude_trio.actors.fleet.Fleet`.

::

    async with open_fleet(max_live=4) as fleet:
        port = await nursery.start(
            partial(serve_gateway, fleet, token=secret, allowed_origins={"https://app.example"})
        )

Remote clients speak the JSON protocol of :mod:`claude_trio.protocol.wire` (one op or frame per
text message). This module only moves bytes and enforces the connection policy; every decision
about what a message means is made by ``decode_op`` and by the fleet.

Handshake (before the websocket is accepted, so a refused client never gets a socket):

* **Auth**: ``Authorization: Bearer <token>``, or ``?token=<token>`` in the URL for browsers
  (the WebSocket API cannot set headers; a URL can end up in proxy logs, so prefer the header).
  When the header is present it alone decides. Missing or wrong -> HTTP 401. Compared in
  constant time. The token, the request path and the headers are never logged.
* **Origin**: with ``allowed_origins`` given, a request whose ``Origin`` header is not in it
  -> HTTP 403. A request without ``Origin`` is not a browser (browsers always send it on a
  websocket handshake), so cross-site websocket hijacking does not apply and it is allowed.
  ``allowed_origins=None`` turns the check off.

Close codes: a message longer than ``max_message_size`` (``len()`` of the text, i.e.
characters; trio-websocket's measure) -> 1009; a text frame that is not UTF-8 -> 1007; a
frame wsproto rejects -> 1002; a binary message (the protocol is JSON text) -> 1002; a slow
client -> 1008 ``"slow consumer: ..."``; server shutdown -> 1001; a bug in the gateway -> 1011
(logged; that connection only). Anything wrong *inside* a
well-formed text message (malformed JSON, unknown op, unknown session, missing field, invalid
params) gets an ``error`` frame and the connection goes on.

Backpressure (the documented policy): every connection has ONE outgoing queue of at most
``client_queue`` encoded frames, drained by one writer task. Event frames wait for room, so a
burst is absorbed by the fleet's per-subscription queue (``max_queue=client_queue``), which
merges adjacent deltas; when that overflows too, the fleet drops the subscription
(``SlowSubscriberError``) and the client is closed with 1008 and the fleet's reason. Replies,
errors and ``opened`` frames never wait: if the queue is full when one is due, the client is
not reading and is closed with 1008 as well. So memory per client is bounded by
``client_queue`` frames plus ``client_queue`` events per attached session (plus the kernel's
socket buffers); the session and its other subscribers never wait for a slow client. A
dropped client can reconnect and ``attach`` with the highest seq it saw for an exact replay.

Channels: each connection owns its outgoing queue (both ends, closed when the connection
ends) and each attached session's :class:`~claude_trio.actors.fleet.Subscription` (closed on
detach, re-attach, or when the connection ends; closing it detaches it from the session).

Cancellation: cancelling ``serve_gateway`` closes every connection with 1001 (bounded by
``CLOSE_GRACE``, shielded) and ends every task it started. Sessions belong to the fleet, not
to a connection: a client that disconnects leaves its sessions running, to attach to again.

Error handling: a bad message is the client's problem and gets an ``error`` frame; a refused
``fleet.start`` (invalid params) too. A broken connection ends that connection only, and so
does an unexpected exception while serving one (logged, close 1011): ``trio.serve_listeners``
would otherwise take the whole server down with it.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Collection, Generator
from functools import partial
from typing import NoReturn, assert_never
from urllib.parse import parse_qs, urlsplit

import attrs
import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, WebSocketRequest
from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import CloseConnection, Event

from claude_trio.protocol.errors import InvalidParamsError, LocalProtocolError
from claude_trio.protocol.events import Event as UnifiedEvent
from claude_trio.protocol.lifecycle import Accepted
from claude_trio.protocol.wire import (
    AbortOp,
    AnswerOp,
    AttachOp,
    DetachOp,
    ErrorFrame,
    EventFrame,
    Frame,
    OpenedFrame,
    OpenOp,
    PushOp,
    ReplyFrame,
    ResyncRequiredFrame,
    WireError,
    decode_op,
    encode_frame,
)

from .broker import AnswerAccepted
from .fleet import Fleet, FleetSession, ResyncRequired, SlowSubscriberError, Subscription

__all__ = ["CLOSE_GRACE", "HANDSHAKE_TIMEOUT", "serve_gateway"]

log = logging.getLogger(__name__)

#: How long a client may take to send its HTTP upgrade request (slowloris guard).
HANDSHAKE_TIMEOUT = 10.0
#: How long a closing handshake may take before the TCP connection is cut.
CLOSE_GRACE = 5.0
#: RFC 6455 5.5: a control frame's payload is at most 125 bytes, 2 of them the close code.
_MAX_CLOSE_REASON_BYTES = 123

# RFC 6455 7.4.1 close codes we send.
GOING_AWAY = 1001
PROTOCOL_ERROR = 1002
POLICY_VIOLATION = 1008
INTERNAL_ERROR = 1011


@attrs.frozen(kw_only=True)
class _Config:
    fleet: Fleet
    token: str
    allowed_origins: frozenset[str] | None
    max_message_size: int
    client_queue: int
    allow_cwd: bool
    allow_env: bool


async def serve_gateway(
    fleet: Fleet,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    token: str,
    allowed_origins: Collection[str] | None,
    max_message_size: int = 64 * 1024,
    client_queue: int = 1000,
    allow_cwd: bool = False,
    allow_env: bool = False,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> NoReturn:
    """Serve ``fleet`` over websockets on ``host:port`` until cancelled.

    ``task_status.started(port)`` gives the bound port (useful with ``port=0``) once the
    socket listens. ``allow_cwd`` / ``allow_env`` let clients set ``params.cwd`` and the
    environment keys of ``architecture_config`` (both refused by default: they choose what a
    process on this machine reads and runs). See the module docstring for the policy.
    """
    if not isinstance(token, str) or not token:
        raise InvalidParamsError("token", "<hidden>", "a non-empty string")
    if isinstance(allowed_origins, str):
        raise InvalidParamsError(
            "allowed_origins", allowed_origins, "a collection of origins, not one string"
        )
    if not isinstance(max_message_size, int) or max_message_size < 1:
        raise InvalidParamsError("max_message_size", max_message_size, "a positive int")
    if not isinstance(client_queue, int) or client_queue < 1:
        raise InvalidParamsError("client_queue", client_queue, "a positive int")
    config = _Config(
        fleet=fleet,
        token=token,
        allowed_origins=None if allowed_origins is None else frozenset(allowed_origins),
        max_message_size=max_message_size,
        client_queue=client_queue,
        allow_cwd=allow_cwd,
        allow_env=allow_env,
    )
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()[1]
    async with trio.open_nursery() as nursery:
        await nursery.start(trio.serve_listeners, partial(_serve_stream, config), listeners)
        log.info("gateway listening on %s:%d", host, bound)
        task_status.started(bound)
        await trio.sleep_forever()
    raise AssertionError("unreachable: sleep_forever returned")  # pragma: no cover


class _FailingWSConnection(WSConnection):
    """A server ``WSConnection`` that sends the close frame for frames it cannot parse.

    wsproto reports an invalid incoming frame (text that is not UTF-8: 1007; a bad opcode,
    reserved bits, an unmasked client frame: 1002) as a ``CloseConnection`` event while its
    state is still OPEN. trio-websocket 0.12 only answers a close it sees in REMOTE_CLOSING, so
    it drops the TCP connection without a close frame and the client sees 1006, never the
    code (checked; see tests/gateway/test_gateway_ws.py). Here such an event reports
    REMOTE_CLOSING until trio-websocket answers it; the answer goes out as our own close
    frame with wsproto's code and reason, as RFC 6455 7.1.7 ("Fail the WebSocket Connection")
    asks.
    """

    def __init__(self) -> None:
        super().__init__(ConnectionType.SERVER)
        self._failure: CloseConnection | None = None

    @property
    def state(self) -> ConnectionState:
        if self._failure is not None:
            return ConnectionState.REMOTE_CLOSING
        return super().state

    def events(self) -> Generator[Event, None, None]:
        for event in super().events():
            if isinstance(event, CloseConnection) and super().state is ConnectionState.OPEN:
                self._failure = event
            yield event

    def send(self, event: Event) -> bytes:
        failure = self._failure
        if failure is not None and isinstance(event, CloseConnection):
            self._failure = None
            reason = _clip_reason(failure.reason or "")
            return super().send(CloseConnection(code=failure.code, reason=reason))
        return super().send(event)


def _clip_reason(reason: str) -> str:
    """``reason`` cut to fit a close frame (whole characters only)."""
    data = reason.encode()[:_MAX_CLOSE_REASON_BYTES]
    return data.decode(errors="ignore")


async def _serve_stream(config: _Config, stream: trio.SocketStream) -> None:
    """One TCP connection: the handshake, the policy checks, then the client's session.

    This is trio-websocket's ``wrap_server_stream`` with our ``_FailingWSConnection`` (the one
    thing it does not let us choose); the stream itself is closed by ``trio.serve_listeners``.
    """
    peer = _peer(stream)
    connection = WebSocketConnection(
        stream, _FailingWSConnection(), max_message_size=config.max_message_size
    )
    code, reason = GOING_AWAY, "server shutting down"
    async with trio.open_nursery() as nursery:
        nursery.start_soon(connection._reader_task)
        try:
            await _handshake_then_serve(config, connection, peer)
        except Exception:
            # A bug met by one connection must not end the server and its other clients
            # (trio.serve_listeners would propagate it). Cancellation is not caught.
            log.exception("gateway: the connection of %s failed", peer)
            code, reason = INTERNAL_ERROR, "internal error"
        finally:
            with trio.move_on_after(CLOSE_GRACE, shield=True):
                await connection.aclose(code, reason)
            nursery.cancel_scope.cancel()


async def _handshake_then_serve(
    config: _Config, connection: WebSocketConnection, peer: str
) -> None:
    request: WebSocketRequest | None = None
    with trio.move_on_after(HANDSHAKE_TIMEOUT):
        request = await connection._get_request()
    if request is None:
        log.info("gateway: %s did not complete the handshake in time", peer)
        return
    refusal = _refusal(config, request)
    if refusal is not None:
        status, why = refusal
        log.info("gateway: refused %s: HTTP %d, %s", peer, status, why)
        headers = [(b"content-type", b"text/plain; charset=utf-8")]
        if status == 401:
            headers.append((b"www-authenticate", b"Bearer"))
        await request.reject(status, extra_headers=headers, body=why.encode() + b"\n")
        return
    ws = await request.accept()
    log.info("gateway: %s connected", peer)
    await _Client(config, ws, peer).run()


def _peer(stream: trio.SocketStream) -> str:
    try:
        host, port = stream.socket.getpeername()[:2]
    except OSError:
        return "<unknown peer>"
    return f"{host}:{port}"


def _refusal(config: _Config, request: WebSocketRequest) -> tuple[int, str] | None:
    """``(HTTP status, why)`` if the handshake must be refused, else None. Never echoes the
    token: the reason names only what was wrong."""
    headers: dict[str, list[str]] = {}
    for name, value in request.headers:
        headers.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))
    authorization = headers.get("authorization")
    if authorization is not None:
        scheme, _, presented = authorization[0].strip().partition(" ")
        if scheme.lower() != "bearer":
            return 401, "unauthorized: the Authorization header must be 'Bearer <token>'"
        if not _same_secret(presented.strip(), config.token):
            return 401, "unauthorized: wrong token"
    else:
        tokens = parse_qs(urlsplit(request.path).query).get("token")
        if not tokens:
            return 401, "unauthorized: send 'Authorization: Bearer <token>' (or ?token=)"
        if not _same_secret(tokens[0], config.token):
            return 401, "unauthorized: wrong token"
    origins = headers.get("origin")
    if (
        config.allowed_origins is not None
        and origins is not None
        and origins[0] not in config.allowed_origins
    ):
        return 403, "forbidden: this Origin is not allowed"
    return None


def _same_secret(presented: str, expected: str) -> bool:
    return hmac.compare_digest(presented.encode(), expected.encode())


class _Client:
    """One accepted websocket: a reader (ops in), a writer (frames out), one pump per attached
    session, and the close policy. See the module docstring for the backpressure policy."""

    def __init__(self, config: _Config, ws: WebSocketConnection, peer: str) -> None:
        self._config = config
        self._fleet = config.fleet
        self._ws = ws
        self._peer = peer
        # Bounded on purpose: this IS the per-client buffer of the slow-client policy.
        self._out_send, self._out_recv = trio.open_memory_channel[str](config.client_queue)
        #: session id -> the cancel scope of the pump feeding its events to this client.
        self._attached: dict[str, trio.CancelScope] = {}
        self._close_code: int | None = None
        self._close_reason = ""
        self._close_wanted = trio.Event()
        self._nursery: trio.Nursery | None = None

    async def run(self) -> None:
        with self._out_send, self._out_recv:
            try:
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    nursery.start_soon(self._writer)
                    nursery.start_soon(self._reader)
                    await self._close_wanted.wait()
                    if self._close_code is not None:
                        log.info(
                            "gateway: closing %s: %d %s",
                            self._peer,
                            self._close_code,
                            self._close_reason,
                        )
                        with trio.move_on_after(CLOSE_GRACE):
                            await self._ws.aclose(self._close_code, self._close_reason)
                    nursery.cancel_scope.cancel()
            finally:
                for scope in self._attached.values():
                    scope.cancel()

    def _close(self, code: int | None, reason: str = "") -> None:
        """Ask ``run`` to end the connection: with a close frame ``code``, or with None when
        the connection is already closed. The first request wins."""
        if self._close_wanted.is_set():
            return
        self._close_code = code
        self._close_reason = _clip_reason(reason)
        self._close_wanted.set()

    # -- the writer -----------------------------------------------------------------------------

    async def _writer(self) -> None:
        """Send queued frames in order. Stops before the next frame once a close is wanted, so
        the close frame follows a whole frame (trio-websocket serializes sends on a lock)."""
        async for text in self._out_recv:
            if self._close_wanted.is_set():
                return
            try:
                await self._ws.send_message(text)
            except ConnectionClosed:
                self._close(None)
                return

    def _send_now(self, frame: Frame) -> None:
        """Queue a reply/error/opened frame; a full queue means the client is not reading."""
        if self._close_wanted.is_set():
            return
        try:
            self._out_send.send_nowait(encode_frame(frame))
        except trio.WouldBlock:
            self._close(
                POLICY_VIOLATION,
                f"slow consumer: {self._config.client_queue} frames waiting to be sent",
            )

    # -- the reader -----------------------------------------------------------------------------

    async def _reader(self) -> None:
        await trio.lowlevel.checkpoint()
        while True:
            try:
                message = await self._ws.get_message()
            except ConnectionClosed as exc:
                reason = exc.reason
                if reason is not None:
                    log.info(
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
        try:
            op = decode_op(
                text, allow_cwd=self._config.allow_cwd, allow_env=self._config.allow_env
            )
        except WireError as exc:
            self._send_now(exc.to_frame())
            return
        match op:
            case OpenOp():
                await self._open(op)
            case AttachOp():
                session = self._session(op.id, op.session)
                if session is not None:
                    self._attach(op.id, session, op.last_seq)
            case DetachOp():
                scope = self._attached.pop(op.session, None)
                if scope is None:
                    self._send_now(ReplyFrame(id=op.id, ok=False, reason="not attached"))
                else:
                    scope.cancel()
                    self._send_now(ReplyFrame(id=op.id, ok=True))
            case PushOp():
                session = self._session(op.id, op.session)
                if session is not None:
                    pushed = session.push_nowait(op.text)
                    if isinstance(pushed, Accepted):
                        self._send_now(ReplyFrame(id=op.id, ok=True))
                    else:
                        self._send_now(ReplyFrame(id=op.id, ok=False, reason=pushed.reason))
            case AnswerOp():
                session = self._session(op.id, op.session)
                if session is not None:
                    answered = await session.answer(op.request, op.answer)
                    if isinstance(answered, AnswerAccepted):
                        self._send_now(ReplyFrame(id=op.id, ok=True))
                    else:
                        self._send_now(ReplyFrame(id=op.id, ok=False, reason=answered.reason))
            case AbortOp():
                session = self._session(op.id, op.session)
                if session is not None:
                    await session.abort()
                    self._send_now(ReplyFrame(id=op.id, ok=True))
            case _:
                assert_never(op)

    def _session(self, op_id: str, session_id: str) -> FleetSession | None:
        try:
            return self._fleet.get(session_id)
        except KeyError:
            self._send_now(
                ErrorFrame(
                    id=op_id,
                    code="unknown_session",
                    message=f"unknown session {session_id!r} (never opened here, or forgotten)",
                )
            )
            return None

    async def _open(self, op: OpenOp) -> None:
        await trio.lowlevel.checkpoint()
        try:
            session = await self._fleet.start(op.params)
        except InvalidParamsError as exc:
            self._send_now(ErrorFrame(id=op.id, code="invalid_params", message=str(exc)))
            return
        except LocalProtocolError as exc:  # the fleet is closing
            self._send_now(ErrorFrame(id=op.id, code="internal", message=str(exc)))
            return
        self._send_now(OpenedFrame(id=op.id, session=session.id))
        self._attach(None, session, None)

    def _attach(self, op_id: str | None, session: FleetSession, last_seq: int | None) -> None:
        """Subscribe to ``session`` and start its pump; ``op_id`` None for the attach that
        ``open`` implies (it gets no reply: ``opened`` is the reply)."""
        try:
            subscribed = session.subscribe(last_seq, max_queue=self._config.client_queue)
        except InvalidParamsError as exc:
            self._send_now(ErrorFrame(id=op_id, code="invalid_field", message=str(exc)))
            return
        if isinstance(subscribed, ResyncRequired):
            assert op_id is not None  # last_seq=None never needs a resync
            self._send_now(
                ResyncRequiredFrame(
                    id=op_id, session=session.id, oldest_seq=subscribed.oldest_seq
                )
            )
            return
        previous = self._attached.pop(session.id, None)
        if previous is not None:  # re-attach replaces the old subscription
            previous.cancel()
        if op_id is not None:
            self._send_now(ReplyFrame(id=op_id, ok=True))
        assert self._nursery is not None
        scope = trio.CancelScope()
        self._attached[session.id] = scope
        self._nursery.start_soon(self._pump, session.id, subscribed, scope)

    async def _pump(
        self, session_id: str, subscription: Subscription, scope: trio.CancelScope
    ) -> None:
        """Move one subscription's events into the outgoing queue, waiting for room."""
        await trio.lowlevel.checkpoint()
        with subscription, scope:
            try:
                async for event in subscription:
                    await self._out_send.send(_event_frame(session_id, event))
            except SlowSubscriberError as exc:
                self._close(POLICY_VIOLATION, exc.reason)
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                self._close(None)
        if self._attached.get(session_id) is scope:
            del self._attached[session_id]


def _event_frame(session_id: str, event: UnifiedEvent) -> str:
    return encode_frame(EventFrame(session=session_id, event=event))

