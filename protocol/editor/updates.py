"""Unified events as the Agent Client Protocol's ``session/update`` notifications, and the rest
of what an editor is told: the agent's capabilities and modes, the prompt's stop reason, a tool
approval as ``session/request_permission`` and the editor's choice as the approval's answer.

:class:`UpdateMapper` is one ACP session's state (which messages already streamed their text);
``mapper.updates(event)`` is the list of updates for one event, the same for a live turn and for
the replay ``session/load`` sends:

=====================================  ==========================================================
event                                  update
=====================================  ==========================================================
``text_delta``                         ``agent_message_chunk``
``thinking``                           ``agent_thought_chunk``
``assistant_message``                  its text / thinking, when no delta of it streamed
``adapter_ready`` (its ``prompt``)     ``user_message_chunk``: the execution's prompt (the
                                       agent leaves out the one the editor just sent)
``user_message``                       ``user_message_chunk`` (a push, from any client)
``tool_use``                           ``tool_call`` (kind, title, locations; Edit and Write as
                                       diffs), status ``pending``
``tool_result``                        ``tool_call_update``: ``completed`` or ``failed``, the text
``todo_list_updated``                  ``plan``
``control_applied`` (permission mode)  ``current_mode_update``
=====================================  ==========================================================

Subagents' events are left out: the editor sees the ``Task`` tool call and its result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs
from acp import schema
from acp.helpers import (
    SessionUpdate,
    plan_entry,
    start_tool_call,
    text_block,
    tool_content,
    tool_diff_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_current_mode,
    update_plan,
    update_tool_call,
    update_user_message_text,
)

from claude_trio.protocol.config.models import CLI_FAMILY_ALIASES
from claude_trio.protocol.config.permissions import PERMISSION_MODES, PermissionMode
from claude_trio.protocol.editor.jsonrpc import INTERNAL_ERROR
from claude_trio.protocol.errors import EditorRequestError
from claude_trio.protocol.session.events import (
    Aborted,
    AdapterReady,
    AssistantMessage,
    ControlApplied,
    Error,
    Event,
    Result,
    TextContent,
    TextDelta,
    ThinkingContent,
    ThinkingDelta,
    TodoListUpdated,
    ToolResult,
    ToolUse,
    UserInputRequest,
    UserMessage,
)

__all__ = [
    "AGENT_NAME",
    "ALLOW_ALWAYS",
    "ALLOW_ONCE",
    "MODEL_CHOICES",
    "MODEL_OPTION",
    "MODE_DESCRIPTIONS",
    "REJECTED_MESSAGE",
    "REJECT_ONCE",
    "UpdateMapper",
    "initialize_response",
    "model_option",
    "permission_answer",
    "permission_request",
    "session_modes",
    "stop_reason",
    "tool_call_start",
    "tool_kind",
    "tool_result_update",
    "turn_failed",
]

AGENT_NAME = "claude-trio"

ALLOW_ONCE = "allow"
ALLOW_ALWAYS = "always"
REJECT_ONCE = "reject"
REJECTED_MESSAGE = "The user rejected this tool call in the editor."

MODE_DESCRIPTIONS: Mapping[PermissionMode, tuple[str, str]] = {
    "default": ("Ask", "Ask before each tool call no rule allows"),
    "acceptEdits": ("Accept edits", "Edits run without asking; other tools ask"),
    "plan": ("Plan", "Read and plan only; nothing is changed"),
    "bypassPermissions": ("Bypass permissions", "Every tool call runs without asking"),
    "dontAsk": ("Don't ask", "Tool calls no rule allows are denied without asking"),
    "auto": ("Auto", "The CLI decides which tool calls to ask about"),
}


def initialize_response(version: str | None = None) -> schema.InitializeResponse:
    """What the agent says about itself: the protocol version it speaks, ``session/load``,
    images and embedded context in prompts, MCP servers over HTTP and SSE."""
    return schema.InitializeResponse(
        protocol_version=schema_protocol_version(),
        agent_capabilities=schema.AgentCapabilities(
            load_session=True,
            prompt_capabilities=schema.PromptCapabilities(
                image=True, audio=False, embedded_context=True
            ),
            mcp_capabilities=schema.McpCapabilities(http=True, sse=True),
        ),
        agent_info=schema.Implementation(
            name=AGENT_NAME, title="claude-trio", version=version or "0"
        ),
    )


def schema_protocol_version() -> int:
    from acp.meta import PROTOCOL_VERSION

    return int(PROTOCOL_VERSION)


def session_modes(current: PermissionMode) -> schema.SessionModeState:
    """The permission modes, as the protocol's session modes."""
    return schema.SessionModeState(
        current_mode_id=current,
        available_modes=[
            schema.SessionMode(
                id=mode, name=MODE_DESCRIPTIONS[mode][0], description=MODE_DESCRIPTIONS[mode][1]
            )
            for mode in PERMISSION_MODES
        ],
    )


MODEL_OPTION = "model"
"""The id of the session's model, a config option (the protocol's model selection)."""

