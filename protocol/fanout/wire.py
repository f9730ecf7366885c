"""The websocket gateway's wire format: client ops in, server frames out (sans-I/O, no trio).

This module holds the client ops (their classes, :func:`decode_op` with the checks of every
value it lets in, :func:`encode_op`); the ``params`` of an ``open`` op, both ways, are in
``protocol/fanout/wire_params.py`` and the server frames in ``protocol/fanout/wire_frames.py``,
both importable from here too.

Every message is one JSON object in one text message.

Client -> server ops (each has ``"op"`` and a client-chosen request ``"id"``)::

    {"op": "hello",    "id"}
    {"op": "open",     "id", "params": {ExecuteParams fields, see PARAMS_FIELDS},
                       "label": <str, optional: shown by "list">,
                       "idempotency_key": <str, optional>, "traceparent": <str, optional>}
    {"op": "continue", "id", "session", "prompt", "idempotency_key": <str, optional>,
                       "traceparent": <str, optional>, "model": <str, optional>,
                       "permission_mode": <str, optional>,
                       "images": [{"data": <base64>}, optional]}
    {"op": "list",     "id"}
    {"op": "push",     "id", "session", "text", "images": [{"data": <base64>}, optional]}
    {"op": "answer",   "id", "session", "request", "answer": <any JSON>}
    {"op": "abort",    "id", "session"}
    {"op": "set_model", "id", "session", "model": <str: an alias or model id; null: default>}
    {"op": "set_permission_mode", "id", "session", "mode": <a permission mode>}
    {"op": "attach",   "id", "session", "last_seq": <int >= 0 or null; may be omitted>}
    {"op": "detach",   "id", "session"}
    {"op": "inbox",    "id", "follow": <bool, optional, default true>}
    {"op": "governor", "id", "follow": <bool, optional, default true>}

Server -> client frames (each has ``"type"``)::

    {"type": "hello",           "id", "server", "protocol", "principal", "admin", "ops",
                                "capabilities": {...}, "limits": {...}, "policy": {...},
                                "cluster": {...} | null, "governor": {...} | null}
    {"type": "opened",          "id", "session"}
    {"type": "continued",       "id", "session", "first_seq": int}
    {"type": "sessions",        "id", "sessions": [SessionInfo, ...]}
    {"type": "event",           "session", "event": <codec.event_to_json(event)>}
    {"type": "reply",           "id", "ok": bool, "reason": str | null, "uuid": str | null}
    {"type": "resync_required", "id", "session", "oldest_seq": int}
    {"type": "error",           "id": str | null, "code": WireErrorCode, "message": str}
    {"type": "inbox",           "id": str | null, "items": [InboxItem, ...]}
    {"type": "inbox_arrived",   "item": InboxItem}
    {"type": "inbox_resolved",  "session", "request", "outcome": <an InboxOutcome>}
    {"type": "governor",        "id": str | null, "governor": {...} | null}

An ``InboxItem`` is ``{"session", "label", "owner", "request": <a user_input_request event>,
"asked_at": <seconds since the epoch>}`` (``protocol/fanout/inbox.py``). ``inbox`` answers with
the requests waiting across the sessions the principal may see; with ``follow`` (the default)
the connection then gets each ``inbox_arrived`` and ``inbox_resolved``, and an ``inbox`` frame
with a null ``id`` (a fresh list that replaces the one held) when it fell behind. ``inbox``
with ``"follow": false`` answers the list and stops following. ``governor`` answers with the
figures of the server's fleet governor (``GovernorFigures`` as JSON; null when it has none:
its pause and when it resumes, the effective concurrency, the budget spent); with ``follow``
(the default) the connection then gets a ``governor`` frame with a null ``id`` each time they
change, at most one per ``GOVERNOR_FOLLOW_INTERVAL`` (``actors/fanout/gateway_governor.py``),
only the latest when the client is behind. ``"follow": false`` answers and stops following.

A session's events carry one ``seq`` sequence across its executions: ``continue`` starts the
next execution of an ended session's conversation, whose first event has ``first_seq``. An
``open`` or ``continue`` sent again with its ``idempotency_key`` is answered with the session
the first one created, never run twice (``protocol/fanout/idempotency.py``).

Rules:

1. Untrusted input is validated once, here: :func:`decode_op` returns a fully checked op or
   raises :class:`WireError` whose ``code`` is machine-readable and whose message names the field,
   the value and what is allowed. ``id`` is filled in whenever the message carried a string
   ``"id"``, so the client can match the error to its request.
2. Ops are strict: an unknown key is an error (``unknown_field``), so a typo such as
   ``"last_sq"`` is not silently ignored. Frames read by :func:`decode_frame` (a client reading a
   possibly newer server) ignore unknown keys instead, as the event codec does.
3. Safe by default: a remote client must not control the server's file system or processes. So
   ``params.cwd`` is refused unless ``allow_cwd=True``; the CLI's environment
   (``architecture_config.custom_env`` / ``ollama_baseUrl``) unless ``allow_env=True``; and
   ``mcp_servers`` (which starts processes) is never accepted over the wire. All three are
   ``forbidden_field`` errors. A subagent's ``mcp_servers`` may name the session's servers,
   never configure one (``invalid_params``).
4. Every string that enters is valid to send back out, and every value is bounded, so no
   reply, error or event built from an op can fail to encode or poison a session's replay:
   :func:`decode_op` refuses (``invalid_field``, naming the path) a string holding a lone
   UTF-16 surrogate (a ``\\ud800`` escape with no partner: it is not a character, and no UTF-8
   encoder accepts it), a value nested deeper than ``MAX_DEPTH``, an integer beyond
   ``MAX_INT``, an ``id``/``session``/``request`` longer than ``MAX_ID_CHARS``, and an
   ``answer`` larger than ``MAX_ANSWER_CHARS``. Refused rather than replaced: a client that
   sends one has a bug to hear about, and a silently altered answer or prompt is worse.
5. What an ``open`` op's params hand to the CLI's command line and environment is checked
   before anything is spawned (``invalid_params``, naming the field): no NUL character in any
   string but the prompt (which travels on stdin), a ``system_prompt`` under
   ``MAX_ARGUMENT_BYTES`` (the kernel's limit for one argument), environment entries under it
   too (the one rule of ``checks.check_env``, as for a local session). Error messages quote
   a client's value at most ``MAX_QUOTE`` characters long.
6. Encoding never fails (the event codec never does, and :func:`~.codec.dumps` escapes what
   UTF-8 cannot carry) and emits compact JSON without NaN/Infinity.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, NoReturn, TypeAlias, assert_never

import attrs

from claude_trio.protocol.checks import is_int
from claude_trio.protocol.config.images import ImageInput
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.config.permissions import PermissionMode, check_permission_mode
from claude_trio.protocol.errors import InvalidParamsError, WireError, WireErrorCode
from claude_trio.protocol.fanout.codec import dumps, json_type
from claude_trio.protocol.fanout.idempotency import check_idempotency_key
from claude_trio.protocol.fanout.listing import list_request_problem
from claude_trio.protocol.fanout.wire_checks import (
    MAX_ARGUMENT_BYTES,
    MAX_DEPTH,
    MAX_ID_CHARS,
    MAX_IMAGE_BASE64,
    MAX_INT,
    MAX_QUOTE,
    is_traceparent,
    quote,
)
from claude_trio.protocol.fanout.wire_checks import check_value as _check_value
from claude_trio.protocol.fanout.wire_checks import images_from_json as _images
from claude_trio.protocol.fanout.wire_checks import images_to_json as _images_json
from claude_trio.protocol.fanout.wire_checks import is_sendable_id as _is_sendable_id
from claude_trio.protocol.fanout.wire_checks import no_nul as _no_nul
from claude_trio.protocol.fanout.wire_frames import (
    PROTOCOL_VERSION,
    ContinuedFrame,
    ErrorFrame,
    EventFrame,
    Frame,
    GovernorFrame,
    HelloFrame,
    InboxArrivedFrame,
    InboxFrame,
    InboxResolvedFrame,
    OpenedFrame,
    ReplyFrame,
    ResyncRequiredFrame,
    SessionInfo,
    SessionsFrame,
    SessionState,
    decode_frame,
    encode_frame,
    error_frame,
    event_frame_text,
    frame_to_json,
    loads_message,
    remote_entry_frame,
    remote_event_frame,
)
from claude_trio.protocol.fanout.wire_params import (
    ENV_KEYS,
    LOCAL_ONLY_FIELDS,
    PARAMS_FIELDS,
    params_from_json,
    params_to_json,
)

__all__ = [
    "ENV_KEYS",
    "LOCAL_ONLY_FIELDS",
    "MAX_ANSWER_CHARS",
    "MAX_ARGUMENT_BYTES",
    "MAX_DEPTH",
    "MAX_ID_CHARS",
    "MAX_IMAGE_BASE64",
    "MAX_INT",
    "MAX_QUOTE",
    "OP_NAMES",
    "PARAMS_FIELDS",
    "PROTOCOL_VERSION",
    "AbortOp",
    "AnswerOp",
    "AttachOp",
    "ContinueOp",
    "ContinuedFrame",
    "DetachOp",
    "ErrorFrame",
    "EventFrame",
    "Frame",
    "GovernorFrame",
    "GovernorOp",
    "HelloFrame",
    "HelloOp",
    "InboxArrivedFrame",
    "InboxFrame",
    "InboxOp",
    "InboxResolvedFrame",
    "ListOp",
    "Op",
    "OpenOp",
    "OpenedFrame",
    "PushOp",
    "ReplyFrame",
    "ResyncRequiredFrame",
    "SessionInfo",
    "SessionState",
    "SessionsFrame",
    "SetModelOp",
    "SetPermissionModeOp",
    "decode_frame",
    "decode_op",
    "encode_frame",
    "encode_op",
    "error_frame",
    "event_frame_text",
    "frame_to_json",
    "params_from_json",
    "params_to_json",
    "quote",
    "remote_entry_frame",
    "remote_event_frame",
]

MAX_ANSWER_CHARS = 64 * 1024
"""The largest ``answer``, in characters of its compact JSON."""


# ---------------------------------------------------------------------------------------------
# Ops (client -> server)
# ---------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class HelloOp:
    """Ask the server who it is and what it allows (answered by a ``hello`` frame)."""

    id: str
    op: ClassVar[str] = "hello"


@attrs.frozen(kw_only=True)
class OpenOp:
    """Start a session. ``label``: the client's name for it, shown by ``list``;
    ``idempotency_key``: a retry with it returns the session the first open created;
    ``traceparent``: the caller's trace context (W3C), the parent of the session's spans."""

    id: str
    params: ExecuteParams
    label: str | None = None
    idempotency_key: str | None = None
    traceparent: str | None = None
    op: ClassVar[str] = "open"


@attrs.frozen(kw_only=True)
class ContinueOp:
    """Run ``prompt`` as the next execution of an ended session's conversation
    (``traceparent`` as for :class:`OpenOp`); ``model`` and ``permission_mode`` replace the
    session's (``None``: kept), ``images`` go with the prompt."""

    id: str
    session: str
    prompt: str
    idempotency_key: str | None = None
    traceparent: str | None = None
    model: str | None = None
    permission_mode: PermissionMode | None = None
    images: tuple[ImageInput, ...] = ()
    op: ClassVar[str] = "continue"


