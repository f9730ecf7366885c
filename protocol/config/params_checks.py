"""Checks of the ``ExecuteParams`` fields that address a conversation and tag its requests (pure).

Rules (each as the CLI and the SDK take them, checked against claude-agent-sdk's
``ClaudeAgentOptions`` and the bundled CLI's flags):

1. ``session_id``, ``resume_session_at`` and ``resume_drops_turn`` are UUIDs (the CLI's
   ``--session-id <uuid>``; the others name transcript entries, whose ids are UUIDs), spelled
   as the CLI writes them: 36 characters, lower or upper case hex, with hyphens.
2. ``session_id`` names the conversation a start creates: with ``resume_session_id`` only for
   a fork (``fork_session=True``), whose new id it then is; resuming in place keeps the old id.
3. ``resume_session_at`` (fork from a given message) needs ``resume_session_id``;
   ``resume_drops_turn`` (the turn the truncation discards, checked by the CLI) needs
   ``resume_session_at``.
4. ``betas`` are beta header names (``context-1m-2025-08-07``): letters, digits, ``.``, ``_``
   and ``-``, no repeats. Names the SDK does not list are passed on (the CLI and the API decide).
5. ``client_app`` travels in an HTTP header: printable Latin-1 (no character above U+00FF, no
   control character), at most 256 characters; ``""`` sends no identifier at all.
"""

from __future__ import annotations

import re
from typing import Any

from claude_trio.protocol.errors import InvalidParamsError

__all__ = [
    "MAX_CLIENT_APP_CHARS",
    "check_betas",
    "check_client_app",
    "check_uuid",
    "check_with_resume",
]

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_BETA = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
MAX_CLIENT_APP_CHARS = 256
"""The longest ``client_app`` (an identifier such as ``my-app/1.0.0``)."""


def check_uuid(field: str, value: object, what: str) -> None:
    """Rule 1: ``None`` or a UUID; ``what`` says where the caller finds one."""
    if value is None:
        return
    if not (isinstance(value, str) and _UUID.fullmatch(value)):
        raise InvalidParamsError(
            field, value, f"a UUID such as '123e4567-e89b-12d3-a456-426614174000' ({what})"
        )


def check_betas(field: str, value: object) -> None:
    """Rule 4 (``value`` is a tuple by now; anything else is refused)."""
    allowed = "a list of beta header names such as 'context-1m-2025-08-07'"
    if not isinstance(value, tuple):
        raise InvalidParamsError(field, value, allowed)
    for i, name in enumerate(value):
        if not (isinstance(name, str) and len(name) <= 128 and _BETA.fullmatch(name)):
            raise InvalidParamsError(
                f"{field}[{i}]", name, allowed + " (letters, digits, '.', '_' and '-')"
            )
    if len(set(value)) != len(value):
        raise InvalidParamsError(field, list(value), "each beta named once")


def check_client_app(field: str, value: object) -> None:
    """Rule 5."""
    if value is None:
        return
    allowed = (
        "None, '' (send no identifier) or an identifier such as 'my-app/1.0.0' in printable "
        f"Latin-1 (it is an HTTP header value), at most {MAX_CLIENT_APP_CHARS} characters"
    )
    if not isinstance(value, str) or len(value) > MAX_CLIENT_APP_CHARS:
        raise InvalidParamsError(field, value, allowed)
    for char in value:
        if ord(char) > 0xFF or not char.isprintable():
            raise InvalidParamsError(field, value, allowed + f"; {char!r} is not")


def check_with_resume(params: Any) -> None:
    """Rules 2 and 3, across fields of an ``ExecuteParams``."""
    resuming = params.resume_session_id is not None
    if params.session_id is not None and resuming and not params.fork_session:
        raise InvalidParamsError(
            "session_id",
            params.session_id,
            "no session_id when resuming in place (the conversation keeps its id); with "
            "fork_session=True it names the fork",
        )
    if params.resume_session_at is not None and not resuming:
        raise InvalidParamsError(
            "resume_session_at",
            params.resume_session_at,
            "only with resume_session_id (it picks the message of that session's transcript "
            "to go on from; fork_session=True keeps the original whole)",
        )
    if params.resume_drops_turn is not None and params.resume_session_at is None:
        raise InvalidParamsError(
            "resume_drops_turn",
            params.resume_drops_turn,
            "only with resume_session_at (it names the user prompt whose turn the truncation "
            "discards)",
        )