MODEL_CHOICES: tuple[str, ...] = ("default", *sorted(CLI_FAMILY_ALIASES))
"""The models offered: the CLI's default, and its families (the newest model of each)."""


def model_option(model: str | None) -> schema.SessionConfigOptionSelect:
    """The model as a select config option of category ``model`` (``None``: the default)."""
    return schema.SessionConfigOptionSelect(
        id=MODEL_OPTION,
        name="Model",
        category="model",
        type="select",
        current_value=model or "default",
        options=[
            schema.SessionConfigSelectOption(
                value=choice,
                name="Default" if choice == "default" else choice.capitalize(),
                description="The CLI's default model" if choice == "default" else None,
            )
            for choice in MODEL_CHOICES
        ],
    )


# -- tools ----------------------------------------------------------------------------------------

_KINDS: Mapping[str, schema.ToolKind] = {
    "Read": "read",
    "NotebookRead": "read",
    "Edit": "edit",
    "MultiEdit": "edit",
    "Write": "edit",
    "NotebookEdit": "edit",
    "Bash": "execute",
    "BashOutput": "execute",
    "KillShell": "execute",
    "Grep": "search",
    "Glob": "search",
    "LS": "search",
    "WebFetch": "fetch",
    "WebSearch": "fetch",
    "TodoWrite": "think",
    "Task": "think",
    "ExitPlanMode": "switch_mode",
}


def tool_kind(name: str) -> schema.ToolKind:
    """The protocol's kind of a tool (``other`` for one it has no kind for)."""
    return _KINDS.get(name, "other")


def _path(tool_input: Mapping[str, Any]) -> str | None:
    for key in ("file_path", "notebook_path", "path"):
        value = tool_input.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def tool_title(name: str, tool_input: Mapping[str, Any]) -> str:
    """A one-line title: the command of a ``Bash``, the path of a file tool, the pattern of a
    search; else the tool's name."""
    command = tool_input.get("command")
    if name == "Bash" and isinstance(command, str):
        return f"`{command}`"
    path = _path(tool_input)
    pattern = tool_input.get("pattern")
    if path is not None and not isinstance(pattern, str):
        return f"{name} {path}"
    if isinstance(pattern, str):
        return f"{name} {pattern}" + (f" in {path}" if path else "")
    url = tool_input.get("url") or tool_input.get("query")
    if isinstance(url, str):
        return f"{name} {url}"
    return name


def tool_locations(tool_input: Mapping[str, Any]) -> list[schema.ToolCallLocation]:
    path = _path(tool_input)
    if path is None:
        return []
    line = tool_input.get("offset")
    return [schema.ToolCallLocation(path=path, line=line if isinstance(line, int) else None)]


def tool_diffs(name: str, tool_input: Mapping[str, Any]) -> list[schema.FileEditToolCallContent]:
    """``Write`` and ``Edit`` (each edit of a ``MultiEdit``) as the protocol's diffs."""
    path = _path(tool_input)
    if path is None:
        return []
    if name == "Write" and isinstance(tool_input.get("content"), str):
        return [tool_diff_content(path, tool_input["content"], None)]
    edits: Sequence[Any] = ()
    if name == "Edit":
        edits = (tool_input,)
    elif name == "MultiEdit" and isinstance(tool_input.get("edits"), list):
        edits = tool_input["edits"]
    return [
        tool_diff_content(path, edit["new_string"], edit["old_string"])
        for edit in edits
        if isinstance(edit, Mapping)
        and isinstance(edit.get("old_string"), str)
        and isinstance(edit.get("new_string"), str)
    ]


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(block.get("text", "")) for block in content if isinstance(block, Mapping)
        )
    return "" if content is None else str(content)


def tool_call_start(
    tool_use_id: str, name: str, tool_input: Mapping[str, Any]
) -> schema.ToolCallStart:
    """A ``tool_use`` as the ``tool_call`` update that announces it, ``pending``."""
    diffs = tool_diffs(name, tool_input)
    return start_tool_call(
        tool_use_id,
        tool_title(name, tool_input),
        kind=tool_kind(name),
        status="pending",
        content=list(diffs) or None,
        locations=tool_locations(tool_input) or None,
        raw_input=dict(tool_input),
    )


def tool_result_update(
    tool_use_id: str, content: Any, *, is_error: bool | None
) -> schema.ToolCallProgress:
    """A ``tool_result`` as the ``tool_call_update`` that ends its call, with its text."""
    text = _result_text(content)
    return update_tool_call(
        tool_use_id,
        status="failed" if is_error else "completed",
        content=[tool_content(text_block(text))] if text else None,
    )


# -- the mapper -----------------------------------------------------------------------------------

_TODO_STATUS: Mapping[str, schema.PlanEntryStatus] = {
    "pending": "pending",
    "in_progress": "in_progress",
    "completed": "completed",
}