@attrs.frozen(kw_only=True)
class ListOp:
    """The sessions this client's principal may see (answered by a ``sessions`` frame), oldest
    first: all of them, or with ``limit`` (1 to ``LIST_PAGE_MAX``) a page of at most that
    many, after ``cursor`` (the ``next_cursor`` of the previous page; none: from the oldest)."""

    id: str
    cursor: str | None = None
    limit: int | None = None
    op: ClassVar[str] = "list"


@attrs.frozen(kw_only=True)
class PushOp:
    """A user message for a running session; ``images`` travel as in ``params``
    (``[{"data": "<base64>"}]``)."""

    id: str
    session: str
    text: str
    images: tuple[ImageInput, ...] = ()
    op: ClassVar[str] = "push"


@attrs.frozen(kw_only=True)
class AnswerOp:
    id: str
    session: str
    request: str
    answer: Any
    op: ClassVar[str] = "answer"


@attrs.frozen(kw_only=True)
class AbortOp:
    id: str
    session: str
    op: ClassVar[str] = "abort"


@attrs.frozen(kw_only=True)
class SetModelOp:
    """Switch a running session's model (``Session.set_model``); ``None``: the default."""

    id: str
    session: str
    model: str | None
    op: ClassVar[str] = "set_model"


@attrs.frozen(kw_only=True)
class SetPermissionModeOp:
    """Switch a running session's permission mode, as the server's policy allows."""

    id: str
    session: str
    mode: PermissionMode
    op: ClassVar[str] = "set_permission_mode"


