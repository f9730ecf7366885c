"""The CLI's raw stdout frames, before the SDK's parser sees them (pure).

The SDK's parser drops top-level frame types it does not model (``tool_use_summary``,
``command_lifecycle``, ...); the session's transport tap rewrites them with
:func:`rewrite_unknown_frame` so they stay in order with everything else. The CLI also reports
its own state (``session_state_changed``: ``running``, ``requires_action``, ``idle``), which the
session follows to know when an interrupted CLI has settled (:func:`session_state`); those
frames are meant for the SDK host only and never become events.
"""

from __future__ import annotations

from typing import Any

# Top-level frame types the SDK's parser (0.2.189) understands, or routes itself.
KNOWN_TYPES = frozenset(
    {
        "user",
        "assistant",
        "system",
        "result",
        "stream_event",
        "rate_limit_event",
        "conversation_reset",
        "control_request",
        "control_response",
        "control_cancel_request",
        "transcript_mirror",
        "keep_alive",
    }
)

SDK_ROUTED = frozenset(
    {"control_request", "control_response", "control_cancel_request", "transcript_mirror"}
)
"""Frames the SDK's own router needs (the control protocol); every other frame is a message."""

CLI_STATES = frozenset({"running", "requires_action", "idle"})


def rewrite_unknown_frame(frame: dict[str, Any]) -> dict[str, Any]:
    """Turn a frame the SDK would drop into a ``system`` frame that keeps it.

    ``tool_use_summary`` becomes subtype ``tool_use_summary``; any other unknown type ``T``
    becomes subtype ``passthrough:T``. The original frame rides along as ``original_frame``.
    """
    frame_type = frame.get("type")
    if not isinstance(frame_type, str) or frame_type in KNOWN_TYPES:
        return frame
    summary = frame_type == "tool_use_summary"
    subtype = frame_type if summary else f"passthrough:{frame_type}"
    rewritten = dict(frame)
    rewritten["type"] = "system"
    rewritten["subtype"] = subtype
    rewritten["original_frame"] = frame
    return rewritten


def session_state(frame: dict[str, Any]) -> str | None:
    """The CLI state a ``session_state_changed`` frame reports, or None for any other frame."""
    if frame.get("type") != "system" or frame.get("subtype") != "session_state_changed":
        return None
    state = frame.get("state")
    return state if isinstance(state, str) and state in CLI_STATES else None


def is_host_only(frame: dict[str, Any]) -> bool:
    """A frame the CLI sent only because the SDK host asked for it (the SDK drops these)."""
    return frame.get("sdk_host_only") is True
