"""What the claude-code architecture can do, as one frozen value.

A consumer uses it to decide what to offer before it starts a session (a push box only when
``mid_turn_push``, a skills picker only when ``skills``, ...). The values are the TypeScript
library's claims for the claude-code adapter, each backed by this library (see the field docs
for where).
"""

from __future__ import annotations

from typing import Any

import attrs

from claude_trio.protocol.config.architecture import (
    EFFORT_LEVELS,
    KNOWN_PRESETS,
    THINKING_DISPLAYS,
    THINKING_MODES,
)
from claude_trio.protocol.config.models import ADAPTIVE_THINKING_ONLY
from claude_trio.protocol.config.params import MCP_SERVER_TYPES
from claude_trio.protocol.config.permissions import PERMISSION_MODES
from claude_trio.protocol.config.providers import PROVIDERS
from claude_trio.protocol.config.resume import RESUME_IMMUTABLE, RESUME_NARROW_ONLY
from claude_trio.protocol.extensions.approvals import ASKING_MODES, DECISIONS, TOOL_PERMISSION
from claude_trio.protocol.extensions.custom_tools import SERVER_NAME
from claude_trio.protocol.extensions.hooks import HOOK_EVENTS
from claude_trio.protocol.extensions.scope import SCOPE_ENFORCEMENTS
from claude_trio.protocol.extensions.skills import PLUGIN_NAME


@attrs.frozen(kw_only=True)
class ArchitectureCapabilities:
    architecture: str
    mid_turn_push: bool
    """``push()`` during an execution; folded into the turn or queued as the next one."""
    resume: bool
    """Native ``resume_session_id``."""
    resume_immutable: frozenset[str]
    """Settings that must not change on resume (``resume.RESUME_IMMUTABLE``)."""
    subagents: bool
    """``subagent_started`` / ``subagent_progress`` / ``subagent_completed`` mapped, not made up."""
    todo_lists: bool
    """``todo_list_updated`` from TodoWrite (and the Task* tools), snapshot on the result."""
    user_input_sources: frozenset[str]
    """``user_input_request.source`` values: AskUserQuestion, MCP elicitation and tool
    approvals (``tool_permission``)."""
    permission_modes: tuple[str, ...]
    """``ExecuteParams.permission_mode`` values (``permissions.PERMISSION_MODES``); unset is
    ``bypassPermissions``."""
    asking_permission_modes: tuple[str, ...]
    """The modes that ask before tool calls (``approvals.ASKING_MODES``): each call is a
    ``user_input_request`` with ``source="tool_permission"``; they need ``on_user_input``."""
    tool_approval_decisions: tuple[str, ...]
    """What an answer to a tool approval may decide (``approvals.ApprovalAnswer``)."""
    thinking: bool
    thinking_modes: tuple[str, ...]
    thinking_displays: tuple[str, ...]
    effort_levels: tuple[str, ...]
    adaptive_thinking_only_models: frozenset[str]
    flush: bool
    """``flush`` on ``compact_boundary`` (manual ``/compact`` or auto-compaction)."""
    skills: bool
    """The ``claude_skills*`` keys, and ``skill_invoked`` events."""
    mcp_server_types: frozenset[str]
    plan_mode: bool
    plan_mode_strategy: str
    """``tool-visibility``: plan mode's allow-list (read-only built-ins only; MCP servers are the
    caller's choice), not the CLI's ``plan`` permission mode."""
    system_prompt_presets: frozenset[str]
    partial_messages: bool
    """``text_delta`` / ``thinking`` deltas while the model streams."""
    tool_use_summary: bool
    abort: bool
    adapter_ready: bool
    """``adapter_ready`` first in every execution: the resolved configuration, secrets masked."""
    timeouts: frozenset[str]
    """``run_timeout`` / ``idle_timeout`` on the trio clock."""
    max_budget_usd: bool
    providers: frozenset[str]
    """Provider presets (``protocol/config/providers.py``); any model id with one."""
    fallback_model: bool
    subagent_definitions: bool
    """``ExecuteParams.subagents``: subagents offered to the model."""
    image_input: frozenset[str]
    """Image types a prompt or a push may carry."""
    structured_output: bool
    """``output_schema`` -> ``Result.structured_output``, checked against the schema."""
    tool_lists: frozenset[str]
    """``tools``, ``allowed_tools``, ``disallowed_tools``."""
    context_window: bool
    """``Result.context_tokens`` / ``context_window`` / ``context_share``."""
    custom_tools: str | None
    """``open_session(custom_tools=...)``: Python tools run as trio code in the session, served
    as the in-process MCP server of this name (the model sees ``mcp__<name>__<tool>``); local
    only, never over the gateway."""
    inline_skills: str | None
    """``ExecuteParams.inline_skills``: skills written to a private folder for one session,
    offered as ``<this>:<name>``; ``list_skills(cwd)`` lists the skills on disk."""
    path_scope: frozenset[str]
    """The ``ExecuteParams`` fields of a path scope (``protocol/extensions/scope.py``): the file
    tools confined by the CLI's permission settings, Bash by its OS sandbox."""
    scope_enforcements: tuple[str, ...]
    """``hard`` (no start without the Bash sandbox) and ``soft`` (start with a warning)."""
    resume_narrow_only: frozenset[str]
    """Settings a resume may narrow but not widen (``resume.RESUME_NARROW_ONLY``)."""
    hooks: frozenset[str] = frozenset()
    """``open_session(hooks=...)``: the hook events a trio callback can answer
    (``protocol/extensions/hooks.py``), each call a ``hook_invoked`` event; local only (a fleet's
    operator may give them to remote sessions, no client can send one)."""
    live_controls: frozenset[str] = frozenset()
    """What a running session takes (``protocol/extensions/controls.py``): ``set_model``,
    ``set_permission_mode``, ``context_usage``, ``mcp_status``, ``rewind_files``."""
    remote_controls: frozenset[str] = frozenset()
    """The live controls a gateway client may use (ops of the same names)."""
    fork_session: bool = False
    """``ExecuteParams.fork_session``: resume an old history under a new session id."""
    file_checkpointing: bool = False
    """``ExecuteParams.file_checkpointing`` and ``Session.rewind_files``."""

    def to_mapping(self) -> dict[str, Any]:
        """JSON-ready: sets become sorted lists, tuples lists."""

        def plain(_inst: type, _attr: attrs.Attribute[Any], value: Any) -> Any:
            if isinstance(value, frozenset):
                return sorted(value)
            if isinstance(value, tuple):
                return list(value)
            return value

        return attrs.asdict(self, value_serializer=plain)


