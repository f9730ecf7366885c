"""The errors of the fake CLI."""

from __future__ import annotations

from claude_trio.protocol.errors import ClaudeTrioError


class ScriptError(ClaudeTrioError):
    """A responder or background job of a ``FakeCLI`` raised. The fake process exited with 1."""


class SDKControlError(ClaudeTrioError):
    """The SDK answered a control request of the fake CLI with ``subtype: "error"``."""


class RequestCancelledError(ClaudeTrioError):
    """The fake CLI withdrew its own control request (``control_cancel_request``)."""
