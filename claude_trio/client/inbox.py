"""The gateway client's inbox: ``GatewayClient.inbox()``, the ``inbox`` op's list and changes
(``protocol/fanout/wire.py``) as the same :class:`~claude_trio.actors.fanout.inbox.InboxChannel`
a local fleet hands out.

The client follows the server's inbox from its first ``inbox()`` on (one ``inbox`` op per
connection, sent again after a reconnect), keeps the list as the server says it
(:class:`~claude_trio.protocol.fanout.inbox.InboxState`) and offers each change to its
consumers. A consumer that falls behind gets a snapshot of that list; after a reconnect every
consumer gets a fresh one (what changed meanwhile is in it).

Channels: each consumer's channel is its own (closing it detaches it). Cancellation: nothing
here waits but the ``inbox`` op's reply. Error handling: once the client gives up, every
consumer's ``receive()`` raises its :class:`~claude_trio.errors.GatewayUnavailableError`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio

from claude_trio.actors.extensions.broker import AnswerAccepted, AnswerRejected
from claude_trio.actors.fanout.inbox import InboxChannel
from claude_trio.protocol.errors import RemoteOpError
from claude_trio.protocol.extensions.approvals import ApprovalAnswer
from claude_trio.protocol.fanout.inbox import (
    DEFAULT_INBOX_CHANGES,
    InboxArrived,
    InboxResolved,
    InboxSnapshot,
    InboxState,
)
from claude_trio.protocol.fanout.wire import (
    AnswerOp,
    Frame,
    InboxArrivedFrame,
    InboxFrame,
    InboxOp,
    InboxResolvedFrame,
    ReplyFrame,
)

__all__ = ["RemoteInbox"]


class RemoteInbox:
    """What a client knows of the server's inbox, and the consumers it tells."""

    def __init__(
        self, op_id: Callable[[], str], request: Callable[[AnswerOp], Awaitable[ReplyFrame]]
    ) -> None:
        #: The client's next op id, and its ``answer`` op sent (``GatewayClient._request``).
        self._op_id = op_id
        self._request = request
        self._state = InboxState()
        self._channels: dict[InboxChannel, None] = {}
        #: True once ``inbox()`` was called: every connection follows the server's inbox.
        self.following = False

    def op(self, op_id: str) -> InboxOp:
        """The op that (re)starts following on a connection."""
        return InboxOp(id=op_id)

    def channel(self, max_changes: int = DEFAULT_INBOX_CHANGES) -> InboxChannel:
        """A new consumer: a snapshot of the list as the server last said it, then changes."""
        channel = InboxChannel(
            lambda: InboxSnapshot(items=self._state.items),
            self._answer,
            max_changes=max_changes,
            on_close=self._detach,
        )
        self._channels[channel] = None
        return channel

    def on_reply(self, frame: Frame) -> None:
        """The ``inbox`` op's reply (in the reader, before the changes after it)."""
        if isinstance(frame, InboxFrame):
            self._replace(frame)

    def on_frame(self, frame: InboxFrame | InboxArrivedFrame | InboxResolvedFrame) -> None:
        """A frame of the server's inbox that answers no op of ours."""
        match frame:
            case InboxFrame():
                self._replace(frame)
            case InboxArrivedFrame():
                self._tell(InboxArrived(item=frame.item))
            case InboxResolvedFrame():
                change = InboxResolved(
                    session=frame.session, request_id=frame.request, outcome=frame.outcome
                )
                self._tell(change)

    def give_up(self, error: BaseException) -> None:
        for channel in list(self._channels):
            channel.end(error)

    def _replace(self, frame: InboxFrame) -> None:
        self._state.apply(InboxSnapshot(items=frame.items))
        for channel in list(self._channels):
            channel.resync()

    def _tell(self, change: InboxArrived | InboxResolved) -> None:
        self._state.apply(change)
        for channel in list(self._channels):
            channel.offer(change)

    def _detach(self, channel: InboxChannel) -> None:
        self._channels.pop(channel, None)

    async def _answer(
        self, session_id: str, request_id: str, answer: Any
    ) -> AnswerAccepted | AnswerRejected:
        """The gateway's ``answer`` op (the server's broker decides, as for a local session)."""
        if isinstance(answer, ApprovalAnswer):
            answer = answer.to_json()
        op = AnswerOp(id=self._op_id(), session=session_id, request=request_id, answer=answer)
        try:
            reply = await self._request(op)
        except RemoteOpError as exc:  # unknown_session: gone, or never this principal's
            await trio.lowlevel.checkpoint()
            return AnswerRejected(request_id=request_id, reason=exc.message)
        if reply.ok:
            return AnswerAccepted(request_id=request_id)
        return AnswerRejected(request_id=request_id, reason=reply.reason or "refused")

