"""The todo reducer: TodoWrite lists and the Task* family, mirroring the CLI's own observer."""

from __future__ import annotations

from claude_trio.protocol.session import todos
from claude_trio.protocol.session.events import TodoItem


def test_todo_write_ids_are_synthesized_from_the_index() -> None:
    items = todos.todo_write_items(
        {
            "todos": [
                {"content": "Write tests", "status": "in_progress", "activeForm": "Writing tests"},
                {"content": "Ship", "status": "pending", "activeForm": "Shipping"},
            ]
        }
    )
    assert items == (
        TodoItem(id="0", content="Write tests", status="in_progress", active_form="Writing tests"),
        TodoItem(id="1", content="Ship", status="pending", active_form="Shipping"),
    )


def test_todo_write_skips_malformed_entries() -> None:
    assert todos.todo_write_items({"todos": "nope"}) == ()
    items = todos.todo_write_items({"todos": ["junk", {"content": "ok"}]})
    assert items == (TodoItem(id="1", content="ok", status="pending", active_form=None),)


def test_task_create_is_pending_until_its_result_names_the_id() -> None:
    state = todos.apply_task_create(
        todos.TodoState(), "toolu_1", {"subject": "Fix bug", "description": "the crash"}
    )
    assert state.items == (
        TodoItem(id="toolu_1", content="Fix bug", status="pending", active_form="Fix bug"),
    )
    state = todos.apply_task_create_result(
        state,
        "toolu_1",
        content="Task #1 created successfully: Fix bug",
        is_error=None,
        tool_use_result=None,
    )
    assert [item.id for item in state.items] == ["1"]
    assert state.pending == ()


def test_task_create_id_from_tool_use_result_wins() -> None:
    assert todos.created_task_id("garbage", {"task": {"id": "7", "subject": "x"}}) == "7"
    assert (
        todos.created_task_id([{"type": "text", "text": "Task #12 created successfully: x"}], None)
        == "12"
    )
    assert todos.created_task_id("no id here", None) is None


def test_failed_task_create_drops_the_pending_item() -> None:
    state = todos.apply_task_create(todos.TodoState(), "toolu_1", {"subject": "Fix bug"})
    state = todos.apply_task_create_result(
        state, "toolu_1", content="boom", is_error=True, tool_use_result=None
    )
    assert state.items == ()


def test_unreadable_task_create_result_keeps_the_provisional_item() -> None:
    state = todos.apply_task_create(todos.TodoState(), "toolu_1", {"subject": "Fix bug"})
    after = todos.apply_task_create_result(
        state, "toolu_1", content="something new", is_error=False, tool_use_result=None
    )
    assert after == state


def test_task_update_merges_deletes_and_adds_unknown_ids() -> None:
    state = todos.TodoState(
        tasks=(TodoItem(id="1", content="Fix bug", status="pending", active_form="Fixing"),)
    )
    state = todos.apply_task_update(state, {"taskId": "1", "status": "in_progress"})
    assert state.items == (
        TodoItem(id="1", content="Fix bug", status="in_progress", active_form="Fixing"),
    )
    state = todos.apply_task_update(state, {"taskId": "2", "subject": "Docs"})
    assert [(i.id, i.content, i.status) for i in state.items] == [
        ("1", "Fix bug", "in_progress"),
        ("2", "Docs", "pending"),
    ]
    state = todos.apply_task_update(state, {"taskId": "1", "status": "deleted"})
    assert [i.id for i in state.items] == ["2"]
    assert todos.apply_task_update(state, {"status": "completed"}) == state


def test_task_list_replaces_the_todo_write_list_once_tasks_exist() -> None:
    state = todos.apply_todo_write(todos.TodoState(), {"todos": [{"content": "a"}]})
    assert [i.content for i in state.items] == ["a"]
    state = todos.apply_task_create(state, "toolu_9", {"subject": "b"})
    assert [i.content for i in state.items] == ["b"]
