"""The private names of trio-websocket and wsproto that ``actors/fanout/_websocket_private.py``
lists are there, with the shape it relies on (their behaviour is pinned by the gateway tests)."""

from __future__ import annotations

import inspect
from importlib.metadata import version

import trio_websocket
from trio_websocket import WebSocketConnection
from wsproto import WSConnection
from wsproto.connection import ConnectionState

from claude_trio.actors.fanout import _websocket_private as private


def test_the_pinned_versions_are_installed() -> None:
    # Upgrading either one means re-reading the list in actors/fanout/_websocket_private.py.
    assert version("trio-websocket").startswith("0.12.")
    assert version("wsproto").startswith("1.")


def test_the_private_names_are_there() -> None:
    assert inspect.iscoroutinefunction(WebSocketConnection._reader_task)
    assert inspect.iscoroutinefunction(WebSocketConnection._get_request)
    handler = inspect.getsource(WebSocketConnection._handle_close_connection_event)
    assert "ConnectionState.REMOTE_CLOSING" in handler
    assert "self._wsproto.state" in handler
    # What FailingWSConnection overrides is wsproto's public surface.
    for name in ("state", "events", "send"):
        assert hasattr(WSConnection, name)
    assert ConnectionState.REMOTE_CLOSING.name == "REMOTE_CLOSING"
    # send_texts does what send_message does (its _send), for several messages at once.
    send = inspect.getsource(WebSocketConnection._send)
    for used in (
        "self._wsproto.send(event)",
        "async with self._stream_lock:",
        "await self._stream.send_all(data)",
        "await self._abort_web_socket()",
        "raise ConnectionClosed(self._close_reason)",
    ):
        assert used in send, used
    assert "if self._close_reason:" in inspect.getsource(WebSocketConnection.send_message)
    assert trio_websocket.WebSocketRequest is not None


def test_the_module_lists_every_private_name_it_uses() -> None:
    source = inspect.getsource(private)
    header, _, code = source.partition('"""\n\nfrom __future__')
    used = {
        name
        for name in (
            "_reader_task",
            "_get_request",
            "_handle_close_connection_event",
            "_wsproto",
            "_stream",
            "_stream_lock",
            "_close_reason",
            "_abort_web_socket",
        )
        if name in code or name in header
    }
    for name in used:
        assert f"WebSocketConnection.{name}" in header, name
    # No other module of ours touches a private name of trio-websocket.
    import claude_trio.actors.fanout.gateway as gateway
    import claude_trio.actors.fanout.gateway_connection as gateway_connection

    for module in (gateway, gateway_connection):
        source = inspect.getsource(module)
        for name in ("_reader_task", "_get_request", "_wsproto", "_stream_lock", "_close_reason"):
            assert name not in source, (module.__name__, name)


def test_a_text_frame_is_the_bytes_wsproto_writes_for_the_message() -> None:
    from wsproto import ConnectionType
    from wsproto.events import AcceptConnection, Request, TextMessage

    client = WSConnection(ConnectionType.CLIENT)
    server = WSConnection(ConnectionType.SERVER)
    server.receive_data(client.send(Request(host="localhost", target="/")))
    next(server.events())
    client.receive_data(server.send(AcceptConnection()))
    next(client.events())
    for text in ("", "a" * 125, "b" * 126, "c" * 65535, "d" * 65536, "é€😀" * 50):
        frame = private.text_frame(text)
        assert frame == server.send(TextMessage(data=text))
        client.receive_data(frame)
        pieces = list(client.events())  # wsproto hands a long message over in pieces
        assert all(isinstance(piece, TextMessage) for piece in pieces)
        assert "".join(piece.data for piece in pieces) == text
        assert pieces[-1].message_finished
