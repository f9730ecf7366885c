"""Where every exception claude-trio raises is defined: one tree, one base.

Users import them from :mod:`claude_trio.errors`, whose docstring draws the tree; the classes
live here so that ``protocol/`` (which imports nothing of ours outside itself, and never trio)
can raise them too. A test checks that every exception class of the package is defined here
(or is private) and is drawn in that tree.

Like h11, we tell apart errors where *we* (or the caller) misused something
(``LocalProtocolError``, ``InvalidParamsError``) from errors where the *peer* (the CLI, a
websocket client) sent nonsense or broke (``RemoteProtocolError``, ``CLIError``).
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

__all__ = [
    "BatchFileError",
    "CLIError",
    "CassetteError",
    "ClaudeTrioError",
    "ClusterUnavailableError",
    "ConnectionLostError",
    "ControlFailedError",
    "ControlRefusedError",
    "EditorRequestError",
    "GatewayError",
    "GatewayRefusedError",
    "GatewayUnavailableError",
    "HookDecisionError",
    "IdempotencyConflictError",
    "InvalidParamsError",
    "LocalProtocolError",
    "ModelDoubleRunaway",
    "RedisUnavailableError",
    "RedisUsageError",
    "RemoteOpError",
    "RemoteProtocolError",
    "ReplayGapError",
    "ResyncRequiredError",
    "ServeUsageError",
    "SessionLostError",
    "SlowSubscriberError",
    "StreamEndedError",
    "UnknownModelError",
    "UnknownSessionError",
    "WireError",
    "WireErrorCode",
]


class ClaudeTrioError(Exception):
    """Base class of every exception claude-trio raises on purpose."""


# -- the caller's input --------------------------------------------------------------------------


class InvalidParamsError(ClaudeTrioError, ValueError):
    """A parameter is invalid. The message names the field, the value and what is allowed."""

    def __init__(self, field: str, value: Any, allowed: str) -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(f"invalid {field}={value!r}: {allowed}")


class UnknownModelError(InvalidParamsError):
    """A model name is neither a known alias, a CLI family alias, nor a full ``claude-`` id."""


class BatchFileError(ClaudeTrioError, ValueError):
    """A batch file line that is not an item; the message names the line and the problem."""

    def __init__(self, where: str, problem: str) -> None:
        self.where = where
        self.problem = problem
        super().__init__(f"{where}: {problem}")


class CassetteError(ClaudeTrioError):
    """A cassette that cannot be read: the message names the file, the line and the problem."""


class ServeUsageError(ClaudeTrioError):
    """``claude-trio serve`` cannot start as asked (its tokens file, its address, its folder);
    the message names the option and what to do."""


class RedisUsageError(ClaudeTrioError):
    """A Redis URL that cannot be used; the message says what to do."""


# -- misuse of the API ---------------------------------------------------------------------------


class LocalProtocolError(ClaudeTrioError):
    """The caller used the API in a way it does not allow (e.g. a session that is closed)."""


class ControlRefusedError(LocalProtocolError):
    """A live control (``set_model``, ``set_permission_mode``, ``context_usage``,
    ``mcp_status``, ``rewind_files``) was asked of a session that cannot take it: its execution
    has ended or is being aborted, or the CLI is gone. The message says which."""


class HookDecisionError(LocalProtocolError, ValueError):
    """A hook returned something its event cannot take (``protocol/extensions/hooks.py``, rule
    2)."""


# -- the peer ------------------------------------------------------------------------------------


class RemoteProtocolError(ClaudeTrioError):
    """The CLI sent something we cannot understand (a malformed or oversize frame)."""


WireErrorCode: TypeAlias = Literal[
    "malformed_json",  # not JSON (or nested too deeply)
    "invalid_message",  # JSON, but not an object (or not text)
    "unknown_op",  # "op" missing from the known set
    "missing_field",  # a required field is absent
    "invalid_field",  # a field has the wrong type or value
    "unknown_field",  # a key the op does not know
    "invalid_params",  # ExecuteParams refused the params (the message names params.<field>)
    "forbidden_field",  # allowed in ExecuteParams, not from a remote client (rule 3)
    "unknown_session",  # (gateway) no session with that id (or not one of this principal's)
    "cannot_continue",  # (gateway) continue while the session runs, or with nothing to resume
    "idempotency_conflict",  # (gateway) an idempotency key given again with another request
    "control_refused",  # (gateway) a live control of a session that has stopped
    "control_failed",  # (gateway) the CLI refused a live control or did not answer it in time
    "limit_reached",  # (gateway) a per-client or server limit; the message names it
    "internal",  # (gateway) a bug of ours
    "unavailable",  # (gateway) the cluster behind it (Redis) does not answer: try again later
]
"""The machine-readable code of a websocket ``error`` frame (``protocol/fanout/wire.py``)."""


class WireError(RemoteProtocolError):
    """A websocket client sent an op we cannot accept. ``code`` is a :data:`WireErrorCode`;
    ``protocol.wire.error_frame(error)`` is the ``error`` frame that answers it."""

    def __init__(self, code: WireErrorCode, message: str, id: str | None = None) -> None:
        self.code: WireErrorCode = code
        self.message = message if len(message) <= 1000 else message[:999] + "\u2026"
        self.id = id
        super().__init__(f"{code}: {message}")


class EditorRequestError(ClaudeTrioError):
    """``claude-trio acp`` answers an editor's request with a JSON-RPC error: a message it
    cannot read or refuses, or a prompt whose turn failed. ``code`` is the JSON-RPC error code,
    ``id`` the request's (None when it could not be read)."""

    def __init__(self, code: int, message: str, *, id: int | str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.id = id


class CLIError(ClaudeTrioError):
    """The CLI could not be started, died, or did not answer in time."""


class ControlFailedError(CLIError):
    """The CLI refused a live control (its message is quoted) or did not answer it within
    ``DriverConfig.control_timeout``."""


class ClusterUnavailableError(ClaudeTrioError):
    """The cluster a gateway or worker runs on (Redis) does not answer: try again later."""


class RedisUnavailableError(ClusterUnavailableError):
    """The Redis of a URL could not be used at start (unreachable, TLS not verified, password
    refused); the message says which, and never holds the password."""


# -- streams and fleets --------------------------------------------------------------------------


class StreamEndedError(ClaudeTrioError):
    """The stream ended before the event that was waited for (``streams.wait_for``)."""


class SlowSubscriberError(ClaudeTrioError):
    """The subscription was dropped because its consumer fell too far behind.

    Raised by every ``receive()`` after the drop. ``reason`` starts with ``"slow consumer"``.
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class UnknownSessionError(ClaudeTrioError, KeyError):
    """No session with this id: it was never started here, or it was forgotten
    (``keep_finished``). A ``KeyError`` too, as ``Fleet.get`` always raised."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(session_id)

    def __str__(self) -> str:
        return (
            f"no session {self.session_id!r} in this fleet: it was never started here, or it "
            "ended and was forgotten (keep_finished bounds how many ended sessions are kept)"
        )


class IdempotencyConflictError(ClaudeTrioError, ValueError):
    """An ``open`` or ``continue`` gave an idempotency key that an earlier request with other
    parameters (another prompt, other params, another session) already used. The key stands
    for one request: retry that request with it, or send this one with a new key."""

    def __init__(self, key: str, op: str) -> None:
        self.key = key
        self.op = op
        super().__init__(
            f"idempotency key {key[:80]!r} was already used by a different {op} request; "
            "a retry must send the same request, or a new request a new key"
        )


class ReplayGapError(ClaudeTrioError):
    """A session host no longer holds every event after ``last_seq`` (its replay buffer, or a
    cluster's trimmed stream, starts at ``oldest_seq``): they cannot be replayed exactly.
    Subscribe again with ``last_seq=None`` for what is left. A gateway client raises its
    subclass ``ResyncRequiredError``."""

    def __init__(self, session_id: str, last_seq: int, oldest_seq: int | None) -> None:
        self.session_id = session_id
        self.last_seq = last_seq
        self.oldest_seq = oldest_seq
        super().__init__(self._message())

    def _message(self) -> str:
        return (
            f"session {self.session_id}: the events after seq {self.last_seq} are no longer "
            f"held (the replay starts at seq {self.oldest_seq}); subscribe again with "
            "last_seq=None for what is left, or keep a larger replay buffer"
        )


# -- the gateway client --------------------------------------------------------------------------


class GatewayError(ClaudeTrioError):
    """Something went wrong between this client and the gateway."""


class GatewayRefusedError(GatewayError):
    """The gateway refused the websocket handshake (``status``: 401 for a wrong token, 403
    for an Origin it does not allow, 503 when it is over a connection cap)."""

    def __init__(self, url: str, status: int, body: str) -> None:
        self.status = status
        self.body = body
        super().__init__(f"the gateway at {url} refused the connection: HTTP {status} {body}")


class GatewayUnavailableError(GatewayError):
    """The client could not connect (again) after its attempts, or was closed."""


class ConnectionLostError(GatewayError):
    """The connection dropped after the op was sent and before its reply: the server may or
    may not have acted on it (``open`` may have started a session: ``list`` shows it)."""


class RemoteOpError(GatewayError):
    """The gateway answered an op with an ``error`` frame: ``code`` is one of
    :data:`WireErrorCode`, the message is the server's."""

    def __init__(self, op: str, code: str, message: str) -> None:
        self.op = op
        self.code = code
        self.message = message
        super().__init__(f"{op}: {code}: {message}")


class ResyncRequiredError(GatewayError, ReplayGapError):
    """The server's replay buffer no longer holds the events after ``last_seq``: they cannot
    be replayed exactly (``oldest_seq`` is the oldest it holds). A ``ReplayGapError``, as
    every session host raises it."""

    def _message(self) -> str:
        return (
            f"session {self.session_id}: the server no longer holds the events after seq "
            f"{self.last_seq} (its replay buffer starts at {self.oldest_seq}); this client fell "
            "too far behind to resume exactly. Attach again with last_seq=None for what is "
            "left, or give the server a larger replay buffer"
        )


class SessionLostError(GatewayError):
    """The server no longer knows the session (it restarted, or forgot it: keep_finished)."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(
            f"session {session_id}: the server no longer knows it (it restarted, or forgot "
            "the session after it ended)"
        )


# -- the offline model ---------------------------------------------------------------------------


class ModelDoubleRunaway(ClaudeTrioError, AssertionError):
    """The CLI kept sending requests past the end of a ``ModelDouble``'s script (an
    ``AssertionError`` too: in a test it is the test's failure)."""
