"""How a gateway client follows one remote session's events, exactly once, across dropped
connections and a consumer that falls behind (pure: no trio, no I/O).

The client (``claude_trio.client``) feeds a :class:`Follow` what happens - an event frame
arrived, the consumer took an event, a reply came, the connection dropped or came back - and
does what it answers: queue the event or drop it, send an ``attach`` from :attr:`last_seq`, send
a ``detach``. The server side it relies on: events of a session are sent in ``seq`` order;
``attach`` with ``last_seq`` is answered (``reply``) before the replay of exactly the events
after it; ``detach`` is answered after the last event of the old subscription; a session
whose execution ended is no longer sent anything until it is continued.

Rules:

1. **Exactly once, in order.** An event is queued for the consumer only while the session is
   followed on this connection (``live``, or ``idle`` after its execution's final event:
   what comes then is the next execution, sent on from the same place) and only when its
   ``seq`` is above :attr:`last_seq`, the highest queued so far. Everything else is dropped,
   and is replayed by the next ``attach`` from ``last_seq``, which is never sent before the
   server answered for what came before (the ``attach`` or ``detach`` in flight).
2. **Bounded.** At most ``max_queue`` events wait for the consumer. An event that finds the
   queue full is dropped and the session is detached (``pausing``, then ``paused`` once the
   server confirmed); once the consumer has taken the queue down to ``low_water``, it is
   attached again from ``last_seq``. So a slow consumer costs a replay, never memory, and
   never holds up the other sessions of the connection.
3. **Reconnect.** When the connection drops, a session that was followed (or being
   attached or detached) needs an ``attach`` from ``last_seq`` on the next connection; a
   ``paused`` one waits for room first; an ``idle`` one (its execution's final event was
   queued) needs none: the server has nothing for it until it is continued.
4. **The answers to an attach.** ``reply ok`` -> ``live``. ``resync_required`` (the events
   after ``last_seq`` were evicted from the server's replay buffer) and ``unknown_session``
   (the server forgot the session, or restarted) -> ``failed``, with :attr:`error` saying
   which; the consumer gets the events queued before, then the error.
5. **Continue.** An accepted ``continue`` names the seq its execution starts at. A final
   event makes the session ``idle`` only when no accepted ``continue`` starts after it: a
   ``continue`` accepted before the current execution's final event reached the consumer
   keeps the session followed through that event (so a dropped connection attaches it
   again). When the server accepted ``continue``, an ``idle`` session is followed again
   (``live``): the server sends the next execution from the event after the last one sent.
   Any other state is left as it is (an ``attach`` from ``last_seq`` is due or in flight
   and covers the next execution too). When the connection dropped before the answer and
   the server says (``list``) that it was accepted (:meth:`Follow.continue_lost`), the same
   holds, and an ``idle`` session is attached from ``last_seq`` on the next connection.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

import attrs

from claude_trio.protocol.errors import LocalProtocolError

FollowState: TypeAlias = Literal["live", "idle", "attaching", "pausing", "paused", "failed"]
Decision: TypeAlias = Literal["queue", "drop", "pause"]
"""What to do with an event frame: queue it for the consumer; drop it; or drop it and send a
``detach`` (rule 2)."""


@attrs.frozen(kw_only=True)
class FollowError:
    """Why a session cannot be followed any more (rule 4).

    ``kind``: ``resync_required`` (``oldest_seq`` is the oldest seq the server still holds)
    or ``unknown_session``.
    """

    kind: Literal["resync_required", "unknown_session"]
    last_seq: int
    oldest_seq: int | None = None


class Follow:
    """One remote session as a client follows it. See the module docstring for the rules."""

    def __init__(
        self,
        *,
        max_queue: int,
        low_water: int | None = None,
        state: FollowState = "live",
        last_seq: int = 0,
    ) -> None:
        if max_queue < 1:
            raise LocalProtocolError(f"max_queue must be at least 1, got {max_queue}")
        self.max_queue = max_queue
        self.low_water = max_queue // 2 if low_water is None else low_water
        if not 0 <= self.low_water < max_queue:
            raise LocalProtocolError(
                f"low_water must be from 0 to max_queue - 1, got {self.low_water}"
            )
        self.state: FollowState = state
        #: The highest seq queued for the consumer so far.
        self.last_seq = last_seq
        #: Events queued and not taken by the consumer yet.
        self.queued = 0
        #: Events dropped (to be replayed) so far, for statistics.
        self.dropped = 0
        self.error: FollowError | None = None
        self._online = True
        #: Where the latest accepted ``continue``'s execution starts (rule 5).
        self._next_start = 0

    # -- inputs ------------------------------------------------------------------------------

    def event(self, seq: int, *, final: bool) -> Decision:
        """An event frame with ``seq`` arrived; ``final``: it ends its execution (rules 1-2)."""
        if self.state not in ("live", "idle") or seq <= self.last_seq:
            self.dropped += 1
            return "drop"
        if self.queued >= self.max_queue:
            self.state = "pausing"
            self.dropped += 1
            return "pause"
        self.last_seq = seq
        self.queued += 1
        self.state = "idle" if final and self._next_start <= seq else "live"
        return "queue"

    def taken(self) -> bool:
        """The consumer took one event; True: send an ``attach`` from ``last_seq`` now."""
        if self.queued <= 0:
            raise LocalProtocolError("taken() with no event queued")
        self.queued -= 1
        return self._resume_if_room()

    def detached(self) -> bool:
        """The server answered our ``detach``; True: send an ``attach`` from ``last_seq``."""
        if self.state != "pausing":
            return False
        self.state = "paused"
        return self._resume_if_room()

    def attached(self) -> None:
        """The server answered our ``attach`` with ok: follow from here (rule 4)."""
        if self.state == "attaching":
            self.state = "live"

    def resync_required(self, oldest_seq: int) -> None:
        self._fail(
            FollowError(kind="resync_required", last_seq=self.last_seq, oldest_seq=oldest_seq)
        )

    def unknown_session(self) -> None:
        self._fail(FollowError(kind="unknown_session", last_seq=self.last_seq))

    def continued(self, first_seq: int) -> None:
        """The server accepted ``continue``; its execution starts at ``first_seq`` (rule 5)."""
        self._next_start = max(self._next_start, first_seq)
        if self.state == "idle" and first_seq > self.last_seq:
            self.state = "live"

    def continue_lost(self, first_seq: int) -> bool:
        """The server accepted a ``continue`` whose answer was lost with the connection; its
        execution starts at ``first_seq`` (rule 5). True: send an ``attach`` from
        ``last_seq`` now (the connection is back already)."""
        self._next_start = max(self._next_start, first_seq)
        if self.state == "idle" and first_seq > self.last_seq:
            self.state = "paused"
        return self._resume_if_room()

    def connection_lost(self) -> None:
        """The connection dropped: nothing more arrives until :meth:`connected` (rule 3)."""
        self._online = False
        if self.state in ("live", "attaching", "pausing"):
            self.state = "paused"

    def connected(self) -> bool:
        """A new connection is up; True: send an ``attach`` from ``last_seq`` on it."""
        self._online = True
        return self._resume_if_room()

    # -- internals ---------------------------------------------------------------------------

    def _resume_if_room(self) -> bool:
        if self.state != "paused" or not self._online or self.queued > self.low_water:
            return False
        self.state = "attaching"
        return True

    def _fail(self, error: FollowError) -> None:
        self.state = "failed"
        self.error = error
