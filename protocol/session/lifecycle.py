"""The phase of one execution, and when it ends (pure, no I/O).

An *execution* is one ``execute()``: the first prompt, every push accepted while it runs, and
every turn they cause. The CLI's stdin stays open for the whole session, so an execution cannot
end by closing the input; it ends by this state machine, the one owner of the execution's phase::

    STARTING --started()--> RUNNING --abort()--> ABORTING
        |                      |                    |
        +----------------------+--------------------+--finish(cause)--> ENDED

``finish(cause)`` is the only way into ``ENDED`` (``result_arrived`` calls it for a result that
completes the execution, ``cli_died`` for a dead CLI).

Rules:

1. Every ``push(uuid)`` gets exactly one outcome, at once: ``Accepted(uuid)`` (the push will be
   delivered in this execution) or ``Rejected(reason)`` (it will not; the caller re-dispatches).
   Pushes are accepted while ``STARTING`` or ``RUNNING`` only.
2. A push is *pending* from ``Accepted`` until it is *consumed*: its echo was seen
   (``consumed(uuid)``) or a result lists it in ``user_message_uuids``.
3. A result completes the execution (``result_arrived(...)`` returns True and finishes it with
   cause ``"completed"``) when, after consuming the uuids it lists, no push is pending and no
   background task is in flight, and no abort is under way. A background subagent keeps the
   execution open; the CLI reports its completion with one more turn, and that turn's result
   ends the execution (when nothing else is pending).
4. ``abort()`` moves ``STARTING``/``RUNNING`` to ``ABORTING`` and returns the pushes accepted but
   never seen consumed, so the caller can report them; from then on pushes are rejected and
   user messages still waiting to be written must not be written (``may_write_user_messages``).
   The abort ends with ``finish("aborted")`` once its terminal event is out.
5. After the end every push is ``Rejected`` with a reason that says which end it was. The end
   is serialized with pushes by the caller (one trio thread, no checkpoint in between), which
   is what closes the race at the turn boundary: a push either lands before ``result_arrived``
   (Accepted, and it keeps the execution open) or after (Rejected).
6. ``finish`` returns the pushes still pending (they were never delivered) and is idempotent (a
   second call returns nothing and changes nothing). ``abort`` is idempotent too.
7. Unknown uuids in ``consumed`` / ``result_arrived`` are ignored (the CLI also echoes and
   lists messages it injects itself, e.g. task notifications). Pushing a uuid twice is a bug of
   the caller and raises ``LocalProtocolError``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Literal

import attrs

from claude_trio.protocol.errors import LocalProtocolError

REJECT_ENDED = "the execution has ended"
REJECT_ABORTED = "the execution was aborted"
REJECT_CLOSED = "the session was closed"

EndCause = Literal["completed", "aborted", "cli_died", "closed", "failed"]
"""Why an execution ended: its last result (``completed``), ``abort()`` (``aborted``), the CLI
died or could not start (``cli_died``), the session was left before the end (``closed``), or a
limit or bug of ours ended it (``failed``)."""


class Phase(enum.Enum):
    STARTING = "starting"
    """The CLI is being started; nothing was written to it yet."""
    RUNNING = "running"
    """The prompt was handed to the CLI: it may be working (tools included)."""
    ABORTING = "aborting"
    """``abort()`` was called: the CLI is being interrupted; nothing new is written to it."""
    ENDED = "ended"
    """The execution's terminal event is out; nothing else belongs to it."""


@attrs.frozen(kw_only=True)
class Accepted:
    """The push will be delivered to the CLI within this execution."""

    uuid: str


@attrs.frozen(kw_only=True)
class Rejected:
    """The push will not be delivered; ``reason`` says why (ended, aborted, CLI died: ...)."""

    reason: str


class ExecutionLifecycle:
    """The state of one execution: its phase and its pending pushes."""

    def __init__(self) -> None:
        self._phase = Phase.STARTING
        self._pending: dict[str, None] = {}  # insertion-ordered set
        self._seen: set[str] = set()
        self._end_reason: str | None = None
        self._end_cause: EndCause | None = None

    # -- state -----------------------------------------------------------------------------

    @property
    def phase(self) -> Phase:
        return self._phase

    @property
    def ended(self) -> bool:
        return self._phase is Phase.ENDED

    @property
    def aborting(self) -> bool:
        return self._phase is Phase.ABORTING

    @property
    def end_cause(self) -> EndCause | None:
        """Why the execution ended (None until it has)."""
        return self._end_cause

    @property
    def end_reason(self) -> str | None:
        """Why pushes are rejected now (None while they are accepted)."""
        return self._end_reason

    @property
    def may_write_user_messages(self) -> bool:
        """Whether a user message still waiting to be written may go to the CLI (rule 4)."""
        return self._phase is Phase.STARTING or self._phase is Phase.RUNNING

    @property
    def pending(self) -> frozenset[str]:
        return frozenset(self._pending)

    # -- inputs ----------------------------------------------------------------------------

    def started(self) -> None:
        """The prompt was handed to the CLI (``STARTING`` -> ``RUNNING``)."""
        if self._phase is Phase.STARTING:
            self._phase = Phase.RUNNING

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
        """A turn's result arrived; True when it completes the execution (rule 3)."""
        if self._phase is Phase.ENDED or self._phase is Phase.ABORTING:
            return False
        for uuid in user_message_uuids:
            self.consumed(uuid)
        if self._pending or tasks_in_flight:
            return False
        self.finish("completed")
        return True

    def abort(self) -> list[str]:
        """The user aborts (rule 4); returns the never-consumed pushes (once)."""
        if self._phase is Phase.ENDED or self._phase is Phase.ABORTING:
            return []
        self._phase = Phase.ABORTING
        self._end_reason = REJECT_ABORTED
        lost = list(self._pending)
        self._pending.clear()
        return lost

    def cli_died(self, reason: str) -> list[str]:
        """The CLI died; returns the never-consumed pushes."""
        return self.finish("cli_died", reason=f"the CLI died: {reason}")

    def finish(self, cause: EndCause, *, reason: str | None = None) -> list[str]:
        """End the execution (rule 6); returns the pushes still pending, which were lost."""
        if self._phase is Phase.ENDED:
            return []
        if self._phase is Phase.ABORTING:
            cause = "aborted"  # whatever ended it, the user's abort came first
        self._phase = Phase.ENDED
        self._end_cause = cause
        if self._end_reason is None:
            self._end_reason = reason or _REASONS[cause]
        lost = list(self._pending)
        self._pending.clear()
        return lost


_REASONS: dict[EndCause, str] = {
    "completed": REJECT_ENDED,
    "aborted": REJECT_ABORTED,
    "cli_died": "the CLI died",
    "closed": REJECT_CLOSED,
    "failed": REJECT_ENDED,
}
