"""Tool approvals through the real CLI against the Messages API double.

Under ``permission_mode="default"`` the CLI asks before a Bash call that writes a file; the
session turns that into a ``user_input_request`` with ``source="tool_permission"``. What the CLI
did with the answer shows in two places only: the model's next request (the tool result the
model gets) and the file system (what really ran).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from helpers import dump, of_type, params, run_session, workdir

from claude_trio import allow_tool, always_allow_tool, deny_tool
from claude_trio.protocol.extensions.approvals import no_answer_message
from claude_trio.protocol.extensions.custom_tools import custom_tool
from claude_trio.protocol.session.events import (
    AdapterReady,
    Result,
    ToolResult,
    UserInputRequest,
    UserInputResolved,
)
from claude_trio.testing.model_double import ModelDouble, ModelRequest, Reply, turns

pytestmark = pytest.mark.e2e


def bash(command: str, tool_id: str) -> Reply:
    return Reply.tool_use("Bash", {"command": command, "description": "write a file"}, id=tool_id)


def echo_result(tool_id: str) -> Any:
    def reply(request: ModelRequest) -> Reply:
        return Reply.text(f"the tool said: {request.tool_result_text(tool_id)}")

    return reply


class Recorder:
    """An ``on_user_input`` handler that records each request and gives a fixed answer."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.requests: list[UserInputRequest] = []

    async def __call__(self, request: UserInputRequest) -> Any:
        self.requests.append(request)
        await trio.lowlevel.checkpoint()
        return self.answer


def asking(tmp_path: Path, prompt: str, **kwargs: Any) -> Any:
    return params(tmp_path, prompt, permission_mode="default", **kwargs)


