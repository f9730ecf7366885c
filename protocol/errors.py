"""The one exception hierarchy of claude-trio.

``ClaudeTrioError`` is the base. Like h11, we tell apart errors where *we* (or the caller) misused
something (``LocalProtocolError``, ``InvalidParamsError``) from errors where the *peer* (the CLI)
sent nonsense or broke (``RemoteProtocolError``, ``CLIError``).
"""

from __future__ import annotations

from typing import Any


class ClaudeTrioError(Exception):
    """Base class of every exception claude-trio raises on purpose."""


class InvalidParamsError(ClaudeTrioError, ValueError):
    """A parameter is invalid. The message names the field, the value and what is allowed."""

    def __init__(self, field: str, value: Any, allowed: str) -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(f"invalid {field}={value!r}: {allowed}")


class LocalProtocolError(ClaudeTrioError):
    """The caller used the API in a way it does not allow (e.g. a session that is closed)."""


class RemoteProtocolError(ClaudeTrioError):
    """The CLI sent something we cannot understand (a malformed or oversize frame)."""


class ClusterUnavailableError(ClaudeTrioError):
    """The cluster a gateway or worker runs on (Redis) does not answer: try again later."""


class CLIError(ClaudeTrioError):
    """The CLI could not be started, died, or did not answer in time."""


class ControlRefusedError(LocalProtocolError):
    """A live control (``set_model``, ``set_permission_mode``, ``context_usage``,
    ``mcp_status``, ``rewind_files``) was asked of a session that cannot take it: its execution
    has ended or is being aborted, or the CLI is gone. The message says which."""


class ControlFailedError(CLIError):
    """The CLI refused a live control (its message is quoted) or did not answer it within
    ``DriverConfig.control_timeout``."""


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
