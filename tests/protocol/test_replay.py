"""The replay buffer and the slow-subscriber queue: what is kept, merged, dropped, and counted."""

from __future__ import annotations

import gc
import json
import tracemalloc
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import claude_trio.protocol.fanout.replay as replay
from claude_trio.protocol.fanout.codec import event_from_json, event_text
from claude_trio.protocol.fanout.replay import (
    ENTRY_OVERHEAD,
    Entry,
    ReplayBuffer,
    SubscriberQueue,
    entry_size,
    slim,
    text_entry_size,
)
from claude_trio.protocol.fanout.wire import EventFrame, encode_frame, event_frame_text
from claude_trio.protocol.session.events import (
    AssistantMessage,
    Event,
    NormalizedMessage,
    Passthrough,
    Result,
    TextContent,
    TextDelta,
    ThinkingDelta,
    ToolResult,
    ToolUse,
    ToolUseContent,
)
from claude_trio.protocol.session.usage import Usage


def delta(text: str, seq: int, *, mid: str = "m", index: int = 0) -> TextDelta:
    return TextDelta(text=text, seq=seq, turn=1, message_id=mid, index=index, raw={"frame": seq})


def tool(seq: int) -> ToolUse:
    return ToolUse(tool_use_id=f"t{seq}", name="Bash", input={"command": "ls"}, seq=seq, turn=1)


def entry(event: Event) -> Entry:
    return Entry.of(event)


def take_all(queue: SubscriberQueue) -> list[Event]:
    out: list[Event] = []
    while (item := queue.take()) is not None:
        out.append(item.event)
    return out


# -- what is kept ------------------------------------------------------------------------------


def test_slim_drops_raw_and_keeps_everything_else() -> None:
    event = delta("abc", 3)
    kept = slim(event)
    assert kept.raw is None
    assert kept == event  # raw does not take part in equality
    assert kept.text == "abc"
    bare = TextDelta(text="x", seq=1)
    assert slim(bare) is bare  # nothing to strip: no copy


def test_an_entry_holds_the_event_without_raw() -> None:
    e = Entry.of(delta("abc", 3))
    assert e.event.raw is None
    assert e.seq == 3
    assert e.size == entry_size(e.event)
    assert e.wire is None


def test_sizes_grow_with_the_text_and_count_utf8() -> None:
    small = entry_size(TextDelta(text="ab", seq=1))
    big = entry_size(TextDelta(text="ab" * 1000, seq=1))
    assert big - small == 2 * 1998
    assert entry_size(TextDelta(text="é", seq=1)) - entry_size(TextDelta(text="e", seq=1)) == 2
    assert small >= ENTRY_OVERHEAD


def test_a_deeply_nested_value_is_counted_without_recursing_through_it() -> None:
    value: Any = "leaf"
    for _ in range(5000):
        value = [value]
    size = entry_size(ToolResult(tool_use_id="t", content=value, seq=1))
    assert size < ENTRY_OVERHEAD + 64 * 1024


def _events_of_every_shape(i: int) -> list[Event]:
    mid = "msg_" + uuid.uuid4().hex[:20]
    usage = Usage()
    return [
        TextDelta(text=f"ab{i % 10}defgh", seq=i, turn=1, message_id=mid, index=0),
        ThinkingDelta(text="x" * 4000 + str(i), seq=i, turn=1, message_id=mid, index=0),
        ToolUse(
            tool_use_id="toolu_" + uuid.uuid4().hex,
            name="Bash",
            input={"command": f"ls -la {i}", "description": "list"},
            seq=i,
        ),
        ToolResult(
            tool_use_id="toolu_" + uuid.uuid4().hex,
            content=[{"type": "text", "text": "line\n" * 50 + str(i)}],
            seq=i,
        ),
        AssistantMessage(
            message=NormalizedMessage(
                role="assistant",
                content=(
                    TextContent(text="hello " * 100 + str(i)),
                    ToolUseContent(tool_use_id=f"t{i}", name="Read", input={"file_path": "/a"}),
                ),
                message_id=mid,
                model="claude-sonnet-4-5",
            ),
            seq=i,
        ),
        Result(
            subtype="success",
            is_error=False,
            session_id=str(uuid.uuid4()),
            usage=usage,
            execution_usage=usage,
            session_usage=usage,
            text="done " * 20 + str(i),
            seq=i,
            final=True,
        ),
        Passthrough(
            frame_type="system:status",
            data={"type": "system", "status": None, "uuid": str(uuid.uuid4())},
            seq=i,
        ),
    ]


