"""A TCP proxy on 127.0.0.1 between a client and a gateway, that a test can make misbehave:
cut every connection now, cut at the client's next message (an op lost on the way), refuse
new connections (HTTP 503, as a gateway over its connection cap does), or go silent (forward
nothing, close nothing: a dead peer)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import attrs
import trio


@attrs.define(eq=False)
class CutProxy:
    target_port: int
    port: int = 0
    #: Connections accepted so far (each one a client connection attempt that got through).
    accepted: int = 0
    #: Connections refused while ``refusing``.
    refused: int = 0
    refusing: bool = False
    _cut_on_next_send: bool = False
    _forward_before_cut: bool = False
    _cut: trio.Event = attrs.field(factory=trio.Event)
    _accepted_one: trio.Event = attrs.field(factory=trio.Event)
    _thawed: trio.Event | None = None
    _pipes: set[trio.CancelScope] = attrs.field(factory=set)

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/"

    def cut(self) -> int:
        """Close every connection now (the client sees its TCP connection end); how many."""
        for scope in list(self._pipes):
            scope.cancel()
        return len(self._pipes)

    def freeze(self) -> None:
        """Forward nothing and close nothing from now on: the client's peer looks dead."""
        self._thawed = trio.Event()

    def thaw(self) -> None:
        if self._thawed is not None:
            self._thawed.set()
            self._thawed = None

    async def next_connection(self) -> None:
        """Until the proxy forwards its next new connection."""
        self._accepted_one = trio.Event()
        await self._accepted_one.wait()

    def cut_at_next_client_message(self, *, forward: bool = False) -> trio.Event:
        """Cut every connection when the client next sends anything: without forwarding it
        (an op lost on the way), or with ``forward=True`` right after forwarding it (the op
        reaches the server, its answer is lost); the returned event is set once that
        happened."""
        self._cut_on_next_send = True
        self._forward_before_cut = forward
        self._cut = trio.Event()
        return self._cut

    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, self._handle, listeners)
            task_status.started(self.port)

    async def _handle(self, client: trio.SocketStream) -> None:
        async with client:
            if self.refusing:  # as a gateway over its connection cap answers
                self.refused += 1
                with contextlib.suppress(trio.BrokenResourceError):
                    await client.send_all(
                        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                        b"Connection: close\r\n\r\n"
                    )
                return
            self.accepted += 1
            try:
                upstream = await trio.open_tcp_stream("127.0.0.1", self.target_port)
            except OSError:
                return
            self._accepted_one.set()
            async with upstream, trio.open_nursery() as nursery:
                scope = nursery.cancel_scope
                self._pipes.add(scope)
                nursery.start_soon(self._pipe, client, upstream, True, scope)
                nursery.start_soon(self._pipe, upstream, client, False, scope)
            self._pipes.discard(scope)

    async def _pipe(
        self,
        source: trio.SocketStream,
        sink: trio.SocketStream,
        from_client: bool,
        scope: trio.CancelScope,
    ) -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            while True:
                data = await source.receive_some(65536)
                if not data:
                    break
                if from_client and self._cut_on_next_send:
                    self._cut_on_next_send = False
                    if self._forward_before_cut:
                        await sink.send_all(data)
                    self.cut()
                    self._cut.set()
                    return
                if self._thawed is not None:
                    await self._thawed.wait()
                await sink.send_all(data)
        scope.cancel()


@asynccontextmanager
async def cut_proxy(target_port: int) -> AsyncIterator[CutProxy]:
    proxy = CutProxy(target_port=target_port)
    async with trio.open_nursery() as nursery:
        await nursery.start(proxy.serve)
        yield proxy
        nursery.cancel_scope.cancel()
