"""The CLI's built-in tools: the names it reports, and what plan mode and headless sessions decide
by them (pure data and one check).

Pinned to the bundled CLI (``versions.VERIFIED_CLI``, 2.1.332): ``tests/e2e/test_tools_e2e.py``
starts it against the Messages API double and checks that the ``tools`` list of its ``init``
frame is :data:`CLI_TOOLS` (with :data:`CONDITIONAL_TOOLS` present only when their condition
holds). Rules:

1. A tool name in a list (``tools``, ``allowed_tools``, ``disallowed_tools``, a subagent's
   ``tools``, an approval's rules) is a built-in tool, an MCP tool (``mcp__<server>__<tool>``,
   or ``mcp__<server>`` for all of a server's tools), or a permission rule on one of them
   (``Bash(git status:*)``, ``Read(./src/**)``).
2. A well-formed name the CLI does not report (:data:`KNOWN_TOOLS`) is accepted with an
   :class:`UnknownToolWarning` (with a "did you mean" when one is close): a newer CLI may offer
   it, and a list naming a tool that does not exist only does nothing. A malformed name (not a
   string, empty, a bad ``mcp__`` name, a rule without its closing parenthesis) is refused with
   ``InvalidParamsError``.
3. Plan mode allows :data:`READONLY_BUILTINS` only and denies :data:`MUTATING_BUILTINS`; the
   gateway's remote policy offers :data:`READONLY_BUILTINS` only. These are the pinned lists a
   decision needs; a tool the CLI adds later is in neither until it is classified here.
4. A headless session (every session run through claude-trio) gets :data:`SCHEDULING_TOOLS`
   denied by default: a wake-up the agent schedules for itself would fire in a CLI that is
   gone by then.
"""

from __future__ import annotations

import difflib
import re
import sys
import warnings
from collections.abc import Mapping
from types import FrameType, MappingProxyType

from claude_trio.protocol.errors import InvalidParamsError

__all__ = [
    "CLI_TOOLS",
    "CONDITIONAL_TOOLS",
    "KNOWN_TOOLS",
    "MUTATING_BUILTINS",
    "OTHER_BUILD_TOOLS",
    "READONLY_BUILTINS",
    "SCHEDULING_TOOLS",
    "UnknownToolWarning",
    "check_tool_name",
    "check_tool_names",
]


class UnknownToolWarning(UserWarning):
    """A tool list names a tool the bundled CLI does not report (rule 2); it is passed on as
    given. Silence it with ``warnings.filterwarnings("ignore", category=UnknownToolWarning)``,
    or make it an error with ``"error"`` in place of ``"ignore"``."""


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
    "Monitor",
    "Edit",
    "MultiEdit",
    "Write",
    "NotebookEdit",
    "EnterWorktree",
    "ExitWorktree",
    "Agent",
    "Task",
    "SendMessage",
    "Skill",
    "Workflow",
)
"""Plan mode's deny list: what runs commands, changes files or the working tree, or starts
(or instructs) an agent that could."""

SCHEDULING_TOOLS: tuple[str, ...] = ("CronCreate", "CronDelete", "CronList", "ScheduleWakeup")
"""Tools that make the agent act later, on its own (rule 4)."""

CONDITIONAL_TOOLS: Mapping[str, str] = MappingProxyType(
    {
        "AskUserQuestion": "with on_user_input (the CLI then has a can_use_tool to ask)",
        "EnterPlanMode": "with on_user_input (the CLI then has a can_use_tool to ask)",
        "ExitPlanMode": "with on_user_input (the CLI then has a can_use_tool to ask)",
        "StructuredOutput": "with an output_schema",
        "TodoWrite": "with CLAUDE_CODE_ENABLE_TASKS=0 in the CLI's environment, in place of "
        "TaskCreate, TaskGet, TaskList and TaskUpdate",
    }
)
"""Tools the bundled CLI reports only in some configurations, and which. (The todo tools,
TaskCreate and its family, need ``CLAUDE_CODE_ENABLE_TODO_TOOLS=1`` on the CLI's default model:
claude-trio always sets it, ``options.DEFAULT_ENV``.)"""

