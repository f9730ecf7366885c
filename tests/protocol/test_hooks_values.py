"""protocol/extensions/hooks.py and protocol/extensions/controls.py, rule by rule: what a decision
becomes for the CLI, which decisions an event refuses, the typed input, the hooks' own checks, and
the live controls' arguments and answers."""

from __future__ import annotations

from typing import Any, get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from claude_trio.errors import HookDecisionError
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.extensions.controls import (
    context_usage_from,
    control_refusal,
    mcp_status_from,
    model_for_switch,
)
from claude_trio.protocol.extensions.hooks import (
    HOOK_EVENTS,
    MAX_HOOKS,
    Hook,
    HookDecision,
    check_hooks,
    decision_name,
    failure_output,
    hook,
    hook_input,
    hook_output,
    output_reason,
    stopped_output,
)


async def nothing(call: Any) -> None:
    return None


def test_a_pre_tool_use_decision_becomes_the_cli_s_permission_output() -> None:
    assert hook_output("PreToolUse", None) == {}
    assert hook_output("PreToolUse", HookDecision.deny("no")) == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "no",
        }
    }
    allowed = hook_output(
        "PreToolUse", HookDecision.allow("ok", updated_input={"command": "ls -la"})
    )
    assert allowed["hookSpecificOutput"]["updatedInput"] == {"command": "ls -la"}
    assert decision_name(allowed) == "allow"
    assert decision_name(hook_output("PreToolUse", HookDecision.ask())) == "ask"


def test_block_context_stop_and_system_message_for_the_other_events() -> None:
    blocked = hook_output("Stop", HookDecision.blocked("the tests fail"))
    assert blocked == {"decision": "block", "reason": "the tests fail"}
    assert (decision_name(blocked), output_reason(blocked)) == ("block", "the tests fail")
    context = hook_output("UserPromptSubmit", HookDecision.context("tabs, not spaces"))
    assert context == {
        "hookSpecificOutput": {
            "hookEventName": "UserPromptSubmit",
            "additionalContext": "tabs, not spaces",
        }
    }
    assert decision_name(context) == "context"
    halted = hook_output(
        "PostToolUse", HookDecision(stop=True, stop_reason="budget", system_message="!")
    )
    assert halted == {"continue_": False, "stopReason": "budget", "systemMessage": "!"}
    assert decision_name(halted) == "stop"
    assert decision_name({}) == "none"


@pytest.mark.parametrize(
    ("event", "decision", "problem"),
    [
        (
            "PostToolUse",
            HookDecision.allow(),
            "permission is for PreToolUse and PermissionRequest hooks",
        ),
        ("PermissionRequest", HookDecision.ask(), "allows or denies, not 'ask'"),
        ("PermissionRequest", HookDecision(permission="deny"), "a deny needs a reason"),
        ("PermissionRequest", HookDecision.blocked("x"), "block is not for PermissionRequest"),
        ("PermissionRequest", HookDecision.context("x"), "additional_context is not for Perm"),
        (
            "PermissionRequest",
            HookDecision(permission="deny", reason="x", updated_input={"a": 1}),
            "updated_input goes with a PermissionRequest allow",
        ),
        ("PreToolUse", HookDecision(permission="deny"), "a deny needs a reason"),
        ("PreToolUse", HookDecision.blocked("x"), "block is for"),
        (
            "PreToolUse",
            HookDecision(permission="deny", reason="x", updated_input={"a": 1}),
            "updated_input goes with",
        ),
        ("PreCompact", HookDecision.context("x"), "additional_context is not for PreCompact"),
        ("Stop", "allow", "a hook returns a HookDecision or None, not str"),
        ("Stop", HookDecision(block=True), "a block's reason must be a string"),
    ],
)
def test_a_decision_its_event_cannot_take_is_refused_naming_why(
    event: Any, decision: Any, problem: str
) -> None:
    with pytest.raises(HookDecisionError, match=problem):
        hook_output(event, decision)