async def test_a_denied_bash_call_never_runs_and_the_model_gets_the_message(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    target = Path(workdir(tmp_path)) / "out.txt"
    model_double.responder = turns(bash(f"echo hi > {target}", "toolu_b1"), echo_result("toolu_b1"))
    handler = Recorder(deny_tool("Not in this repository, please."))
    events = await run_session(asking(tmp_path, "write it"), hermetic, on_user_input=handler)

    (ready,) = of_type(events, AdapterReady)
    assert ready.permission_mode == "default"
    (request,) = handler.requests
    assert request.source == "tool_permission"
    assert request.tool_name == "Bash"
    assert request.tool_input == {"command": f"echo hi > {target}", "description": "write a file"}
    assert request.tool_use_id == "toolu_b1"
    assert request.blocked_path == str(target)
    assert (request.display_name, request.description) == ("Bash", "write a file")
    # The CLI's own "always allow" proposal: a Bash rule for this command.
    rules = [s for s in request.suggestions if s["type"] == "addRules"]
    assert rules
    assert rules[0]["rules"][0]["toolName"] == "Bash"
    assert request.deadline is not None

    assert not target.exists()
    sent = model_double.message_requests[-1]
    assert sent.tool_result_text("toolu_b1") == "Not in this repository, please."
    assert sent.tool_results["toolu_b1"].get("is_error") is True
    (resolved,) = of_type(events, UserInputResolved)
    assert (resolved.outcome, resolved.answer) == (
        "answered",
        {"decision": "deny", "message": "Not in this repository, please."},
    )
    (result,) = [e for e in of_type(events, ToolResult) if e.tool_use_id == "toolu_b1"]
    assert result.is_error
    final = events[-1]
    assert isinstance(final, Result), dump(events)
    assert final.text == "the tool said: Not in this repository, please."


async def test_allowed_with_an_edited_input_the_edited_command_is_what_runs(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    work = Path(workdir(tmp_path))
    asked, edited = work / "asked.txt", work / "edited.txt"
    model_double.responder = turns(
        bash(f"echo asked > {asked}", "toolu_b1"), echo_result("toolu_b1")
    )
    handler = Recorder(
        allow_tool({"command": f"echo edited > {edited}", "description": "write a file"})
    )
    events = await run_session(asking(tmp_path, "write it"), hermetic, on_user_input=handler)

    assert len(handler.requests) == 1
    assert edited.read_text() == "edited\n"
    assert not asked.exists()
    sent = model_double.message_requests[-1]
    assert not sent.tool_results["toolu_b1"].get("is_error")
    assert isinstance(events[-1], Result), dump(events)


async def test_an_unanswered_approval_is_denied_at_its_deadline_and_the_model_is_told(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    target = Path(workdir(tmp_path)) / "out.txt"
    model_double.responder = turns(bash(f"echo hi > {target}", "toolu_b1"), echo_result("toolu_b1"))
    execute = asking(tmp_path, "write it", user_input_timeout=1.5)
    events = await run_session(execute, hermetic, on_user_input="manual")

    (request,) = of_type(events, UserInputRequest)
    (resolved,) = of_type(events, UserInputResolved)
    assert (resolved.request_id, resolved.outcome) == (request.request_id, "expired")
    assert not target.exists()
    sent = model_double.message_requests[-1]
    assert sent.tool_result_text("toolu_b1") == no_answer_message("Bash", 1.5)
    assert "No one answered the permission request for Bash within 1.5 s" in (
        sent.tool_result_text("toolu_b1") or ""
    )
    assert sent.tool_results["toolu_b1"].get("is_error") is True


async def test_always_allow_is_not_asked_again_for_the_same_call(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    target = Path(workdir(tmp_path)) / "log.txt"
    # Not a shell redirect: the CLI asks before every redirect into a file, rule or not
    # (docs/sdk-facts.md); a command's own writes are the command's business.
    command = "python3 -c \"open('log.txt', 'a').write('line\\n')\""
    model_double.responder = turns(
        bash(command, "toolu_b1"), bash(command, "toolu_b2"), echo_result("toolu_b2")
    )
    handler = Recorder(always_allow_tool())
    events = await run_session(asking(tmp_path, "log twice"), hermetic, on_user_input=handler)

    assert [r.tool_use_id for r in handler.requests] == ["toolu_b1"]  # asked once
    (request,) = handler.requests
    assert request.suggestions == (
        {
            "type": "addRules",
            "rules": [{"toolName": "Bash", "ruleContent": command}],
            "behavior": "allow",
            "destination": "localSettings",
        },
    )
    assert target.read_text() == "line\nline\n"  # ran twice
    second, third = model_double.message_requests[1:]
    assert not second.tool_results["toolu_b1"].get("is_error")
    assert not third.tool_results["toolu_b2"].get("is_error")
    assert [r.outcome for r in of_type(events, UserInputResolved)] == ["answered"]
    # Kept for the session only: the CLI proposed localSettings, nothing was written there.
    assert not (Path(workdir(tmp_path)) / ".claude").exists()


async def test_always_allow_on_a_write_means_always_for_writes_in_the_session(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    """The CLI suggests only a change of mode for a Write (never applied): the session
    remembers the tool, so the second Write runs without being asked."""
    work = Path(workdir(tmp_path))
    model_double.responder = turns(
        Reply.tool_use("Write", {"file_path": str(work / "a.txt"), "content": "A"}, id="toolu_w1"),
        Reply.tool_use("Write", {"file_path": str(work / "b.txt"), "content": "B"}, id="toolu_w2"),
        echo_result("toolu_w2"),
    )
    handler = Recorder(always_allow_tool())
    events = await run_session(asking(tmp_path, "write two"), hermetic, on_user_input=handler)

    assert [r.tool_use_id for r in handler.requests] == ["toolu_w1"], dump(events)  # asked once
    (request,) = handler.requests
    assert all(s.get("type") != "addRules" for s in request.suggestions)
    assert (work / "a.txt").read_text() == "A"
    assert (work / "b.txt").read_text() == "B"
    assert not model_double.message_requests[-1].tool_results["toolu_w2"].get("is_error")
    assert [r.outcome for r in of_type(events, UserInputResolved)] == ["answered"]


async def test_a_custom_tool_goes_through_approval_like_any_tool(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    calls: list[dict[str, Any]] = []

    @custom_tool(input_schema={"type": "object", "properties": {"id": {"type": "string"}}})
    async def lookup(args: dict[str, Any]) -> Any:
        """Find a customer by id."""
        calls.append(args)
        await trio.lowlevel.checkpoint()
        return {"name": "Ada"}

    model_double.responder = turns(
        Reply.tool_use("mcp__trio__lookup", {"id": "c-1"}, id="toolu_c1"),
        Reply.tool_use("mcp__trio__lookup", {"id": "c-2"}, id="toolu_c2"),
        echo_result("toolu_c2"),
    )
    answers = iter([deny_tool("not this one"), allow_tool()])

    async def handler(request: UserInputRequest) -> Any:
        seen.append(request)
        await trio.lowlevel.checkpoint()
        return next(answers)

    seen: list[UserInputRequest] = []
    await run_session(
        asking(tmp_path, "look up"), hermetic, on_user_input=handler, custom_tools=[lookup]
    )
    assert [(r.tool_name, r.tool_input) for r in seen] == [
        ("mcp__trio__lookup", {"id": "c-1"}),
        ("mcp__trio__lookup", {"id": "c-2"}),
    ]
    assert calls == [{"id": "c-2"}]  # the denied call never ran
    assert model_double.message_requests[1].tool_result_text("toolu_c1") == "not this one"
