"""The one receive-channel base (actors/channel.py): receive, nowait, close, iteration,
statistics, and the on-demand view over another stream."""

from __future__ import annotations

import collections
from typing import Any

import pytest
import trio
import trio.testing

from claude_trio.actors.channel import BaseReceiveChannel, ChannelStatistics, SourceView
from claude_trio.actors.fanout.fleet import Subscription
from claude_trio.actors.session.event_stream import EventStream
from claude_trio.cli.runner import _AnsweredEvents
from claude_trio.client import RemoteEvents
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.streams import EventFilter, ObservedStream, TeeOutput


class Box(BaseReceiveChannel[int]):
    """The smallest channel on the base: a queue and an end."""

    _closed_message = "this box was closed"

    def __init__(self) -> None:
        super().__init__()
        self.items: collections.deque[int] = collections.deque()
        self.ended = False
        self.discarded = 0

    def put(self, *items: int) -> None:
        self.items.extend(items)
        self._wake()

    def end(self) -> None:
        self.ended = True
        self._wake()

    def _take(self) -> int:
        if self.items:
            return self.items.popleft()
        if self.ended:
            raise trio.EndOfChannel
        raise trio.WouldBlock

    def _discard(self) -> None:
        self.discarded += 1
        self.items.clear()

    def _queued(self) -> int:
        return len(self.items)


@pytest.mark.parametrize(
    "cls",
    [EventStream, Subscription, TeeOutput, RemoteEvents, EventFilter, ObservedStream,
     _AnsweredEvents],
)  # fmt: skip
def test_every_event_channel_builds_on_the_base(cls: type) -> None:
    assert issubclass(cls, BaseReceiveChannel)
    # None writes its own receive loop or close protocol.
    for name in ("receive", "receive_nowait", "aclose", "__enter__", "__exit__"):
        assert getattr(cls, name) is getattr(BaseReceiveChannel, name), (cls, name)


async def test_items_come_out_in_order_nowait_or_not_and_the_loop_ends_at_the_end() -> None:
    box = Box()
    with pytest.raises(trio.WouldBlock):
        box.receive_nowait()
    box.put(1, 2, 3)
    assert box.receive_nowait() == 1
    assert await box.receive() == 2
    box.end()
    assert [item async for item in box] == [3]
    with pytest.raises(trio.EndOfChannel):
        box.receive_nowait()
    with pytest.raises(trio.EndOfChannel):
        await box.receive()


async def test_a_waiting_receive_gets_what_arrives_later(
    autojump_clock: trio.testing.MockClock,
) -> None:
    box = Box()
    got: list[tuple[int, float]] = []

    async def reader() -> None:
        got.append((await box.receive(), trio.current_time()))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        await trio.testing.wait_all_tasks_blocked()
        assert box.statistics() == ChannelStatistics(
            queued=0, tasks_waiting_receive=1, closed=False
        )
        await trio.sleep(2)
        box.put(7)
    assert got == [(7, 2.0)]
    assert box.statistics().tasks_waiting_receive == 0


async def test_two_waiting_receivers_each_get_one_item() -> None:
    box = Box()
    got: list[int] = []

    async def reader() -> None:
        got.append(await box.receive())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        nursery.start_soon(reader)
        await trio.testing.wait_all_tasks_blocked()
        assert box.statistics().tasks_waiting_receive == 2
        box.put(1)
        await trio.testing.wait_all_tasks_blocked()
        box.put(2)
    assert sorted(got) == [1, 2]


async def test_close_while_a_receiver_waits_wakes_it_with_closed_resource_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    box = Box()
    raised: list[tuple[str, float]] = []

    async def reader() -> None:
        with pytest.raises(trio.ClosedResourceError) as caught:
            await box.receive()
        raised.append((str(caught.value), trio.current_time()))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        await trio.testing.wait_all_tasks_blocked()
        await trio.sleep(3)
        box.close()
    assert raised == [("this box was closed", 3.0)]