@given(
    event=st.sampled_from(HOOK_EVENTS),
    permission=st.sampled_from([None, "allow", "deny", "ask"]),
    reason=st.one_of(st.none(), st.text(max_size=5)),
    block=st.booleans(),
    stop=st.booleans(),
    context=st.one_of(st.none(), st.text(max_size=5)),
)
def test_any_decision_is_refused_or_becomes_an_output_that_says_what_it_decided(
    event: Any, permission: Any, reason: Any, block: bool, stop: bool, context: Any
) -> None:
    decision = HookDecision(
        permission=permission,
        reason=reason,
        block=block,
        stop=stop,
        additional_context=context,
    )
    try:
        output = hook_output(event, decision)
    except HookDecisionError:
        return
    name = decision_name(output)
    if stop:
        assert name == "stop"
    elif permission is not None:
        assert event in ("PreToolUse", "PermissionRequest")
        assert name == permission
    elif block:
        assert name == "block"
        assert output["reason"] == reason
    elif context is not None:
        assert name == "context"
    else:
        assert name == "none"


def test_a_failed_hook_denies_a_tool_and_has_no_opinion_elsewhere() -> None:
    denied = failure_output("PreToolUse", "the hook broke")
    assert decision_name(denied) == "deny"
    assert output_reason(denied) == "the hook broke"
    for event in HOOK_EVENTS:
        if event != "PreToolUse":
            assert failure_output(event, "x") == {}  # type: ignore[arg-type]


def test_the_input_is_typed_and_keeps_what_the_cli_sent() -> None:
    call = hook_input(
        "PostToolUse",
        {
            "tool_name": "Bash",
            "tool_input": {"command": "ls"},
            "tool_response": {"stdout": "a\n"},
            "permission_mode": "plan",
            "extra": 1,
        },
        "toolu_1",
    )
    assert (call.tool_name, call.tool_use_id, call.permission_mode) == ("Bash", "toolu_1", "plan")
    assert call.tool_input == {"command": "ls"}
    assert call.tool_response == {"stdout": "a\n"}
    assert call.data["extra"] == 1
    assert hook_input("Stop", None).data == {}


def test_the_hook_events_are_the_sdk_s_ten() -> None:
    from claude_agent_sdk.types import HookEvent

    sdk_events = {name for literal in get_args(HookEvent) for name in get_args(literal)}
    assert set(HOOK_EVENTS) == sdk_events
    assert len(HOOK_EVENTS) == 10


def test_a_permission_request_decision_becomes_the_cli_s_decision_object() -> None:
    allowed = hook_output(
        "PermissionRequest", HookDecision.allow(updated_input={"command": "ls -la"})
    )
    assert allowed == {
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "allow", "updatedInput": {"command": "ls -la"}},
        }
    }
    assert decision_name(allowed) == "allow"
    denied = hook_output("PermissionRequest", HookDecision.deny("not on Fridays"))
    assert denied["hookSpecificOutput"]["decision"] == {
        "behavior": "deny",
        "message": "not on Fridays",
    }
    assert (decision_name(denied), output_reason(denied)) == ("deny", "not on Fridays")
    assert hook_output("PermissionRequest", None) == {}  # the usual approval asks
    halted = hook_output("PermissionRequest", HookDecision.halt("enough"))
    assert halted == {"continue_": False, "stopReason": "enough"}
    # A failed hook has no opinion (the user is asked); a stopping session denies.
    assert failure_output("PermissionRequest", "broke") == {}
    stopped = stopped_output("PermissionRequest", "stopping")
    assert (decision_name(stopped), output_reason(stopped)) == ("deny", "stopping")
    assert stopped_output("PreToolUse", "stopping") == failure_output("PreToolUse", "stopping")
    assert stopped_output("SubagentStart", "stopping") == {}


def test_the_failure_and_subagent_start_events_take_context() -> None:
    for event in ("PostToolUseFailure", "SubagentStart"):
        assert hook_output(event, HookDecision.context("look at the log")) == {
            "hookSpecificOutput": {"hookEventName": event, "additionalContext": "look at the log"}
        }
    with pytest.raises(HookDecisionError, match="block is for"):
        hook_output("PostToolUseFailure", HookDecision.blocked("x"))
    with pytest.raises(HookDecisionError, match="permission is for"):
        hook_output("SubagentStart", HookDecision.deny("x"))


