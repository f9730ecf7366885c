"""EventStream: the one hop between the SDK's reader and the consumer."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from claude_trio import TextDelta
from claude_trio.session import EventStream


def deltas(n: int, start: int = 0) -> list[TextDelta]:
    return [TextDelta(text=str(i), seq=i + 1) for i in range(start, start + n)]


async def test_events_come_out_in_order_and_the_loop_ends_after_close() -> None:
    stream = EventStream(capacity=8)
    stream.send_nowait(deltas(3))
    stream.close()
    assert [e.text async for e in stream] == ["0", "1", "2"]


async def test_user_actions_never_wait_even_past_capacity() -> None:
    stream = EventStream(capacity=4)
    stream.send_nowait(deltas(10))  # a push from inside the consumer's own loop must not block
    assert len(stream) == 10
    assert stream.over_capacity


async def test_a_producer_over_capacity_waits_until_the_low_water_mark() -> None:
    stream = EventStream(capacity=8)  # low water: 2
    stream.send_nowait(deltas(8))
    assert stream.over_capacity
    woke: list[int] = []

    async def producer() -> None:
        await stream.wait_writable()
        woke.append(len(stream))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(producer)
        await trio.testing.wait_all_tasks_blocked()
        for expected_left in (7, 6, 5, 4, 3):
            stream.receive_nowait()
            await trio.testing.wait_all_tasks_blocked()
            assert woke == [], f"woke with {expected_left} still queued"
        stream.receive_nowait()  # 2 left: the low-water mark
    assert woke == [2]


@pytest.mark.parametrize("how", ["consumer_gone", "producer_closed", "woken"])
async def test_a_waiting_producer_is_released_when_the_stream_ends_or_is_woken(
    how: str, autojump_clock: trio.testing.MockClock
) -> None:
    stream = EventStream(capacity=2)
    stream.send_nowait(deltas(2))
    released: list[float] = []

    async def producer() -> None:
        await stream.wait_writable()
        released.append(trio.current_time())

    with trio.fail_after(1):  # a producer left waiting would hang here
        async with trio.open_nursery() as nursery:
            nursery.start_soon(producer)
            await trio.testing.wait_all_tasks_blocked()
            assert released == []  # it does wait while the consumer is behind
            await trio.sleep(0.5)
            if how == "consumer_gone":
                await stream.aclose()
            elif how == "woken":
                stream.wake_producers()
            else:
                stream.close()
    assert released == [0.5]


async def test_after_the_consumer_closed_events_are_dropped_and_receive_refuses() -> None:
    stream = EventStream()
    stream.send_nowait(deltas(2))
    await stream.aclose()
    stream.send_nowait(deltas(1))
    with pytest.raises(trio.ClosedResourceError):
        stream.receive_nowait()


async def test_sending_after_the_producer_closed_is_a_bug_and_says_so() -> None:
    stream = EventStream()
    stream.close()
    with pytest.raises(trio.ClosedResourceError, match="closed by its producer"):
        stream.send_nowait(deltas(1))


async def test_receive_waits_and_can_be_cancelled_while_waiting(
    autojump_clock: trio.testing.MockClock,
) -> None:
    stream = EventStream()
    start = trio.current_time()
    with trio.move_on_after(1) as scope:
        await stream.receive()
    assert scope.cancelled_caught
    assert trio.current_time() - start == 1