async def test_close_discards_once_and_every_later_call_refuses() -> None:
    box = Box()
    box.put(1, 2)
    box.close()
    box.close()
    await box.aclose()
    with box:
        pass
    assert box.discarded == 1  # idempotent: closing again does nothing
    assert box.statistics() == ChannelStatistics(queued=0, tasks_waiting_receive=0, closed=True)
    with pytest.raises(trio.ClosedResourceError, match="this box was closed"):
        box.receive_nowait()
    with pytest.raises(trio.ClosedResourceError):
        await box.receive()
    with pytest.raises(trio.ClosedResourceError):
        async for _ in box:
            pass  # pragma: no cover


async def test_leaving_a_with_block_closes_it() -> None:
    with Box() as box:
        box.put(1)
    assert box.statistics().closed
    with pytest.raises(trio.ClosedResourceError):
        box.receive_nowait()


async def test_receive_is_a_checkpoint_even_with_an_item_ready_and_loses_nothing() -> None:
    box = Box()
    box.put(1)
    with trio.CancelScope() as scope:
        scope.cancel()
        with pytest.raises(trio.Cancelled):
            await box.receive()
    assert box.receive_nowait() == 1  # the cancelled receive did not take it


async def test_cancelling_a_waiting_receive_loses_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    box = Box()
    with trio.move_on_after(1) as scope:
        await box.receive()
    assert scope.cancelled_caught
    assert trio.current_time() == 1
    box.put(5)
    assert await box.receive() == 5


# -- SourceView: on demand, over another stream ---------------------------------------------------


class Evens(SourceView[int]):
    def __init__(self, source: Any) -> None:
        super().__init__(source)
        self.ends = 0

    def _admit(self, item: Any) -> int | None:
        return item if item % 2 == 0 else None

    def _source_ended(self) -> None:
        self.ends += 1


class Numbers:
    """A plain async iterable (no receive_nowait)."""

    def __init__(self, *items: int) -> None:
        self._items = list(items)

    def __aiter__(self) -> Numbers:
        return self

    async def __anext__(self) -> int:
        await trio.lowlevel.checkpoint()
        if not self._items:
            raise StopAsyncIteration
        return self._items.pop(0)


async def test_a_view_reads_its_source_on_demand_and_ends_with_it() -> None:
    evens = Evens(Numbers(1, 2, 3, 4, 5))
    with pytest.raises(trio.WouldBlock):  # a plain async iterable has no nowait
        evens.receive_nowait()
    assert [n async for n in evens] == [2, 4]
    assert evens.ends == 1
    with pytest.raises(trio.EndOfChannel):
        await evens.receive()
    assert evens.ends == 1


async def test_a_view_over_a_channel_takes_without_waiting_what_the_channel_holds() -> None:
    box = Box()
    evens = Evens(box)
    box.put(1, 3, 4, 5)
    assert evens.receive_nowait() == 4  # 1 and 3 passed over
    with pytest.raises(trio.WouldBlock):
        evens.receive_nowait()  # 5 was read and passed over
    box.end()
    with pytest.raises(trio.EndOfChannel):
        evens.receive_nowait()
    assert evens.ends == 1


async def test_closing_a_view_wakes_its_waiting_receiver_and_leaves_the_source_open(
    autojump_clock: trio.testing.MockClock,
) -> None:
    box = Box()
    evens = Evens(box)
    raised: list[float] = []

    async def reader() -> None:
        with pytest.raises(trio.ClosedResourceError, match="this view was closed"):
            await evens.receive()
        raised.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        await trio.testing.wait_all_tasks_blocked()
        assert box.statistics().tasks_waiting_receive == 1  # the view waits on its source
        await trio.sleep(4)
        evens.close()
    assert raised == [4.0]
    box.put(6)
    assert await box.receive() == 6  # the source is open and lost nothing


async def test_a_view_refuses_what_is_not_a_stream() -> None:
    with pytest.raises(InvalidParamsError, match="a stream of events"):
        Evens([1, 2])
