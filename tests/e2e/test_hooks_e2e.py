"""Hooks through the real CLI against the Messages API double.

A ``PreToolUse`` hook on Bash denies ``rm`` (the file stays, the model's next request carries
the reason as the tool's result) and lets ``ls`` run; a ``PostToolUse`` hook sees the tool's
output; a hook that raises is an ``error`` event and the turn still finishes; the CLI itself
lets the stop gate's deny win over a hook's allow.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import dump, of_type, params, run_session, workdir

from claude_trio.protocol.extensions.hooks import HookDecision, HookInput, hook
from claude_trio.protocol.session.events import (
    Error,
    HookInvoked,
    Result,
    ToolResult,
    UserInputResolved,
)
from claude_trio.testing.model_double import ModelDouble, Reply, turns

pytestmark = pytest.mark.e2e


def json_text(body: Any) -> str:
    return json.dumps(body)


@hook("PreToolUse", matcher="Bash")
async def no_rm(call: HookInput) -> HookDecision | None:
    command = str((call.tool_input or {}).get("command", ""))
    if command.split()[:1] == ["rm"]:
        return HookDecision.deny(f"rm is not allowed in this project: {command!r}")
    return None


async def test_a_pre_tool_use_hook_blocks_rm_and_the_model_sees_why(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    keep = Path(workdir(tmp_path)) / "keep.txt"
    keep.write_text("precious")
    seen_after: list[tuple[str | None, Any]] = []

    @hook("PostToolUse", matcher="Bash")
    async def audit(call: HookInput) -> None:
        seen_after.append((call.tool_use_id, call.tool_response))

    model_double.responder = turns(
        Reply.tool_use("Bash", {"command": "rm keep.txt", "description": "rm"}, id="toolu_rm"),
        Reply.tool_use("Bash", {"command": "ls", "description": "list"}, id="toolu_ls"),
        Reply.text("done"),
    )
    events = await run_session(params(tmp_path, "clean up"), hermetic, hooks=[no_rm, audit])

    assert keep.read_text() == "precious"  # the rm never ran
    second, third = model_double.message_requests[1:3]
    reason = "rm is not allowed in this project: 'rm keep.txt'"
    assert reason in str(second.tool_result_text("toolu_rm"))
    assert second.tool_results["toolu_rm"].get("is_error") is True
    assert "keep.txt" in str(third.tool_result_text("toolu_ls"))
    # The PostToolUse hook saw ls's output (and was never called for the denied rm).
    [(tool_use_id, response)] = seen_after
    assert tool_use_id == "toolu_ls"
    assert "keep.txt" in str(response["stdout"])
    calls = [(e.hook_name, e.decision, e.tool_use_id) for e in of_type(events, HookInvoked)]
    assert calls == [
        ("no_rm", "deny", "toolu_rm"),
        ("no_rm", "none", "toolu_ls"),
        ("audit", "none", "toolu_ls"),
    ], dump(events)
    assert of_type(events, HookInvoked)[0].reason == reason
    [rm_result, ls_result] = of_type(events, ToolResult)
    assert rm_result.is_error is True
    assert not ls_result.is_error
    assert isinstance(events[-1], Result)


async def test_a_hook_that_raises_is_an_error_event_and_the_turn_finishes(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    @hook("PostToolUse")
    async def broken(call: HookInput) -> None:
        raise RuntimeError("the audit log is full")

    model_double.responder = turns(
        Reply.tool_use("Bash", {"command": "echo hi", "description": "hi"}, id="toolu_1"),
        Reply.text("finished anyway"),
    )
    events = await run_session(params(tmp_path, "say hi"), hermetic, hooks=[broken])

    [error] = of_type(events, Error)
    assert error.code == "callback"
    assert not error.fatal
    assert error.message == (
        "the PostToolUse hook 'broken' raised RuntimeError: the audit log is full"
    )
    assert [e.decision for e in of_type(events, HookInvoked)] == ["failed"]
    # No opinion was the answer: the tool's result reached the model unchanged.
    assert model_double.message_requests[1].tool_result_text("toolu_1") == "hi"
    last = events[-1]
    assert isinstance(last, Result)
    assert last.final
    assert last.text == "finished anyway"


async def test_the_cli_lets_the_stop_gate_s_deny_win_over_a_hook_s_allow(
    model_double: ModelDouble,
    hermetic: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The stop gate is made to answer as it does after a stop while the session's own
    PreToolUse hook allows: the CLI runs the tool only if every hook allows, and the gate
    stops the turn there: the denial is not handed to the model in one more request."""
    from types import SimpleNamespace

    from claude_trio.actors.session import open as session_module
    from claude_trio.actors.session.core import STOPPED, stop_gate

    stopped = stop_gate(SimpleNamespace(may_write_user_messages=False))  # type: ignore[arg-type]
    monkeypatch.setattr(session_module, "stop_gate", lambda lifecycle: stopped)
    marker = Path(workdir(tmp_path)) / "ran.txt"

    @hook("PreToolUse")
    async def allow_all(call: HookInput) -> HookDecision:
        return HookDecision.allow("fine by me")

    model_double.responder = turns(
        Reply.tool_use("Bash", {"command": "touch ran.txt", "description": "t"}, id="toolu_1"),
        Reply.text("it was denied"),
    )
    events = await run_session(params(tmp_path, "touch it"), hermetic, hooks=[allow_all])

    assert not marker.exists()
    assert [e.decision for e in of_type(events, HookInvoked)] == ["allow"]
    [denied] = [r for r in of_type(events, ToolResult) if r.tool_use_id == "toolu_1"]
    assert STOPPED in str(denied.content)
    assert len(model_double.message_requests) == 1  # the turn stopped at the denied call
    last = events[-1]
    assert isinstance(last, Result)
    assert last.terminal_reason == "hook_stopped"


