"""The CLI's built-in tools, by what they can do (pure data and one check).

Checked against CLI 2.1.332. Rules:

1. A tool name in a list (``allowed_tools``, a subagent's ``tools``) is a built-in tool, an MCP
   tool (``mcp__<server>__<tool>``, or ``mcp__<server>`` for all of a server's tools), or a
   permission rule on one of them (``Bash(git status:*)``, ``Read(./src/**)``).
2. Plan mode allows :data:`READONLY_BUILTINS` only and denies :data:`MUTATING_BUILTINS`.
3. A headless session (every session run through claude-trio) gets :data:`SCHEDULING_TOOLS`
   denied by default: a wake-up the agent schedules for itself would fire in a CLI that is
   gone by then.
"""

from __future__ import annotations

import re

from claude_trio.protocol.errors import InvalidParamsError

READONLY_BUILTINS: tuple[str, ...] = (
    "Read",
    "Grep",
    "Glob",
    "WebFetch",
    "WebSearch",
    "TodoWrite",
    "TaskCreate",
    "TaskGet",
    "TaskList",
    "TaskUpdate",
    "ToolSearch",
    "AskUserQuestion",
)
"""Plan mode's allow-list: reading, searching, the todo list (both families), questions."""

MUTATING_BUILTINS: tuple[str, ...] = (
    "Bash",
    "BashOutput",
    "KillShell",
    "Edit",
    "MultiEdit",
    "Write",
    "NotebookEdit",
    "Agent",
    "Task",
    "Skill",
    "Workflow",
)
"""Plan mode's deny list: what runs commands, changes files, or starts an agent that could."""

SCHEDULING_TOOLS: tuple[str, ...] = ("CronCreate", "CronDelete", "CronList", "ScheduleWakeup")
"""Tools that make the agent act later, on its own (rule 3)."""

BUILTIN_TOOLS: frozenset[str] = frozenset(
    {
        *READONLY_BUILTINS,
        *MUTATING_BUILTINS,
        *SCHEDULING_TOOLS,
        "ExitPlanMode",
        "ListAgents",
        "NotebookRead",
        "ReportFindings",
        "SlashCommand",
        "StructuredOutput",
        "TaskOutput",
        "TaskStop",
    }
)
"""Every built-in tool name the CLI knows."""

_MCP = re.compile(r"mcp__[A-Za-z0-9_.-]+(__[A-Za-z0-9_.-]+)?")
_RULE = re.compile(r"(?P<name>[A-Za-z][A-Za-z0-9_]*)\((?P<spec>.*)\)")


def check_tool_name(field: str, name: object) -> str:
    """``name`` if it names a tool (rule 1); ``InvalidParamsError`` naming ``field`` else."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidParamsError(field, name, "a tool name")
    if name in BUILTIN_TOOLS or _MCP.fullmatch(name):
        return name
    rule = _RULE.fullmatch(name)
    if rule and rule.group("name") in BUILTIN_TOOLS:
        return name
    raise InvalidParamsError(
        field,
        name,
        "a built-in tool (" + ", ".join(sorted(BUILTIN_TOOLS)) + "), an MCP tool "
        "(mcp__server__tool) or a rule on one (Bash(git status:*))",
    )


def check_tool_names(field: str, names: object) -> tuple[str, ...]:
    if not isinstance(names, list | tuple):
        raise InvalidParamsError(field, names, "a list of tool names")
    return tuple(check_tool_name(f"{field}[{i}]", name) for i, name in enumerate(names))