def test_the_new_events_inputs_are_typed() -> None:
    failed = hook_input(
        "PostToolUseFailure",
        {
            "tool_name": "Bash",
            "tool_input": {"command": "false"},
            "tool_use_id": "toolu_9",
            "error": "Exit code 1",
            "is_interrupt": False,
            "agent_id": "a-1",
        },
    )
    assert (failed.tool_name, failed.tool_use_id) == ("Bash", "toolu_9")
    assert failed.error == "Exit code 1"
    assert failed.is_interrupt is False
    assert failed.agent_id == "a-1"
    suggestion = {"type": "setMode", "mode": "acceptEdits", "destination": "session"}
    asked = hook_input(
        "PermissionRequest",
        {"tool_name": "Write", "tool_input": {"file_path": "/a"}, "permission_suggestions": [
            suggestion, "junk"]},
    )
    assert asked.permission_suggestions == (suggestion,)
    assert asked.tool_input == {"file_path": "/a"}
    started = hook_input("SubagentStart", {"agent_id": "a-2", "agent_type": "Explore"})
    assert (started.agent_id, started.agent_type) == ("a-2", "Explore")
    assert (started.error, started.is_interrupt, started.permission_suggestions) == (
        None, None, None
    )  # fmt: skip
    for event, matcher in (
        ("PostToolUseFailure", "Bash"),
        ("PermissionRequest", "Write|Edit"),
        ("SubagentStart", "Explore"),
    ):
        assert hook(event, matcher=matcher)(nothing).matcher == matcher  # type: ignore[arg-type]


def test_hooks_are_checked_when_made() -> None:
    made = hook("PreToolUse", matcher="Write|Edit", timeout=2)(nothing)
    assert (made.name, made.label) == ("nothing", "PreToolUse hook 'nothing' (Write|Edit)")
    bad: list[tuple[dict[str, Any], str]] = [
        ({"event": "Elicitation", "callback": nothing}, "hook event"),
        ({"event": "Stop", "callback": nothing, "matcher": "x"}, "PreToolUse, SubagentStart take"),
        ({"event": "PreToolUse", "callback": nothing, "matcher": "("}, "a valid pattern"),
        ({"event": "PreToolUse", "callback": print}, "an async function"),
        ({"event": "PreToolUse", "callback": nothing, "timeout": 0}, "seconds > 0"),
    ]
    for kwargs, problem in bad:
        with pytest.raises(InvalidParamsError, match=problem):
            Hook(**kwargs)
    with pytest.raises(InvalidParamsError, match=r"hooks\[1\]"):
        check_hooks([made, nothing])
    with pytest.raises(InvalidParamsError, match=f"at most {MAX_HOOKS}"):
        check_hooks([made] * (MAX_HOOKS + 1))
    with pytest.raises(InvalidParamsError, match="a list of Hook"):
        check_hooks(made)


def test_live_control_arguments_and_refusals() -> None:
    assert model_for_switch("opus-4.6", custom_server=False) == "claude-opus-4-6"
    assert model_for_switch(None, custom_server=False) is None
    assert model_for_switch("qwen3", custom_server=True) == "qwen3"
    with pytest.raises(InvalidParamsError, match="unknown model alias"):
        model_for_switch("qwen3", custom_server=False)
    with pytest.raises(InvalidParamsError, match="model"):
        model_for_switch("", custom_server=True)
    assert control_refusal(ended=False, aborting=False, cli_running=True) is None
    assert "has ended" in str(control_refusal(ended=True, aborting=False, cli_running=True))
    assert "being aborted" in str(control_refusal(ended=False, aborting=True, cli_running=True))
    assert "not running" in str(control_refusal(ended=False, aborting=False, cli_running=False))


def test_control_answers_are_read_leniently() -> None:
    usage = context_usage_from(
        {
            "totalTokens": 10,
            "maxTokens": 100,
            "percentage": 10,
            "model": "m",
            "categories": [{"name": "a", "tokens": 4}, {"name": "b"}, "junk"],
        }
    )
    assert (usage.total_tokens, usage.max_tokens, usage.percentage) == (10, 100, 10.0)
    assert usage.categories == (("a", 4),)
    empty = context_usage_from({})
    assert (empty.total_tokens, empty.percentage, empty.categories) == (None, None, ())
    servers = mcp_status_from(
        {
            "mcpServers": [
                {"name": "db", "status": "failed", "error": "boom"},
                {"name": "trio", "status": "connected", "tools": [{"name": "lookup"}]},
                {"status": "nameless"},
            ]
        }
    )
    assert [(s.name, s.status, s.error, s.tools) for s in servers] == [
        ("db", "failed", "boom", ()),
        ("trio", "connected", None, ("lookup",)),
    ]
