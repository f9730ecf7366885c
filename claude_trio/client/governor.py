"""The gateway client's view of the server's fleet governor: ``GatewayClient.follow_governor()``,
the ``governor`` op's figures and their changes (``protocol/fanout/wire.py``).

The client follows the server's figures from its first ``follow_governor()`` on (one
``governor`` op per connection, sent again after a reconnect) and keeps the latest. Each
consumer (:class:`GovernorFeed`) reads the latest figures it has not read yet: one that is
behind skips to the newest, so nothing queues.

Channels: none; every feed reads the one latest value. Cancellation: ``receive`` waits for a
change and may be cancelled. Error handling: once the client gives up, every feed's
``receive()`` raises its :class:`~claude_trio.errors.GatewayUnavailableError`.
"""

from __future__ import annotations

import trio

from claude_trio.protocol.fanout.governor import GovernorFigures
from claude_trio.protocol.fanout.wire import Frame, GovernorFrame, GovernorOp

__all__ = ["GovernorFeed", "RemoteGovernor"]


class RemoteGovernor:
    """What a client knows of the server's governor figures, and the feeds it tells."""

    def __init__(self) -> None:
        #: True once ``follow_governor()`` was called: every connection follows the figures.
        self.following = False
        self.figures: GovernorFigures | None = None
        #: How many times the server said the figures (0: not yet).
        self.version = 0
        self.error: BaseException | None = None
        self._changed = trio.Event()

    def op(self, op_id: str) -> GovernorOp:
        """The op that (re)starts following on a connection."""
        return GovernorOp(id=op_id)

    def on_reply(self, frame: Frame) -> None:
        """The ``governor`` op's answer (in the reader, before the changes after it)."""
        if isinstance(frame, GovernorFrame):
            self.on_frame(frame)

    def on_frame(self, frame: GovernorFrame) -> None:
        """Figures the server sent (its answer, or a change)."""
        self.figures = frame.governor
        self.version += 1
        self._wake()

    def give_up(self, error: BaseException) -> None:
        self.error = error
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def changed(self) -> None:
        """Wait for the next figures (or the client giving up)."""
        await self._changed.wait()

    def feed(self) -> GovernorFeed:
        return GovernorFeed(self)


class GovernorFeed:
    """One consumer's reading of the server's governor figures::

        async with client.follow_governor() as feed:
            async for figures in feed:  # the figures now, then each change
                print(governor_line(figures) if figures is not None else "no governor")

    ``figures`` is None when the server has no governor (or, on a cluster's gateway, when
    Redis cannot be read)."""

    def __init__(self, remote: RemoteGovernor) -> None:
        self._remote = remote
        self._read = 0

    @property
    def latest(self) -> GovernorFigures | None:
        """The latest figures the server said, read or not."""
        return self._remote.figures

    async def receive(self) -> GovernorFigures | None:
        """The latest figures this feed has not read yet; waits for a change when it has
        read them all."""
        remote = self._remote
        while True:
            if remote.error is not None:
                await trio.lowlevel.checkpoint()
                raise remote.error
            if remote.version > self._read:
                await trio.lowlevel.checkpoint()
                self._read = remote.version
                return remote.figures
            await remote.changed()

    def __aiter__(self) -> GovernorFeed:
        return self

    async def __anext__(self) -> GovernorFigures | None:
        return await self.receive()
