"""The inbox's pure part: the list kept by changes, the bounded queue of one consumer, and
the wire's inbox op and frames."""

from __future__ import annotations

import json

import pytest

from claude_trio.protocol.errors import WireError
from claude_trio.protocol.fanout.inbox import (
    InboxArrived,
    InboxItem,
    InboxQueue,
    InboxResolved,
    InboxSnapshot,
    InboxState,
    item_from_json,
    item_to_json,
)
from claude_trio.protocol.fanout.wire import (
    InboxArrivedFrame,
    InboxFrame,
    InboxOp,
    InboxResolvedFrame,
    decode_frame,
    decode_op,
    encode_frame,
    encode_op,
)
from claude_trio.protocol.session.events import UserInputRequest


def item(session: str, request: str, owner: str | None = None) -> InboxItem:
    return InboxItem(
        session=session,
        label=f"label of {session}",
        owner=owner,
        request=UserInputRequest(
            request_id=request,
            source="tool_permission",
            tool_name="Bash",
            tool_input={"command": "ls"},
            seq=3,
        ),
        asked_at=1000.5,
    )


def test_the_state_follows_snapshots_arrivals_and_resolutions() -> None:
    state = InboxState()
    a, b, c = item("s1", "r1"), item("s2", "r1"), item("s1", "r2")
    state.apply(InboxArrived(item=a))
    state.apply(InboxArrived(item=b))
    state.apply(InboxArrived(item=c))
    assert state.items == (a, b, c)  # the order they arrived
    state.apply(InboxResolved(session="s2", request_id="r1", outcome="expired"))
    assert state.items == (a, c)
    # A resolution of what it never held (or twice) changes nothing.
    state.apply(InboxResolved(session="s2", request_id="r1", outcome="answered"))
    assert state.get("s1", "r2") == c
    assert len(state) == 2
    state.apply(InboxSnapshot(items=(b,)))
    assert state.items == (b,)


def test_an_item_says_its_tool_input_and_age() -> None:
    it = item("s1", "r1")
    assert (it.request_id, it.source, it.tool, it.input) == (
        "r1",
        "tool_permission",
        "Bash",
        {"command": "ls"},
    )
    assert it.age(1003.0) == 2.5
    assert it.age(999.0) == 0.0  # a clock behind the host's: never negative


def test_the_queue_starts_with_a_snapshot_and_resyncs_past_its_bound() -> None:
    queue = InboxQueue(max_changes=2)
    assert queue.resync
    assert queue.ready
    queue.offer(InboxArrived(item=item("s1", "r1")))  # held by the snapshot to come
    assert queue.take() is None
    queue.snapshot_taken()
    assert not queue.ready
    first, second = InboxArrived(item=item("s1", "r2")), InboxArrived(item=item("s1", "r3"))
    queue.offer(first)
    queue.offer(second)
    assert len(queue) == 2
    assert queue.resyncs == 0
    queue.offer(InboxResolved(session="s1", request_id="r2", outcome="answered"))
    # Over its bound: everything queued is dropped, and a snapshot is due instead.
    assert (len(queue), queue.resync, queue.resyncs) == (0, True, 1)
    assert queue.take() is None
    queue.snapshot_taken()
    queue.offer(first)
    assert queue.take() == first
    assert queue.take() is None


def test_an_item_round_trips_through_json() -> None:
    it = item("s1", "r1", owner="alice")
    assert item_from_json(json.loads(json.dumps(item_to_json(it)))) == it


@pytest.mark.parametrize(
    "frame",
    [
        InboxFrame(id="i1", items=(item("s1", "r1", "alice"), item("s2", "r9"))),
        InboxFrame(id=None, items=()),
        InboxArrivedFrame(item=item("s1", "r1")),
        InboxResolvedFrame(session="s1", request="r1", outcome="ended"),
    ],
)
def test_inbox_frames_round_trip(frame: object) -> None:
    assert decode_frame(encode_frame(frame)) == frame  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"type": "inbox_resolved", "session": "s", "request": "r", "outcome": "maybe"}',
         "outcome='maybe'"),
        ('{"type": "inbox", "id": "i", "items": {}}', "items={}"),
        ('{"type": "inbox_arrived", "item": {"session": "s", "label": null, "owner": null, '
         '"asked_at": 1, "request": {"kind": "text_delta", "text": "x"}}}',
         "expected user_input_request"),
        ('{"type": "inbox_arrived", "item": {"session": 3}}', "session=3"),
    ],
)
def test_a_bad_inbox_frame_is_refused_by_name(text: str, problem: str) -> None:
    with pytest.raises(WireError) as caught:
        decode_frame(text)
    assert problem in caught.value.message


def test_the_inbox_op() -> None:
    assert decode_op('{"op": "inbox", "id": "i"}') == InboxOp(id="i", follow=True)
    assert decode_op(encode_op(InboxOp(id="i", follow=False))) == InboxOp(id="i", follow=False)
    with pytest.raises(WireError) as caught:
        decode_op('{"op": "inbox", "id": "i", "follow": 1}')
    assert (caught.value.code, caught.value.id) == ("invalid_field", "i")
    with pytest.raises(WireError) as caught:
        decode_op('{"op": "inbox", "id": "i", "session": "s"}')
    assert caught.value.code == "unknown_field"
