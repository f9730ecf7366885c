"""The editor face's pure side: events as ACP ``session/update`` payloads, stop reasons,
approvals, prompts and the JSON-RPC framing (``protocol/editor``)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from acp import schema

from claude_trio.protocol.editor import jsonrpc
from claude_trio.protocol.editor.prompts import mcp_servers, prompt_parts
from claude_trio.protocol.editor.updates import (
    REJECTED_MESSAGE,
    UpdateMapper,
    initialize_response,
    model_option,
    permission_answer,
    permission_request,
    session_modes,
    stop_reason,
    tool_kind,
)
from claude_trio.protocol.errors import EditorRequestError, InvalidParamsError
from claude_trio.protocol.session.events import (
    Aborted,
    AdapterReady,
    AssistantMessage,
    ControlApplied,
    Error,
    NormalizedMessage,
    Result,
    TextContent,
    TextDelta,
    ThinkingContent,
    ThinkingDelta,
    TodoItem,
    TodoListUpdated,
    ToolResult,
    ToolUse,
    UserInputRequest,
    UserMessage,
)
from claude_trio.protocol.session.usage import Usage


def dumped(updates: list[Any]) -> list[dict[str, Any]]:
    return [jsonrpc.dump(u) for u in updates]


def result(**fields: Any) -> Result:
    base: dict[str, Any] = {
        "subtype": "success",
        "is_error": False,
        "session_id": "s",
        "usage": Usage(),
        "execution_usage": Usage(),
        "session_usage": Usage(),
    }
    return Result(**{**base, **fields})


def test_deltas_are_chunks_and_a_streamed_message_is_not_sent_twice() -> None:
    mapper = UpdateMapper()
    assert dumped(mapper.updates(ThinkingDelta(text="hm", message_id="m1"))) == [
        {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hm"}}
    ]
    assert dumped(mapper.updates(TextDelta(text="Hi", message_id="m1"))) == [
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Hi"}}
    ]
    whole = NormalizedMessage(
        role="assistant",
        content=(ThinkingContent(thinking="hm"), TextContent(text="Hi")),
        message_id="m1",
    )
    assert mapper.updates(AssistantMessage(message=whole)) == []
    unstreamed = AssistantMessage(message=attrs_evolve(whole, message_id="m2"))
    assert [u.session_update for u in mapper.updates(unstreamed)] == [
        "agent_thought_chunk",
        "agent_message_chunk",
    ]


def attrs_evolve(message: NormalizedMessage, **changes: Any) -> NormalizedMessage:
    import attrs

    return attrs.evolve(message, **changes)


def test_subagent_events_are_left_out() -> None:
    assert UpdateMapper().updates(TextDelta(text="x", is_subagent=True)) == []


def test_a_write_is_an_edit_tool_call_with_a_diff_and_its_result_completes_it() -> None:
    mapper = UpdateMapper()
    (start,) = dumped(
        mapper.updates(
            ToolUse(tool_use_id="t1", name="Write", input={"file_path": "/w/a.py", "content": "x"})
        )
    )
    assert start == {
        "sessionUpdate": "tool_call",
        "toolCallId": "t1",
        "title": "Write /w/a.py",
        "kind": "edit",
        "status": "pending",
        "content": [{"type": "diff", "path": "/w/a.py", "newText": "x"}],
        "locations": [{"path": "/w/a.py"}],
        "rawInput": {"file_path": "/w/a.py", "content": "x"},
    }
    (done,) = dumped(mapper.updates(ToolResult(tool_use_id="t1", content="ok")))
    assert done == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "t1",
        "status": "completed",
        "content": [{"type": "content", "content": {"type": "text", "text": "ok"}}],
    }
    (failed,) = mapper.updates(
        ToolResult(tool_use_id="t2", content=[{"type": "text", "text": "no"}], is_error=True)
    )
    assert failed.status == "failed"


def test_an_edit_is_a_diff_of_old_and_new_text_and_multiedit_one_per_edit() -> None:
    (edit,) = UpdateMapper().updates(
        ToolUse(
            tool_use_id="t",
            name="Edit",
            input={"file_path": "/a", "old_string": "x", "new_string": "y"},
        )
    )
    assert isinstance(edit, schema.ToolCallStart)
    assert [(d.path, d.old_text, d.new_text) for d in edit.content or []] == [("/a", "x", "y")]
    (multi,) = UpdateMapper().updates(
        ToolUse(
            tool_use_id="t",
            name="MultiEdit",
            input={
                "file_path": "/a",
                "edits": [
                    {"old_string": "1", "new_string": "2"},
                    {"old_string": "3", "new_string": "4"},
                ],
            },
        )
    )
    assert isinstance(multi, schema.ToolCallStart)
    assert [(d.old_text, d.new_text) for d in multi.content or []] == [("1", "2"), ("3", "4")]


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("Read", "read"),
        ("Bash", "execute"),
        ("Grep", "search"),
        ("WebFetch", "fetch"),
        ("ExitPlanMode", "switch_mode"),
        ("mcp__x__y", "other"),
    ],
)
def test_tool_kinds(name: str, kind: str) -> None:
    assert tool_kind(name) == kind


def test_a_bash_title_is_its_command() -> None:
    (call,) = UpdateMapper().updates(
        ToolUse(tool_use_id="t", name="Bash", input={"command": "ls -la"})
    )
    assert isinstance(call, schema.ToolCallStart)
    assert (call.title, call.kind, call.locations) == ("`ls -la`", "execute", None)


def test_the_todo_list_is_the_plan_and_a_mode_change_the_current_mode() -> None:
    mapper = UpdateMapper()
    (plan,) = dumped(
        mapper.updates(
            TodoListUpdated(
                tool_use_id="t",
                tool_name="TodoWrite",
                items=(
                    TodoItem(id="1", content="a", status="completed"),
                    TodoItem(id="2", content="b", status="in_progress"),
                    TodoItem(id="3", content="gone", status="deleted"),
                ),
            )
        )
    )
    assert plan == {
        "sessionUpdate": "plan",
        "entries": [
            {"content": "a", "priority": "medium", "status": "completed"},
            {"content": "b", "priority": "medium", "status": "in_progress"},
        ],
    }
    (mode,) = dumped(mapper.updates(ControlApplied(control="set_permission_mode", value="plan")))
    assert mode == {"sessionUpdate": "current_mode_update", "currentModeId": "plan"}
    (user,) = mapper.updates(UserMessage(text="more", uuid="u", timestamp=0.0))
    assert user.session_update == "user_message_chunk"
    # an execution's prompt rides on its adapter_ready: the user's side of a replay
    (prompt,) = dumped(mapper.updates(AdapterReady(model=None, prompt="fix the tests")))
    assert prompt == {
        "sessionUpdate": "user_message_chunk",
        "content": {"type": "text", "text": "fix the tests"},
    }
    assert mapper.updates(AdapterReady(model=None)) == []  # from a peer that does not send it


@pytest.mark.parametrize(
    ("terminal", "cancelled", "reason"),
    [
        (result(), False, "end_turn"),
        (result(stop_reason="max_tokens"), False, "max_tokens"),
        (result(stop_reason="refusal"), False, "refusal"),
        (result(subtype="error_max_turns", is_error=True), False, "max_turn_requests"),
        (Aborted(), False, "cancelled"),
        (result(), True, "cancelled"),
    ],
)
def test_stop_reasons(terminal: Any, cancelled: bool, reason: str) -> None:
    assert stop_reason(terminal, cancelled=cancelled) == reason


def test_an_error_end_is_the_prompts_error() -> None:
    with pytest.raises(EditorRequestError, match="boom"):
        stop_reason(result(subtype="error_during_execution", is_error=True, errors=("boom",)))
    with pytest.raises(EditorRequestError, match="the CLI died"):
        stop_reason(Error(message="the CLI died", code="cli_exited"))


def test_an_approval_is_a_permission_request_and_each_option_an_answer() -> None:
    request = UserInputRequest(
        request_id="r1",
        source="tool_permission",
        tool_name="Bash",
        tool_input={"command": "rm -rf build"},
        tool_use_id="t9",
    )
    asked = jsonrpc.dump(permission_request("s1", request))
    assert asked["sessionId"] == "s1"
    assert asked["toolCall"]["toolCallId"] == "t9"
    assert asked["toolCall"]["title"] == "`rm -rf build`"
    assert [(o["optionId"], o["kind"]) for o in asked["options"]] == [
        ("allow", "allow_once"),
        ("always", "allow_always"),
        ("reject", "reject_once"),
    ]

    def chosen(option: str) -> schema.RequestPermissionResponse:
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(outcome="selected", option_id=option)
        )

    assert permission_answer(chosen("allow")) == {"decision": "allow"}
    assert permission_answer(chosen("always")) == {"decision": "always"}
    assert permission_answer(chosen("reject")) == {"decision": "deny", "message": REJECTED_MESSAGE}
    cancelled = schema.RequestPermissionResponse(outcome=schema.DeniedOutcome(outcome="cancelled"))
    assert permission_answer(cancelled)["interrupt"] is True


def test_initialize_and_modes() -> None:
    init = jsonrpc.dump(initialize_response("1.2"))
    assert init["protocolVersion"] == 1
    assert init["agentCapabilities"]["loadSession"] is True
    assert init["agentCapabilities"]["promptCapabilities"] == {
        "image": True,
        "audio": False,
        "embeddedContext": True,
    }
    modes = session_modes("acceptEdits")
    assert modes.current_mode_id == "acceptEdits"
    assert [m.id for m in modes.available_modes][:2] == ["default", "acceptEdits"]


PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()


def test_prompt_blocks_are_text_context_and_images() -> None:
    blocks = schema.PromptRequest.model_validate(
        {
            "sessionId": "s",
            "prompt": [
                {"type": "text", "text": "fix it"},
                {"type": "resource", "resource": {"uri": "file:///a.py", "text": "x = 1"}},
                {"type": "resource_link", "uri": "file:///b.py", "name": "b.py"},
                {"type": "image", "data": PNG, "mimeType": "image/png"},
            ],
        }
    ).prompt
    text, images = prompt_parts(blocks)
    assert text == (
        'fix it\n\n<context uri="file:///a.py">\nx = 1\n</context>\n\n(see file:///b.py)'
    )
    assert [i.media_type for i in images] == ["image/png"]
    with pytest.raises(InvalidParamsError, match="prompt"):
        prompt_parts([schema.AudioContentBlock(type="audio", data="", mime_type="audio/wav")])


def test_mcp_servers_in_the_clis_form() -> None:
    request = schema.NewSessionRequest.model_validate(
        {
            "cwd": "/w",
            "mcpServers": [
                {
                    "name": "fs",
                    "command": "mcp-fs",
                    "args": ["-v"],
                    "env": [{"name": "A", "value": "1"}],
                },
                {"type": "http", "name": "web", "url": "https://x", "headers": []},
            ],
        }
    )
    assert mcp_servers(request.mcp_servers) == {
        "fs": {"type": "stdio", "command": "mcp-fs", "args": ["-v"], "env": {"A": "1"}},
        "web": {"type": "http", "url": "https://x", "headers": {}},
    }


def test_jsonrpc_lines() -> None:
    assert jsonrpc.decode_line(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}') == (
        jsonrpc.Request(id=1, method="initialize", params={})
    )
    assert jsonrpc.decode_line('{"jsonrpc":"2.0","method":"session/cancel"}') == (
        jsonrpc.Notification(method="session/cancel", params=None)
    )
    assert jsonrpc.decode_line('{"jsonrpc":"2.0","id":3,"result":null}') == jsonrpc.Response(id=3)
    for bad, code in [
        (b"{", jsonrpc.PARSE_ERROR),
        (b'{"id":1,"method":"x"}', jsonrpc.INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":true,"method":"x"}', jsonrpc.INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":1}', jsonrpc.INVALID_REQUEST),
    ]:
        with pytest.raises(EditorRequestError) as caught:
            jsonrpc.decode_line(bad)
        assert caught.value.code == code
    with pytest.raises(EditorRequestError, match="cwd") as caught:
        jsonrpc.parse_params(schema.NewSessionRequest, {"mcpServers": []}, id=4)
    assert (caught.value.code, caught.value.id) == (jsonrpc.INVALID_PARAMS, 4)
    line = jsonrpc.encode_error(4, jsonrpc.INVALID_PARAMS, "bad")
    assert line.endswith(b"\n")
    assert json.loads(line) == {
        "jsonrpc": "2.0",
        "id": 4,
        "error": {"code": -32602, "message": "bad"},
    }


def test_the_model_is_a_select_config_option_of_category_model() -> None:
    option = jsonrpc.dump(model_option(None))
    assert (option["id"], option["category"], option["type"]) == ("model", "model", "select")
    assert option["currentValue"] == "default"
    assert [o["value"] for o in option["options"]] == ["default", "haiku", "opus", "sonnet"]
    assert jsonrpc.dump(model_option("opus"))["currentValue"] == "opus"
