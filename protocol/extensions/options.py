"""The options for a session's in-process tools and inline skills (pure).

Applied by ``open_session`` over :func:`~claude_trio.protocol.config.options.build_options`. Rules:

1. Custom tools: one in-process MCP server named ``custom_tools.SERVER_NAME`` (``trio``) is
   added to ``mcp_servers`` (a server of that name in ``ExecuteParams.mcp_servers`` is refused
   before anything starts). Its config says ``alwaysLoad``: the CLI otherwise defers MCP tools
   behind its ``ToolSearch`` tool, and the model would see only their names. The tools follow
   the permission mode like any other tool (``allowed_tools=["mcp__trio__<name>"]``
   pre-approves one); they are not added to ``allowed_tools`` here, which would also make the
   SDK warn that ``can_use_tool`` is shadowed for them.
2. Inline skills: their plugin folder is added to ``plugins``; when ``skills`` is a list of
   names (``claude_skills``), the inline skills' qualified names are added to it, so a filter
   on the skills on disk never hides the session's own. In a confined path scope
   (``permissions.blockReadsOutsideWorkingDirectories`` in the settings) the folder is added
   to ``add_dirs`` as a read-only folder (``Edit`` deny rules, as for ``read_only_paths``):
   otherwise the model could open a skill but not read the files its instructions name.
3. Hooks: the session's hooks' matchers are added to ``hooks`` after the ones already there
   (the stop gate comes first for ``PreToolUse``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

from claude_agent_sdk import ClaudeAgentOptions, HookMatcher
from claude_agent_sdk.types import HookEvent, McpServerConfig, SdkPluginConfig

from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.extensions.custom_tools import SERVER_NAME, CustomTool
from claude_trio.protocol.extensions.scope import deny_rules
from claude_trio.protocol.extensions.skills import InlineSkill

__all__ = ["check_server_name", "with_extensions"]


def check_server_name(mcp_servers: Mapping[str, Any]) -> None:
    """Refuse ``mcp_servers`` that already use the custom tools' server name (rule 1)."""
    if SERVER_NAME in mcp_servers:
        raise InvalidParamsError(
            f"mcp_servers[{SERVER_NAME!r}]",
            "...",
            f"another name: {SERVER_NAME!r} is the server of the session's custom_tools",
        )


def with_extensions(
    options: ClaudeAgentOptions,
    *,
    tools: Sequence[CustomTool] = (),
    tool_server: Mapping[str, Any] | None = None,
    skills: Sequence[InlineSkill] = (),
    skills_folder: str | None = None,
    hooks: Mapping[str, Sequence[HookMatcher]] | None = None,
) -> ClaudeAgentOptions:
    """``options`` with the custom tools' server (``tool_server``, the SDK's config from
    ``create_sdk_mcp_server``), the inline skills' plugin folder and the hooks' matchers (see
    the module rules)."""
    changes: dict[str, Any] = {}
    if tools:
        if tool_server is None:
            raise InvalidParamsError("tool_server", None, "the in-process server of the tools")
        servers = dict(cast(Mapping[str, Any], options.mcp_servers or {}))
        check_server_name(servers)
        servers[SERVER_NAME] = {**tool_server, "alwaysLoad": True}
        changes["mcp_servers"] = cast(dict[str, McpServerConfig], servers)
    if skills:
        if skills_folder is None:
            raise InvalidParamsError("skills_folder", None, "the folder of the inline skills")
        plugin: SdkPluginConfig = {"type": "local", "path": skills_folder}
        changes["plugins"] = [*options.plugins, plugin]
        if isinstance(options.skills, list):
            names = [skill.qualified_name for skill in skills]
            changes["skills"] = [*options.skills, *(n for n in names if n not in options.skills)]
        changes.update(_readable_in_scope(options, skills_folder))
    if hooks:
        merged: dict[HookEvent, list[HookMatcher]] = {
            event: list(matchers) for event, matchers in (options.hooks or {}).items()
        }
        for event, matchers in hooks.items():
            merged.setdefault(cast(HookEvent, event), []).extend(matchers)
        changes["hooks"] = merged
    return dataclasses.replace(options, **changes) if changes else options


def _readable_in_scope(options: ClaudeAgentOptions, folder: str) -> dict[str, Any]:
    """The changes that let a confined scope read ``folder`` and not write it (rule 2)."""
    if not isinstance(options.settings, str):
        return {}
    settings = json.loads(options.settings)
    permissions = settings.get("permissions") if isinstance(settings, dict) else None
    if not isinstance(permissions, dict):
        return {}
    if not permissions.get("blockReadsOutsideWorkingDirectories"):
        return {}
    deny = list(permissions.get("deny") or [])
    deny += [rule for rule in deny_rules([folder], []) if rule not in deny]
    permissions["deny"] = deny
    return {
        "add_dirs": [*options.add_dirs, folder],
        "settings": json.dumps(settings, sort_keys=True),
    }
