"""One receive channel, written once: the base every event channel of claude-trio builds on.

A session's ``events``, a fleet :class:`~.fleet.Subscription`, an ``open_tee`` output, a
gateway client's ``RemoteSession.events``, ``filter_events`` and ``observe`` all hand out
``trio.abc.ReceiveChannel`` objects. They differ only in where an item comes from; how it is
received, how the channel closes and how it iterates is this module's, modelled on trio's
``MemoryReceiveChannel`` (``trio/_channel.py``):

* ``receive_nowait()`` returns an item, or raises ``trio.WouldBlock`` (nothing yet),
  ``trio.EndOfChannel`` (the end), the channel's own error (a dropped subscriber's
  ``SlowSubscriberError``, a failed source's ``trio.BrokenResourceError``), or
  ``trio.ClosedResourceError`` once the receiver closed it.
* ``receive()`` is a checkpoint either way, like trio's: it checks for cancellation, takes an
  item if there is one, else waits and tries again. Cancelling a waiting ``receive()`` loses
  nothing.
* ``close()`` (sync, idempotent), ``aclose()`` and ``with channel:`` close the receive side:
  what is queued is discarded, and every task waiting in ``receive()`` wakes and raises
  ``trio.ClosedResourceError``, as every later call does.
* ``async for item in channel`` ends at ``trio.EndOfChannel`` (trio's ``ReceiveChannel``).
* ``statistics()`` returns a frozen :class:`ChannelStatistics`.

There is no ``clone()``: each of these channels is one consumer's view (one execution's
events, one subscription, one tee output). A second consumer subscribes again, or reads
through ``open_tee``; a clone would have to split one queue between readers for no use.

A subclass supplies where items come from, through four hooks: :meth:`_take` (the next item,
without waiting), :meth:`_wait_readable` (wait until ``_take`` may succeed; by default until
the producer calls :meth:`_wake`), :meth:`_discard` (what closing drops) and
:meth:`_queued` (for ``statistics()``). :class:`SourceView` is the base of the channels
that read another stream on demand, with no buffer of their own.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable
from types import TracebackType
from typing import Any, ClassVar, Self, TypeVar

import attrs
import trio

from claude_trio.protocol.errors import InvalidParamsError

T_co = TypeVar("T_co", covariant=True)

__all__ = ["BaseReceiveChannel", "ChannelStatistics", "SourceView", "check_source"]


@attrs.frozen(kw_only=True)
class ChannelStatistics:
    """A receive channel's state: ``queued`` items not received yet, tasks waiting in
    ``receive()``, and whether its receiver closed it."""

    queued: int
    tasks_waiting_receive: int
    closed: bool


class BaseReceiveChannel(trio.abc.ReceiveChannel[T_co]):
    """The receive side of every event channel (see the module docstring).

    Channels: whoever holds it owns it and closes it (``with channel:``, trio #746).
    Cancellation: ``receive()`` is a checkpoint; cancelling it loses nothing.
    Error handling: after ``close()``, ``trio.ClosedResourceError`` (saying which channel);
    otherwise what the subclass's :meth:`_take` raises.
    """

    #: The message of the ``trio.ClosedResourceError`` raised after ``close()``.
    _closed_message: ClassVar[str] = "this channel was closed"

    def __init__(self) -> None:
        self._closed = False
        self._readable = trio.Event()
        self._waiting = 0

    # -- what a subclass provides ---------------------------------------------------------------

    def _take(self) -> T_co:
        """The next item without waiting; ``trio.WouldBlock`` when there is none yet,
        ``trio.EndOfChannel`` at the end. Called only while the channel is open."""
        raise NotImplementedError

    async def _wait_readable(self) -> None:
        """Wait until :meth:`_take` may have something (or the channel was closed): by
        default until the producer calls :meth:`_wake`. Called after ``_take`` raised
        ``WouldBlock``, with no checkpoint in between, so no wake-up is lost."""
        if self._readable.is_set():
            self._readable = trio.Event()
        await self._readable.wait()

    def _wake(self) -> None:
        """Wake the tasks waiting in ``receive()``: an item, the end, or an error is ready."""
        self._readable.set()

    def _discard(self) -> None:
        """Drop what is queued (and detach from the producer) on ``close()``."""

    def _queued(self) -> int:
        """How many items are queued and not received yet (for ``statistics()``)."""
        return 0

    # -- the receive side, the same for every channel -------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise trio.ClosedResourceError(self._closed_message)

    def receive_nowait(self) -> T_co:
        """The next item if one is ready; else ``trio.WouldBlock``, ``trio.EndOfChannel`` at
        the end, ``trio.ClosedResourceError`` after ``close()``."""
        self._check_open()
        return self._take()

    async def receive(self) -> T_co:
        """The next item, waiting for it; ``trio.EndOfChannel`` at the end."""
        # The shape of trio's MemoryReceiveChannel.receive: a checkpoint either way.
        await trio.lowlevel.checkpoint_if_cancelled()
        while True:
            try:
                item = self.receive_nowait()
            except trio.WouldBlock:
                self._waiting += 1
                try:
                    await self._wait_readable()
                finally:
                    self._waiting -= 1
                continue
            await trio.lowlevel.cancel_shielded_checkpoint()
            return item

    def _close_receiving(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._discard()
        self._wake()

    def close(self) -> None:
        """Stop receiving: what is queued is discarded, waiting and later ``receive()`` calls
        raise ``trio.ClosedResourceError``. Idempotent; not a checkpoint."""
        self._close_receiving()

    async def aclose(self) -> None:
        """``close()``, then a checkpoint."""
        self._close_receiving()
        await trio.lowlevel.checkpoint()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._close_receiving()

    def statistics(self) -> ChannelStatistics:
        return ChannelStatistics(
            queued=self._queued(), tasks_waiting_receive=self._waiting, closed=self._closed
        )


def check_source(source: object) -> None:
    """Refuse what is not a stream of events (for the functions that read one)."""
    if not hasattr(source, "__aiter__"):
        raise InvalidParamsError(
            "events",
            source,
            "a stream of events: session.events, a subscription, any async iterable of events",
        )


class SourceView(BaseReceiveChannel[T_co]):
    """A receive channel that reads another stream (its source) on demand: no task, no
    buffer but the one item just read. Closing the view leaves the source open.

    A subclass decides what each item of the source becomes with :meth:`_admit` (``None``:
    pass it over) and may act at the source's end (:meth:`_source_ended`). A source with a
    ``receive_nowait`` (every channel of this module, trio's memory channels) is read
    without waiting by ``receive_nowait()``; any other async iterable only by ``receive()``.

    Cancellation: cancelling ``receive()`` loses nothing the source had not handed over.
    Error handling: the source's errors come out of ``receive()`` as they are; after the
    source's end, ``trio.EndOfChannel``.
    """

    _closed_message = "this view was closed"

    def __init__(self, source: AsyncIterable[Any]) -> None:
        check_source(source)
        super().__init__()
        self._source = source
        self._iterator: AsyncIterator[Any] = aiter(source)
        self._source_nowait: Callable[[], Any] | None = getattr(source, "receive_nowait", None)
        self._read: list[Any] = []  # at most one item, read from the source, not admitted yet
        self._source_done = False
        self._pulls: set[trio.CancelScope] = set()

    def _admit(self, item: Any) -> T_co | None:
        """What the source's ``item`` becomes for the receiver; ``None`` passes it over."""
        return item  # type: ignore[no-any-return]

    def _source_ended(self) -> None:
        """The source ended (once)."""

    def _end_of_source(self) -> trio.EndOfChannel:
        if not self._source_done:
            self._source_done = True
            self._source_ended()
        return trio.EndOfChannel()

    def _take(self) -> T_co:
        while True:
            if not self._read:
                if self._source_done:
                    raise trio.EndOfChannel
                if self._source_nowait is None:
                    raise trio.WouldBlock
                try:
                    self._read.append(self._source_nowait())
                except trio.EndOfChannel:
                    raise self._end_of_source() from None
            item = self._admit(self._read.pop())
            if item is not None:
                return item

    async def _wait_readable(self) -> None:
        # Read one item, under a scope close() cancels: a receiver waiting on the source
        # wakes with ClosedResourceError when the view is closed, as trio's would.
        with trio.CancelScope() as pull:
            self._pulls.add(pull)
            try:
                item = await anext(self._iterator)
            except StopAsyncIteration:
                self._end_of_source()
                # An iterator may end without a checkpoint; receive() stays one either way.
                await trio.lowlevel.checkpoint()
                return
            finally:
                self._pulls.discard(pull)
            self._read.append(item)

    def _wake(self) -> None:
        super()._wake()
        for pull in self._pulls:
            pull.cancel()

    def _discard(self) -> None:
        self._read.clear()

    def _queued(self) -> int:
        return len(self._read)
