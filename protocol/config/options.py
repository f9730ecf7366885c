"""``ExecuteParams`` -> ``claude_agent_sdk.ClaudeAgentOptions``, as one pure function.

Rules (the TypeScript library's adapter, checked against claude-agent-sdk 0.2.189 and its
bundled CLI):

1. ``model``: resolved through ``models.resolve_model``.
2. Thinking: ``models.effective_thinking`` - ``enabled`` + budget becomes ``adaptive`` on
   adaptive-only models, unset is omitted (``None``, never ``disabled``), and the display
   (``ThinkingConfig*.display``, sent as ``--thinking-display``) defaults to ``summarized`` on
   adaptive-only models.
3. ``claude_effort`` -> ``effort``.
4. System prompt (``system_prompt.py``): a mapping form as is; a preset ->
   ``{"type": "preset", "preset": "claude_code"}``, with a ``system_prompt`` string as
   ``"append"``; no preset -> the ``system_prompt`` string as is. ``None`` stays ``None``, and
   the SDK then sends an EMPTY system prompt, not Claude Code's.
5. Plan mode = a tool allow-list and a deny list: ``tools`` = :data:`READONLY_BUILTINS`,
   ``disallowed_tools`` = :data:`MUTATING_BUILTINS`. Never ``permission_mode="plan"``: it blocks
   every tool, including the read-only MCP tools a plan-mode caller chose to keep.
6. ``permission_mode``: ``params.permission_mode``, unset ``bypassPermissions`` (the TypeScript
   library's default, plan mode included). An asking mode (``approvals.ASKING_MODES``) needs
   ``can_use_tool``: the CLI asks it before each tool call no rule allows. The Python SDK has no
   ``allow_dangerously_skip_permissions`` field and the CLI does not need
   ``--allow-dangerously-skip-permissions`` with ``--permission-mode bypassPermissions``. As root
   the CLI refuses it without ``IS_SANDBOX=1``: see :func:`check_root_bypass`, and
   ``permission_mode="default"`` + a ``can_use_tool`` gate for the root-safe way.
7. ``env`` = ``custom_env``, then ``ollama_baseUrl`` as ``ANTHROPIC_BASE_URL``, then
   ``extra_env`` (the caller's last word, e.g. a test harness pointing at a model double).
8. ``resume_session_id`` -> ``resume``; ``max_turns``, ``cwd`` and ``mcp_servers`` pass through,
   and so do ``strict_mcp_config``, ``session_id``, ``resume_session_at``,
   ``resume_drops_turn``, ``betas``, ``include_hook_events``, ``verbatim_prompts``,
   ``client_app``; ``task_budget`` (tokens) -> ``{"total": task_budget}``.
9. Skills: ``claude_skills`` -> ``skills`` (the SDK also allows the ``Skill`` tool and the setting
   sources it needs). The SDK has no fields for ``skillOverrides``,
   ``skillListingBudgetFraction`` and ``disableSkillShellExecution``; they are Claude Code
   settings, so they travel as the inline JSON of ``settings`` (``--settings``).
10. ``forward_subagent_text=True``: without it the CLI forwards only a foreground subagent's
    tool blocks, so its text and thinking (which a background subagent's messages do carry)
    would never reach the stream.
11. ``include_partial_messages=True`` (text/thinking deltas) and
    ``extra_args={"replay-user-messages": None}``: the CLI echoes each user message when it
    consumes it, which the push accounting relies on.
13. ``max_buffer_size`` (the SDK's cap on one stdout line) is 32 MiB when a message may carry
    images (``images.MAX_MESSAGE_IMAGE_BYTES`` in base64, echoed on one line); an explicit
    ``open_session(max_buffer_size=...)`` wins.
14. ``tools`` / ``allowed_tools`` / ``disallowed_tools`` from the params; the scheduling tools
    (``tools.SCHEDULING_TOOLS``) are always denied, plan mode's mutating tools too.
    ``max_budget_usd``, ``fallback_model``, ``subagents`` (-> ``agents``) and ``output_schema``
    (-> ``output_format``) pass through. ``env`` starts from :data:`DEFAULT_ENV` and the
    provider's (``providers.py``), then rule 7.
15. Path scope (``scope.py``): its settings (``permissions`` blocks and deny rules, the Bash
    ``sandbox``) join the skills' in the ``--settings`` JSON; ``allowed_paths`` and
    ``read_only_paths`` become ``add_dirs``; ``setting_sources`` passes through, and a scoped
    execution that names none gets ``[]`` (no settings file is loaded).
12. ``pre_tool_use`` -> a ``PreToolUse`` hook on every tool (``matcher=None``). The CLI asks it
    before each tool call, under ``bypassPermissions`` too: the session denies every call once
    it is stopping, so no tool starts after a stop, whatever an interrupt races with.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Literal, assert_never, cast

from claude_agent_sdk import AgentDefinition, ClaudeAgentOptions, HookMatcher
from claude_agent_sdk.types import (
    CanUseTool,
    HookCallback,
    McpServerConfig,
    SdkBeta,
    SettingSource,
)

from claude_trio.protocol.config.params import ArchitectureConfig, ExecuteParams
from claude_trio.protocol.config.providers import provider_env
from claude_trio.protocol.config.system_prompt import build_system_prompt
from claude_trio.protocol.config.tools import MUTATING_BUILTINS, READONLY_BUILTINS, SCHEDULING_TOOLS
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.extensions.approvals import ASKING_MODES
from claude_trio.protocol.extensions.scope import scope_settings

__all__ = [
    "DEFAULT_ENV",
    "MUTATING_BUILTINS",
    "READONLY_BUILTINS",
    "build_env",
    "build_options",
    "check_root_bypass",
    "with_changes",
]

DEFAULT_ENV: Mapping[str, str] = MappingProxyType(
    {
        # The todo tools (TodoWrite / the Task* family) are off on the CLI's default model
        # unless asked for: without them todo_list_updated never happens.
        "CLAUDE_CODE_ENABLE_TODO_TOOLS": "1",
        # tool_use_summary frames are only written when asked for.
        "CLAUDE_CODE_EMIT_TOOL_USE_SUMMARIES": "true",
    }
)
"""Environment every CLI gets unless ``custom_env`` or the caller's ``env`` says otherwise."""

