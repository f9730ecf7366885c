"""The websocket gateway's wire format: client ops in, server frames out (sans-I/O, no trio).

Every message is one JSON object in one text message.

Client -> server ops (each has ``"op"`` and a client-chosen request ``"id"``)::

    {"op": "open",   "id", "params": {ExecuteParams fields, see PARAMS_FIELDS}}
    {"op": "push",   "id", "session", "text"}
    {"op": "answer", "id", "session", "request", "answer": <any JSON>}
    {"op": "abort",  "id", "session"}
    {"op": "attach", "id", "session", "last_seq": <int >= 0 or null; may be omitted>}
    {"op": "detach", "id", "session"}

Server -> client frames (each has ``"type"``)::

    {"type": "opened",          "id", "session"}
    {"type": "event",           "session", "event": <codec.event_to_json(event)>}
    {"type": "reply",           "id", "ok": bool, "reason": str | null}
    {"type": "resync_required", "id", "session", "oldest_seq": int}
    {"type": "error",           "id": str | null, "code": WireErrorCode, "message": str}

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
   ``forbidden_field`` errors.
4. Encoding never fails for values built by this module (events go through the codec, which
   never fails) and emits compact JSON without NaN/Infinity.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar, Literal, NoReturn, TypeAlias, assert_never

import attrs

from .codec import event_from_json, event_to_json, json_type
from .errors import InvalidParamsError, RemoteProtocolError
from .events import Event
from .params import ArchitectureConfig, ExecuteParams

WireErrorCode = Literal[
    "malformed_json",  # not JSON (or nested too deeply)
    "invalid_message",  # JSON, but not an object (or not text)
    "unknown_op",  # "op" missing from the known set
    "missing_field",  # a required field is absent
    "invalid_field",  # a field has the wrong type or value
    "unknown_field",  # a key the op does not know
    "invalid_params",  # ExecuteParams refused the params (the message names params.<field>)
    "forbidden_field",  # allowed in ExecuteParams, not from a remote client (rule 3)
    "unknown_session",  # (gateway) no session with that id
    "internal",  # (gateway) a bug of ours
]

PARAMS_FIELDS: tuple[str, ...] = (
    "prompt",
    "model",
    "system_prompt",
    "max_turns",
    "plan_mode",
    "cwd",
    "resume_session_id",
    "streaming_input",
    "architecture_config",
    "user_input_timeout",
)
"""The ``ExecuteParams`` fields an ``open`` op may carry (``mcp_servers`` never: rule 3)."""

ENV_KEYS: frozenset[str] = frozenset({"custom_env", "ollama_baseUrl"})
"""``architecture_config`` keys that set the CLI's environment (refused unless ``allow_env``)."""


class WireError(RemoteProtocolError):
    """A client sent an op we cannot accept. ``code`` is a :data:`WireErrorCode`."""

    def __init__(self, code: WireErrorCode, message: str, id: str | None = None) -> None:
        self.code: WireErrorCode = code
        self.message = message
        self.id = id
        super().__init__(f"{code}: {message}")

    def to_frame(self) -> ErrorFrame:
        return ErrorFrame(id=self.id, code=self.code, message=self.message)


# ---------------------------------------------------------------------------------------------
# Ops (client -> server)
# ---------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class OpenOp:
    id: str
    params: ExecuteParams
    op: ClassVar[str] = "open"


@attrs.frozen(kw_only=True)
class PushOp:
    id: str
    session: str
    text: str
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


Op: TypeAlias = OpenOp | PushOp | AnswerOp | AbortOp | AttachOp | DetachOp

OP_NAMES: tuple[str, ...] = ("open", "push", "answer", "abort", "attach", "detach")

# ---------------------------------------------------------------------------------------------
# Frames (server -> client)
# ---------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class OpenedFrame:
    id: str
    session: str
    type: ClassVar[str] = "opened"


@attrs.frozen(kw_only=True)
class EventFrame:
    session: str
    event: Event
    type: ClassVar[str] = "event"


