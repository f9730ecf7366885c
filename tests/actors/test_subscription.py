"""A subscription as a serving layer uses it: told when it becomes readable, read in batches."""

from __future__ import annotations

import pytest
import trio

from claude_trio.actors.fanout.subscription import Subscription
from claude_trio.protocol.errors import SlowSubscriberError
from claude_trio.protocol.fanout.replay import Entry
from claude_trio.protocol.session.events import TextDelta, ToolUse


class _Owner:
    """What a subscription follows: only its id and the detach it calls on close."""

    def __init__(self) -> None:
        self.detached: list[Subscription] = []

    @property
    def id(self) -> str:
        return "s1"

    def _detach(self, subscription: Subscription) -> None:
        self.detached.append(subscription)


def delta(seq: int, message: str = "m1") -> Entry:
    return Entry.of(TextDelta(text=f"d{seq}", seq=seq, turn=1, message_id=message, index=0))


def tool(seq: int) -> Entry:
    return Entry.of(ToolUse(tool_use_id=f"t{seq}", name="Bash", input={}, seq=seq, turn=1))


def subscription(
    head: list[Entry] | None = None, *, max_queue: int = 100
) -> tuple[Subscription, list[int]]:
    calls: list[int] = []
    sub = Subscription(
        _Owner(),
        head or [],
        max_queue=max_queue,
        max_bytes=1 << 20,
        notify=lambda: calls.append(len(calls) + 1),
    )
    return sub, calls


def seqs(entries: list[Entry]) -> list[int]:
    return [e.seq for e in entries]


def test_notify_comes_when_the_subscription_becomes_readable_not_for_each_event() -> None:
    sub, calls = subscription()
    sub._offer(tool(1))
    sub._offer(tool(2))
    sub._offer(tool(3))
    assert len(calls) == 1  # readable once; the next two queue behind it
    assert seq_of(sub.receive_entry_nowait()) == 1
    sub._offer(tool(4))
    assert len(calls) == 1  # still readable: its reader has not emptied it
    assert seqs(sub.receive_entries_nowait(10, 1 << 20)) == [2, 3, 4]
    with pytest.raises(trio.WouldBlock):
        sub.receive_entries_nowait(10, 1 << 20)
    sub._offer(tool(5))
    assert len(calls) == 2  # emptied, so readable again
    sub._end()
    assert len(calls) == 3  # the end is always told


def seq_of(entry: Entry) -> int:
    return entry.seq


def test_a_drop_is_told_even_while_events_are_queued() -> None:
    sub, calls = subscription(max_queue=2)
    sub._offer(tool(1))
    sub._offer(tool(2))
    sub._offer(tool(3))  # no room and nothing to merge: dropped
    assert len(calls) == 2
    assert sub.dropped_reason is not None
    with pytest.raises(SlowSubscriberError):
        sub.receive_entries_nowait(10, 1 << 20)


def test_several_are_read_at_once_within_the_bounds_asked_and_the_head_first() -> None:
    head = [tool(1), tool(2)]
    sub, _ = subscription(head)
    for seq in range(3, 9):
        sub._offer(tool(seq))
    # The re-shown head and the replay come one at a time, then live events in batches.
    assert seqs(sub.receive_entries_nowait(4, 1 << 20)) == [1]
    assert seqs(sub.receive_entries_nowait(4, 1 << 20)) == [2]
    assert seqs(sub.receive_entries_nowait(4, 1 << 20)) == [3, 4, 5, 6]
    one_size = tool(7).size
    assert seqs(sub.receive_entries_nowait(4, one_size + 1)) == [7, 8]  # stops at the size
    sub._end()
    with pytest.raises(trio.EndOfChannel):
        sub.receive_entries_nowait(4, 1 << 20)
    sub.close()
    with pytest.raises(trio.ClosedResourceError):
        sub.receive_entries_nowait(4, 1 << 20)


def test_merged_deltas_are_read_as_one_entry_in_a_batch() -> None:
    sub, _ = subscription(max_queue=2)
    for seq in range(1, 6):
        sub._offer(delta(seq))  # a full queue merges the deltas of one message
    got = sub.receive_entries_nowait(10, 1 << 20)
    texts = [e.event.text for e in got if isinstance(e.event, TextDelta)]
    assert "".join(texts) == "d1d2d3d4d5"
    assert seqs(got)[-1] == 5
    assert sub.queued_bytes == 0


async def test_a_reader_waiting_in_receive_gets_every_event_of_bursts() -> None:
    """Telling only when it becomes readable loses no wake-up: a reader that waits in
    ``receive()`` between bursts gets every event."""
    sub, _ = subscription(max_queue=1000)
    got: list[int] = []

    async def read() -> None:
        async for event in sub:
            got.append(event.seq)

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            seq = 0
            for burst in (1, 3, 2, 5):
                await trio.testing.wait_all_tasks_blocked()  # the reader waits in receive()
                for _ in range(burst):
                    seq += 1
                    sub._offer(tool(seq))
                if burst == 2:  # and once while it has read only part of the last burst
                    await trio.lowlevel.checkpoint()
                    sub._offer(tool(seq := seq + 1))
                await trio.testing.wait_all_tasks_blocked()
                assert got == list(range(1, seq + 1))  # read before the end wakes it
            sub._end()
    assert got == list(range(1, 13))
