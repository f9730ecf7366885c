"""The todo tools in the CLI's plan permission mode, through the real CLI against the Messages
API double: planning is what plan mode is for, so ``permission_mode="plan"`` keeps the task
list tools (``TaskCreate``, ``TaskUpdate``) running and reported as ``todo_list_updated``, as
in any other mode, while the tools that change files stay refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import dump, of_type, params, run_session

from claude_trio.protocol.session.events import (
    AdapterReady,
    Result,
    TodoItem,
    TodoListUpdated,
    ToolResult,
    ToolUse,
    UserInputRequest,
)
from claude_trio.testing.model_double import ModelDouble, Reply, turns

pytestmark = pytest.mark.e2e


async def test_task_tools_run_and_are_reported_in_plan_permission_mode(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    execute = params(tmp_path, "plan the work", permission_mode="plan")
    notes = Path(execute.cwd or "") / "notes.txt"
    model_double.responder = turns(
        Reply.tool_use(
            "TaskCreate",
            {"subject": "write tests", "description": "plan", "activeForm": "Writing tests"},
            id="toolu_create",
        ),
        Reply.tool_use("TaskUpdate", {"taskId": "1", "status": "in_progress"}, id="toolu_update"),
        Reply.tool_use("Write", {"file_path": str(notes), "content": "x"}, id="toolu_write"),
        Reply.text("planned"),
    )

    events = await run_session(execute, hermetic)

    [ready] = of_type(events, AdapterReady)
    assert ready.permission_mode == "plan"
    last = model_double.message_requests[-1]
    assert (last.tool_result_text("toolu_create") or "").startswith("Task #1 created successfully")
    assert (last.tool_result_text("toolu_update") or "").startswith("Updated task #1")
    started = TodoItem(
        id="1", content="write tests", status="in_progress", active_form="Writing tests"
    )
    updates = of_type(events, TodoListUpdated)
    assert [(u.tool_name, u.tool_use_id) for u in updates] == [
        ("TaskCreate", "toolu_create"),
        ("TaskCreate", "toolu_create"),
        ("TaskUpdate", "toolu_update"),
    ], dump(events)
    assert updates[-1].items == (started,)
    # The todo tools never show as raw tool events; the Write is one, and plan mode refused it.
    assert [e.name for e in of_type(events, ToolUse)] == ["Write"], dump(events)
    [write_result] = of_type(events, ToolResult)
    assert write_result.is_error, dump(events)
    assert "plan mode" in str(write_result.content), dump(events)
    assert not notes.exists()
    assert of_type(events, UserInputRequest) == [], dump(events)
    [result] = of_type(events, Result)
    assert result.final
    assert result.todo_list_snapshot == (started,)