@attrs.frozen(kw_only=True)
class AttachOp:
    """Subscribe to a session. ``last_seq``: the highest seq the client has seen (None: none)."""

    id: str
    session: str
    last_seq: int | None = None
    op: ClassVar[str] = "attach"


@attrs.frozen(kw_only=True)
class DetachOp:
    id: str
    session: str
    op: ClassVar[str] = "detach"


@attrs.frozen(kw_only=True)
class InboxOp:
    """The requests waiting across the principal's sessions (an ``inbox`` frame); with
    ``follow``, their arrivals and resolutions from then on."""

    id: str
    follow: bool = True
    op: ClassVar[str] = "inbox"


@attrs.frozen(kw_only=True)
class GovernorOp:
    """The figures of the server's fleet governor (a ``governor`` frame); with ``follow``,
    each change of them from then on."""

    id: str
    follow: bool = True
    op: ClassVar[str] = "governor"


Op: TypeAlias = (
    HelloOp
    | OpenOp
    | ContinueOp
    | ListOp
    | PushOp
    | AnswerOp
    | AbortOp
    | SetModelOp
    | SetPermissionModeOp
    | AttachOp
    | DetachOp
    | InboxOp
    | GovernorOp
)

OP_NAMES: tuple[str, ...] = (
    "hello",
    "open",
    "continue",
    "list",
    "push",
    "answer",
    "abort",
    "set_model",
    "set_permission_mode",
    "attach",
    "detach",
    "inbox",
    "governor",
)

