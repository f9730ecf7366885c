"""Following a remote session exactly once (``protocol/fanout/follow.py``): the rules one by one,
and a simulated server, network and consumer driven by Hypothesis through drops, slow reads and
reconnects, where the consumer must always have seen exactly 1..n in order."""

from __future__ import annotations

import collections
from typing import Literal

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claude_trio.protocol.errors import LocalProtocolError
from claude_trio.protocol.fanout.follow import Follow, FollowError


def test_events_are_queued_once_in_order_and_the_final_one_makes_it_idle() -> None:
    follow = Follow(max_queue=10)
    assert [follow.event(s, final=False) for s in (1, 2, 2, 1, 3)] == [
        "queue", "queue", "drop", "drop", "queue"
    ]  # fmt: skip
    assert follow.event(4, final=True) == "queue"
    assert (follow.state, follow.last_seq, follow.queued, follow.dropped) == ("idle", 4, 4, 2)
    # the next execution, sent on from the same place, is followed too (rule 1)
    assert follow.event(5, final=False) == "queue"
    assert follow.state == "live"


def test_a_full_queue_pauses_and_room_resumes_from_the_last_seq() -> None:
    follow = Follow(max_queue=4, low_water=1)
    for seq in (1, 2, 3, 4):
        assert follow.event(seq, final=False) == "queue"
    assert follow.event(5, final=False) == "pause"
    assert follow.state == "pausing"
    assert follow.event(6, final=False) == "drop"  # in flight before the detach
    assert not follow.taken()  # the detach is not answered yet
    assert follow.detached() is False  # 3 queued > low water 1
    assert follow.state == "paused"
    assert not follow.taken()
    assert follow.taken()  # down to 1: attach from last_seq
    assert (follow.state, follow.last_seq) == ("attaching", 4)
    assert follow.event(7, final=False) == "drop"  # the old subscription's, before the reply
    follow.attached()
    assert follow.event(5, final=False) == "queue"  # the replay


def test_a_dropped_connection_reattaches_from_the_last_seq_unless_idle() -> None:
    live = Follow(max_queue=4)
    live.event(1, final=False)
    live.connection_lost()
    assert live.event(2, final=False) == "drop"
    assert live.connected()
    assert (live.state, live.last_seq) == ("attaching", 1)
    idle = Follow(max_queue=4)
    idle.event(1, final=True)
    idle.connection_lost()
    assert not idle.connected()
    assert idle.state == "idle"
    idle.continued(2)
    assert idle.state == "live"


def test_a_continue_whose_answer_was_lost_attaches_from_the_last_seq() -> None:
    follow = Follow(max_queue=4)
    follow.event(1, final=True)
    follow.connection_lost()
    assert not follow.continue_lost(2)  # no connection yet
    assert follow.connected()  # then: attach from 1, which brings the next execution if any
    back = Follow(max_queue=4)
    back.event(1, final=True)
    back.connection_lost()
    assert not back.connected()  # idle: nothing to attach
    assert back.continue_lost(2)  # the caller hears of the lost answer after the reconnect


def test_room_while_disconnected_waits_for_the_connection() -> None:
    follow = Follow(max_queue=2, low_water=0)
    follow.event(1, final=False)
    follow.event(2, final=False)
    assert follow.event(3, final=False) == "pause"
    follow.connection_lost()
    assert not follow.taken()
    assert not follow.taken()  # room, but no connection
    assert follow.connected()


def test_resync_and_unknown_session_fail_with_the_reason() -> None:
    follow = Follow(max_queue=2, state="attaching", last_seq=7)
    follow.resync_required(40)
    assert follow.state == "failed"
    assert follow.error == FollowError(kind="resync_required", last_seq=7, oldest_seq=40)
    assert follow.event(8, final=False) == "drop"
    gone = Follow(max_queue=2, state="attaching")
    gone.unknown_session()
    assert gone.error == FollowError(kind="unknown_session", last_seq=0)


def test_bad_bounds_and_a_take_of_nothing_are_refused() -> None:
    with pytest.raises(LocalProtocolError, match="max_queue"):
        Follow(max_queue=0)
    with pytest.raises(LocalProtocolError, match="low_water"):
        Follow(max_queue=2, low_water=2)
    with pytest.raises(LocalProtocolError, match="no event queued"):
        Follow(max_queue=2).taken()


# -- a simulated server, network and consumer ------------------------------------------------

Action = Literal[
    "produce", "handle", "emit", "deliver", "take", "drop_connection", "reconnect", "continue"
]


