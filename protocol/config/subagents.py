"""Subagent definitions a session offers the model (pure).

``ExecuteParams.subagents`` maps a name to a :class:`SubagentDefinition`; the CLI gets them as
the SDK's ``agents``, and the model can call each with the ``Agent`` tool. Rules:

1. A name is lower-case letters, digits and dashes, starting with a letter (what the CLI
   accepts as an agent type), at most 64 characters.
2. ``description`` (when to use it) and ``prompt`` (its system prompt) are non-empty.
3. ``tools`` / ``disallowed_tools`` name tools (``protocol/config/tools.py``); ``None`` inherits.
4. ``model`` is ``inherit``, a family alias (``sonnet``, ``opus``, ``haiku``), one of our
   aliases or a full ``claude-`` id.
5. ``max_turns`` is a positive int; ``background=True`` runs it in the background (the parent's
   turn ends first and the CLI reports its completion with one more turn).
6. ``permission_mode`` is one of the CLI's modes (``permissions.PERMISSION_MODES``): which of
   the subagent's tool calls run without asking. An asking one (``default``,
   ``acceptEdits``) needs the session's ``on_user_input``, as the session's own mode does.
7. ``effort`` is a level (``low`` .. ``max``) or a positive int; ``skills`` names skills to
   preload; ``memory`` is ``user``, ``project`` or ``local`` (where the CLI keeps the agent's
   memory files); ``initial_prompt`` is a non-empty string (used only when the agent runs as
   the main thread agent).
8. ``mcp_servers`` lists the subagent's own MCP servers: each the name of a server the session
   has, or ``{name: config}`` with a config as for ``ExecuteParams.mcp_servers``
   (``mcp_servers.check_mcp_server``), except an in-process ``sdk`` server (the CLI ignores one
   here: give it to the session, or use custom tools). Over the gateway only names travel
   (:func:`subagent_from_mapping` with ``inline_mcp=False``): a config starts a process.
Every error names the subagent and the field; :meth:`SubagentDefinition.to_sdk` gives the SDK's
``AgentDefinition`` keys (all 13 of them), which the SDK sends to the CLI in its ``initialize``
request's ``agents``.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

import attrs
from claude_agent_sdk.types import EffortLevel

from claude_trio.protocol.checks import check_bool, check_int
from claude_trio.protocol.config.mcp_servers import check_mcp_server
from claude_trio.protocol.config.models import CLI_FAMILY_ALIASES, FULL_ID_PREFIX, MODEL_ALIASES
from claude_trio.protocol.config.permissions import PermissionMode, check_permission_mode
from claude_trio.protocol.config.tools import check_tool_names
from claude_trio.protocol.errors import InvalidParamsError

_NAME = re.compile(r"[a-z][a-z0-9-]{0,63}")

AgentMemory: TypeAlias = Literal["user", "project", "local"]
AGENT_MEMORIES: tuple[str, ...] = typing.get_args(AgentMemory)
_EFFORT_LEVELS: tuple[str, ...] = typing.get_args(EffortLevel)
MAX_EFFORT = 1_000_000


def _as_tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _servers(value: Any) -> Any:
    """A list of server names and ``{name: config}`` dicts as a tuple (dicts copied)."""
    if not isinstance(value, list | tuple):
        return value
    return tuple(dict(item) if isinstance(item, Mapping) else item for item in value)


def _check_text(field: str, value: object) -> None:
    if not isinstance(value, str) or not value.strip() or "\0" in value:
        raise InvalidParamsError(field, value, "a non-empty string")


def _check_names(field: str, value: object, what: str) -> None:
    if not isinstance(value, tuple):
        raise InvalidParamsError(field, value, f"a list of {what}")
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item.strip() or any(c in item for c in "\0\n\r"):
            raise InvalidParamsError(f"{field}[{i}]", item, f"one of the {what} (a name)")


@attrs.frozen(kw_only=True)
class SubagentDefinition:
    """One subagent (see the module rules); checked when made, errors name the field::

        SubagentDefinition(
            description="Reviews diffs",        # when the model should use it
            prompt="You review.",               # its system prompt
            tools=["Read", "Grep"],             # None: the session's tools
            permission_mode="plan",             # its own mode (an asking one needs on_user_input)
            effort="low",                       # or an int
            skills=["lint-rules"],              # skills to preload
            memory="project",                   # where its memory files live
            mcp_servers=["github", {"tracker": {"type": "http", "url": "https://..."}}],
        )
    """

    description: str
    prompt: str
    tools: tuple[str, ...] | None = attrs.field(default=None, converter=_as_tuple)
    disallowed_tools: tuple[str, ...] | None = attrs.field(default=None, converter=_as_tuple)
    model: str | None = None
    max_turns: int | None = None
    background: bool = False
    permission_mode: PermissionMode | None = None
    effort: EffortLevel | int | None = None
    skills: tuple[str, ...] | None = attrs.field(default=None, converter=_as_tuple)
    memory: AgentMemory | None = None
    mcp_servers: tuple[str | dict[str, Any], ...] | None = attrs.field(
        default=None, converter=_servers
    )
    initial_prompt: str | None = None

    def check(self, name: str) -> None:
        """Raise ``InvalidParamsError`` naming ``subagents[name].<field>`` (rules 2-8)."""
        field = f"subagents[{name!r}]"
        for key in ("description", "prompt"):
            value = getattr(self, key)
            if not isinstance(value, str) or not value.strip():
                raise InvalidParamsError(f"{field}.{key}", value, "a non-empty string")
        for key in ("tools", "disallowed_tools"):
            value = getattr(self, key)
            if value is not None:
                check_tool_names(f"{field}.{key}", value)
        model = self.model
        if model is not None and not (
            isinstance(model, str)
            and (
                model == "inherit"
                or model in CLI_FAMILY_ALIASES
                or model in MODEL_ALIASES
                or model.startswith(FULL_ID_PREFIX)
            )
        ):
            raise InvalidParamsError(
                f"{field}.model",
                model,
                "inherit, sonnet, opus, haiku, one of " + ", ".join(sorted(MODEL_ALIASES))
                + ", or a full claude- id",
            )
        if self.max_turns is not None:
            check_int(f"{field}.max_turns", self.max_turns, 1, 10_000)
        check_bool(f"{field}.background", self.background)
        if self.permission_mode is not None:
            check_permission_mode(f"{field}.permission_mode", self.permission_mode)
        effort = self.effort
        if effort is not None and not (
            effort in _EFFORT_LEVELS
            or (
                isinstance(effort, int)
                and not isinstance(effort, bool)
                and 1 <= effort <= MAX_EFFORT
            )
        ):
            raise InvalidParamsError(
                f"{field}.effort",
                effort,
                "one of " + ", ".join(_EFFORT_LEVELS) + f", or an int from 1 to {MAX_EFFORT}",
            )
        if self.skills is not None:
            _check_names(f"{field}.skills", self.skills, "skills")
        if self.memory is not None and self.memory not in AGENT_MEMORIES:
            raise InvalidParamsError(
                f"{field}.memory", self.memory, "one of " + ", ".join(AGENT_MEMORIES)
            )
        if self.initial_prompt is not None:
            _check_text(f"{field}.initial_prompt", self.initial_prompt)
        if self.mcp_servers is not None:
            self._check_servers(field)

    def _check_servers(self, field: str) -> None:
        servers = self.mcp_servers
        if not isinstance(servers, tuple):
            raise InvalidParamsError(
                f"{field}.mcp_servers", servers, "a list of server names or {name: config}"
            )
        for i, item in enumerate(servers):
            where = f"{field}.mcp_servers[{i}]"
            if isinstance(item, str):
                _check_text(where, item)
                continue
            if not (isinstance(item, dict) and len(item) == 1):
                raise InvalidParamsError(
                    where, item, "a server name, or {name: config} for one server of its own"
                )
            [(server, config)] = item.items()
            if not (isinstance(server, str) and server.strip()):
                raise InvalidParamsError(where, server, "a non-empty server name")
            check_mcp_server(server, config, field=f"{where}[{server!r}]")
            if isinstance(config, Mapping) and config.get("type") == "sdk":
                raise InvalidParamsError(
                    f"{where}[{server!r}].type",
                    "sdk",
                    "stdio, sse or http (the CLI ignores an in-process server given to a "
                    "subagent: put it in ExecuteParams.mcp_servers and name it here, or use "
                    "custom tools)",
                )

    def to_sdk(self) -> dict[str, Any]:
        """The SDK's ``AgentDefinition`` fields."""
        model = self.model
        if model is not None and model in MODEL_ALIASES:
            model = MODEL_ALIASES[model]
        out: dict[str, Any] = {"description": self.description, "prompt": self.prompt}
        if self.tools is not None:
            out["tools"] = list(self.tools)
        if self.disallowed_tools is not None:
            out["disallowedTools"] = list(self.disallowed_tools)
        if model is not None:
            out["model"] = model
        if self.max_turns is not None:
            out["maxTurns"] = self.max_turns
        if self.background:
            out["background"] = True
        if self.permission_mode is not None:
            out["permissionMode"] = self.permission_mode
        if self.effort is not None:
            out["effort"] = self.effort
        if self.skills is not None:
            out["skills"] = list(self.skills)
        if self.memory is not None:
            out["memory"] = self.memory
        if self.mcp_servers is not None:
            out["mcpServers"] = [
                item if isinstance(item, str) else dict(item) for item in self.mcp_servers
            ]
        if self.initial_prompt is not None:
            out["initialPrompt"] = self.initial_prompt
        return out


