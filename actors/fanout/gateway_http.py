"""The web console's pages on the gateway's own port: a connection's request head is read
first; a plain page request is answered here (``protocol/fanout/console.py`` says with what)
and the connection closed, anything else goes on to the websocket handshake with the bytes
already read put back in front of the stream (:class:`PrefixedStream`)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from importlib import resources

import trio

from claude_trio.protocol.fanout.console import (
    CONSOLE_FILES,
    MAX_HEAD_BYTES,
    is_page_request,
    page_response,
    parse_head,
)

__all__ = ["PrefixedStream", "load_console_files", "route_request"]


def load_console_files() -> Mapping[str, bytes]:
    """The console's static files, read once from the installed package."""
    folder = resources.files("claude_trio").joinpath("console")
    return {name: folder.joinpath(name).read_bytes() for name, _ in CONSOLE_FILES.values()}


class PrefixedStream(trio.abc.HalfCloseableStream):
    """``stream`` with ``prefix`` (bytes already read from it) received again first."""

    def __init__(self, stream: trio.SocketStream, prefix: bytes) -> None:
        self.stream = stream
        self.socket = stream.socket
        self._prefix = prefix

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._prefix:
            size = len(self._prefix) if max_bytes is None else max_bytes
            data, self._prefix = self._prefix[:size], self._prefix[size:]
            await trio.lowlevel.checkpoint()
            return data
        return await self.stream.receive_some(max_bytes)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.stream.wait_send_all_might_not_block()

    async def send_eof(self) -> None:
        await self.stream.send_eof()

    async def aclose(self) -> None:
        await self.stream.aclose()


async def route_request(
    stream: trio.SocketStream, files: Mapping[str, bytes], deadline: float
) -> PrefixedStream | None:
    """Read the request head (until ``deadline``); answer a page request and return None, or
    return the stream for the websocket handshake (a head that is incomplete, too long or
    not understood is the handshake's to refuse, as without the console)."""
    head = b""
    with trio.move_on_at(deadline):
        await trio.lowlevel.checkpoint()
        while True:
            try:
                data = await stream.receive_some(MAX_HEAD_BYTES)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            head += data
            if not data or b"\r\n\r\n" in head or len(head) >= MAX_HEAD_BYTES:
                break
    end = head.find(b"\r\n\r\n")
    request = None if end < 0 else parse_head(head[: end + 4])
    if request is None or not is_page_request(request):
        return PrefixedStream(stream, head)
    with trio.move_on_at(deadline), contextlib.suppress(trio.BrokenResourceError):
        await stream.send_all(page_response(request, files))
    return None
