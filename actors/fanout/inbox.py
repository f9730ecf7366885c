"""A host's inbox: the user-input requests waiting across its sessions, and their changes.

::

    async with host.inbox() as inbox:           # any session host (actors/fanout/hosts.py)
        async for change in inbox:              # a snapshot first, then arrivals and resolutions
            match change:
                case InboxSnapshot(items=items): ...
                case InboxArrived(item=item):
                    await inbox.answer(item.session, item.request_id, "allow")
                case InboxResolved(): ...
        inbox.items                             # what waits now, as far as the changes read

The rules (what an item is, when it leaves, the bound on a slow consumer) are
``protocol/fanout/inbox.py``'s. This module holds :class:`InboxHub`, the list a host keeps and
the consumers it tells (a local fleet feeds it from the events it publishes, inline: no task
per session), and :class:`InboxChannel`, one consumer's receive channel.

Channels: an :class:`InboxChannel` is its consumer's (``with inbox:`` closes it and detaches
it from its hub). Cancellation: nothing here waits but ``receive()``, which loses nothing when
cancelled. Error handling: a consumer that falls behind gets a snapshot (never an error);
answering goes through the session's broker, so a late or bad answer is ``AnswerRejected``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from claude_trio.actors.channel import BaseReceiveChannel
from claude_trio.actors.extensions.broker import AnswerAccepted, AnswerRejected
from claude_trio.protocol.checks import check_int
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.fanout.inbox import (
    DEFAULT_INBOX_CHANGES,
    InboxArrived,
    InboxChange,
    InboxItem,
    InboxOutcome,
    InboxQueue,
    InboxResolved,
    InboxSnapshot,
    InboxState,
)

__all__ = ["Answerer", "InboxChannel", "InboxHub", "MaySee", "check_inbox_options"]

#: Whether a consumer may see a session of this principal (None: a session no gateway opened).
MaySee = Callable[[str | None], bool]
#: How a channel answers: ``(session_id, request_id, answer)`` -> the broker's outcome.
Answerer = Callable[[str, str, Any], Awaitable[AnswerAccepted | AnswerRejected]]


def check_inbox_options(max_changes: object, notify: object) -> None:
    check_int("max_changes", max_changes, 1)
    if notify is not None and not callable(notify):
        raise InvalidParamsError("notify", notify, "a callable or None")


class InboxChannel(BaseReceiveChannel[InboxChange]):
    """One consumer of an inbox: a receive channel of :data:`InboxChange` (a snapshot first,
    then arrivals and resolutions; a fresh snapshot after falling ``max_changes`` behind), and
    :meth:`answer`. :attr:`items` is what waits, as of the changes received so far.

    Channels: its consumer's; closing it detaches it from its source. Cancellation:
    ``receive()`` loses nothing. Error handling: ``trio.EndOfChannel`` once its host closed
    (or the connection of a gateway client ended, with ``trio.BrokenResourceError``).
    """

    _closed_message = "this inbox was closed"

    def __init__(
        self,
        snapshot: Callable[[], InboxSnapshot],
        answerer: Answerer,
        *,
        max_changes: int = DEFAULT_INBOX_CHANGES,
        notify: Callable[[], None] | None = None,
        on_close: Callable[[InboxChannel], None] | None = None,
    ) -> None:
        check_inbox_options(max_changes, notify)
        super().__init__()
        self._snapshot = snapshot
        self._answerer = answerer
        self._queue = InboxQueue(max_changes)
        self._notify = notify
        self._on_close = on_close
        self._state = InboxState()
        self._ended = False
        self._error: BaseException | None = None

    @property
    def items(self) -> tuple[InboxItem, ...]:
        """The requests waiting, as of the changes received so far (oldest first)."""
        return self._state.items

    @property
    def resyncs(self) -> int:
        """How many times this consumer fell behind and was served a snapshot instead."""
        return self._queue.resyncs

    async def answer(
        self, session_id: str, request_id: str, answer: Any
    ) -> AnswerAccepted | AnswerRejected:
        """Answer a waiting request through its session's broker (``SessionHandle.answer``:
        the first answer wins; a late one, or one for a session gone, is ``AnswerRejected``)."""
        return await self._answerer(session_id, request_id, answer)

    # -- the producer's side ------------------------------------------------------------------

    def offer(self, change: InboxChange) -> None:
        """A change for this consumer (never waits; rule 3 of ``protocol/fanout/inbox.py``)."""
        if self._closed or self._ended:
            return
        self._queue.offer(change)
        self._ready()

    def resync(self) -> None:
        """Serve a fresh snapshot next, whatever is queued (the source lost track)."""
        if self._closed or self._ended:
            return
        self._queue.snapshot_taken()
        self._queue.resync = True
        self._ready()

    def end(self, error: BaseException | None = None) -> None:
        """No change follows: ``trio.EndOfChannel`` (or ``error``) once the queue is read."""
        if self._ended:
            return
        self._ended = True
        self._error = error
        self._ready()

    def _ready(self) -> None:
        self._wake()
        if self._notify is not None:
            self._notify()

    # -- BaseReceiveChannel ---------------------------------------------------------------------

    def _take(self) -> InboxChange:
        queue = self._queue
        change: InboxChange | None
        if queue.resync and not self._ended:
            change = self._snapshot()
            queue.snapshot_taken()
        else:
            change = queue.take()
        if change is None:
            if self._ended:
                if self._error is not None:
                    raise self._error
                raise trio.EndOfChannel
            raise trio.WouldBlock
        self._state.apply(change)
        return change

    def _discard(self) -> None:
        self._queue.snapshot_taken()
        if self._on_close is not None:
            self._on_close(self)

    def _queued(self) -> int:
        return len(self._queue) + (1 if self._queue.resync else 0)


class InboxHub:
    """What waits across a host's sessions, and the consumers to tell of each change.

    A host calls :meth:`arrived`, :meth:`resolved` and :meth:`session_ended` as it sees its
    sessions' ``user_input_request`` / ``user_input_resolved`` events and their ends (all
    synchronous), and hands out :meth:`watch` channels.
    """

    def __init__(self, answerer: Answerer) -> None:
        self._answerer = answerer
        self._items: dict[tuple[str, str], InboxItem] = {}
        self._watches: dict[InboxChannel, MaySee | None] = {}  # insertion-ordered
        self._closed = False

    @staticmethod
    def now() -> float:
        """Wall-clock seconds for ``asked_at`` (``protocol/fanout/inbox.py`` rule 5)."""
        return time.time()

    @property
    def items(self) -> tuple[InboxItem, ...]:
        return tuple(self._items.values())

    @property
    def watches(self) -> int:
        """How many consumers follow the inbox now."""
        return len(self._watches)

    def arrived(self, item: InboxItem) -> None:
        self._items[(item.session, item.request_id)] = item
        self._tell(item.owner, InboxArrived(item=item))

    def resolved(self, session: str, request_id: str, outcome: InboxOutcome) -> None:
        item = self._items.pop((session, request_id), None)
        if item is not None:
            change = InboxResolved(session=session, request_id=request_id, outcome=outcome)
            self._tell(item.owner, change)

    def session_ended(self, session: str) -> None:
        """``session``'s execution ended: what it left open leaves as ``ended`` (rule 1)."""
        for key in [key for key in self._items if key[0] == session]:
            self.resolved(session, key[1], "ended")

    def snapshot(self, may_see: MaySee | None = None) -> InboxSnapshot:
        items = self._items.values()
        if may_see is not None:
            return InboxSnapshot(items=tuple(i for i in items if may_see(i.owner)))
        return InboxSnapshot(items=tuple(items))

    def watch(
        self,
        *,
        may_see: MaySee | None = None,
        max_changes: int = DEFAULT_INBOX_CHANGES,
        notify: Callable[[], None] | None = None,
    ) -> InboxChannel:
        """A new consumer, decided at once: a snapshot of what ``may_see`` admits, then its
        changes. ``notify`` is called (synchronously) whenever it becomes readable."""
        channel = InboxChannel(
            lambda: self.snapshot(may_see),
            self._answerer,
            max_changes=max_changes,
            notify=notify,
            on_close=self._detach,
        )
        if self._closed:
            channel.end()
        else:
            self._watches[channel] = may_see
        return channel

    def close(self) -> None:
        """The host closes: every consumer ends after what it has queued."""
        self._closed = True
        for channel in list(self._watches):
            channel.end()
        self._watches.clear()

    def _detach(self, channel: InboxChannel) -> None:
        self._watches.pop(channel, None)

    def _tell(self, owner: str | None, change: InboxChange) -> None:
        for channel, may_see in list(self._watches.items()):
            if may_see is None or may_see(owner):
                channel.offer(change)
