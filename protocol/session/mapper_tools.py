"""The mapper's bookkeeping of tool calls: the todo list and the subagent tasks (pure).

Two small state holders the mapper (``mapper.py``) owns, one each, and calls inline:

* :class:`TodoTracker` keeps the main thread's todo list as the todo tools change it (rule
  R10): the list after each call, the list before it (for a refusal to take back), and the
  snapshot a ``Result`` carries.
* :class:`SubagentTasks` keeps the subagents' tasks (rules R13, R14): which ``Agent`` tool use
  started which task, the tasks in flight, and the tasks already completed (each is reported
  once).

Both return the events a message causes, unstamped: the mapper stamps and emits them (and
flushes a subagent's buffered message before its ``SubagentCompleted``, rule R8). Nothing here
blocks or imports trio.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import claude_agent_sdk as sdk

from claude_trio.protocol.session import todos
from claude_trio.protocol.session.events import (
    Event,
    SubagentCompleted,
    SubagentProgress,
    SubagentStarted,
    TodoItem,
    TodoListContent,
    TodoListUpdated,
    WarningEvent,
)
from claude_trio.protocol.session.mapper_system import opt_str

TERMINAL_TASK_STATUSES = frozenset({"completed", "failed", "stopped", "killed"})


def result_text(content: Any) -> str:
    """A tool result's text, for a message (blocks joined, at most 300 characters)."""
    if isinstance(content, list):
        content = " ".join(
            str(block.get("text", "")) for block in content if isinstance(block, Mapping)
        )
    text = str(content) if content is not None else ""
    return text[:300]


class TodoTracker:
    """The main thread's todo list as its todo tools change it (rule R10)."""

    def __init__(self) -> None:
        # The todo tool of each todo call seen: its result is suppressed (R10).
        self.tool_uses: dict[str, str] = {}
        # The list before each todo call changed it, for a refusal to take back (R10).
        self._before: dict[str, todos.TodoState] = {}
        self._last_change: str | None = None
        self._state = todos.TodoState()
        self.snapshot: tuple[TodoItem, ...] | None = None
        """The list after the latest change; None if no todo tool ever changed it."""

    def call(
        self, block: sdk.ToolUseBlock, *, first: bool
    ) -> tuple[TodoListContent, TodoListUpdated | None]:
        """A todo tool's call: the block it becomes in its message, and the list's update
        when the call changed it (``first``: its id was never reported before)."""
        self.tool_uses[block.id] = block.name
        update = None
        if first and block.name in todos.TODO_WRITING_TOOLS:
            self._before[block.id] = self._state
            self._last_change = block.id
            match block.name:
                case todos.TODO_WRITE:
                    self._state = todos.apply_todo_write(self._state, block.input)
                case todos.TASK_CREATE:
                    self._state = todos.apply_task_create(self._state, block.id, block.input)
                case _:
                    self._state = todos.apply_task_update(self._state, block.input)
            update = self._updated(block.id, block.name)
        return TodoListContent(tool_use_id=block.id, items=self._state.items), update

    def result(
        self,
        block: sdk.ToolResultBlock,
        tool_name: str,
        tool_use_result: Mapping[str, Any] | None,
    ) -> list[Event]:
        """A todo tool's result: suppressed; a ``TaskCreate``'s may change the list, and a
        refusal takes the call's change back and is reported."""
        events: list[Event] = []
        before = self._before.pop(block.tool_use_id, None)
        if block.is_error:
            events.append(
                WarningEvent(
                    code="todo_refused",
                    message=f"the CLI refused {tool_name} ({block.tool_use_id}): "
                    f"{result_text(block.content)}",
                )
            )
            if tool_name != todos.TASK_CREATE:
                if before is not None and self._last_change == block.tool_use_id:
                    self._state = before
                    self._last_change = None
                    events.append(self._updated(block.tool_use_id, tool_name))
                return events
        if tool_name != todos.TASK_CREATE:
            return events
        before = self._state
        self._state = todos.apply_task_create_result(
            before,
            block.tool_use_id,
            content=block.content,
            is_error=block.is_error,
            tool_use_result=tool_use_result,
        )
        if self._state != before:
            events.append(self._updated(block.tool_use_id, tool_name))
        return events

    def _updated(self, tool_use_id: str, tool_name: str) -> TodoListUpdated:
        self.snapshot = self._state.items
        return TodoListUpdated(items=self.snapshot, tool_use_id=tool_use_id, tool_name=tool_name)


class SubagentTasks:
    """The subagents' tasks of one session (rules R13, R14)."""

    def __init__(self) -> None:
        self.task_by_tool_use: dict[str, str] = {}
        """The ``Agent`` tool use id -> the task it started (R13)."""
        self.tool_use_by_task: dict[str, str] = {}
        self.in_flight: set[str] = set()
        """Tasks started and not completed."""
        self._completed: set[str] = set()

    def started(self, message: sdk.TaskStartedMessage) -> SubagentStarted:
        """``task_started`` -> ``SubagentStarted``."""
        if message.tool_use_id is not None:
            self.task_by_tool_use[message.tool_use_id] = message.task_id
            self.tool_use_by_task[message.task_id] = message.tool_use_id
        if message.task_id not in self._completed:
            self.in_flight.add(message.task_id)
        return SubagentStarted(
            task_id=message.task_id,
            tool_use_id=message.tool_use_id,
            description=message.description,
            task_type=message.task_type,
            raw=message,
        )

    def progress(self, message: sdk.TaskProgressMessage) -> SubagentProgress:
        """``task_progress`` -> ``SubagentProgress``."""
        return SubagentProgress(
            task_id=message.task_id,
            tool_use_id=message.tool_use_id or self.tool_use_by_task.get(message.task_id),
            description=message.description,
            last_tool_name=message.last_tool_name,
            usage=dict(message.usage),
            raw=message,
        )

    def notified(self, message: sdk.TaskNotificationMessage) -> SubagentCompleted | None:
        """``task_notification`` -> ``SubagentCompleted``, unless the task already completed."""
        return self._finished(
            message,
            task_id=message.task_id,
            status=message.status,
            summary=message.summary,
            usage=dict(message.usage) if message.usage is not None else None,
            tool_use_id=message.tool_use_id,
        )

    def updated(
        self, message: sdk.TaskUpdatedMessage
    ) -> SubagentProgress | SubagentCompleted | None:
        """``task_updated`` -> ``SubagentProgress``; with a terminal status (completed, failed,
        stopped, killed) ``SubagentCompleted``, unless the task already completed."""
        if message.status in TERMINAL_TASK_STATUSES:
            return self._finished(
                message,
                task_id=message.task_id,
                status=message.status,
                summary=None,
                usage=None,
                tool_use_id=None,
            )
        return SubagentProgress(
            task_id=message.task_id,
            tool_use_id=self.tool_use_by_task.get(message.task_id),
            description=opt_str(message.patch.get("description")),
            raw=message,
        )

    def _finished(
        self,
        message: sdk.SystemMessage,
        *,
        task_id: str,
        status: str,
        summary: str | None,
        usage: Mapping[str, Any] | None,
        tool_use_id: str | None,
    ) -> SubagentCompleted | None:
        self.in_flight.discard(task_id)
        if task_id in self._completed:
            return None
        self._completed.add(task_id)
        return SubagentCompleted(
            task_id=task_id,
            tool_use_id=tool_use_id or self.tool_use_by_task.get(task_id),
            status=status,
            summary=summary,
            usage=usage,
            raw=message,
        )
