"""Tool approvals, the pure part: the request event, the answer value, the SDK reply."""

from __future__ import annotations

from typing import Any

import pytest
from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny
from claude_agent_sdk.types import PermissionRuleValue, PermissionUpdate

from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.extensions.approvals import (
    DEFAULT_DENY_MESSAGE,
    ApprovalAnswer,
    allow,
    always,
    approval_reply,
    approval_request,
    check_approval_answer,
    deny,
    no_answer_message,
)
from claude_trio.protocol.extensions.user_input import normalize_answer
from claude_trio.protocol.fanout.codec import event_from_json, event_to_json

BASH_INPUT = {"command": "echo hi > out.txt", "description": "write"}
SUGGESTION = PermissionUpdate(
    type="addRules",
    rules=[PermissionRuleValue(tool_name="Bash", rule_content="echo hi *")],
    behavior="allow",
    destination="localSettings",
)


def request() -> Any:
    return approval_request(
        "approve-1",
        "Bash",
        BASH_INPUT,
        suggestions=[SUGGESTION],
        tool_use_id="toolu_1",
        blocked_path="/work/out.txt",
        display_name="Bash",
        description="write",
    )


def test_the_request_carries_the_call_and_the_clis_words_and_survives_the_wire() -> None:
    event = request()
    assert event.source == "tool_permission"
    assert (event.tool_name, event.tool_input, event.tool_use_id) == ("Bash", BASH_INPUT, "toolu_1")
    assert event.blocked_path == "/work/out.txt"
    assert (event.display_name, event.description, event.title) == ("Bash", "write", None)
    # Suggestions in the CLI's wire form, as the CLI sent them.
    assert event.suggestions == (
        {
            "type": "addRules",
            "rules": [{"toolName": "Bash", "ruleContent": "echo hi *"}],
            "behavior": "allow",
            "destination": "localSettings",
        },
    )
    assert event_from_json(event_to_json(event)) == event


def test_constructors_build_the_json_form() -> None:
    assert allow().to_json() == {"decision": "allow"}
    assert allow({"command": "ls"}).to_json() == {"decision": "allow", "input": {"command": "ls"}}
    assert deny("no", interrupt=True).to_json() == {
        "decision": "deny", "message": "no", "interrupt": True
    }  # fmt: skip
    assert always(rules=["Bash(ls:*)"]).to_json() == {"decision": "always", "rules": ["Bash(ls:*)"]}
    for answer in (allow(), deny("x"), always(rules=["Read"])):
        assert check_approval_answer(answer.to_json()) == answer


def test_bare_strings_are_answers_and_deny_gets_a_message() -> None:
    assert check_approval_answer("allow") == allow()
    assert check_approval_answer("deny") == deny(DEFAULT_DENY_MESSAGE)
    assert check_approval_answer({"decision": "deny"}).message == DEFAULT_DENY_MESSAGE


@pytest.mark.parametrize(
    ("answer", "names"),
    [
        ("yes", "answer"),
        (True, "answer"),
        ({}, "answer.decision"),
        ({"decision": "maybe"}, "answer.decision"),
        ({"decision": "allow", "colour": 1}, "colour"),
        ({"decision": "allow", "input": "ls"}, "answer.input"),
        ({"decision": "allow", "message": "hi"}, "no message or interrupt"),
        ({"decision": "deny", "input": {}}, "a deny takes only"),
        ({"decision": "deny", "message": "  "}, "answer.message"),
        ({"decision": "deny", "interrupt": "yes"}, "answer.interrupt"),
        ({"decision": "allow", "rules": ["Bash"]}, "only with 'always'"),
        ({"decision": "always", "rules": "Bash"}, "answer.rules"),
        ({"decision": "always", "rules": ["Bash(x"]}, r"answer.rules\[0\]"),
    ],
)
def test_malformed_answers_are_refused_naming_the_problem(answer: Any, names: str) -> None:
    with pytest.raises(InvalidParamsError, match=names):
        check_approval_answer(answer)
    with pytest.raises(InvalidParamsError):
        normalize_answer(request(), answer)


def test_each_outcome_has_its_reply() -> None:
    event = request()
    assert approval_reply("answered", allow().to_json(), event, timeout=5) == PermissionResultAllow(
        updated_input=BASH_INPUT
    )
    edited = allow({"command": "echo safe"}).to_json()
    assert approval_reply("answered", edited, event, timeout=5) == PermissionResultAllow(
        updated_input={"command": "echo safe"}
    )
    assert approval_reply(
        "answered", deny("not now", interrupt=True).to_json(), event, timeout=5
    ) == (PermissionResultDeny(message="not now", interrupt=True))
    expired = approval_reply("expired", None, event, timeout=7.5)
    assert expired == PermissionResultDeny(message=no_answer_message("Bash", 7.5))
    assert "No one answered" in expired.message
    assert "7.5 s" in expired.message
    cancelled = approval_reply("cancelled", None, event, timeout=5)
    assert isinstance(cancelled, PermissionResultDeny)
    assert cancelled.interrupt is True
    with pytest.raises(InvalidParamsError):
        approval_reply("failed", "boom", event, timeout=5)


def test_always_keeps_the_suggestions_for_the_session_only() -> None:
    reply = approval_reply("answered", {"decision": "always"}, request(), timeout=5)
    assert isinstance(reply, PermissionResultAllow)
    (update,) = reply.updated_permissions or []
    assert update.to_dict() == {
        "type": "addRules",
        "rules": [{"toolName": "Bash", "ruleContent": "echo hi *"}],
        "behavior": "allow",
        "destination": "session",  # never the project's settings file the CLI proposed
    }


def test_always_applies_only_the_allow_rules_the_cli_suggests() -> None:
    widening = [
        PermissionUpdate(type="setMode", mode="acceptEdits", destination="session"),
        PermissionUpdate(type="addDirectories", directories=["/etc"], destination="session"),
        PermissionUpdate(
            type="addRules",
            rules=[PermissionRuleValue(tool_name="Bash", rule_content="curl *")],
            behavior="ask",
            destination="session",
        ),
    ]
    event = approval_request("approve-2", "Bash", BASH_INPUT, suggestions=[*widening, SUGGESTION])
    reply = approval_reply("answered", "always", event, timeout=5)
    assert isinstance(reply, PermissionResultAllow)
    assert [u.to_dict()["type"] for u in reply.updated_permissions or []] == ["addRules"]
    assert (reply.updated_permissions or [])[0].behavior == "allow"
    only_widening = approval_request("approve-3", "Bash", BASH_INPUT, suggestions=widening)
    reply = approval_reply("answered", "always", only_widening, timeout=5)
    assert reply == PermissionResultAllow(updated_input=BASH_INPUT, updated_permissions=[])


def test_always_with_rules_adds_those_rules() -> None:
    answer = always(rules=["Bash(npm test:*)", "Read"]).to_json()
    reply = approval_reply("answered", answer, request(), timeout=5)
    assert isinstance(reply, PermissionResultAllow)
    (update,) = reply.updated_permissions or []
    assert update.to_dict() == {
        "type": "addRules",
        "rules": [{"toolName": "Bash", "ruleContent": "npm test:*"}, {"toolName": "Read"}],
        "behavior": "allow",
        "destination": "session",
    }


def test_answer_is_frozen_and_keyword_only() -> None:
    with pytest.raises(TypeError):
        ApprovalAnswer("allow")  # type: ignore[misc]
