"""What a gateway connection's writer puts in one write: replies first, then each attached
session's events in turns of at most ``TURN_FRAMES``, within ``WRITE_FRAMES``."""

from __future__ import annotations

import collections
import json
from typing import Any

import trio

from claude_trio.actors.fanout.gateway_connection import _Client
from claude_trio.actors.fanout.gateway_records import TURN_FRAMES, WRITE_FRAMES, _Attached
from claude_trio.actors.fanout.subscription import Subscription
from claude_trio.protocol.fanout.replay import Entry
from claude_trio.protocol.session.events import ToolUse


class _Session:
    def __init__(self, session_id: str) -> None:
        self.id = session_id
        self.last_seq = 0

    def _detach(self, subscription: Subscription) -> None:
        pass


def writer() -> _Client:
    """A connection's writer state alone (no socket: ``_next_frames`` only builds the write)."""
    client = _Client.__new__(_Client)
    client._replies = collections.deque()
    client._reply_room = trio.Event()
    client._inbox = None
    client._governor = None
    client._ready = collections.deque()
    client._wake = trio.Event()
    client._metrics = None
    return client


def attach(client: _Client, session_id: str) -> _Attached:
    session = _Session(session_id)
    attached: _Attached
    subscription = Subscription(
        session, [], max_queue=10_000, max_bytes=1 << 30, notify=lambda: client._notify(attached)
    )
    attached = _Attached(session_id=session_id, session=session, subscription=subscription)  # type: ignore[arg-type]
    return attached


def offer(attached: _Attached, count: int) -> None:
    for seq in range(1, count + 1):
        event = ToolUse(tool_use_id=f"t{seq}", name="Bash", input={}, seq=seq, turn=1)
        attached.subscription._offer(Entry.of(event))


def payload(frame: str | bytes) -> Any:
    if isinstance(frame, str):
        return json.loads(frame)
    start = 4 if frame[1] == 126 else 2  # a server frame: no mask; these are under 64 KiB
    return json.loads(frame[start:])


def test_each_session_gets_a_turn_of_at_most_turn_frames_and_replies_go_first() -> None:
    client = writer()
    a, b = attach(client, "A"), attach(client, "B")
    offer(a, TURN_FRAMES + 5)
    offer(b, TURN_FRAMES + 3)
    client._replies.append('{"type":"reply","id":"r1","ok":true}')
    write = [payload(frame) for frame in client._next_frames()]
    assert write[0]["type"] == "reply"
    events = [(f["session"], f["event"]["seq"]) for f in write[1:]]
    expected = (
        [("A", s) for s in range(1, TURN_FRAMES + 1)]
        + [("B", s) for s in range(1, TURN_FRAMES + 1)]
        + [("A", s) for s in range(TURN_FRAMES + 1, TURN_FRAMES + 6)]
        + [("B", s) for s in range(TURN_FRAMES + 1, TURN_FRAMES + 4)]
    )
    assert events == expected
    assert (a.last_sent, b.last_sent) == (TURN_FRAMES + 5, TURN_FRAMES + 3)
    assert client._reply_room.is_set()
    assert client._next_frames() == []  # both emptied
    assert (a.ready, b.ready) == (False, False)


def test_one_write_holds_at_most_write_frames_and_the_rest_follows() -> None:
    client = writer()
    a = attach(client, "A")
    offer(a, WRITE_FRAMES + 10)
    first = [payload(f)["event"]["seq"] for f in client._next_frames()]
    second = [payload(f)["event"]["seq"] for f in client._next_frames()]
    assert first == list(range(1, WRITE_FRAMES + 1))
    assert second == list(range(WRITE_FRAMES + 1, WRITE_FRAMES + 11))
