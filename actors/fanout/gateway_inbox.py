"""A gateway connection's inbox: the ``inbox`` op (``protocol/fanout/wire.py``) served from the
host's inbox (``actors/fanout/inbox.py``), the principal's sessions only.

The connection (``actors/fanout/gateway_connection.py``) holds at most one
:class:`InboxFollower`; its writer asks :meth:`InboxFollower.next_frame` for the next inbox
frame after the replies and before the sessions' events.

Channels: the follower owns its :class:`~claude_trio.actors.fanout.inbox.InboxChannel` (closed
by :meth:`InboxFollower.close`, when the client stops following or the connection ends).
Cancellation: nothing here waits. Error handling: a client that falls behind gets a fresh
``inbox`` frame (a null ``id``), never an error and never unbounded memory.
"""

from __future__ import annotations

import trio

from claude_trio.actors.fanout.inbox import InboxChannel
from claude_trio.protocol.fanout.inbox import InboxArrived, InboxResolved, InboxSnapshot
from claude_trio.protocol.fanout.wire import (
    Frame,
    InboxArrivedFrame,
    InboxFrame,
    InboxResolvedFrame,
    encode_frame,
)

__all__ = ["InboxFollower"]


class InboxFollower:
    """One client's following of its principal's inbox."""

    def __init__(self, channel: InboxChannel, op_id: str, *, follow: bool = True) -> None:
        self._channel = channel
        self._follow = follow
        #: The id the first snapshot answers (the ``inbox`` op's); later ones have none.
        self._op_id: str | None = op_id

    def next_frame(self) -> str | None:
        """The next inbox frame to send, encoded; None when there is none now."""
        try:
            change = self._channel.receive_nowait()
        except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
            return None
        frame: Frame
        match change:
            case InboxSnapshot():
                frame = InboxFrame(id=self._op_id, items=change.items)
                self._op_id = None
                if not self._follow:
                    self._channel.close()  # the list only: nothing follows
            case InboxArrived():
                frame = InboxArrivedFrame(item=change.item)
            case InboxResolved():
                frame = InboxResolvedFrame(
                    session=change.session, request=change.request_id, outcome=change.outcome
                )
        return encode_frame(frame)

    def close(self) -> None:
        self._channel.close()