CLI_TOOLS: frozenset[str] = frozenset(
    {
        *SCHEDULING_TOOLS,
        *CONDITIONAL_TOOLS,
        "Bash",
        "Edit",
        "EnterWorktree",
        "ExitWorktree",
        "ListAgents",
        "Monitor",
        "NotebookEdit",
        "Read",
        "ReportFindings",
        "SendMessage",
        "Skill",
        "Task",
        "TaskCreate",
        "TaskGet",
        "TaskList",
        "TaskStop",
        "TaskUpdate",
        "ToolSearch",
        "WebFetch",
        "WebSearch",
        "Workflow",
        "Write",
    }
)
"""The built-in tools the bundled CLI reports in its ``init`` frame, over every configuration
(checked by an e2e test against the bundled version)."""

OTHER_BUILD_TOOLS: frozenset[str] = frozenset(
    {
        "Agent",  # the subagent tool's own name; the CLI reports it as Task
        "Glob",  # Glob and Grep: builds without the embedded search tools offer them
        "Grep",
        "LSP",
        "PowerShell",
        "BashOutput",  # offered by earlier CLI versions
        "KillShell",
        "MultiEdit",
        "NotebookRead",
        "SlashCommand",
        "TaskOutput",
    }
)
"""Built-in tools the CLI offers in other builds, platforms or recent versions but the bundled
one does not report: named without a warning, since a list that names them is not a typo."""

KNOWN_TOOLS: frozenset[str] = CLI_TOOLS | OTHER_BUILD_TOOLS
"""Every built-in tool name accepted without an :class:`UnknownToolWarning`."""

_MCP = re.compile(r"mcp__[A-Za-z0-9_.-]+(__[A-Za-z0-9_.-]+)?")
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_RULE = re.compile(r"(?P<name>[A-Za-z][A-Za-z0-9_]*)\((?P<spec>.*)\)")
_FORMS = (
    "a built-in tool (Read, Bash, ...), an MCP tool (mcp__server__tool, or mcp__server for all "
    "of its tools) or a rule on one (Bash(git status:*))"
)


def check_tool_name(field: str, name: object) -> str:
    """``name`` if it names a tool (rule 1); ``InvalidParamsError`` naming ``field`` if it is
    malformed; an :class:`UnknownToolWarning` if it is well formed but unknown (rule 2)."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidParamsError(field, name, f"a tool name: {_FORMS}")
    if name.startswith("mcp_"):
        if _MCP.fullmatch(name):
            return name
        raise InvalidParamsError(
            field,
            name,
            "an MCP tool as mcp__<server>__<tool> (or mcp__<server> for all of a server's "
            "tools), each part letters, digits, '_', '.' or '-'",
        )
    rule = _RULE.fullmatch(name)
    tool = rule.group("name") if rule else name
    if rule is None and not _NAME.fullmatch(name):
        raise InvalidParamsError(field, name, _FORMS)
    if tool not in KNOWN_TOOLS:
        _warn_unknown(field, name, tool)
    return name


def check_tool_names(field: str, names: object) -> tuple[str, ...]:
    """Each of ``names`` checked by :func:`check_tool_name` (``field[i]`` in an error)."""
    if not isinstance(names, list | tuple):
        raise InvalidParamsError(field, names, "a list of tool names")
    return tuple(check_tool_name(f"{field}[{i}]", name) for i, name in enumerate(names))


def _warn_unknown(field: str, name: str, tool: str) -> None:
    close = difflib.get_close_matches(tool, sorted(KNOWN_TOOLS), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    warnings.warn(
        UnknownToolWarning(
            f"{field}={name!r}: {tool!r} is not a tool the bundled claude CLI reports{hint} "
            "(passed on as given: a newer CLI may know it)"
        ),
        stacklevel=_callers_level(),
    )


def _callers_level() -> int:
    """The ``stacklevel`` of the first frame outside claude-trio and attrs, so the warning
    points at the caller's line that made the list, not at this module."""
    frame = sys._getframe(2)  # check_tool_name, which is stacklevel 2 of warnings.warn
    level = 2
    while frame.f_back is not None and _internal(frame):
        frame = frame.f_back
        level += 1
    return level


def _internal(frame: FrameType) -> bool:
    module = str(frame.f_globals.get("__name__", ""))
    filename = frame.f_code.co_filename
    return (
        module == "claude_trio"
        or module.startswith(("claude_trio.", "attr.", "attrs."))
        or filename.startswith("<attrs generated")
    )
