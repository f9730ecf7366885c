"""Fair slot grants: the cap, start order within an owner, turns between owners."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claude_trio.protocol.fanout.slots import SlotQueue


def test_one_owner_is_served_in_request_order() -> None:
    slots: SlotQueue[str] = SlotQueue(2)
    assert slots.request("a", None)
    assert slots.request("b", None)
    assert [slots.request(k, None) for k in "cde"] == [False, False, False]
    assert (slots.live, slots.waiting) == (2, 3)
    assert slots.release("a") == "c"
    assert slots.release("b") == "d"
    assert slots.release("c") == "e"
    assert slots.release("d") is None
    assert (slots.live, slots.waiting) == (1, 0)


def test_an_owner_with_a_long_queue_does_not_hold_up_another_owners_first_request() -> None:
    slots: SlotQueue[str] = SlotQueue(1)
    assert slots.request("busy-0", "busy")
    for i in range(1, 300):
        slots.request(f"busy-{i}", "busy")
    slots.request("first", "other")
    assert slots.waiting_of("busy") == 299
    assert slots.waiting_of("other") == 1
    assert slots.release("busy-0") == "busy-1"  # busy asked first: its turn
    assert slots.release("busy-1") == "first"  # then the other owner's, not busy-2
    assert slots.release("first") == "busy-2"
    assert slots.live_of("busy") == 1
    assert slots.live_of("other") == 0


def test_owners_take_turns_and_each_keeps_its_order() -> None:
    slots: SlotQueue[str] = SlotQueue(1)
    slots.request("x", None)
    for key in ["a1", "a2", "a3"]:
        slots.request(key, "a")
    for key in ["b1", "b2"]:
        slots.request(key, "b")
    slots.request("c1", "c")
    order = []
    current = "x"
    while (current := slots.release(current)) is not None:  # type: ignore[assignment]
        order.append(current)
    assert order == ["a1", "b1", "c1", "a2", "b2", "a3"]


def test_a_withdrawn_request_is_never_granted() -> None:
    slots: SlotQueue[str] = SlotQueue(1)
    slots.request("x", None)
    slots.request("a", "A")
    slots.request("b", "B")
    slots.withdraw("a", "A")
    assert slots.waiting_of("A") == 0
    assert slots.release("x") == "b"
    assert slots.release("b") is None


def test_asking_twice_is_a_bug() -> None:
    slots: SlotQueue[str] = SlotQueue(1)
    slots.request("a", None)
    with pytest.raises(ValueError, match="already"):
        slots.request("a", None)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 4),
    st.lists(st.tuples(st.sampled_from(["ask", "release", "withdraw"]), st.integers(0, 3))),
)
def test_the_cap_holds_and_a_waiting_owner_is_passed_at_most_once_by_each_other_owner(
    max_live: int, moves: list[tuple[str, int]]
) -> None:
    slots: SlotQueue[int] = SlotQueue(max_live)
    held: list[int] = []
    waiting: dict[int, int] = {}  # key -> owner
    # For each owner with waiting keys: grants each other owner got since it was last served
    # (or since it started waiting).
    passed: dict[int, dict[int, int]] = {}
    key = 0
    for move, owner in moves:
        if move == "ask":
            key += 1
            if slots.request(key, owner):
                held.append(key)
            else:
                waiting[key] = owner
                passed.setdefault(owner, {})
        elif move == "release" and held:
            granted = slots.release(held.pop(0))
            if granted is not None:
                got_owner = waiting.pop(granted)
                held.append(granted)
                passed[got_owner] = {}
                for other, counts in passed.items():
                    if other != got_owner:
                        counts[got_owner] = counts.get(got_owner, 0) + 1
                        assert counts[got_owner] <= 1, (other, got_owner)
        elif move == "withdraw" and waiting:
            victim = max(waiting)
            slots.withdraw(victim, waiting.pop(victim))
        for gone in [o for o in passed if o not in waiting.values()]:
            del passed[gone]
        assert slots.live == len(held) <= max_live
        assert slots.waiting == len(waiting)
        if slots.waiting:
            assert slots.live == max_live
