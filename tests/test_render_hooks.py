"""The console renderer's line for a hook call."""

from __future__ import annotations

from test_render import render

from claude_trio.protocol.session.events import HookInvoked


def test_a_hook_call_is_one_line_with_the_hook_the_tool_and_the_decision() -> None:
    out = render(
        [
            HookInvoked(
                hook_event="PreToolUse",
                hook_name="no_rm",
                decision="deny",
                tool_name="Bash",
                tool_use_id="toolu_1",
                reason="rm is not allowed here",
            ),
            HookInvoked(hook_event="Stop", hook_name="check", decision="none"),
        ]
    )
    assert "hook PreToolUse no_rm Bash -> deny: rm is not allowed here" in out
    assert "hook Stop check -> none" in out


def test_a_live_control_is_one_line_with_its_new_value() -> None:
    from claude_trio.protocol.session.events import ControlApplied

    out = render(
        [
            ControlApplied(control="set_model", value="claude-opus-4-6"),
            ControlApplied(control="set_permission_mode", value="plan"),
            ControlApplied(control="set_model", value=None),
        ]
    )
    assert "» set model: claude-opus-4-6" in out
    assert "» set permission mode: plan" in out
    assert "» set model: (default)" in out