@attrs.define
class World:
    """One session behind a gateway-like server: a first execution of ``first`` events, and
    a second of ``second`` events once the client continues it (the last of each is final).

    The server keeps at most one subscription for the connection, sends events in order,
    answers ops in order, forgets the subscription after an execution's final event unless
    the session was continued before that, and on ``continue`` of a session it does not
    follow for this connection attaches it from the first execution's last event.
    """

    first: int
    second: int
    max_queue: int
    follow: Follow = attrs.field(init=False)
    produced: int = 0
    continued: bool = False
    attached: bool = True  # the server's subscription, opened by "open" (from seq 0)
    sent_through: int = 0
    online: bool = True
    to_client: collections.deque[tuple[str, int]] = attrs.field(factory=collections.deque)
    to_server: collections.deque[tuple[str, int]] = attrs.field(factory=collections.deque)
    queue: collections.deque[int] = attrs.field(factory=collections.deque)
    seen: list[int] = attrs.field(factory=list)
    continue_pending: bool = False  # sent, not answered

    def __attrs_post_init__(self) -> None:
        self.follow = Follow(max_queue=self.max_queue)

    @property
    def total(self) -> int:
        return self.first + self.second if self.continued else self.first

    def client_sends(self, op: str) -> None:
        if self.online:
            self.to_server.append((op, self.follow.last_seq))

    def server_handles(self, op: str, last_seq: int) -> None:
        match op:
            case "attach":
                self.attached, self.sent_through = True, last_seq
                self.to_client.append(("attached", 0))
            case "detach":
                self.attached = False
                self.to_client.append(("detached", 0))
            case "continue":
                if self.continued or self.produced < self.first:
                    self.to_client.append(("refused", 0))
                    return
                self.continued = True
                self.to_client.append(("continued", self.first + 1))
                if not self.attached:
                    self.attached, self.sent_through = True, self.first

    def step(self, action: Action) -> None:
        match action:
            case "produce":
                self.produced = min(self.total, self.produced + 1)
            case "handle":  # the server's reader handles one op
                if self.to_server:
                    self.server_handles(*self.to_server.popleft())
            case "emit":  # the server's writer sends one event
                if self.attached and self.sent_through < self.produced:
                    self.sent_through += 1
                    self.to_client.append(("event", self.sent_through))
                    if self.sent_through == self.total:
                        self.attached = False  # the execution ended: the server forgets it
            case "deliver":
                if self.to_client:
                    self.client_receives(*self.to_client.popleft())
            case "take":
                if self.queue:
                    self.seen.append(self.queue.popleft())
                    if self.follow.taken():
                        self.client_sends("attach")
            case "drop_connection":
                if self.online:
                    self.online = False
                    self.to_client.clear()
                    self.to_server.clear()
                    self.attached = False
                    self.follow.connection_lost()
                    if self.continue_pending:  # the caller hears ConnectionLostError
                        self.continue_pending = False
                        if self.continued:  # and learns from ``list`` that it was accepted
                            # offline: the attach waits for the next connection
                            assert not self.follow.continue_lost(self.first + 1)
            case "reconnect":
                if not self.online:
                    self.online = True
                    if self.follow.connected():
                        self.client_sends("attach")
            case "continue":
                if self.second and not self.continued and self.online:
                    self.client_sends("continue")
                    self.continue_pending = True
        assert self.seen == list(range(1, len(self.seen) + 1)), self.seen
        assert len(self.queue) == self.follow.queued <= self.max_queue

    def client_receives(self, kind: str, seq: int) -> None:
        match kind:
            case "event":
                final = seq in (self.first, self.first + self.second)
                decision = self.follow.event(seq, final=final)
                if decision == "queue":
                    self.queue.append(seq)
                elif decision == "pause":
                    self.client_sends("detach")
            case "attached":
                self.follow.attached()
            case "detached":
                if self.follow.detached():
                    self.client_sends("attach")
            case "continued":
                self.continue_pending = False
                self.follow.continued(seq)
            case _:
                self.continue_pending = False

    def finish(self) -> None:
        """Run everything to the end: the consumer must get every event exactly once."""
        self.step("reconnect")
        for _ in range(40 * (self.first + self.second + 10)):
            for action in ("produce", "handle", "emit", "deliver", "take"):
                self.step(action)  # type: ignore[arg-type]
            waiting = len(self.seen) == self.first and self.second and not self.continued
            if waiting and not self.to_server:
                self.step("continue")
            if len(self.seen) == self.first + self.second and self.continued:
                break
        expected = self.first + (self.second if self.continued else 0)
        assert self.seen == list(range(1, expected + 1))
        assert self.follow.state == "idle"


ACTIONS: list[Action] = [
    "produce", "handle", "emit", "deliver", "take", "drop_connection", "reconnect", "continue"
]  # fmt: skip


def run(world: World, actions: str) -> World:
    for action in actions.split():
        world.step(action)  # type: ignore[arg-type]
    return world


def test_a_continue_while_paused_lets_none_of_the_next_execution_in_before_the_replay() -> None:
    # The consumer got 1 of 2; 2 was dropped (queue full) when the client continues: the
    # server attaches the next execution from 2, but the client waits for its own replay.
    world = run(
        World(first=2, second=2, max_queue=1),
        "produce produce emit emit deliver deliver continue handle handle produce produce "
        "emit emit deliver deliver deliver",
    )
    assert (world.seen, list(world.queue), world.follow.state) == ([], [1], "paused")
    world.finish()


def test_the_next_executions_events_before_the_attach_reply_are_dropped() -> None:
    # continue, then an attach from 1 (room came): the server's attach for the continue
    # sends 3 before it handles our attach; 3 must not be queued after 1.
    world = run(
        World(first=2, second=2, max_queue=1),
        "produce produce emit emit deliver deliver continue handle deliver take handle "
        "produce produce emit deliver deliver",
    )
    assert world.follow.state == "attaching"
    assert world.seen == [1]
    assert list(world.queue) == []
    world.finish()


def test_a_continue_accepted_before_the_final_event_keeps_the_session_followed() -> None:
    # The server ended execution 1 and accepted the continue before the client saw event 1
    # (final): queuing it must not make the session idle, or the dropped connection would
    # not attach it again and execution 2 would never arrive.
    world = run(
        World(first=1, second=1, max_queue=1),
        "produce continue handle emit deliver deliver drop_connection",
    )
    assert (list(world.queue), world.follow.state) == ([1], "paused")
    world.finish()
    assert world.seen == [1, 2]


@settings(max_examples=500, deadline=None)
@given(
    first=st.integers(1, 10),
    second=st.integers(0, 6),
    max_queue=st.integers(1, 4),
    actions=st.lists(st.sampled_from(ACTIONS), max_size=150),
)
def test_the_consumer_sees_every_event_exactly_once_whatever_happens(
    first: int, second: int, max_queue: int, actions: list[Action]
) -> None:
    world = World(first=first, second=second, max_queue=max_queue)
    for action in actions:
        world.step(action)
    world.finish()