_CLAUDE_CODE = ArchitectureCapabilities(
    architecture="claude-code",
    mid_turn_push=True,
    resume=True,
    resume_immutable=RESUME_IMMUTABLE,
    subagents=True,
    todo_lists=True,
    user_input_sources=frozenset({"model-tool", "mcp-elicitation", TOOL_PERMISSION}),
    permission_modes=PERMISSION_MODES,
    asking_permission_modes=ASKING_MODES,
    tool_approval_decisions=DECISIONS,
    thinking=True,
    thinking_modes=THINKING_MODES,
    thinking_displays=THINKING_DISPLAYS,
    effort_levels=EFFORT_LEVELS,
    adaptive_thinking_only_models=ADAPTIVE_THINKING_ONLY,
    flush=True,
    skills=True,
    mcp_server_types=frozenset(MCP_SERVER_TYPES),
    plan_mode=True,
    plan_mode_strategy="tool-visibility",
    system_prompt_presets=KNOWN_PRESETS,
    partial_messages=True,
    tool_use_summary=True,
    abort=True,
    adapter_ready=True,
    timeouts=frozenset({"run_timeout", "idle_timeout"}),
    max_budget_usd=True,
    providers=frozenset(PROVIDERS),
    fallback_model=True,
    subagent_definitions=True,
    image_input=frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"}),
    structured_output=True,
    tool_lists=frozenset({"tools", "allowed_tools", "disallowed_tools"}),
    context_window=True,
    custom_tools=SERVER_NAME,
    inline_skills=PLUGIN_NAME,
    path_scope=frozenset(
        {
            "allowed_paths",
            "read_only_paths",
            "disallowed_paths",
            "scope_enforcement",
            "setting_sources",
        }
    ),
    scope_enforcements=SCOPE_ENFORCEMENTS,
    resume_narrow_only=RESUME_NARROW_ONLY,
    hooks=frozenset(HOOK_EVENTS),
    live_controls=frozenset(
        {"set_model", "set_permission_mode", "context_usage", "mcp_status", "rewind_files"}
    ),
    remote_controls=frozenset({"set_model", "set_permission_mode"}),
    fork_session=True,
    file_checkpointing=True,
)


def architecture_capabilities() -> ArchitectureCapabilities:
    """The claude-code architecture's capabilities (the same frozen value every call)."""
    return _CLAUDE_CODE