REPLAY_USER_MESSAGES_FLAG = "replay-user-messages"

def skill_settings(config: ArchitectureConfig) -> dict[str, Any]:
    """The Claude Code settings the skills keys map to (empty when none is set)."""
    settings: dict[str, Any] = {}
    if config.claude_skill_overrides is not None:
        settings["skillOverrides"] = dict(config.claude_skill_overrides)
    if config.claude_skill_listing_budget_fraction is not None:
        settings["skillListingBudgetFraction"] = config.claude_skill_listing_budget_fraction
    if config.claude_disable_skill_shell_execution is not None:
        settings["disableSkillShellExecution"] = config.claude_disable_skill_shell_execution
    return settings


def path_settings(params: ExecuteParams) -> dict[str, Any]:
    """The Claude Code settings of the execution's path scope (rule 15; empty without one)."""
    return scope_settings(
        allowed=params.allowed_paths,
        read_only=params.read_only_paths,
        disallowed=params.disallowed_paths,
        enforcement=params.scope_enforcement,
    )


def build_setting_sources(params: ExecuteParams) -> list[SettingSource] | None:
    """Rule 15: the caller's sources; none at all for a scoped execution that names none."""
    if params.setting_sources is not None:
        return list(params.setting_sources)
    return [] if params.scoped else None