# ---------------------------------------------------------------------------------------------
# Decoding ops
# ---------------------------------------------------------------------------------------------


class _Fields:
    """Reads the fields of one op object, raising errors that carry the op's id."""

    def __init__(self, obj: Mapping[str, Any], op: str, op_id: str | None) -> None:
        self.obj = obj
        self.op = op
        self.id = op_id

    def fail(self, code: WireErrorCode, message: str) -> NoReturn:
        raise WireError(code, message, self.id)

    def only(self, *allowed: str) -> None:
        for key in self.obj:
            if key not in allowed:
                self.fail(
                    "unknown_field",
                    f"{key!r} is not a field of op {self.op!r}; its fields: {', '.join(allowed)}",
                )

    def required(self, key: str) -> Any:
        if key not in self.obj:
            self.fail("missing_field", f"op {self.op!r} needs the field {key!r}")
        return self.obj[key]

    def string(self, key: str, max_chars: int | None = MAX_ID_CHARS) -> str:
        value = self.required(key)
        if not (isinstance(value, str) and value.strip()):
            self.fail("invalid_field", f"{key}={quote(value)}: expected a non-empty string")
        if max_chars is not None and len(value) > max_chars:
            self.fail(
                "invalid_field",
                f"{key}={quote(value)}: longer than {max_chars} characters ({len(value)})",
            )
        return value

    def traceparent(self) -> str | None:
        value = self.obj.get("traceparent")
        if value is None:
            return None
        if not is_traceparent(value):
            self.fail(
                "invalid_field",
                f"traceparent={quote(value)}: not a W3C traceparent "
                "(00-<32 hex trace id>-<16 hex span id>-<2 hex flags>, lower case); "
                "send the one opentelemetry.propagate.inject writes, or none",
            )
        return str(value)

    def idempotency_key(self) -> str | None:
        if self.obj.get("idempotency_key") is None:
            return None
        try:
            return check_idempotency_key(self.obj["idempotency_key"])
        except InvalidParamsError as exc:
            self.fail("invalid_field", f"idempotency_key={quote(exc.value)}: {exc.allowed}")


