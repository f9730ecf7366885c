"""The server -> client frames of the websocket gateway's wire format (sans-I/O, no trio).

The format as a whole (every op and frame, and its rules) is described in
``protocol/fanout/wire.py``, which holds the client ops and re-exports everything here. This module
holds the frames the server sends: their classes (:data:`Frame`), :class:`SessionInfo` (one session
as ``list`` shows it), :func:`encode_frame` / :func:`frame_to_json` (encoding never fails: rule 6),
and
:func:`decode_frame` for clients (unknown keys ignored, a newer server may add some: rule 2).
:func:`loads_message` reads one text message of either direction.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar, Literal, NoReturn, TypeAlias, assert_never

import attrs

from claude_trio.protocol.errors import RemoteProtocolError, WireError
from claude_trio.protocol.fanout.codec import (
    attrs_from_json,
    dumps,
    event_from_json,
    event_text,
    event_to_json,
    json_type,
    to_json_safe,
)
from claude_trio.protocol.fanout.governor import GovernorFigures
from claude_trio.protocol.fanout.inbox import (
    INBOX_OUTCOMES,
    InboxItem,
    InboxOutcome,
    item_from_json,
    item_to_json,
)
from claude_trio.protocol.fanout.remote import remote_event
from claude_trio.protocol.fanout.replay import Entry
from claude_trio.protocol.session.events import Event
from claude_trio.protocol.session.usage import Usage

__all__ = [
    "PROTOCOL_VERSION",
    "ContinuedFrame",
    "ErrorFrame",
    "EventFrame",
    "Frame",
    "GovernorFrame",
    "HelloFrame",
    "InboxArrivedFrame",
    "InboxFrame",
    "InboxResolvedFrame",
    "OpenedFrame",
    "ReplyFrame",
    "ResyncRequiredFrame",
    "SessionInfo",
    "SessionState",
    "SessionsFrame",
    "decode_frame",
    "encode_frame",
    "error_frame",
    "event_frame_text",
    "frame_to_json",
    "loads_message",
    "remote_entry_frame",
    "remote_event_frame",
]

PROTOCOL_VERSION = 1
"""The version of this protocol a server announces in its ``hello`` frame."""


@attrs.frozen(kw_only=True)
class OpenedFrame:
    id: str
    session: str
    type: ClassVar[str] = "opened"


SessionState: TypeAlias = Literal["waiting", "live", "ended"]


@attrs.frozen(kw_only=True)
class SessionInfo:
    """One session as ``list`` shows it.

    ``state``: ``waiting`` (for a CLI slot), ``live`` (its CLI runs) or ``ended`` (its
    execution ended; ``continue`` may start the next one). ``executions``: how many were
    started; ``first_seq``: the seq of the current execution's first event; ``last_seq``: the
    highest seq so far. ``usage``: every turn of every execution so far (interrupted turns
    included). ``created_at`` / ``ended_at``: seconds since the epoch (``ended_at``: when the
    last execution ended; None while one runs). ``owner``: the principal that opened it.
    """

    session: str
    label: str | None
    owner: str | None
    state: SessionState
    executions: int
    first_seq: int
    last_seq: int
    usage: Usage
    created_at: float
    ended_at: float | None


@attrs.frozen(kw_only=True)
class HelloFrame:
    """Who the server is and what it allows: ``server`` (its name and version), ``protocol``
    (:data:`PROTOCOL_VERSION`), the client's ``principal`` and whether it is ``admin``, the
    ``ops`` it accepts, the ``capabilities`` of its sessions (``architecture_capabilities()``
    as JSON: pushes, resume, thinking modes, ...), its ``limits`` (names and values of its
    bounds), its remote ``policy`` (``remote_tools``, ``allow_cwd``, ``allow_env``) and, on a
    cluster's gateway, the ``cluster`` summary."""

    id: str
    server: str
    protocol: int
    principal: str
    admin: bool
    ops: tuple[str, ...]
    capabilities: Mapping[str, Any]
    limits: Mapping[str, Any]
    policy: Mapping[str, Any]
    #: A cluster's gateway (``serve --redis``): its workers alive now, their free and busy
    #: slots, and those degraded (``protocol/cluster/records.py`` rule 8); None for one process.
    cluster: Mapping[str, Any] | None = None
    #: The figures of the fleet governor of the server (its pause, the effective concurrency,
    #: the budget); None when it has none. The ``governor`` op follows them as they change.
    governor: GovernorFigures | None = None
    type: ClassVar[str] = "hello"


@attrs.frozen(kw_only=True)
class GovernorFrame:
    """The figures of the server's fleet governor (None: it has none): the answer to the
    ``governor`` op (``id``), or with ``id`` None their next change for a client that
    follows them."""

    id: str | None
    governor: GovernorFigures | None
    type: ClassVar[str] = "governor"


@attrs.frozen(kw_only=True)
class ContinuedFrame:
    """``continue`` was accepted: the next execution's events start at ``first_seq``."""

    id: str
    session: str
    first_seq: int
    type: ClassVar[str] = "continued"