def build_env(
    config: ArchitectureConfig,
    extra_env: Mapping[str, str] | None,
    *,
    provider: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The CLI's extra environment (rule 7): the defaults, the provider's, ``custom_env``,
    ``ollama_baseUrl``, then the caller's ``extra_env``. ``environ`` is the environment the
    CLI inherits (for the provider's credential check)."""
    env = dict(DEFAULT_ENV)
    if provider is not None and provider != "anthropic":
        # Only another provider reads the environment (for its credential): the merged copy
        # of this process's environment is made for it alone, not for every session.
        user = {**(environ or {}), **config.custom_env, **(extra_env or {})}
        env.update(provider_env(provider, user))
    env.update(config.custom_env)
    if config.ollama_base_url is not None:
        env["ANTHROPIC_BASE_URL"] = config.ollama_base_url
    if extra_env:
        env.update(extra_env)
    return env


def build_tools(params: ExecuteParams) -> list[str] | None:
    """``tools``: plan mode's read-only set (narrowed to ``params.tools`` when both are given),
    else ``params.tools`` (``None``: the CLI's whole set)."""
    if params.plan_mode:
        if params.tools is None:
            return list(READONLY_BUILTINS)
        return [tool for tool in params.tools if tool in READONLY_BUILTINS]
    return None if params.tools is None else list(params.tools)


def build_disallowed_tools(params: ExecuteParams) -> list[str]:
    """Plan mode's deny list, the scheduling tools (a headless CLI cannot wake up later), and
    the caller's own, without repeats."""
    denied = [*(MUTATING_BUILTINS if params.plan_mode else ()), *SCHEDULING_TOOLS]
    denied += params.disallowed_tools
    return list(dict.fromkeys(denied))


IMAGE_LINE_BYTES = 32 * 1024 * 1024
"""The SDK's stdout line cap when a message may carry images (rule 13)."""


def image_buffer_size(params: ExecuteParams) -> int | None:
    """The SDK's stdout line cap (rule 13): the CLI echoes each user message on one line, images
    in base64, which the SDK's default 1 MiB cap would refuse. When the prompt has images or
    pushes (which may carry images) are on: room for one message's images."""
    if params.images or params.streaming_input:
        return IMAGE_LINE_BYTES
    return None


def build_options(
    params: ExecuteParams,
    *,
    can_use_tool: CanUseTool | None = None,
    extra_env: Mapping[str, str] | None = None,
    stderr: Callable[[str], None] | None = None,
    pre_tool_use: HookCallback | None = None,
    environ: Mapping[str, str] | None = None,
) -> ClaudeAgentOptions:
    """The SDK options for ``params`` (see the module rules). Pure: no I/O, nothing started.

    ``can_use_tool`` is the user-input broker's hook (AskUserQuestion reaches it even under
    ``bypassPermissions``). An asking ``params.permission_mode`` needs it: every tool call that
    is not pre-approved is then decided by it. ``pre_tool_use``: a ``PreToolUse`` hook for every
    tool call (rule 12), the session's stop gate.
    """
    permission_mode = params.permission_mode or "bypassPermissions"
    if permission_mode in ASKING_MODES and can_use_tool is None:
        raise InvalidParamsError(
            "permission_mode",
            permission_mode,
            f"{permission_mode!r} asks before tool calls and needs a can_use_tool callback "
            "(open_session(on_user_input=...)) to answer; otherwise use 'bypassPermissions' "
            "or 'dontAsk'",
        )
    config = params.architecture_config
    settings = {**skill_settings(config), **path_settings(params)}
    skills: list[str] | Literal["all"] | None
    match config.claude_skills:
        case None:
            skills = None
        case "all":
            skills = "all"
        case tuple(names):
            skills = list(names)
        case _:
            assert_never(config.claude_skills)
    return ClaudeAgentOptions(
        model=params.resolved_model,
        thinking=params.effective_thinking(),
        effort=config.claude_effort,
        system_prompt=build_system_prompt(params.system_prompt, config.preset),
        tools=build_tools(params),
        allowed_tools=list(params.allowed_tools),
        disallowed_tools=build_disallowed_tools(params),
        permission_mode=permission_mode,
        can_use_tool=can_use_tool,
        env=build_env(config, extra_env, provider=params.provider, environ=environ),
        max_budget_usd=params.max_budget_usd,
        fallback_model=params.resolved_fallback_model,
        agents={
            name: AgentDefinition(**definition.to_sdk())
            for name, definition in params.subagents.items()
        }
        or None,
        output_format=(
            {"type": "json_schema", "schema": dict(params.output_schema)}
            if params.output_schema is not None
            else None
        ),
        max_buffer_size=image_buffer_size(params),
        resume=params.resume_session_id,
        fork_session=params.fork_session,
        session_id=params.session_id,
        resume_session_at=params.resume_session_at,
        resume_drops_turn=params.resume_drops_turn,
        strict_mcp_config=params.strict_mcp_config,
        betas=cast(list[SdkBeta], list(params.betas)),
        task_budget={"total": params.task_budget} if params.task_budget is not None else None,
        include_hook_events=params.include_hook_events,
        verbatim_prompts=params.verbatim_prompts,
        client_app=params.client_app,
        enable_file_checkpointing=params.file_checkpointing,
        max_turns=params.max_turns,
        cwd=params.cwd,
        mcp_servers=cast(dict[str, McpServerConfig], dict(params.mcp_servers)),
        skills=skills,
        settings=json.dumps(settings, sort_keys=True) if settings else None,
        add_dirs=[*params.allowed_paths, *params.read_only_paths],
        setting_sources=build_setting_sources(params),
        include_partial_messages=True,
        forward_subagent_text=True,
        extra_args={REPLAY_USER_MESSAGES_FLAG: None},
        stderr=stderr,
        hooks={"PreToolUse": [HookMatcher(matcher=None, hooks=[pre_tool_use])]}
        if pre_tool_use is not None
        else None,
    )


def with_changes(options: ClaudeAgentOptions, **changes: Any) -> ClaudeAgentOptions:
    """A copy of ``options`` with the given fields changed; ``None`` values leave a field as it is
    (so optional arguments can be passed straight through)."""
    real = {name: value for name, value in changes.items() if value is not None}
    return dataclasses.replace(options, **real) if real else options


def check_root_bypass(
    options: ClaudeAgentOptions, *, is_root: bool, env: Mapping[str, str]
) -> str | None:
    """The error text for a CLI that will refuse to start, or ``None`` when it will start.

    The CLI exits 1 when run as root with ``bypassPermissions`` unless ``IS_SANDBOX=1`` is in its
    environment. ``env`` is the parent's environment; ``options.env`` is merged over it, as the
    SDK does when it spawns the CLI.
    """
    if options.permission_mode != "bypassPermissions" or not is_root:
        return None
    sandbox = options.env["IS_SANDBOX"] if "IS_SANDBOX" in options.env else env.get("IS_SANDBOX")
    if sandbox == "1":
        return None
    return (
        "the claude CLI refuses permission_mode='bypassPermissions' when run as root "
        "without IS_SANDBOX=1 in its environment, so the session cannot start. Do one of: "
        "if this really is a sandbox, set IS_SANDBOX=1 for the CLI - "
        "open_session(..., env={'IS_SANDBOX': '1'}), "
        "ArchitectureConfig(custom_env={'IS_SANDBOX': '1'}) or the process environment; "
        "or run as a non-root user; or have tool calls approved instead: "
        "ExecuteParams(permission_mode='default') with open_session(on_user_input=...). "
        "(Plan mode does not help: it runs under bypassPermissions too.)"
    )