@pytest.mark.parametrize("shape", range(7), ids=lambda i: f"shape{i}")
def test_counted_bytes_are_a_bound_on_what_the_entries_really_hold(shape: int) -> None:
    # The entries, and the frame text the gateway caches beside each.
    def made(i: int) -> Entry:
        e = Entry.of(_events_of_every_shape(i)[shape])
        e.wire = encode_frame(EventFrame(session=str(uuid.uuid4()), event=e.event))
        return e

    assert_counted_bytes_bound_what_is_held(made)


def assert_counted_bytes_bound_what_is_held(made: Callable[[int], Entry], n: int = 500) -> None:
    """What the counted bytes promise: the memory really held by ``n`` entries ``made(i)``
    (all they hold) is at most 1.25x the count, and the count is not a wild overestimate."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        entries = [made(i) for i in range(n)]
        gc.collect()
        real = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    counted = sum(e.size for e in entries)
    assert real <= 1.25 * counted, (real, counted)
    assert counted <= 2.5 * real, (real, counted)


# -- the replay buffer -------------------------------------------------------------------------


def test_the_buffer_evicts_the_oldest_past_max_events() -> None:
    buffer = ReplayBuffer(max_events=3, max_bytes=10**9)
    for seq in range(1, 6):
        buffer.append(delta("x", seq))
    assert [e.seq for e in buffer.entries()] == [3, 4, 5]
    assert buffer.evicted_through == 2
    assert buffer.oldest_seq == 3
    assert buffer.after(1) is None  # seq 2 is gone: a resync
    after = buffer.after(2)
    assert after is not None
    assert [e.seq for e in after] == [3, 4, 5]
    assert buffer.after(5) == []


def test_the_buffer_evicts_by_bytes_and_always_keeps_the_newest() -> None:
    one = entry_size(TextDelta(text="x" * 100, seq=1))
    buffer = ReplayBuffer(max_events=1000, max_bytes=3 * one)
    for seq in range(1, 6):
        buffer.append(TextDelta(text="x" * 100, seq=seq))
    assert [e.seq for e in buffer.entries()] == [3, 4, 5]
    assert buffer.bytes == 3 * one
    huge = buffer.append(TextDelta(text="y" * 100_000, seq=6))
    assert buffer.entries() == [huge]  # alone over the limit, but kept: it is the newest
    assert buffer.bytes == huge.size
    assert buffer.evicted_through == 5


def test_the_buffer_stores_events_without_raw() -> None:
    buffer = ReplayBuffer(max_events=10, max_bytes=10**9)
    kept = buffer.append(delta("abc", 1))
    assert kept.event.raw is None


# -- a subscriber's queue ----------------------------------------------------------------------


def test_the_queue_appends_while_it_fits_and_merges_into_the_last_delta_when_full() -> None:
    queue = SubscriberQueue(max_events=3, max_bytes=10**9)
    for seq, text in enumerate(["a", "b", "c", "d", "e"], start=1):
        assert queue.offer(entry(delta(text, seq)))
    assert len(queue) == 3
    assert queue.coalesced == 2
    got = take_all(queue)
    assert [(e.text, e.seq) for e in got] == [("a", 1), ("b", 2), ("cde", 5)]  # type: ignore[union-attr]
    assert got[-1].raw is None
    assert queue.bytes == 0


def test_a_full_queue_compacts_before_it_drops() -> None:
    queue = SubscriberQueue(max_events=4, max_bytes=10**9)
    for event in [delta("a", 1), delta("b", 2), delta("c", 3), tool(4)]:
        assert queue.offer(entry(event))
    # Full; a tool cannot merge into the tool, but a, b, c merge into one and make room.
    assert queue.offer(entry(tool(5)))
    assert [e.kind for e in take_all(queue)] == ["text_delta", "tool_use", "tool_use"]


def test_a_full_queue_with_nothing_to_merge_drops_the_subscriber() -> None:
    queue = SubscriberQueue(max_events=2, max_bytes=10**9)
    assert queue.offer(entry(tool(1)))
    assert queue.offer(entry(delta("a", 2)))
    assert not queue.offer(entry(tool(3)))
    assert queue.dropped_reason is not None
    assert queue.dropped_reason.startswith("slow consumer: 2 events queued")
    assert len(queue) == 0
    assert queue.bytes == 0
    assert not queue.offer(entry(delta("b", 4)))  # dropped for good
    assert queue.take() is None


def test_merging_frees_slots_never_bytes_so_a_stalled_subscriber_is_dropped_by_bytes() -> None:
    size = entry_size(TextDelta(text="x" * 1000, seq=1, message_id="m", index=0))
    queue = SubscriberQueue(max_events=2, max_bytes=50 * size)
    offered = 0
    for seq in range(1, 1000):
        if not queue.offer(entry(delta("x" * 1000, seq))):
            break
        offered += 1
        assert queue.bytes <= 50 * size
    assert offered == 50
    assert queue.dropped_reason is not None
    assert "bytes queued" in queue.dropped_reason
    assert queue.bytes == 0


def test_an_empty_queue_takes_one_entry_of_any_size() -> None:
    queue = SubscriberQueue(max_events=5, max_bytes=100)
    assert queue.offer(entry(TextDelta(text="z" * 10_000, seq=1)))
    assert not queue.offer(entry(tool(2)))  # but nothing more


def test_merging_joins_the_pieces_once_when_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    joins: list[int] = []
    real_merged = replay.merged

    def counting(first: Any, texts: Iterable[str], last_seq: int) -> Event:
        texts = list(texts)
        joins.append(len(texts))
        return real_merged(first, texts, last_seq)

    monkeypatch.setattr(replay, "merged", counting)
    queue = SubscriberQueue(max_events=1, max_bytes=10**12)
    deltas = [delta(f"{i:05d}", i) for i in range(1, 20_001)]
    for d in deltas:
        assert queue.offer(entry(d))
    assert joins == []  # 19,999 merges and no text copied yet
    (merged,) = take_all(queue)
    assert joins == [20_000]
    assert merged.text == "".join(d.text for d in deltas)  # type: ignore[union-attr]
    assert merged.seq == 20_000


def test_compaction_visits_each_entry_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # A queue kept full by runs that merge only at compaction: every offer that does not
    # merge into the last item compacts, and each compaction must look only at what came
    # since the previous one.
    visited = 0
    real = replay.can_merge

    def counting(a: Event, b: Event) -> bool:
        nonlocal visited
        visited += 1
        return real(a, b)

    monkeypatch.setattr(replay, "can_merge", counting)
    queue = SubscriberQueue(max_events=100, max_bytes=10**12)
    offers = 0
    seq = 0
    for block in range(5000):
        for _ in range(2):
            seq += 1
            queue.offer(entry(delta("ab", seq, index=block)))
            offers += 1
        if len(queue) >= 100 and block % 2:
            take_all(queue)
    assert queue.dropped_reason is None
    assert visited <= 4 * offers


# -- properties --------------------------------------------------------------------------------

_item = st.one_of(
    st.tuples(st.just("delta"), st.sampled_from([("m1", 0), ("m1", 1), ("m2", 0)]), st.text()),
    st.tuples(st.just("tool"), st.none(), st.none()),
    st.tuples(st.just("take"), st.none(), st.none()),
)


@settings(max_examples=300, deadline=None)
@given(
    ops=st.lists(_item, max_size=80),
    max_events=st.integers(1, 6),
    max_bytes=st.integers(600, 6000),
)
def test_the_queue_loses_nothing_until_it_drops_and_keeps_its_bounds(
    ops: list[tuple[str, Any, Any]], max_events: int, max_bytes: int
) -> None:
    queue = SubscriberQueue(max_events=max_events, max_bytes=max_bytes)
    offered: list[Event] = []
    taken: list[Event] = []
    seq = 0
    for kind, block, text in ops:
        if kind == "take":
            got = queue.take()
            if got is not None:
                taken.append(got.event)
            continue
        seq += 1
        event: Event = (
            delta(text, seq, mid=block[0], index=block[1]) if kind == "delta" else tool(seq)
        )
        ok = queue.offer(entry(event))
        if not ok:
            assert queue.dropped_reason is not None
            assert len(queue) == 0
            assert queue.bytes == 0
            return
        offered.append(event)
        assert len(queue) <= max_events
        assert queue.bytes <= max_bytes or len(queue) == 1
    taken.extend(take_all(queue))
    assert queue.bytes == 0
    # Nothing lost: the same tools in the same places, the same text per block, in order.
    assert [e for e in taken if isinstance(e, ToolUse)] == [
        e for e in offered if isinstance(e, ToolUse)
    ]
    assert "|".join(_texts(taken)) == "|".join(_texts(offered))
    seqs = [e.seq for e in taken]
    assert seqs == sorted(set(seqs))
    if offered:
        assert taken[-1].seq == offered[-1].seq


@settings(max_examples=300, deadline=None)
@given(
    ops=st.lists(_item, max_size=80),
    max_events=st.integers(1, 6),
    limit=st.integers(1, 4),
    max_size=st.integers(1, 8000),
)
@example(  # a merge made before a batch is taken does not hide later merges
    ops=[
        *[("delta", ("m1", 0), "a")] * 2,
        *[("tool", None, None)] * 2,
        ("take", None, None),
        *[("delta", ("m2", 0), "b")] * 2,
        *[("tool", None, None)] * 2,
    ],
    max_events=3,
    limit=3,
    max_size=8000,
)
def test_taking_several_at_once_takes_what_one_at_a_time_would(
    ops: list[tuple[str, Any, Any]], max_events: int, limit: int, max_size: int
) -> None:
    """``take_many`` is ``take`` repeated: the same entries (merged runs joined), bytes and
    length, within its bounds."""
    one = SubscriberQueue(max_events=max_events, max_bytes=6000)
    many = SubscriberQueue(max_events=max_events, max_bytes=6000)
    seq = 0
    for kind, block, text in ops:
        if kind == "take":
            empty = len(many) == 0
            batch = many.take_many(limit, max_size)
            singles = [one.take() for _ in batch]
            assert [(e.event, e.size) for e in batch] == [
                (e.event, e.size) for e in singles if e is not None
            ]
            assert bool(batch) != empty
            assert len(batch) <= limit
            assert sum(e.size for e in batch[:-1]) < max_size  # it stops once the sum reaches it
            if len(batch) < limit and sum(e.size for e in batch) < max_size:
                assert len(many) == 0  # it stops early only at a bound
        else:
            seq += 1
            event: Event = (
                delta(text, seq, mid=block[0], index=block[1]) if kind == "delta" else tool(seq)
            )
            assert one.offer(entry(event)) == many.offer(entry(event))
        assert (len(many), many.bytes, many.coalesced) == (len(one), one.bytes, one.coalesced)
        if one.dropped_reason is not None:
            return
    rest = many.take_many(len(many) + 1, 1 << 30)
    assert [e.event for e in rest] == take_all(one)
    assert many.bytes == 0


def _texts(events: list[Event]) -> list[str]:
    """The text of each maximal run of mergeable deltas (merging must not cross runs)."""
    out: list[str] = []
    previous: Event | None = None
    for event in events:
        if isinstance(event, TextDelta):
            if previous is not None and replay.can_merge(previous, event):
                out[-1] += event.text
            else:
                out.append(event.text)
        else:
            out.append("<tool>")
        previous = event
    return out


@settings(max_examples=100, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 3000), min_size=1, max_size=60),
    max_events=st.integers(1, 20),
    max_bytes=st.integers(1, 40_000),
)
def test_the_buffer_keeps_the_newest_suffix_within_its_bounds(
    sizes: list[int], max_events: int, max_bytes: int
) -> None:
    buffer = ReplayBuffer(max_events=max_events, max_bytes=max_bytes)
    for seq, size in enumerate(sizes, start=1):
        buffer.append(TextDelta(text="x" * size, seq=seq))
        held = [e.seq for e in buffer.entries()]
        assert held == list(range(seq - len(held) + 1, seq + 1))  # the newest, contiguous
        assert len(held) <= max_events
        assert buffer.bytes <= max_bytes or len(held) == 1
        assert buffer.bytes == sum(e.size for e in buffer.entries())
        assert buffer.evicted_through == held[0] - 1


# -- entries kept as text ---------------------------------------------------------------------


def test_an_entry_kept_as_text_is_decoded_once_when_its_event_is_first_read() -> None:
    event = slim(delta("héllo", 7))
    text = event_text(event)
    decoded: list[str] = []

    def decode(source: str) -> Event:
        decoded.append(source)
        return event_from_json(json.loads(source))

    e = Entry.undecoded(7, text, decode)
    assert (e.seq, e.size, e.text, e.decoded) == (7, text_entry_size(text), text, False)
    assert text_entry_size(text) == ENTRY_OVERHEAD + replay.STRING_OVERHEAD + 2 * len(text) + 2
    assert decoded == []
    assert e.event == event
    assert e.event is e.event
    assert e.decoded
    assert decoded == [text]  # once


def test_entries_kept_as_text_merge_in_a_full_queue_like_decoded_ones() -> None:
    queue = SubscriberQueue(max_events=3, max_bytes=10**9)
    for seq, text in enumerate(["a", "b", "c", "d", "e"], start=1):
        source = event_text(slim(delta(text, seq)))
        e = Entry.undecoded(seq, source, lambda s: event_from_json(json.loads(s)))
        assert queue.offer(e)
    got = take_all(queue)
    assert [(e.text, e.seq) for e in got] == [("a", 1), ("b", 2), ("cde", 5)]  # type: ignore[union-attr]


def test_counted_bytes_of_entries_kept_as_text_bound_what_they_hold() -> None:
    # As a cluster gateway holds its deltas: the stream's text and the frame made from it.
    events = [slim(delta("tok " * (i % 7 + 1), i, mid=str(uuid.uuid4()))) for i in range(500)]
    texts = [event_text(e) for e in events]

    def made(i: int) -> Entry:
        copy = texts[i][:-1] + "}"  # made while traced, as the stream's reply is
        e = Entry.undecoded(i, copy, lambda s: event_from_json(json.loads(s)))
        e.wire = event_frame_text(str(uuid.uuid4()), e.text or "").encode()
        e.text = None  # let go once framed, as the gateway does
        return e

    assert_counted_bytes_bound_what_is_held(made, len(texts))