def check_subagents(value: object) -> Mapping[str, SubagentDefinition]:
    """Validate ``ExecuteParams.subagents`` (rule 1, then each definition)."""
    if not isinstance(value, Mapping):
        raise InvalidParamsError("subagents", value, "a mapping of name -> SubagentDefinition")
    for name, definition in value.items():
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise InvalidParamsError(
                "subagents", name, "names of lower-case letters, digits and dashes, starting "
                "with a letter (at most 64)"
            )
        if not isinstance(definition, SubagentDefinition):
            raise InvalidParamsError(
                f"subagents[{name!r}]", definition, "a SubagentDefinition"
            )
        definition.check(name)
    return value


_ALIASES = {
    "disallowedTools": "disallowed_tools",
    "maxTurns": "max_turns",
    "permissionMode": "permission_mode",
    "mcpServers": "mcp_servers",
    "initialPrompt": "initial_prompt",
}
"""The SDK's (and the CLI's) camelCase keys, accepted beside the field names."""


def subagent_from_mapping(
    name: str, raw: object, *, inline_mcp: bool = True
) -> SubagentDefinition:
    """A definition from JSON-like data (``--agents FILE``, the gateway): keys as the fields,
    or as the SDK spells them (``disallowedTools``, ``maxTurns``, ``permissionMode``,
    ``mcpServers``, ``initialPrompt``). ``inline_mcp=False`` (the gateway) refuses a server
    config in ``mcp_servers``: only names of the session's servers (rule 8)."""
    field = f"subagents[{name!r}]"
    if not isinstance(raw, Mapping):
        raise InvalidParamsError(field, raw, "an object with description and prompt")
    aliases = _ALIASES
    known = {a.name for a in attrs.fields(SubagentDefinition)}
    kwargs: dict[str, Any] = {}
    for key, item in raw.items():
        attr = aliases.get(key, key)
        if attr not in known:
            raise InvalidParamsError(f"{field}.{key}", item, "one of " + ", ".join(sorted(known)))
        kwargs[attr] = item
    for required in ("description", "prompt"):
        if required not in kwargs:
            raise InvalidParamsError(f"{field}.{required}", None, "a non-empty string")
    definition = SubagentDefinition(**kwargs)
    definition.check(name)
    if not inline_mcp:
        for i, item in enumerate(definition.mcp_servers or ()):
            if not isinstance(item, str):
                raise InvalidParamsError(
                    f"{field}.mcp_servers[{i}]",
                    item,
                    "the name of a server this session has: a server config cannot be sent "
                    "(it would start a process on the server)",
                )
    return definition
