"""The model's todo list, rebuilt from its todo tool calls (a pure reducer).

Two tool families write the list, and the CLI offers one or the other (``docs/sdk-facts.md``):

* ``TodoWrite`` - the input's ``todos`` array IS the whole list
  (``[{"content", "status", "activeForm"}]``); entries have no id, so the id is the index
  (as the TypeScript library's ``todoItemsFromTodoWriteInput``).
* Tasks v2 - ``TaskCreate({"subject", "description", "activeForm"?})`` and
  ``TaskUpdate({"taskId", "status"?, "subject"?, "activeForm"?})``; ``TaskList`` / ``TaskGet``
  only read. The task id is chosen by the CLI and only comes back in the ``TaskCreate``
  result: text ``"Task #<id> created successfully: <subject>"`` and
  ``tool_use_result={"task": {"id", "subject", ...}}``.

The reducer mirrors the CLI's own (the bundled CLI's ``pendingCreates`` / ``tasks`` observer):
a ``TaskCreate`` is a *pending* item (its id is the ``tool_use_id`` until the result names the
real one); its result moves it into ``tasks`` under the real id, or drops it when the call
failed; ``TaskUpdate`` with ``status="deleted"`` removes the task, otherwise merges the given
fields (an update for an unknown id creates it, like the CLI does). The list is the tasks in
creation order followed by the pending creates; when no task was ever created it is the last
``TodoWrite`` list. Malformed tool input degrades gracefully (bad entries are skipped, a missing
field keeps its old value) because it comes from the model, and the CLI reports the error to
the model itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from claude_trio.protocol.checks import is_int
from claude_trio.protocol.session.events import TodoItem

TODO_WRITE = "TodoWrite"
TASK_CREATE = "TaskCreate"
TASK_UPDATE = "TaskUpdate"
TASK_LIST = "TaskList"
TASK_GET = "TaskGet"

#: Tools whose calls write the list (a ``todo_list_updated`` event each).
TODO_WRITING_TOOLS = frozenset({TODO_WRITE, TASK_CREATE, TASK_UPDATE})
#: Every todo tool: their ``tool_use`` and ``tool_result`` never surface as tool events.
TODO_TOOLS = TODO_WRITING_TOOLS | {TASK_LIST, TASK_GET}

# The CLI's own pattern for the TaskCreate result text.
_CREATED = re.compile(r"^Task #(\S+) created successfully")


@attrs.frozen(kw_only=True)
class TodoState:
    """The list as the CLI sees it. ``tasks`` and ``pending`` keep insertion order."""

    written: tuple[TodoItem, ...] = ()
    tasks: tuple[TodoItem, ...] = ()
    pending: tuple[TodoItem, ...] = ()  # TaskCreate calls awaiting their result; id = tool_use_id

    @property
    def items(self) -> tuple[TodoItem, ...]:
        if self.tasks or self.pending:
            return self.tasks + self.pending
        return self.written


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def todo_write_items(tool_input: Mapping[str, Any]) -> tuple[TodoItem, ...]:
    """``TodoWrite`` input -> items; ids are the indexes, entries that are not objects skipped."""
    todos = tool_input.get("todos")
    if not isinstance(todos, list):
        return ()
    return tuple(
        TodoItem(
            id=str(index),
            content=_str(entry.get("content")) or "",
            status=_str(entry.get("status")) or "pending",
            active_form=_str(entry.get("activeForm")),
        )
        for index, entry in enumerate(todos)
        if isinstance(entry, Mapping)
    )


def apply_todo_write(state: TodoState, tool_input: Mapping[str, Any]) -> TodoState:
    return attrs.evolve(state, written=todo_write_items(tool_input))


def apply_task_create(
    state: TodoState, tool_use_id: str, tool_input: Mapping[str, Any]
) -> TodoState:
    """A ``TaskCreate`` call: a pending item until its result names the task id."""
    subject = _str(tool_input.get("subject"))
    if subject is None:
        return state
    item = TodoItem(
        id=tool_use_id,
        content=subject,
        status="pending",
        active_form=_str(tool_input.get("activeForm")) or subject,
    )
    return attrs.evolve(state, pending=(*state.pending, item))


def created_task_id(content: Any, tool_use_result: Mapping[str, Any] | None) -> str | None:
    """The id a ``TaskCreate`` result names: ``tool_use_result.task.id``, else the result text."""
    if tool_use_result is not None:
        task = tool_use_result.get("task")
        if isinstance(task, Mapping) and isinstance(task.get("id"), str | int):
            return str(task["id"])
    if isinstance(content, list):
        content = "".join(
            block.get("text", "")
            for block in content
            if isinstance(block, Mapping) and block.get("type") == "text"
        )
    if isinstance(content, str) and (match := _CREATED.match(content)):
        return match.group(1)
    return None


def apply_task_create_result(
    state: TodoState,
    tool_use_id: str,
    *,
    content: Any,
    is_error: bool | None,
    tool_use_result: Mapping[str, Any] | None,
) -> TodoState:
    """The result of a ``TaskCreate``: promote the pending item, or drop it if the call failed.

    A result whose id cannot be read leaves the item pending (still listed, under the
    ``tool_use_id``): losing a todo would be worse than a provisional id.
    """
    pending = next((item for item in state.pending if item.id == tool_use_id), None)
    if pending is None:
        return state
    others = tuple(item for item in state.pending if item.id != tool_use_id)
    if is_error:
        return attrs.evolve(state, pending=others)
    task_id = created_task_id(content, tool_use_result)
    if task_id is None:
        return state
    if any(task.id == task_id for task in state.tasks):
        return attrs.evolve(state, pending=others)
    return attrs.evolve(
        state, pending=others, tasks=(*state.tasks, attrs.evolve(pending, id=task_id))
    )


def apply_task_update(state: TodoState, tool_input: Mapping[str, Any]) -> TodoState:
    """A ``TaskUpdate`` call: delete, merge into the known task, or add an unknown one."""
    raw_id = tool_input.get("taskId")
    if not (isinstance(raw_id, str) or is_int(raw_id)):
        return state
    task_id = str(raw_id)
    status = _str(tool_input.get("status"))
    if status == "deleted":
        return attrs.evolve(state, tasks=tuple(t for t in state.tasks if t.id != task_id))
    subject = _str(tool_input.get("subject"))
    active_form = _str(tool_input.get("activeForm"))
    old = next((task for task in state.tasks if task.id == task_id), None)
    if old is None:
        new = TodoItem(
            id=task_id,
            content=subject or task_id,
            status=status or "pending",
            active_form=active_form or subject or task_id,
        )
        return attrs.evolve(state, tasks=(*state.tasks, new))
    new = TodoItem(
        id=task_id,
        content=subject or old.content,
        status=status or old.status,
        active_form=active_form or old.active_form,
    )
    return attrs.evolve(state, tasks=tuple(new if t.id == task_id else t for t in state.tasks))