async def test_a_hook_can_rewrite_a_tool_s_input_and_stop_the_turn(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    @hook("PreToolUse", matcher="Bash")
    async def quieter(call: HookInput) -> HookDecision:
        command = str((call.tool_input or {}).get("command"))
        return HookDecision.allow(
            "rewritten", updated_input={**(call.tool_input or {}), "command": f"{command} -n"}
        )

    @hook("PostToolUse", matcher="Bash")
    async def enough(call: HookInput) -> HookDecision:
        return HookDecision.halt("one command is enough")

    model_double.responder = turns(
        Reply.tool_use("Bash", {"command": "echo hi", "description": "hi"}, id="toolu_1"),
        Reply.text("never asked"),
    )
    events = await run_session(params(tmp_path, "say hi"), hermetic, hooks=[quieter, enough])

    [result] = [r for r in of_type(events, ToolResult) if r.tool_use_id == "toolu_1"]
    assert result.content == "hi -n"  # the command that ran is the rewritten one
    assert [(e.hook_name, e.decision) for e in of_type(events, HookInvoked)] == [
        ("quieter", "allow"),
        ("enough", "stop"),
    ]
    assert len(model_double.message_requests) == 1  # the turn stopped after the tool
    assert isinstance(events[-1], Result)


async def test_a_failing_bash_call_reaches_a_post_tool_use_failure_hook(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    failures: list[HookInput] = []

    @hook("PostToolUseFailure", matcher="Bash")
    async def on_failure(call: HookInput) -> HookDecision:
        failures.append(call)
        return HookDecision.context("the build script is flaky: try once more")

    model_double.responder = turns(
        Reply.tool_use("Bash", {"command": "exit 3", "description": "fail"}, id="toolu_1"),
        Reply.text("noted"),
    )
    events = await run_session(params(tmp_path, "fail"), hermetic, hooks=[on_failure])

    [call] = failures
    assert (call.event, call.tool_name, call.tool_use_id) == (
        "PostToolUseFailure",
        "Bash",
        "toolu_1",
    )
    assert call.tool_input is not None
    assert call.tool_input["command"] == "exit 3"
    assert "3" in str(call.error), call.data
    assert call.is_interrupt is not True
    assert [(e.hook_event, e.decision) for e in of_type(events, HookInvoked)] == [
        ("PostToolUseFailure", "context")
    ], dump(events)
    # The hook's context reached the model in its next request.
    assert "the build script is flaky" in json_text(model_double.message_requests[1].body)
    assert isinstance(events[-1], Result)


async def test_a_permission_request_hook_answers_before_the_user_does(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    """Under an asking mode the CLI asks for approval and runs the PermissionRequest hook at
    the same time; the first answer decides and the other request is withdrawn. A hook that
    answers at once decides: an allow lets the first write run, a deny refuses the second,
    and the approvals nobody answered are withdrawn, not denied."""
    work = Path(workdir(tmp_path))

    @hook("PermissionRequest", matcher="Write")
    async def approve(call: HookInput) -> HookDecision:
        path = str((call.tool_input or {}).get("file_path", ""))
        if path.endswith("ok.txt"):
            return HookDecision.allow()
        return HookDecision.deny(f"not {Path(path).name}")

    model_double.responder = turns(
        Reply.tool_use("Write", {"file_path": str(work / "ok.txt"), "content": "A"}, id="toolu_1"),
        Reply.tool_use("Write", {"file_path": str(work / "no.txt"), "content": "B"}, id="toolu_2"),
        Reply.text("done"),
    )
    execute = params(tmp_path, "write", permission_mode="default")
    events = await run_session(execute, hermetic, hooks=[approve], on_user_input="manual")

    assert (work / "ok.txt").read_text() == "A", dump(events)
    assert not (work / "no.txt").exists()
    assert "not no.txt" in str(model_double.message_requests[2].tool_result_text("toolu_2"))
    assert [(e.hook_event, e.decision) for e in of_type(events, HookInvoked)] == [
        ("PermissionRequest", "allow"),
        ("PermissionRequest", "deny"),
    ]
    assert [e.outcome for e in of_type(events, UserInputResolved)] == ["withdrawn"] * 2