@attrs.frozen(kw_only=True)
class SessionsFrame:
    """The answer to ``list``: oldest first; ``next_cursor``: where the next page starts
    (None when this one holds the last session)."""

    id: str
    sessions: tuple[SessionInfo, ...]
    next_cursor: str | None = None
    type: ClassVar[str] = "sessions"


@attrs.frozen(kw_only=True)
class EventFrame:
    session: str
    event: Event
    type: ClassVar[str] = "event"


@attrs.frozen(kw_only=True)
class ReplyFrame:
    """The outcome of a push / answer / abort / attach / detach. ``uuid``: an accepted
    push's (the ``uuid`` of its ``user_message`` event and in ``result.user_message_uuids``)."""

    id: str
    ok: bool
    reason: str | None = None
    uuid: str | None = None
    type: ClassVar[str] = "reply"


@attrs.frozen(kw_only=True)
class ResyncRequiredFrame:
    """``last_seq`` is older than the replay buffer; ``oldest_seq`` is the oldest seq it holds."""

    id: str
    session: str
    oldest_seq: int
    type: ClassVar[str] = "resync_required"


@attrs.frozen(kw_only=True)
class ErrorFrame:
    id: str | None
    code: str
    message: str
    type: ClassVar[str] = "error"


@attrs.frozen(kw_only=True)
class InboxFrame:
    """The requests waiting across the principal's sessions: the answer to ``inbox``
    (``id``), or with ``id`` None a fresh list for a client that fell behind."""

    id: str | None
    items: tuple[InboxItem, ...]
    type: ClassVar[str] = "inbox"


@attrs.frozen(kw_only=True)
class InboxArrivedFrame:
    item: InboxItem
    type: ClassVar[str] = "inbox_arrived"


@attrs.frozen(kw_only=True)
class InboxResolvedFrame:
    session: str
    request: str
    outcome: InboxOutcome
    type: ClassVar[str] = "inbox_resolved"


def error_frame(error: WireError) -> ErrorFrame:
    """The ``error`` frame that answers an op refused with ``error``."""
    return ErrorFrame(id=error.id, code=error.code, message=error.message)


Frame: TypeAlias = (
    OpenedFrame
    | EventFrame
    | ReplyFrame
    | ResyncRequiredFrame
    | ErrorFrame
    | HelloFrame
    | ContinuedFrame
    | SessionsFrame
    | InboxFrame
    | InboxArrivedFrame
    | InboxResolvedFrame
    | GovernorFrame
)

# ---------------------------------------------------------------------------------------------
# Reading and writing frames
# ---------------------------------------------------------------------------------------------