def _list_op(fields: _Fields, op_id: str) -> ListOp:
    cursor, limit = fields.obj.get("cursor"), fields.obj.get("limit")
    if (problem := list_request_problem(cursor, limit)) is not None:
        fields.fail("invalid_field", problem)
    return ListOp(id=op_id, cursor=cursor, limit=limit)


def decode_op(text: str, *, allow_cwd: bool = False, allow_env: bool = False) -> Op:
    """The op in one client message; raises :class:`WireError` (rules 1-3)."""
    obj = loads_message(text)
    if not isinstance(obj, dict):
        raise WireError("invalid_message", f"expected a JSON object, got {json_type(obj)}")
    raw_id = obj.get("id")
    op_id = raw_id if _is_sendable_id(raw_id) else None
    _check_value(obj, "", 0, op_id)
    name = obj.get("op")
    if name not in OP_NAMES:
        allowed = ", ".join(OP_NAMES)
        if "op" not in obj:
            raise WireError("missing_field", f"every message needs 'op' (one of {allowed})", op_id)
        raise WireError("unknown_op", f"op={quote(name)}: expected one of {allowed}", op_id)
    fields = _Fields(obj, name, op_id)
    op_id = fields.string("id")
    match name:
        case "hello":
            fields.only("op", "id")
            return HelloOp(id=op_id)
        case "list":
            fields.only("op", "id", "cursor", "limit")
            return _list_op(fields, op_id)
        case "open":
            fields.only("op", "id", "params", "label", "idempotency_key", "traceparent")
            params = params_from_json(
                fields.required("params"), allow_cwd=allow_cwd, allow_env=allow_env, op_id=op_id
            )
            label = fields.string("label") if obj.get("label") is not None else None
            key = fields.idempotency_key()
            return OpenOp(
                id=op_id,
                params=params,
                label=label,
                idempotency_key=key,
                traceparent=fields.traceparent(),
            )
        case "continue":
            fields.only(
                "op",
                "id",
                "session",
                "prompt",
                "idempotency_key",
                "traceparent",
                "model",
                "permission_mode",
                "images",
            )
            model = None if obj.get("model") is None else fields.string("model")
            if model is not None:
                _no_nul(model, "model", op_id)
            mode = obj.get("permission_mode")
            try:
                mode = None if mode is None else check_permission_mode("permission_mode", mode)
            except InvalidParamsError as exc:
                fields.fail("invalid_field", str(exc))
            images = _images(obj["images"], op_id, "images") if "images" in obj else []
            return ContinueOp(
                id=op_id,
                session=fields.string("session"),
                prompt=fields.string("prompt", max_chars=None),
                idempotency_key=fields.idempotency_key(),
                traceparent=fields.traceparent(),
                model=model,
                permission_mode=mode,
                images=tuple(images),
            )
        case "push":
            fields.only("op", "id", "session", "text", "images")
            images = _images(obj["images"], op_id, "images") if "images" in obj else []
            return PushOp(
                id=op_id,
                session=fields.string("session"),
                text=fields.string("text", max_chars=None),
                images=tuple(images),
            )
        case "answer":
            fields.only("op", "id", "session", "request", "answer")
            answer = fields.required("answer")
            size = _check_value(answer, "answer", 0, op_id)
            if size > MAX_ANSWER_CHARS:
                fields.fail(
                    "invalid_field",
                    f"answer: about {size} characters of JSON, over {MAX_ANSWER_CHARS}",
                )
            return AnswerOp(
                id=op_id,
                session=fields.string("session"),
                request=fields.string("request"),
                answer=answer,
            )
        case "abort":
            fields.only("op", "id", "session")
            return AbortOp(id=op_id, session=fields.string("session"))
        case "set_model":
            fields.only("op", "id", "session", "model")
            if "model" not in obj:
                fields.fail("missing_field", "set_model needs 'model' (a model id, or null)")
            model = obj["model"]
            if model is not None:
                model = fields.string("model")
                _no_nul(model, "model", op_id)
            return SetModelOp(id=op_id, session=fields.string("session"), model=model)
        case "set_permission_mode":
            fields.only("op", "id", "session", "mode")
            try:
                mode = check_permission_mode("mode", fields.required("mode"))
            except InvalidParamsError as exc:
                fields.fail("invalid_field", str(exc))
            return SetPermissionModeOp(id=op_id, session=fields.string("session"), mode=mode)
        case "attach":
            fields.only("op", "id", "session", "last_seq")
            last_seq = obj.get("last_seq")
            if last_seq is not None and not (is_int(last_seq) and last_seq >= 0):
                fields.fail(
                    "invalid_field", f"last_seq={quote(last_seq)}: expected an int >= 0 or null"
                )
            return AttachOp(id=op_id, session=fields.string("session"), last_seq=last_seq)
        case "detach":
            fields.only("op", "id", "session")
            return DetachOp(id=op_id, session=fields.string("session"))
        case "inbox" | "governor":
            fields.only("op", "id", "follow")
            follow = obj.get("follow", True)
            if not isinstance(follow, bool):
                fields.fail("invalid_field", f"follow={quote(follow)}: expected true or false")
            if name == "governor":
                return GovernorOp(id=op_id, follow=follow)
            return InboxOp(id=op_id, follow=follow)
    raise AssertionError(name)  # pragma: no cover - OP_NAMES checked above


