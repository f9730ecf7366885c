"""The CLI's permission modes (pure).

A permission mode decides which tool calls the CLI runs on its own and which it asks about
(through ``can_use_tool``, which a session turns into ``user_input_request`` events):

* ``default``: asks before any tool that is not read-only or allowed by a rule;
* ``acceptEdits``: file edits run, the rest asks as in ``default``;
* ``plan``: read-only tools only, no edits or shell;
* ``bypassPermissions``: every tool runs (the TypeScript library's default);
* ``dontAsk``: what is not allowed by a rule is denied, never asked;
* ``auto``: the CLI's classifier decides.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

from claude_trio.protocol.errors import InvalidParamsError

PermissionMode: TypeAlias = Literal[
    "default", "acceptEdits", "plan", "bypassPermissions", "dontAsk", "auto"
]

PERMISSION_MODES: tuple[PermissionMode, ...] = (
    "default",
    "acceptEdits",
    "plan",
    "bypassPermissions",
    "dontAsk",
    "auto",
)
"""Every mode the CLI knows, in order of how much it lets run without asking (roughly)."""


def check_permission_mode(name: str, value: Any) -> PermissionMode:
    """``value`` as a :data:`PermissionMode`, or ``InvalidParamsError`` naming ``name`` and the
    modes there are."""
    if not isinstance(value, str) or value not in PERMISSION_MODES:
        allowed = ", ".join(repr(mode) for mode in PERMISSION_MODES)
        raise InvalidParamsError(name, value, f"one of {allowed}")
    return value