@attrs.define(kw_only=True)
class UpdateMapper:
    """One ACP session's mapping of events to ``session/update`` payloads (module docstring)."""

    #: Messages whose text or thinking already went out as deltas.
    _streamed: set[str] = attrs.field(factory=set)

    def updates(self, event: Event) -> list[SessionUpdate]:
        if event.is_subagent:
            return []
        match event:
            case TextDelta(text=text) | ThinkingDelta(text=text) if text:
                if event.message_id is not None:
                    self._streamed.add(event.message_id)
                if isinstance(event, TextDelta):
                    return [update_agent_message_text(text)]
                return [update_agent_thought_text(text)]
            case AssistantMessage(message=message):
                if message.message_id is not None and message.message_id in self._streamed:
                    return []
                out: list[SessionUpdate] = []
                for block in message.content:
                    if isinstance(block, TextContent) and block.text:
                        out.append(update_agent_message_text(block.text))
                    elif isinstance(block, ThinkingContent) and block.thinking:
                        out.append(update_agent_thought_text(block.thinking))
                return out
            case AdapterReady(prompt=prompt) if prompt:
                return [update_user_message_text(prompt)]
            case UserMessage(text=text):
                return [update_user_message_text(text)]
            case ToolUse(tool_use_id=tool_use_id, name=name, input=tool_input):
                return [tool_call_start(tool_use_id, name, tool_input)]
            case ToolResult(tool_use_id=tool_use_id, content=content, is_error=is_error):
                return [tool_result_update(tool_use_id, content, is_error=is_error)]
            case TodoListUpdated(items=items):
                return [
                    update_plan(
                        plan_entry(item.content, status=_TODO_STATUS.get(item.status, "pending"))
                        for item in items
                        if item.status in _TODO_STATUS
                    )
                ]
            case ControlApplied(control="set_permission_mode", value=value) if value:
                return [update_current_mode(value)]
        return []


# -- the end of a prompt --------------------------------------------------------------------------


def turn_failed(message: str) -> EditorRequestError:
    """The prompt's execution ended in an error: the editor gets it as the request's error."""
    return EditorRequestError(INTERNAL_ERROR, message)


def stop_reason(terminal: Event, *, cancelled: bool = False) -> schema.StopReason:
    """The stop reason of ``session/prompt`` for the execution's final terminal event.

    ``cancelled`` after ``session/cancel`` (or an ``aborted``); ``max_turn_requests`` when the
    turn limit ended it; the model's own ``max_tokens`` and ``refusal``; ``end_turn`` for any
    other success. An error result or a fatal error raises
    :class:`~claude_trio.protocol.errors.EditorRequestError` with its text.
    """
    if cancelled or isinstance(terminal, Aborted):
        return "cancelled"
    if isinstance(terminal, Result):
        if terminal.subtype == "error_max_turns":
            return "max_turn_requests"
        if terminal.stop_reason == "max_tokens":
            return "max_tokens"
        if terminal.stop_reason == "refusal":
            return "refusal"
        if not terminal.is_error:
            return "end_turn"
        raise turn_failed("; ".join(terminal.errors) or terminal.text or terminal.subtype)
    if isinstance(terminal, Error):
        raise turn_failed(terminal.message)
    raise turn_failed(f"the execution ended with {terminal.kind}")


# -- tool approvals -------------------------------------------------------------------------------


def permission_request(
    session_id: str, request: UserInputRequest
) -> schema.RequestPermissionRequest:
    """A tool approval (``user_input_request`` of source ``tool_permission``) as
    ``session/request_permission``: allow once, allow always (for the session), reject."""
    name = request.tool_name or "tool"
    tool_input = dict(request.tool_input or {})
    diffs = tool_diffs(name, tool_input)
    return schema.RequestPermissionRequest(
        session_id=session_id,
        tool_call=schema.ToolCallUpdate(
            tool_call_id=request.tool_use_id or request.request_id,
            title=request.title or tool_title(name, tool_input),
            kind=tool_kind(name),
            status="pending",
            content=list(diffs) or None,
            locations=tool_locations(tool_input) or None,
            raw_input=tool_input,
        ),
        options=[
            schema.PermissionOption(option_id=ALLOW_ONCE, name="Allow", kind="allow_once"),
            schema.PermissionOption(
                option_id=ALLOW_ALWAYS, name="Always allow", kind="allow_always"
            ),
            schema.PermissionOption(option_id=REJECT_ONCE, name="Reject", kind="reject_once"),
        ],
    )


def permission_answer(response: schema.RequestPermissionResponse) -> Mapping[str, Any]:
    """The editor's choice as the approval's answer (``handle.answer``); a cancelled request
    (the editor cancelled the prompt) denies and stops the turn."""
    outcome = response.outcome
    if isinstance(outcome, schema.AllowedOutcome):
        if outcome.option_id == ALLOW_ONCE:
            return {"decision": "allow"}
        if outcome.option_id == ALLOW_ALWAYS:
            return {"decision": "always"}
        return {"decision": "deny", "message": REJECTED_MESSAGE}
    return {"decision": "deny", "message": "The editor cancelled the request.", "interrupt": True}


Decision = Literal["allow", "always", "deny"]