def encode_op(op: Op) -> str:
    """The client message for ``op`` (clients and tests; the server only decodes)."""
    obj: dict[str, Any] = {"op": op.op}
    match op:
        case HelloOp():
            obj |= {"id": op.id}
        case ListOp():
            obj |= {"id": op.id}
            if op.cursor is not None:
                obj["cursor"] = op.cursor
            if op.limit is not None:
                obj["limit"] = op.limit
        case OpenOp():
            obj |= {"id": op.id, "params": params_to_json(op.params)}
            if op.label is not None:
                obj["label"] = op.label
            if op.idempotency_key is not None:
                obj["idempotency_key"] = op.idempotency_key
            if op.traceparent is not None:
                obj["traceparent"] = op.traceparent
        case ContinueOp():
            obj |= {"id": op.id, "session": op.session, "prompt": op.prompt}
            for name in ("idempotency_key", "traceparent", "model", "permission_mode"):
                if getattr(op, name) is not None:
                    obj[name] = getattr(op, name)
            if op.images:
                obj["images"] = _images_json(op.images)
        case PushOp():
            obj |= {"id": op.id, "session": op.session, "text": op.text}
            if op.images:
                obj["images"] = _images_json(op.images)
        case AnswerOp():
            obj |= {"id": op.id, "session": op.session, "request": op.request, "answer": op.answer}
        case AbortOp() | DetachOp():
            obj |= {"id": op.id, "session": op.session}
        case AttachOp():
            obj |= {"id": op.id, "session": op.session, "last_seq": op.last_seq}
        case SetModelOp():
            obj |= {"id": op.id, "session": op.session, "model": op.model}
        case SetPermissionModeOp():
            obj |= {"id": op.id, "session": op.session, "mode": op.mode}
        case InboxOp() | GovernorOp():
            obj |= {"id": op.id, "follow": op.follow}
        case _:
            assert_never(op)
    return dumps(obj)