@attrs.frozen(kw_only=True)
class ReplyFrame:
    """The outcome of a push / answer / abort / attach / detach."""

    id: str
    ok: bool
    reason: str | None = None
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


Frame: TypeAlias = OpenedFrame | EventFrame | ReplyFrame | ResyncRequiredFrame | ErrorFrame

# ---------------------------------------------------------------------------------------------
# Decoding ops
# ---------------------------------------------------------------------------------------------


def _loads(text: Any) -> Any:
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

    def string(self, key: str) -> str:
        value = self.required(key)
        if not (isinstance(value, str) and value.strip()):
            self.fail("invalid_field", f"{key}={value!r}: expected a non-empty string")
        return value


def decode_op(text: str, *, allow_cwd: bool = False, allow_env: bool = False) -> Op:
    """The op in one client message; raises :class:`WireError` (rules 1-3)."""
    obj = _loads(text)
    if not isinstance(obj, dict):
        raise WireError("invalid_message", f"expected a JSON object, got {json_type(obj)}")
    raw_id = obj.get("id")
    op_id = raw_id if isinstance(raw_id, str) else None
    name = obj.get("op")
    if name not in OP_NAMES:
        allowed = ", ".join(OP_NAMES)
        if "op" not in obj:
            raise WireError("missing_field", f"every message needs 'op' (one of {allowed})", op_id)
        raise WireError("unknown_op", f"op={name!r}: expected one of {allowed}", op_id)
    fields = _Fields(obj, name, op_id)
    op_id = fields.string("id")
    match name:
        case "open":
            fields.only("op", "id", "params")
            params = _params(fields.required("params"), allow_cwd, allow_env, op_id)
            return OpenOp(id=op_id, params=params)
        case "push":
            fields.only("op", "id", "session", "text")
            return PushOp(id=op_id, session=fields.string("session"), text=fields.string("text"))
        case "answer":
            fields.only("op", "id", "session", "request", "answer")
            return AnswerOp(
                id=op_id,
                session=fields.string("session"),
                request=fields.string("request"),
                answer=fields.required("answer"),
            )
        case "abort":
            fields.only("op", "id", "session")
            return AbortOp(id=op_id, session=fields.string("session"))
        case "attach":
            fields.only("op", "id", "session", "last_seq")
            last_seq = obj.get("last_seq")
            if last_seq is not None and not (_is_int(last_seq) and last_seq >= 0):
                fields.fail("invalid_field", f"last_seq={last_seq!r}: expected an int >= 0 or null")
            return AttachOp(id=op_id, session=fields.string("session"), last_seq=last_seq)
        case "detach":
            fields.only("op", "id", "session")
            return DetachOp(id=op_id, session=fields.string("session"))
    raise AssertionError(name)  # pragma: no cover - OP_NAMES checked above


def params_from_json(
    obj: Any, *, allow_cwd: bool = False, allow_env: bool = False
) -> ExecuteParams:
    """``ExecuteParams`` from the ``params`` object of an ``open`` op; raises :class:`WireError`."""
    return _params(obj, allow_cwd, allow_env, None)


def _params(obj: Any, allow_cwd: bool, allow_env: bool, op_id: str | None) -> ExecuteParams:
    if not isinstance(obj, dict):
        raise WireError(
            "invalid_field", f"params: expected a JSON object, got {json_type(obj)}", op_id
        )
    for key in obj:
        if key == "mcp_servers" or (key == "cwd" and not allow_cwd):
            raise WireError(
                "forbidden_field",
                f"params.{key} cannot be set by a remote client"
                + ("" if key == "mcp_servers" else " (the gateway does not allow it)"),
                op_id,
            )
        if key not in PARAMS_FIELDS:
            raise WireError(
                "unknown_field",
                f"params.{key} is not a field; allowed: {', '.join(PARAMS_FIELDS)}",
                op_id,
            )
    if "prompt" not in obj:
        raise WireError("missing_field", "params.prompt is required", op_id)
    kwargs = dict(obj)
    if "architecture_config" in kwargs:
        kwargs["architecture_config"] = _architecture_config(
            kwargs["architecture_config"], allow_env, op_id
        )
    try:
        return ExecuteParams(**kwargs)
    except InvalidParamsError as exc:
        raise WireError("invalid_params", f"params.{exc.field}: {exc}", op_id) from None


