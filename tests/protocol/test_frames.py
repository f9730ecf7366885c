"""protocol/session/frames.py: raw CLI frames before the SDK's parser."""

from __future__ import annotations

from claude_trio.protocol.session.frames import is_host_only, rewrite_unknown_frame, session_state


def test_unknown_frame_types_become_system_frames_that_keep_the_original() -> None:
    frame = {"type": "command_lifecycle", "state": "queued"}
    rewritten = rewrite_unknown_frame(frame)
    assert rewritten["type"] == "system"
    assert rewritten["subtype"] == "passthrough:command_lifecycle"
    assert rewritten["original_frame"] is frame
    summary = rewrite_unknown_frame({"type": "tool_use_summary", "summary": "s"})
    assert summary["subtype"] == "tool_use_summary"


def test_known_frames_pass_unchanged() -> None:
    for frame in ({"type": "assistant"}, {"type": "result"}, {"no": "type"}, {"type": 3}):
        assert rewrite_unknown_frame(frame) is frame


def test_session_state_is_read_from_session_state_changed_only() -> None:
    frame = {"type": "system", "subtype": "session_state_changed", "state": "idle"}
    assert session_state(frame) == "idle"
    assert session_state({**frame, "state": "sleeping"}) is None
    assert session_state({"type": "system", "subtype": "init", "state": "idle"}) is None
    assert is_host_only({**frame, "sdk_host_only": True})
    assert not is_host_only(frame)
