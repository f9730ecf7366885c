"""The questions of an execution still waiting for their answer (pure: no trio, no I/O).

Rule: an execution's ``user_input_request`` is pending from the moment it is asked until its
``user_input_resolved`` or the execution's final event. A subscriber that attaches past a
pending question gets it again ahead of its replay (those asked at or before the seq it
attached after: later ones are in the replay anyway). A local fleet keeps them as its
session publishes (``actors/fanout/fleet_session.py``); a cluster's gateway folds them from
what its follower read, or from the session's stream (``actors/cluster/questions.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from claude_trio.protocol.session.events import (
    Event,
    UserInputRequest,
    UserInputResolved,
    is_final,
)

__all__ = ["PendingQuestions", "still_pending"]

T = TypeVar("T")


class PendingQuestions(Generic[T]):
    """The pending questions of one execution, fed its events in order; each question is kept
    as the ``item`` it was fed with (an event, or the buffer entry holding it)."""

    def __init__(self) -> None:
        self._asked: dict[str, tuple[int, T]] = {}

    def feed(self, event: Event, item: T) -> None:
        """The execution's next event (``item`` holds it)."""
        if isinstance(event, UserInputRequest):  # (asked again: it counts from now)
            self._asked.pop(event.request_id, None)
            self._asked[event.request_id] = (event.seq, item)
        elif isinstance(event, UserInputResolved):
            self._asked.pop(event.request_id, None)
        elif is_final(event):  # the execution ended: nothing is pending any more
            self._asked.clear()

    def clear(self) -> None:
        self._asked.clear()

    def items(self) -> list[T]:
        """Every pending question, oldest first."""
        return [item for _, item in self._asked.values()]

    def asked_through(self, seq: int) -> list[T]:
        """The pending questions asked at or before ``seq``, oldest first."""
        return [item for asked, item in self._asked.values() if asked <= seq]


def still_pending(items: Iterable[T], event_of: Callable[[T], Event], *, through: int) -> list[T]:
    """Of an execution's ``items`` in order (from its first event), those whose event is a
    question still pending after the last, asked at or before seq ``through``."""
    pending: PendingQuestions[T] = PendingQuestions()
    for item in items:
        pending.feed(event_of(item), item)
    return pending.asked_through(through)
