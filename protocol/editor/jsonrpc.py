"""JSON-RPC 2.0 as the Agent Client Protocol frames it: one JSON object per line on stdio.

:func:`decode_line` turns a line into a :class:`Request`, :class:`Notification` or
:class:`Response` (or raises :class:`EditorRequestError` with the code to answer); the ``encode_*``
functions make the lines this side writes. The params of a request are validated against the
package's schema type of the method in :data:`AGENT_REQUESTS` by the caller
(:func:`parse_params`), so a malformed message gets ``-32602 Invalid params`` naming the field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeVar

import attrs
from acp import schema
from pydantic import BaseModel, ValidationError

from claude_trio.protocol.errors import EditorRequestError

__all__ = [
    "AGENT_NOTIFICATIONS",
    "AGENT_REQUESTS",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "Notification",
    "Request",
    "Response",
    "decode_line",
    "dump",
    "encode_error",
    "encode_notification",
    "encode_request",
    "encode_result",
    "parse_params",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

#: The requests the agent answers, with the schema type of their params.
AGENT_REQUESTS: Mapping[str, type[BaseModel]] = {
    "initialize": schema.InitializeRequest,
    "authenticate": schema.AuthenticateRequest,
    "session/new": schema.NewSessionRequest,
    "session/load": schema.LoadSessionRequest,
    "session/prompt": schema.PromptRequest,
    "session/set_mode": schema.SetSessionModeRequest,
    "session/set_config_option": schema.SetSessionConfigOptionSelectRequest,
}

#: The notifications the agent reads, with the schema type of their params.
AGENT_NOTIFICATIONS: Mapping[str, type[BaseModel]] = {
    "session/cancel": schema.CancelNotification,
}

Id = int | str


@attrs.frozen(kw_only=True)
class Request:
    id: Id
    method: str
    params: Any


@attrs.frozen(kw_only=True)
class Notification:
    method: str
    params: Any


@attrs.frozen(kw_only=True)
class Response:
    id: Id
    result: Any = None
    error: Mapping[str, Any] | None = None


def decode_line(line: bytes | str) -> Request | Notification | Response:
    """One line of the peer's output, decoded (``EditorRequestError`` when it is not
    JSON-RPC 2.0)."""
    try:
        message = json.loads(line)
    except ValueError as exc:
        raise EditorRequestError(PARSE_ERROR, f"not JSON: {exc}") from None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        raise EditorRequestError(INVALID_REQUEST, 'not a JSON-RPC 2.0 object ("jsonrpc": "2.0")')
    id_ = message.get("id")
    if id_ is not None and (isinstance(id_, bool) or not isinstance(id_, int | str)):
        raise EditorRequestError(INVALID_REQUEST, "an id must be a number or a string")
    method = message.get("method")
    if method is None:
        if id_ is None or ("result" in message) == ("error" in message):
            raise EditorRequestError(
                INVALID_REQUEST, "a response needs an id and a result or an error"
            )
        error = message.get("error")
        if error is not None and not isinstance(error, dict):
            raise EditorRequestError(INVALID_REQUEST, "a response's error must be an object")
        return Response(id=id_, result=message.get("result"), error=error)
    if not isinstance(method, str):
        raise EditorRequestError(INVALID_REQUEST, "a method must be a string", id=id_)
    params = message.get("params")
    if id_ is None:
        return Notification(method=method, params=params)
    return Request(id=id_, method=method, params=params)


M = TypeVar("M", bound=BaseModel)


def parse_params(model: type[M], params: Any, *, id: Id | None = None) -> M:
    """``params`` validated as ``model`` (``EditorRequestError(INVALID_PARAMS)`` naming the
    fields)."""
    try:
        return model.model_validate(params if params is not None else {})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or 'params'}: {error['msg']}"
            for error in exc.errors()
        )
        raise EditorRequestError(INVALID_PARAMS, f"invalid params: {problems}", id=id) from None


def dump(value: BaseModel | None) -> Any:
    """A schema value as the JSON the protocol wants (camelCase aliases, no unset fields)."""
    if value is None:
        return None
    return value.model_dump(mode="json", by_alias=True, exclude_none=True)


def _line(message: Mapping[str, Any]) -> bytes:
    return (json.dumps(message, separators=(",", ":"), ensure_ascii=False) + "\n").encode()


def encode_result(id: Id, result: BaseModel | None) -> bytes:
    return _line({"jsonrpc": "2.0", "id": id, "result": dump(result)})


def encode_error(id: Id | None, code: int, message: str) -> bytes:
    return _line({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})


def encode_notification(method: str, params: BaseModel) -> bytes:
    return _line({"jsonrpc": "2.0", "method": method, "params": dump(params)})


def encode_request(id: Id, method: str, params: BaseModel) -> bytes:
    return _line({"jsonrpc": "2.0", "id": id, "method": method, "params": dump(params)})
