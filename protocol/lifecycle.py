"""When does an execution end? The seed's one-shot rule for streaming input (pure, no I/O).

An *execution* is one ``execute()``: the first prompt, every push accepted while it runs, and
every turn they cause. The CLI's stdin stays open for the whole session, so an execution cannot
end by closing the input; it ends by this state machine.

Rules:

1. Every ``push(uuid)`` gets exactly one outcome, at once: ``Accepted(uuid)`` (the push will be
   delivered in this execution) or ``Rejected(reason)`` (it will not; the caller re-dispatches).
2. A push is *pending* from ``Accepted`` until it is *consumed*: its echo was seen
   (``consumed(uuid)``) or a result lists it in ``user_message_uuids``.
3. A result ends the execution (``result_arrived(...)`` returns True) when, after consuming the
   uuids it lists, no push is pending and no background task is in flight. A background
   subagent keeps the execution open; the CLI reports its completion with one more turn, and
   that turn's result ends the execution (when nothing else is pending).
4. After the end - by rule 3, ``abort()`` or ``cli_died(reason)`` - every push is ``Rejected``
   with a reason that says which end it was. The end is serialized with pushes by the caller
   (the input-channel actor), which is what closes the race at the turn boundary: a push either
   lands before ``result_arrived`` (Accepted, and it keeps the execution open) or after
   (Rejected).
5. ``abort()`` and ``cli_died()`` return the uuids that were accepted but never seen consumed,
   so the caller can report them; both are idempotent (a second call returns nothing).
6. Unknown uuids in ``consumed`` / ``result_arrived`` are ignored (the CLI also echoes and
   lists messages it injects itself, e.g. task notifications). Pushing a uuid twice is a bug of
   the caller and raises ``LocalProtocolError``.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from .errors import LocalProtocolError

REJECT_ENDED = "the execution has ended"
REJECT_ABORTED = "the execution was aborted"


@attrs.frozen(kw_only=True)
class Accepted:
    """The push will be delivered to the CLI within this execution."""

    uuid: str


@attrs.frozen(kw_only=True)
class Rejected:
    """The push will not be delivered; ``reason`` says why (ended, aborted, CLI died: ...)."""

    reason: str


class ExecutionLifecycle:
    """The state of one execution: pending pushes and whether it has ended."""

    def __init__(self) -> None:
        self._pending: dict[str, None] = {}  # insertion-ordered set
        self._seen: set[str] = set()
        self._end_reason: str | None = None

    @property
    def ended(self) -> bool:
        return self._end_reason is not None

    @property
    def end_reason(self) -> str | None:
        """Why pushes are rejected now (None while the execution runs)."""
        return self._end_reason

    @property
    def pending(self) -> frozenset[str]:
        return frozenset(self._pending)

    def push(self, uuid: str) -> Accepted | Rejected:
        if uuid in self._seen:
            raise LocalProtocolError(f"push uuid {uuid!r} was already used in this execution")
        self._seen.add(uuid)
        if self._end_reason is not None:
            return Rejected(reason=self._end_reason)
        self._pending[uuid] = None
        return Accepted(uuid=uuid)

    def consumed(self, uuid: str) -> None:
        self._pending.pop(uuid, None)

    def result_arrived(self, user_message_uuids: Iterable[str], *, tasks_in_flight: bool) -> bool:
        """A turn's result arrived; True when it ends the execution (rule 3)."""
        if self._end_reason is not None:
            return False
        for uuid in user_message_uuids:
            self.consumed(uuid)
        if self._pending or tasks_in_flight:
            return False
        self._end_reason = REJECT_ENDED
        return True

    def abort(self) -> list[str]:
        """End the execution because the user aborted it; returns the never-consumed pushes."""
        return self._end(REJECT_ABORTED)

    def cli_died(self, reason: str) -> list[str]:
        """End the execution because the CLI died; returns the never-consumed pushes."""
        return self._end(f"the CLI died: {reason}")

    def _end(self, reason: str) -> list[str]:
        if self._end_reason is not None:
            return []
        self._end_reason = reason
        lost = list(self._pending)
        self._pending.clear()
        return lost
