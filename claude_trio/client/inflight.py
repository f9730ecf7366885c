"""What the gateway client keeps per op in flight and per websocket connection
(``claude_trio/client/connection.py`` drives them)."""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable

import attrs
import trio
from trio_websocket import ConnectionClosed, WebSocketConnection

from claude_trio.protocol.fanout.wire import Frame, Op

__all__ = ["_Connection", "_Pending"]


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
    #: Why it was lost (the first reason given).
    why: str = "the connection was closed"
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

    async def send_ops(self) -> None:
        """Send the outbox's ops in order until the websocket closes; each is pending from
        just before it is sent (its reply may come at once)."""
        while True:
            await trio.lowlevel.checkpoint()
            while not self.outbox:
                self.wake = trio.Event()
                await self.wake.wait()
            pending = self.outbox.popleft()
            if pending.abandoned:
                continue
            self.pending[pending.op.id] = pending
            try:
                await self.ws.send_message(pending.text)
            except ConnectionClosed:
                return

    async def ping_until_silent(self, interval: float, *, pong_within: float) -> bool:
        """Ping every ``interval`` seconds until the websocket closes (False) or a pong does
        not come within ``pong_within`` seconds (True)."""
        await trio.lowlevel.checkpoint()
        for count in itertools.count(1):
            await trio.sleep(interval)
            with trio.move_on_after(pong_within) as deadline:
                await trio.lowlevel.checkpoint()
                try:
                    await self.ws.ping(count.to_bytes(8, "big"))
                except ConnectionClosed:
                    return False
            if deadline.cancelled_caught:
                return True
        raise AssertionError("unreachable")  # pragma: no cover
