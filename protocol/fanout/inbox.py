"""The inbox, the pure part: every user-input request waiting across a host's sessions.

A host's inbox (``host.inbox()``, ``actors/fanout/inbox.py``) is the list of ``user_input_request``
events (tool approvals, AskUserQuestion, elicitations) asked and not resolved yet, across
every session the caller may see, as one :class:`InboxItem` each; and a stream of changes
(:data:`InboxChange`) that keeps a copy of that list exact.

Rules:

1. An item arrives with its session's ``user_input_request`` and leaves with exactly one
   :class:`InboxResolved`: the ``outcome`` of the session's ``user_input_resolved``
   (``answered``, here or elsewhere; ``expired``; ``cancelled``; ``withdrawn``; ``failed``), or
   ``ended`` when the session's execution ended with the request still open.
2. A stream of changes opens with an :class:`InboxSnapshot` (everything waiting now), then
   carries each arrival and resolution in order. Applying them to an :class:`InboxState`
   gives the host's list.
3. Bounded: a consumer holds at most ``max_changes`` changes unread (:class:`InboxQueue`).
   One more, and the queue forgets them all and its next change is a fresh snapshot (a
   resync): a slow consumer costs a snapshot, never unbounded memory, and never misses a
   resolution (a snapshot replaces the whole list).
4. An item's ``owner`` is the principal of its session (``None`` for a session no gateway
   opened); a principal's inbox holds only the items it may see.
5. ``asked_at`` is wall-clock seconds since the epoch (when the host saw the request), so an
   item's age means the same on every host and over the wire: :meth:`InboxItem.age`.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Literal, TypeAlias

import attrs

from claude_trio.protocol.errors import RemoteProtocolError
from claude_trio.protocol.fanout.codec import event_from_json, event_to_json
from claude_trio.protocol.session.events import UserInputRequest, UserInputResolved

__all__ = [
    "DEFAULT_INBOX_CHANGES",
    "INBOX_OUTCOMES",
    "InboxArrived",
    "InboxChange",
    "InboxItem",
    "InboxOutcome",
    "InboxQueue",
    "InboxResolved",
    "InboxSnapshot",
    "InboxState",
    "item_from_json",
    "item_to_json",
    "resolution",
]

DEFAULT_INBOX_CHANGES = 256
"""Changes a consumer may leave unread before it is served a snapshot instead (rule 3)."""

InboxOutcome: TypeAlias = Literal[
    "answered", "expired", "cancelled", "withdrawn", "failed", "ended"
]
INBOX_OUTCOMES: tuple[InboxOutcome, ...] = (
    "answered",
    "expired",
    "cancelled",
    "withdrawn",
    "failed",
    "ended",
)


@attrs.frozen(kw_only=True)
class InboxItem:
    """One request waiting for an answer: ``session`` (its id; answer it with
    ``(await host.get(session)).answer(request_id, answer)``), the session's ``label`` and
    ``owner`` (its principal), the ``request`` event itself and when it was seen (``asked_at``,
    seconds since the epoch)."""

    session: str
    label: str | None
    owner: str | None
    request: UserInputRequest
    asked_at: float

    @property
    def request_id(self) -> str:
        return self.request.request_id

    @property
    def source(self) -> str:
        """``tool_permission`` (an approval), ``model-tool`` (a question), ``mcp-elicitation``."""
        return self.request.source

    @property
    def tool(self) -> str | None:
        """The tool an approval asks about (None for a question or an elicitation)."""
        return self.request.tool_name

    @property
    def input(self) -> Mapping[str, Any] | None:
        """The input of the tool call an approval asks about."""
        return self.request.tool_input

    def age(self, now: float) -> float:
        """Seconds it has waited at wall-clock time ``now`` (``time.time()``), never negative."""
        return max(0.0, now - self.asked_at)


@attrs.frozen(kw_only=True)
class InboxArrived:
    item: InboxItem
    kind: ClassVar[str] = "arrived"


@attrs.frozen(kw_only=True)
class InboxResolved:
    """Request ``request_id`` of ``session`` left the inbox (rule 1)."""

    session: str
    request_id: str
    outcome: InboxOutcome
    kind: ClassVar[str] = "resolved"


@attrs.frozen(kw_only=True)
class InboxSnapshot:
    """Everything waiting now, oldest first: it replaces what a consumer held (rule 2)."""

    items: tuple[InboxItem, ...]
    kind: ClassVar[str] = "snapshot"


InboxChange: TypeAlias = InboxArrived | InboxResolved | InboxSnapshot


def resolution(session: str, event: UserInputResolved) -> InboxResolved:
    """The inbox's change for a session's ``user_input_resolved``."""
    return InboxResolved(session=session, request_id=event.request_id, outcome=event.outcome)


class InboxState:
    """A list of waiting requests kept by applying changes (a consumer's copy, or a host's)."""

    def __init__(self, items: Iterable[InboxItem] = ()) -> None:
        self._items: dict[tuple[str, str], InboxItem] = {}
        for item in items:
            self._items[(item.session, item.request_id)] = item

    def apply(self, change: InboxChange) -> None:
        match change:
            case InboxSnapshot():
                self._items = {(i.session, i.request_id): i for i in change.items}
            case InboxArrived():
                item = change.item
                self._items[(item.session, item.request_id)] = item
            case InboxResolved():
                self._items.pop((change.session, change.request_id), None)

    def get(self, session: str, request_id: str) -> InboxItem | None:
        return self._items.get((session, request_id))

    @property
    def items(self) -> tuple[InboxItem, ...]:
        """The waiting requests, in the order they arrived."""
        return tuple(self._items.values())

    def __len__(self) -> int:
        return len(self._items)


class InboxQueue:
    """One consumer's unread changes, bounded (rule 3): :meth:`offer` never fails; past
    ``max_changes`` the queue empties and :meth:`take` says a snapshot is due instead."""

    def __init__(self, max_changes: int = DEFAULT_INBOX_CHANGES) -> None:
        self.max_changes = max_changes
        self._changes: collections.deque[InboxChange] = collections.deque()
        #: True when the consumer's next change must be a fresh snapshot.
        self.resync = True  # the first change of every stream is a snapshot (rule 2)
        #: How many times the consumer fell behind and was served a snapshot.
        self.resyncs = 0

    def offer(self, change: InboxChange) -> None:
        if self.resync:
            return  # the snapshot to come holds it
        if len(self._changes) >= self.max_changes:
            self._changes.clear()
            self.resync = True
            self.resyncs += 1
            return
        self._changes.append(change)

    def take(self) -> InboxChange | None:
        """The next change; None when there is none, or when a snapshot is due (check
        :attr:`resync` first, build the snapshot, and hand it to :meth:`snapshot_taken`)."""
        return self._changes.popleft() if self._changes and not self.resync else None

    def snapshot_taken(self) -> None:
        self.resync = False
        self._changes.clear()

    @property
    def ready(self) -> bool:
        return self.resync or bool(self._changes)

    def __len__(self) -> int:
        return len(self._changes)


# -- JSON (the wire's ``inbox`` frames) ----------------------------------------------------------


def item_to_json(item: InboxItem) -> dict[str, Any]:
    return {
        "session": item.session,
        "label": item.label,
        "owner": item.owner,
        "request": event_to_json(item.request),
        "asked_at": item.asked_at,
    }


def item_from_json(obj: Any) -> InboxItem:
    """An :class:`InboxItem` from its JSON; ``RemoteProtocolError`` naming what is wrong."""
    if not isinstance(obj, dict):
        raise RemoteProtocolError(f"inbox item: expected an object, got {type(obj).__name__}")
    session, label, owner = obj.get("session"), obj.get("label"), obj.get("owner")
    asked_at = obj.get("asked_at")
    if not isinstance(session, str):
        raise RemoteProtocolError(f"inbox item: session={session!r}: expected a string")
    for name, value in (("label", label), ("owner", owner)):
        if value is not None and not isinstance(value, str):
            raise RemoteProtocolError(f"inbox item: {name}={value!r}: expected a string or null")
    if isinstance(asked_at, bool) or not isinstance(asked_at, int | float):
        raise RemoteProtocolError(f"inbox item: asked_at={asked_at!r}: expected a number")
    request = event_from_json(obj.get("request"))
    if not isinstance(request, UserInputRequest):
        raise RemoteProtocolError(
            f"inbox item: request is a {request.kind!r} event, expected user_input_request"
        )
    return InboxItem(
        session=session, label=label, owner=owner, request=request, asked_at=float(asked_at)
    )