def _architecture_config(obj: Any, allow_env: bool, op_id: str | None) -> ArchitectureConfig:
    where = "params.architecture_config"
    if not isinstance(obj, dict):
        raise WireError(
            "invalid_field", f"{where}: expected a JSON object, got {json_type(obj)}", op_id
        )
    if not allow_env:
        for key in obj:
            if key in ENV_KEYS:
                raise WireError(
                    "forbidden_field",
                    f"{where}.{key} sets the CLI's environment on the server; "
                    "the gateway does not allow it",
                    op_id,
                )
    try:
        return ArchitectureConfig.from_mapping(obj)
    except InvalidParamsError as exc:
        raise WireError("invalid_params", f"{where}.{exc.field}: {exc}", op_id) from None


def params_to_json(params: ExecuteParams) -> dict[str, Any]:
    """The ``params`` object for ``params``: the prompt plus every wire field not at its default.

    The inverse of :func:`params_from_json` (with ``allow_cwd``/``allow_env`` for such params);
    ``mcp_servers`` cannot travel and is left out.
    """
    out: dict[str, Any] = {"prompt": params.prompt}
    for field in attrs.fields(ExecuteParams):
        if field.name == "prompt" or field.name not in PARAMS_FIELDS:
            continue
        value = getattr(params, field.name)
        if field.name == "architecture_config":
            mapping = value.to_mapping()
            if mapping:
                out[field.name] = mapping
        elif value != field.default:  # the other wire fields have plain (non-factory) defaults
            out[field.name] = value
    return out


def encode_op(op: Op) -> str:
    """The client message for ``op`` (clients and tests; the server only decodes)."""
    obj: dict[str, Any] = {"op": op.op}
    match op:
        case OpenOp():
            obj |= {"id": op.id, "params": params_to_json(op.params)}
        case PushOp():
            obj |= {"id": op.id, "session": op.session, "text": op.text}
        case AnswerOp():
            obj |= {"id": op.id, "session": op.session, "request": op.request, "answer": op.answer}
        case AbortOp() | DetachOp():
            obj |= {"id": op.id, "session": op.session}
        case AttachOp():
            obj |= {"id": op.id, "session": op.session, "last_seq": op.last_seq}
        case _:
            assert_never(op)
    return _dumps(obj)


# ---------------------------------------------------------------------------------------------
# Frames
# ---------------------------------------------------------------------------------------------


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
        case _:
            assert_never(frame)


def encode_frame(frame: Frame) -> str:
    """The text message for ``frame``; never raises."""
    return _dumps(frame_to_json(frame))


_FRAME_FIELDS: Mapping[str, tuple[type[Any], Mapping[str, tuple[type, ...]]]] = {
    "opened": (OpenedFrame, {"id": (str,), "session": (str,)}),
    "reply": (ReplyFrame, {"id": (str,), "ok": (bool,), "reason": (str, type(None))}),
    "resync_required": (
        ResyncRequiredFrame,
        {"id": (str,), "session": (str,), "oldest_seq": (int,)},
    ),
    "error": (ErrorFrame, {"id": (str, type(None)), "code": (str,), "message": (str,)}),
}


def decode_frame(text: str) -> Frame:
    """The frame in one server message (for clients); raises :class:`WireError`.

    Unknown keys are ignored (a newer server may add some); missing or mistyped ones are errors.
    """
    obj = _loads(text)
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
    if not isinstance(kind, str) or kind not in _FRAME_FIELDS:
        known = ", ".join(["event", *_FRAME_FIELDS])
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


# ---------------------------------------------------------------------------------------------


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
