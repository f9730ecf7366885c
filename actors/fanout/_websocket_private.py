"""Every private name of trio-websocket and wsproto that the gateway relies on: here, and only here.

Pinned versions: **trio-websocket 0.12.2** (``pyproject.toml``: ``>=0.12,<0.13``) and **wsproto
1.3.2**. ``tests/gateway/test_websocket_private.py::test_the_private_names_are_there`` checks
that each name below exists with the shape we use; the behaviour tests named per name break
if its meaning changes. Upgrading either library means re-reading this list.

============================================================  ====================================
private name (what we rely on)                                the tests that break if it changes
============================================================  ====================================
``trio_websocket.WebSocketConnection._reader_task()``:        every test in
the task that reads the socket and feeds wsproto; public      ``tests/gateway/test_gateway_ws.py``
``wrap_server_stream`` starts it, but hard-codes
``WSConnection``, so we start it ourselves.
``WebSocketConnection._get_request()``: waits for the         every test in
client's HTTP upgrade request (``wrap_server_stream``'s       ``tests/gateway/test_gateway_ws.py``
second line).
``WebSocketConnection._handle_close_connection_event``        ``test_gateway_ws.py::test_invalid_
answers a ``CloseConnection`` only when                       frames_get_a_close_frame_with_their
``self._wsproto.state is ConnectionState.REMOTE_CLOSING``:    _code`` (all three cases)
:class:`FailingWSConnection` reports that state for a
frame wsproto refused, so the close frame carries
wsproto's code (1007/1002) instead of none (the client
would see 1006).
``WebSocketConnection._wsproto``,                             ``test_gateway_ws.py`` and every
``WebSocketConnection._stream``,                              gateway test that reads events
``WebSocketConnection._stream_lock``,                         (:func:`send_texts`)
``WebSocketConnection._close_reason`` and
``WebSocketConnection._abort_web_socket()``: what
``send_message`` does (its ``_send``), for several
messages written at once.
============================================================  ====================================

Everything else the gateway uses is public API: ``WebSocketConnection(stream, ws_connection,
max_message_size=...)`` (documented, "users are discouraged from directly instantiating"),
``WebSocketRequest.accept/reject/headers/path``, ``send_message``, ``get_message``, ``ping``,
``aclose``, and wsproto's ``WSConnection.state/events/send``.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence

import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, WebSocketRequest
from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import CloseConnection, Event, Message, TextMessage

#: RFC 6455 5.5: a control frame's payload is at most 125 bytes, 2 of them the close code.
MAX_CLOSE_REASON_BYTES = 123


def clip_reason(reason: str) -> str:
    """``reason`` cut to fit a close frame (whole characters only)."""
    data = reason.encode("utf-8", "replace")[:MAX_CLOSE_REASON_BYTES]
    return data.decode(errors="ignore")


#: How much data a peer may still send once our close frame is out before it is cut off
#: (what a well-behaved peer had in flight when our close frame reached it).
MAX_DATA_AFTER_CLOSE = 16 * 1024


class FailingWSConnection(WSConnection):
    """A server ``WSConnection`` that sends the close frame for frames it cannot parse, and
    reports a peer that floods after our close frame.

    wsproto reports an invalid incoming frame (text that is not UTF-8: 1007; a bad opcode,
    reserved bits, an unmasked client frame: 1002) as a ``CloseConnection`` event while its
    state is still OPEN. trio-websocket 0.12 only answers a close it sees in REMOTE_CLOSING, so
    it drops the TCP connection without a close frame and the client sees 1006, never the
    code (checked on the wire). Here such an event reports REMOTE_CLOSING until
    trio-websocket answers it; the answer goes out as our own close frame with wsproto's code
    and reason, as RFC 6455 7.1.7 ("Fail the WebSocket Connection") asks.

    Once our close frame is sent, trio-websocket reads and discards whatever the peer sends
    until its close frame comes (no backpressure then: nobody receives messages any more). A
    peer that keeps sending data instead would make the server parse it as fast as it comes,
    for the whole closing handshake; past ``MAX_DATA_AFTER_CLOSE`` bytes ``on_flood`` is
    called (once), and the gateway cuts the TCP connection.
    """

    def __init__(self, on_flood: Callable[[], None] | None = None) -> None:
        super().__init__(ConnectionType.SERVER)
        self._failure: CloseConnection | None = None
        self._on_flood = on_flood
        self._after_close = 0

    @property
    def state(self) -> ConnectionState:
        if self._failure is not None:
            return ConnectionState.REMOTE_CLOSING
        return super().state

    def events(self) -> Generator[Event, None, None]:
        for event in super().events():
            state = super().state
            if isinstance(event, CloseConnection) and state is ConnectionState.OPEN:
                self._failure = event
            elif isinstance(event, Message) and state is ConnectionState.LOCAL_CLOSING:
                self._after_close += len(event.data)
                if self._after_close > MAX_DATA_AFTER_CLOSE and self._on_flood is not None:
                    on_flood, self._on_flood = self._on_flood, None
                    on_flood()
            yield event

    def send(self, event: Event) -> bytes:
        failure = self._failure
        if failure is not None and isinstance(event, CloseConnection):
            self._failure = None
            reason = clip_reason(failure.reason or "")
            return super().send(CloseConnection(code=failure.code, reason=reason))
        return super().send(event)


def server_connection(
    stream: trio.abc.Stream, *, max_message_size: int, on_flood: Callable[[], None]
) -> WebSocketConnection:
    """A server-side connection over ``stream`` that answers bad frames with their close code
    and calls ``on_flood`` when the peer floods during the closing handshake."""
    return WebSocketConnection(
        stream, FailingWSConnection(on_flood), max_message_size=max_message_size
    )


async def run_reader(connection: WebSocketConnection) -> None:
    """The connection's reader (private ``_reader_task``): runs until the socket closes."""
    await connection._reader_task()


async def wait_request(connection: WebSocketConnection) -> WebSocketRequest:
    """The client's upgrade request (private ``_get_request``); may be called once."""
    request: WebSocketRequest = await connection._get_request()
    return request


def text_frame(text: str) -> bytes:
    """``text`` as one server text frame (RFC 6455 5.2: FIN, opcode 1, no mask), the bytes
    wsproto writes for it on a connection without extensions (the gateway negotiates none).
    Made once per event and written to every client as is."""
    payload = text.encode("utf-8")
    length = len(payload)
    if length < 126:
        head = bytes((0x81, length))
    elif length < 1 << 16:
        head = bytes((0x81, 126)) + length.to_bytes(2, "big")
    else:
        head = bytes((0x81, 127)) + length.to_bytes(8, "big")
    return head + payload


async def send_texts(connection: WebSocketConnection, texts: Sequence[str | bytes]) -> None:
    """Send ``texts`` as text messages, in order, with one write to the socket: what
    ``send_message`` does for each (under the same lock, with the same errors), without a
    write and a lock per message. A ``bytes`` item is a frame made by :func:`text_frame`.
    ``ConnectionClosed`` when the connection is closed."""
    if connection._close_reason:
        raise ConnectionClosed(connection._close_reason)
    encode = connection._wsproto.send
    if connection._wsproto.state is not ConnectionState.OPEN:
        encode(TextMessage(data=""))  # raises wsproto's error, as send_message would
    data = b"".join(
        [text if isinstance(text, bytes) else encode(TextMessage(data=text)) for text in texts]
    )
    async with connection._stream_lock:
        try:
            await connection._stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        else:
            return
        await connection._abort_web_socket()
        assert connection._close_reason is not None
        raise ConnectionClosed(connection._close_reason)
