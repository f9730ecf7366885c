"""The session's outgoing event stream: the one hop between the SDK's reader and the consumer.

Why not a plain ``trio.open_memory_channel``? Two kinds of producers feed the consumer:

* the SDK driver (the hot path: deltas, messages, results), which must feel backpressure so a slow
  consumer slows the CLI down instead of growing a buffer; and
* user actions (``push``, ``abort``) and the user-input broker, which must NEVER block on the
  consumer: a consumer that calls ``await session.push(...)`` from inside its own
  ``async for event in session.events`` loop would deadlock against a zero-buffer channel.

So the hot-path producer appends and then waits (``wait_writable``) while the queue holds
``capacity`` events or more, and the user-action producers append without waiting
(``send_nowait``). The latter are bounded by what
causes them - each is one accepted push, one question, one abort - and those are capped elsewhere
(``MAX_PENDING_PUSHES``, one request per CLI control request), so the queue stays bounded.

Events are appended in the order they were stamped (stamping and appending happen with no
checkpoint in between), so the consumer sees ``seq`` strictly increasing.

The driver forwards events in batches (one wake-up per batch of frames it drained), the consumer
receives them one at a time: :class:`EventStream` is a receive channel of events, built on
:class:`~.channel.BaseReceiveChannel` like every other event channel.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

import trio

from claude_trio.actors.channel import BaseReceiveChannel
from claude_trio.protocol.session.events import Event


class EventStream(BaseReceiveChannel[Event]):
    """Single-consumer receive side. ``async for event in stream`` ends after the producer's
    ``close()``; the consumer stops with ``aclose()`` (or ``with stream:``).

    ``close()`` here is the producer's end of stream (the session's), not the receive side's
    close of the other channels: the session owns it.
    """

    _closed_message = "the event stream was closed by its consumer"

    def __init__(
        self, *, capacity: int = 256, observer: Callable[[Event], None] | None = None
    ) -> None:
        """``observer``: called with every event as it is queued, in order, whether or not
        the consumer still reads (the session's traces, ``actors/session/tracing.py``)."""
        super().__init__()
        self._observer = observer
        self._queue: deque[Event] = deque()
        self._capacity = capacity
        # A producer that hit the capacity waits until the consumer took the queue down to this
        # (hysteresis): both then run in long stretches instead of handing over every event.
        self._low_water = capacity // 4
        self._producer_closed = False
        self._writable = trio.Event()
        self._writable.set()

    # -- producer side (the session owns it) ----------------------------------------------

    def send_nowait(self, events: Iterable[Event]) -> None:
        """Append without waiting (user actions, broker). Never raises for a full queue."""
        if self._producer_closed:
            raise trio.ClosedResourceError("event stream already closed by its producer")
        observer = self._observer
        if observer is not None:
            events = list(events)
            for event in events:
                observer(event)
        if self._closed:
            return  # nobody will ever read them; dropping is the documented behaviour of aclose()
        added = False
        for event in events:
            self._queue.append(event)
            added = True
        if added:
            self._wake()

    @property
    def over_capacity(self) -> bool:
        """True while a hot-path producer should wait (``wait_writable``) before adding more
        (unless it decided not to hold back: the session does not while it stops the CLI)."""
        return self.full and not self._closed

    @property
    def full(self) -> bool:
        """The queue holds ``capacity`` events or more (whether or not producers wait)."""
        return len(self._queue) >= self._capacity

    def wake_producers(self) -> None:
        """Make a producer waiting in ``wait_writable`` return now, whatever the queue holds.

        A stop needs the CLI's answer to its interrupt, which arrives on the very reader that
        backpressure parks while the consumer is behind (possibly the consumer that is stopping
        the session from inside its own loop): the session wakes it, and holds it back no more
        (``protocol/session/stop.py``, rule 3).
        """
        self._writable.set()

    async def wait_writable(self) -> None:
        """Wait until the consumer has taken the queue down to the low-water mark (or gave up,
        or the stream was closed), or ``wake_producers()`` was called. Always a checkpoint."""
        await trio.lowlevel.checkpoint()
        if (
            len(self._queue) > self._low_water
            and not self._closed
            and not self._producer_closed
        ):
            self._writable = trio.Event()
            await self._writable.wait()

    def close(self) -> None:
        """No more events: the consumer's loop ends once the queue is drained."""
        self._producer_closed = True
        self._wake()
        self._writable.set()

    @property
    def closed(self) -> bool:
        return self._producer_closed

    def __len__(self) -> int:
        return len(self._queue)

    # -- consumer side (public: receive, receive_nowait, aclose from the base) ------------------

    def _take(self) -> Event:
        if self._queue:
            event = self._queue.popleft()
            if len(self._queue) <= self._low_water:
                self._writable.set()
            return event
        if self._producer_closed:
            raise trio.EndOfChannel
        raise trio.WouldBlock

    def _discard(self) -> None:
        # aclose(): queued and future events are discarded, producers never block again.
        self._queue.clear()
        self._writable.set()

    def _queued(self) -> int:
        return len(self._queue)