def loads_message(text: Any) -> Any:
    """The JSON value in one text message, NaN and Infinity refused; raises :class:`WireError`
    (``invalid_message`` for a message that is not text, ``malformed_json``)."""
    if not isinstance(text, str):
        raise WireError("invalid_message", f"expected a text message, got {type(text).__name__}")
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise WireError("malformed_json", "JSON nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, and NaN/Infinity from _no_constant
        raise WireError("malformed_json", f"not valid JSON: {exc}") from None


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not allowed")


def frame_to_json(frame: Frame) -> dict[str, Any]:
    """The JSON object for ``frame``; never raises."""
    match frame:
        case EventFrame():
            return {
                "type": frame.type,
                "session": frame.session,
                "event": event_to_json(frame.event),
            }
        case OpenedFrame() | ReplyFrame() | ResyncRequiredFrame() | ErrorFrame():
            return {"type": frame.type, **attrs.asdict(frame)}
        case HelloFrame() | ContinuedFrame() | SessionsFrame() | GovernorFrame():
            encoded: dict[str, Any] = to_json_safe(frame)
            return encoded
        case InboxFrame():
            return {
                "type": frame.type,
                "id": frame.id,
                "items": [item_to_json(item) for item in frame.items],
            }
        case InboxArrivedFrame():
            return {"type": frame.type, "item": item_to_json(frame.item)}
        case InboxResolvedFrame():
            return {"type": frame.type, **attrs.asdict(frame)}
        case _:
            assert_never(frame)


def encode_frame(frame: Frame) -> str:
    """The text message for ``frame``; never raises."""
    if isinstance(frame, EventFrame):  # the most frequent by far: the event's text as is
        return event_frame_text(frame.session, event_text(frame.event))
    return dumps(frame_to_json(frame))


def event_frame_text(session: str, event_text: str) -> str:
    """The text message for ``EventFrame(session, event)`` made from the event's JSON text
    (``codec.event_text``, as a cluster's stream stores it) without encoding it again."""
    return f'{{"type":"event","session":{dumps(session)},"event":{event_text}}}'


def remote_event_frame(session: str, event: Event, stored: str | None = None) -> str:
    """The text message carrying ``event`` of ``session`` to a remote client (``remote.py``,
    rule 5). ``stored``: the event's JSON text when it was read as text (a cluster's stream),
    framed as it is unless rule 5 changes the event."""
    shown = remote_event(event)
    if stored is not None and shown is event:
        return event_frame_text(session, stored)
    return encode_frame(EventFrame(session=session, event=shown))


def remote_entry_frame(session: str, entry: Entry) -> str:
    """:func:`remote_event_frame` of a buffer's entry. One that holds its event as text only
    (``Entry.undecoded``: a delta, which rule 5 shows as it is) is framed from the text
    without decoding it."""
    if not entry.decoded and entry.text is not None:
        return event_frame_text(session, entry.text)
    return remote_event_frame(session, entry.event, entry.text)


_FRAME_FIELDS: Mapping[str, tuple[type[Any], Mapping[str, tuple[type, ...]]]] = {
    "opened": (OpenedFrame, {"id": (str,), "session": (str,)}),
    "reply": (
        ReplyFrame,
        {"id": (str,), "ok": (bool,), "reason": (str, type(None)), "uuid": (str, type(None))},
    ),
    "resync_required": (
        ResyncRequiredFrame,
        {"id": (str,), "session": (str,), "oldest_seq": (int,)},
    ),
    "error": (ErrorFrame, {"id": (str, type(None)), "code": (str,), "message": (str,)}),
}


_TypedFrame: TypeAlias = HelloFrame | ContinuedFrame | SessionsFrame | GovernorFrame
_TYPED_FRAMES: Mapping[str, type[_TypedFrame]] = {
    "hello": HelloFrame,
    "continued": ContinuedFrame,
    "sessions": SessionsFrame,
    "governor": GovernorFrame,
}


def decode_frame(text: str) -> Frame:
    """The frame in one server message (for clients); raises :class:`WireError`.

    Unknown keys are ignored (a newer server may add some); missing or mistyped ones are errors.
    """
    obj = loads_message(text)
    if not isinstance(obj, dict):
        raise WireError("invalid_message", f"expected a JSON object, got {json_type(obj)}")
    kind = obj.get("type")
    if kind == "event":
        session = obj.get("session")
        if not isinstance(session, str):
            raise WireError("invalid_field", f"event frame: session={session!r}: expected a string")
        if "event" not in obj:
            raise WireError("missing_field", "event frame needs the field 'event'")
        try:
            event = event_from_json(obj["event"])
        except RemoteProtocolError as exc:
            raise WireError("invalid_field", f"event frame: {exc}") from None
        return EventFrame(session=session, event=event)
    if isinstance(kind, str) and kind.startswith("inbox"):
        try:
            return _inbox_frame(kind, obj)
        except RemoteProtocolError as exc:
            raise WireError("invalid_field", f"{kind} frame: {exc}") from None
    if isinstance(kind, str) and kind in _TYPED_FRAMES:
        try:
            typed: Frame = attrs_from_json(obj, _TYPED_FRAMES[kind], f"{kind} frame")
        except RemoteProtocolError as exc:
            raise WireError("invalid_field", str(exc)) from None
        return typed
    if not isinstance(kind, str) or kind not in _FRAME_FIELDS:
        known = ", ".join(["event", *_FRAME_FIELDS, *_TYPED_FRAMES, *_INBOX_FRAMES])
        raise WireError("invalid_message", f"type={kind!r}: expected one of {known}")
    cls, types = _FRAME_FIELDS[kind]
    kwargs: dict[str, Any] = {}
    for key, allowed in types.items():
        if key not in obj:
            if type(None) in allowed:
                kwargs[key] = None
                continue
            raise WireError("missing_field", f"{kind} frame needs the field {key!r}")
        value = obj[key]
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            raise WireError("invalid_field", f"{kind} frame: {key}={value!r} has the wrong type")
        kwargs[key] = value
    frame: Frame = cls(**kwargs)
    return frame


_INBOX_FRAMES = ("inbox", "inbox_arrived", "inbox_resolved")


def _inbox_frame(kind: str, obj: Mapping[str, Any]) -> Frame:
    """An inbox frame (``RemoteProtocolError`` naming what is wrong)."""
    match kind:
        case "inbox":
            frame_id, items = obj.get("id"), obj.get("items")
            if frame_id is not None and not isinstance(frame_id, str):
                raise RemoteProtocolError(f"id={frame_id!r}: expected a string or null")
            if not isinstance(items, list):
                raise RemoteProtocolError(f"items={items!r}: expected a list")
            return InboxFrame(id=frame_id, items=tuple(item_from_json(i) for i in items))
        case "inbox_arrived":
            return InboxArrivedFrame(item=item_from_json(obj.get("item")))
        case "inbox_resolved":
            session, request, outcome = obj.get("session"), obj.get("request"), obj.get("outcome")
            if not isinstance(session, str) or not isinstance(request, str):
                raise RemoteProtocolError("session and request: expected strings")
            if outcome not in INBOX_OUTCOMES:
                raise RemoteProtocolError(
                    f"outcome={outcome!r}: expected one of {', '.join(INBOX_OUTCOMES)}"
                )
            return InboxResolvedFrame(session=session, request=request, outcome=outcome)
    raise RemoteProtocolError(f"type={kind!r}: expected one of {', '.join(_INBOX_FRAMES)}")
