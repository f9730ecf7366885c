"""Helpers for the gateway tests: a fleet behind a gateway, clients, raw wsproto peers."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import attrs
import trio
from trio_websocket import WebSocketConnection, wrap_client_stream
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, RejectConnection, Request
from wsproto.events import Event as WsEvent

from claude_trio import ExecuteParams, serve_gateway
from claude_trio.actors.fanout.fleet import Fleet, open_fleet
from claude_trio.protocol.fanout.wire import (
    EventFrame,
    Frame,
    OpenedFrame,
    decode_frame,
    params_to_json,
)
from claude_trio.protocol.session.events import Event, Result, TextDelta
from claude_trio.testing import FakeCLI, FakeTurn

TOKEN = "s3cret-gateway-token-7f1d"
ORIGIN = "https://app.example"
AUTH = [(b"authorization", f"Bearer {TOKEN}".encode())]
QUESTION = {
    "question": "Which color?",
    "header": "Color",
    "options": [{"label": "red", "description": "warm"}, {"label": "blue", "description": ""}],
    "multiSelect": False,
}


@asynccontextmanager
async def gateway(
    fake: FakeCLI,
    *,
    replay_buffer: int = 2000,
    fleet_options: dict[str, Any] | None = None,
    **gateway_options: Any,
) -> AsyncIterator[tuple[Fleet, int]]:
    """A fleet of ``fake`` sessions behind a gateway; yields ``(fleet, port)``. The token is
    :data:`TOKEN` unless ``tokens=`` names principals."""
    gateway_options.setdefault("allowed_origins", {ORIGIN})
    if "tokens" not in gateway_options:
        gateway_options.setdefault("token", TOKEN)
    async with (
        open_fleet(
            transport_factory=fake, replay_buffer=replay_buffer, **(fleet_options or {})
        ) as fleet,
        trio.open_nursery() as nursery,
    ):
        port = await nursery.start(partial(serve_gateway, fleet, **gateway_options))
        yield fleet, port
        nursery.cancel_scope.cancel()


@attrs.define
class Client:
    """A test client: JSON ops out, decoded frames in."""

    ws: WebSocketConnection
    frames: list[Frame] = attrs.field(factory=list)

    async def send(self, op: str, **fields: Any) -> None:
        await self.ws.send_message(json.dumps({"op": op, **fields}))

    async def receive(self) -> Frame:
        frame = decode_frame(str(await self.ws.get_message()))
        self.frames.append(frame)
        return frame

    async def receive_until(self, done: Callable[[Frame], bool]) -> list[Frame]:
        got = [await self.receive()]
        while not done(got[-1]):
            got.append(await self.receive())
        return got

    async def events_until_final(self) -> list[Event]:
        frames = await self.receive_until(is_final_result)
        return [f.event for f in frames if isinstance(f, EventFrame)]

    def received_events(self, session: str) -> list[Event]:
        """Every event of ``session`` this client has received so far, in order."""
        return [f.event for f in self.frames if isinstance(f, EventFrame) and f.session == session]

    async def open(self, params: ExecuteParams, op_id: str = "open-1") -> str:
        await self.send("open", id=op_id, params=params_to_json(params))
        opened = await self.receive()
        assert isinstance(opened, OpenedFrame), opened
        assert opened.id == op_id
        return opened.session


async def tcp_from(
    port: int, source: str = "127.0.0.1", rcvbuf: int | None = None
) -> trio.SocketStream:
    """A TCP connection to the gateway from ``source`` (any 127.x.y.z address is local)."""
    sock = trio.socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if rcvbuf is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        await sock.bind((source, 0))
        await sock.connect(("127.0.0.1", port))
    except BaseException:
        sock.close()
        raise
    return trio.SocketStream(sock)


@asynccontextmanager
async def client(
    port: int,
    *,
    source: str = "127.0.0.1",
    rcvbuf: int | None = None,
    path: str = "/",
    extra_headers: list[tuple[bytes, bytes]] | None = None,
    max_message_size: int = 2**20,
) -> AsyncIterator[Client]:
    """A websocket client connected from ``source`` (its own nursery for the reader)."""
    stream = await tcp_from(port, source, rcvbuf)
    async with trio.open_nursery() as nursery:
        ws = await wrap_client_stream(
            nursery,
            stream,
            "127.0.0.1",
            path,
            extra_headers=AUTH if extra_headers is None else extra_headers,
            max_message_size=max_message_size,
        )
        try:
            yield Client(ws)
        finally:
            with trio.move_on_after(5, shield=True):
                await ws.aclose()
            nursery.cancel_scope.cancel()


async def drain(c: Client) -> None:
    """Read until the connection closes (raises ``ConnectionClosed``)."""
    while True:
        await c.receive()


def bearer(token: str) -> list[tuple[bytes, bytes]]:
    """The handshake headers that present ``token``."""
    return [(b"authorization", f"Bearer {token}".encode())]


def is_event(frame: Frame) -> bool:
    return isinstance(frame, EventFrame)


def is_final_result(frame: Frame) -> bool:
    return isinstance(frame, EventFrame) and isinstance(frame.event, Result) and frame.event.final


def text_of(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


async def say(text: str, turn: FakeTurn) -> None:
    await turn.text(text, chunk=3)


@attrs.define
class RawPeer:
    """A websocket client driven by hand with wsproto: it answers nothing by itself."""

    stream: trio.SocketStream
    ws: WSConnection
    events: list[WsEvent] = attrs.field(factory=list)

    async def next_events(self) -> list[WsEvent] | None:
        """The events in the next bytes received; ``None`` at EOF (the server closed TCP)."""
        try:
            data = await self.stream.receive_some(65536)
        except trio.BrokenResourceError:  # reset by the server
            return None
        if not data:
            return None
        self.ws.receive_data(data)
        got = list(self.ws.events())
        self.events.extend(got)
        return got


async def raw_peer(
    port: int, *, source: str = "127.0.0.1", headers: list[tuple[bytes, bytes]] | None = None
) -> RawPeer | RejectConnection:
    """Handshake by hand; the peer (accepted) or the server's refusal."""
    stream = await tcp_from(port, source)
    ws = WSConnection(ConnectionType.CLIENT)
    request = Request(
        host="127.0.0.1", target="/", extra_headers=AUTH if headers is None else headers
    )
    await stream.send_all(ws.send(request))
    peer = RawPeer(stream=stream, ws=ws)
    while True:
        got = await peer.next_events()
        if got is None:
            raise AssertionError("the server closed the connection during the handshake")
        for event in got:
            if isinstance(event, AcceptConnection):
                return peer
            if isinstance(event, RejectConnection):
                await stream.aclose()
                return event
