"""What one execution is asked to do: :class:`ExecuteParams`.

Everything is validated once, at construction (the edge), so nothing downstream has to wonder:
a wrong type or value raises :class:`~claude_trio.protocol.errors.InvalidParamsError` naming the
field, the value and what is allowed. The class is frozen; use ``attrs.evolve`` to change one
(``evolve`` re-runs the validators). Its ``architecture_config`` is an
:class:`~claude_trio.protocol.config.architecture.ArchitectureConfig` (the TypeScript library's
``claude_*`` keys); the forms of ``system_prompt`` are in ``system_prompt.py``.

``plan_mode`` and ``permission_mode`` are two different things. ``plan_mode`` is the
TypeScript library's read-only plan mode: which built-in tools are offered at all (the
read-only ones, see ``options.py``). ``permission_mode`` is the CLI's: which of the offered
tool calls run without asking. Unset (``None``) it is ``bypassPermissions``, as it always was:
nothing asks. An asking mode (``default``, ``acceptEdits``) turns each tool call the CLI would
ask about into a ``user_input_request`` with ``source="tool_permission"`` (``approvals.py``),
and so needs an ``on_user_input`` handler; ``permission_mode="plan"`` is the CLI's own plan
mode, which denies shell and edits without asking.

A working directory (``cwd``) is a path on the machine where the session runs, which may not be
this one (a gateway's client builds ``ExecuteParams`` for a server): that it exists is checked
when the session starts, before the CLI does (an ``error`` event with ``code="config"``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import attrs
from claude_agent_sdk.types import ThinkingConfig
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, best_match

from claude_trio.protocol.checks import check_number, optional, validator
from claude_trio.protocol.config.architecture import (
    CONFIG_KEYS,
    EFFORT_LEVELS,
    KNOWN_PRESETS,
    MAX_COUNT,
    THINKING_DISPLAYS,
    THINKING_MODES,
    ArchitectureConfig,
    _check_bool,
    _check_optional_nonempty_str,
    _check_optional_positive_int,
    _freeze_mapping,
    _one_of,
    _optional_mapping,
)
from claude_trio.protocol.config.images import ImageInput, check_images
from claude_trio.protocol.config.models import effective_thinking, resolve_model
from claude_trio.protocol.config.params_checks import (
    check_betas,
    check_client_app,
    check_uuid,
    check_with_resume,
)
from claude_trio.protocol.config.permissions import PermissionMode, check_permission_mode
from claude_trio.protocol.config.providers import check_provider
from claude_trio.protocol.config.subagents import SubagentDefinition, check_subagents
from claude_trio.protocol.config.system_prompt import (
    check_argument_text,
    check_system_prompt,
    check_with_preset,
    freeze_system_prompt,
)
from claude_trio.protocol.config.tools import check_tool_names
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.extensions.scope import (
    SCOPE_ENFORCEMENTS,
    SETTING_SOURCES,
    ScopeEnforcement,
    SettingSource,
    check_paths,
    normalize_path,
)
from claude_trio.protocol.extensions.skills import InlineSkill, check_inline_skills

__all__ = [
    "CONFIG_KEYS",
    "DEFAULT_HOOK_TIMEOUT",
    "DEFAULT_TOOL_TIMEOUT",
    "DEFAULT_USER_INPUT_TIMEOUT",
    "EFFORT_LEVELS",
    "KNOWN_PRESETS",
    "MAX_COUNT",
    "MCP_SERVER_TYPES",
    "THINKING_DISPLAYS",
    "THINKING_MODES",
    "ArchitectureConfig",
    "ExecuteParams",
    "check_mcp_server",
]

MCP_SERVER_TYPES: tuple[str, ...] = ("stdio", "sse", "http", "sdk")

DEFAULT_USER_INPUT_TIMEOUT = 300.0
DEFAULT_TOOL_TIMEOUT = 300.0
DEFAULT_HOOK_TIMEOUT = 30.0

# ---------------------------------------------------------------------------------------------
# ExecuteParams
# ---------------------------------------------------------------------------------------------


def _check_prompt(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not (isinstance(value, str) and value.strip()):
        raise InvalidParamsError(attribute.name, value, "a non-empty string")


def _check_optional_str(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, str):
        raise InvalidParamsError(attribute.name, value, "a string or None")


def _check_argument(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """A string the CLI gets as a command-line argument: no NUL, within the system's limit."""
    _check_optional_str(_inst, attribute, value)
    if value is not None:
        assert isinstance(value, str)
        check_argument_text(attribute.name, value)


def _check_system_prompt(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    check_system_prompt(attribute.name, value)


def _check_model(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    # Known or not is decided in __attrs_post_init__: with a provider or a base URL any id goes.
    if value is not None and (not isinstance(value, str) or not value.strip() or "\0" in value):
        raise InvalidParamsError(attribute.name, value, "a model id or alias, or None")


_check_optional_seconds = optional(
    validator(check_number, above=0, maximum=30 * 86_400, allowed="seconds > 0 (at most 30 days)")
)
_check_budget = optional(
    validator(check_number, above=0, maximum=1_000_000, allowed="US dollars > 0")
)


def _check_provider(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    check_provider(value)


def _check_fallback_model(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    _check_model(_inst, attribute, value)


def _check_images(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    check_images(value, attribute.name)


def _check_subagents(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    check_subagents(value)


def _check_schema(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if not isinstance(value, Mapping) or not value:
        raise InvalidParamsError(attribute.name, value, "a JSON Schema (a non-empty mapping)")
    try:
        Draft202012Validator.check_schema(dict(value))
    except SchemaError as exc:
        # Named by its JSON path (output_schema.properties.a.type) and what is wrong there;
        # for "valid under none of" the closest alternative says it better.
        where = attribute.name + exc.json_path.removeprefix("$")
        closest = best_match(exc.context) if exc.context else None
        problem = (closest or exc).message
        raise InvalidParamsError(
            where, exc.instance, f"{problem} (a JSON Schema, draft 2020-12)"
        ) from None
    if value.get("type", "object") != "object":
        raise InvalidParamsError(
            f"{attribute.name}.type", value.get("type"), "'object' (the result is an object)"
        )


def _check_tool_list(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        check_tool_names(attribute.name, value)


def _tool_tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _allowed_paths(value: Any) -> tuple[str, ...]:
    return check_paths("allowed_paths", value)


def _read_only_paths(value: Any) -> tuple[str, ...]:
    return check_paths("read_only_paths", value)


def _disallowed_paths(value: Any) -> tuple[str, ...]:
    return check_paths("disallowed_paths", value)


def _check_enforcement(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value not in SCOPE_ENFORCEMENTS:
        raise InvalidParamsError(attribute.name, value, _one_of(SCOPE_ENFORCEMENTS))


def _setting_sources(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _check_setting_sources(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    allowed = "None or a list of " + _one_of(SETTING_SOURCES)
    if not isinstance(value, tuple):
        raise InvalidParamsError(attribute.name, value, allowed)
    for i, source in enumerate(value):
        if source not in SETTING_SOURCES:
            raise InvalidParamsError(f"{attribute.name}[{i}]", source, allowed)


def _check_inline_skills(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    check_inline_skills(value)


def _check_session_id(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if not isinstance(value, str) or not value or value != value.strip() or value.startswith("-"):
        raise InvalidParamsError(
            attribute.name, value, "a session id from an earlier result (non-empty, no spaces)"
        )


def _check_new_session_id(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    check_uuid(attribute.name, value, "the id the new conversation gets: uuid.uuid4()")


def _check_message_uuid(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    check_uuid(attribute.name, value, "a message's uuid from the session's transcript")


def _check_betas(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    check_betas(attribute.name, value)


def _check_client_app(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    check_client_app(attribute.name, value)


def check_mcp_server(name: str, config: object) -> None:
    """Validate one ``mcp_servers`` entry (the SDK's four config shapes, as dicts)."""
    field = f"mcp_servers[{name!r}]"
    if not isinstance(config, Mapping):
        raise InvalidParamsError(field, config, "a config dict (stdio, sse, http or sdk)")
    kind = config.get("type", "stdio")
    match kind:
        case "stdio":
            if not (isinstance(config.get("command"), str) and config["command"]):
                raise InvalidParamsError(
                    f"{field}.command", config.get("command"), "a non-empty command string"
                )
        case "sse" | "http":
            url = config.get("url")
            if not (isinstance(url, str) and urlsplit(url).scheme in ("http", "https")):
                raise InvalidParamsError(f"{field}.url", url, "an http:// or https:// URL")
        case "sdk":
            if "instance" not in config or not isinstance(config.get("name"), str):
                raise InvalidParamsError(
                    field,
                    config,
                    "an in-process server from claude_agent_sdk.create_sdk_mcp_server() "
                    "(keys 'name' and 'instance')",
                )
        case _:
            raise InvalidParamsError(f"{field}.type", kind, _one_of(MCP_SERVER_TYPES))


def _check_mcp_servers(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, Mapping):
        raise InvalidParamsError(attribute.name, value, "a mapping of server name -> config")
    for name, config in value.items():
        if not (isinstance(name, str) and name):
            raise InvalidParamsError(attribute.name, name, "server names are non-empty strings")
        check_mcp_server(name, config)


def _check_timeout(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    check_number(attribute.name, value, above=0, allowed="a finite number of seconds > 0")


def _check_permission_mode(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None:
        check_permission_mode(attribute.name, value)


def _check_config(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, ArchitectureConfig):
        raise InvalidParamsError(
            attribute.name,
            value,
            "an ArchitectureConfig (build one from the TypeScript library's keys with "
            "ArchitectureConfig.from_mapping)",
        )


@attrs.frozen(kw_only=True)
class ExecuteParams:
    """One execution: a prompt plus everything that shapes the CLI session that runs it."""

    prompt: str = attrs.field(validator=_check_prompt)
    model: str | None = attrs.field(default=None, validator=_check_model)
    """An alias (``opus-4.6``), a CLI family alias (``opus``) or a full id; ``None``: the CLI's
    default model."""

    system_prompt: str | Mapping[str, Any] | None = attrs.field(
        default=None, converter=freeze_system_prompt, validator=_check_system_prompt
    )
    """Every form the SDK takes (``protocol/config/system_prompt.py``): a string (without a
    preset the whole system prompt, with ``claude_usePreset`` appended to Claude Code's), or
    ``{"type": "preset", "preset": "claude_code", "append": ...}``, ``{"type": "custom",
    "prompt": ...}``, ``{"type": "file", "path": ...}``. ``None`` means an EMPTY system prompt
    (the SDK sends ``--system-prompt ""``), not Claude Code's; ask for the preset to get that."""

    max_turns: int | None = attrs.field(default=None, validator=_check_optional_positive_int)
    """Passed through untouched. The CLI counts it across a resumed session's earlier turns too."""

    plan_mode: bool = attrs.field(default=False, validator=_check_bool)
    """Read-only built-in tools only (the TypeScript library's plan mode); MCP servers stay the
    caller's call."""

    permission_mode: PermissionMode | None = attrs.field(
        default=None, validator=_check_permission_mode
    )
    """The CLI's permission mode (``protocol/config/permissions.py``); ``None``:
    ``bypassPermissions`` (every offered tool runs). ``default`` / ``acceptEdits`` ask before tool
    calls: each one is a
    ``user_input_request`` with ``source="tool_permission"``, answered like a question."""

    cwd: str | None = attrs.field(
        default=None, validator=[_check_optional_nonempty_str, _check_argument]
    )
    mcp_servers: Mapping[str, Any] = attrs.field(
        factory=dict, converter=_freeze_mapping, validator=_check_mcp_servers
    )
    strict_mcp_config: bool = attrs.field(default=False, validator=_check_bool)
    """Start only the servers of ``mcp_servers`` (and the session's own tools): none of the
    repository's ``.mcp.json``, the user's configuration or plugins (the CLI's
    ``--strict-mcp-config``). Settings files still load (``setting_sources``)."""

    betas: tuple[str, ...] = attrs.field(default=(), converter=_tool_tuple, validator=_check_betas)
    """Beta headers the CLI sends with its API requests (``context-1m-2025-08-07``)."""

    task_budget: int | None = attrs.field(default=None, validator=_check_optional_positive_int)
    """An API-side budget in tokens the model is told of, so that it paces its tool use and
    wraps up before it (the CLI's ``--task-budget``; the API's task-budgets beta)."""

    include_hook_events: bool = attrs.field(default=False, validator=_check_bool)
    """The CLI reports each hook it runs (the settings files' and the session's own, such as
    its stop gate on ``PreToolUse``): ``passthrough`` events of ``frame_type``
    ``system:hook_started`` and ``system:hook_response``."""

    verbatim_prompts: bool = attrs.field(default=False, validator=_check_bool)
    """Deliver the prompt and every push exactly as written: no ``@path`` file expansion, no
    slash commands (use it for text the end user did not type)."""

    client_app: str | None = attrs.field(default=None, validator=_check_client_app)
    """Your app's identifier (``my-app/1.0.0``), sent with the CLI's API requests;
    ``""``: none at all."""

    resume_session_id: str | None = attrs.field(default=None, validator=_check_session_id)
    """Resume this session. Needs the same ``cwd`` and ``CLAUDE_CONFIG_DIR``; see ``resume.py``
    for the settings that must not change."""

    streaming_input: bool = attrs.field(default=True, validator=_check_bool)
    """Accept pushes while the execution runs (mid-turn push)."""

    architecture_config: ArchitectureConfig = attrs.field(
        factory=ArchitectureConfig, validator=_check_config
    )
    user_input_timeout: float = attrs.field(
        default=DEFAULT_USER_INPUT_TIMEOUT, validator=_check_timeout
    )
    """Seconds a user-input request (AskUserQuestion, MCP elicitation) waits for an answer."""

    images: tuple[ImageInput, ...] = attrs.field(
        default=(), converter=_tool_tuple, validator=_check_images
    )
    """Images sent with the prompt (``ImageInput.from_path`` / ``from_bytes``)."""

    run_timeout: float | None = attrs.field(default=None, validator=_check_optional_seconds)
    """Seconds the whole execution may take; then it is stopped, with one ``aborted`` event
    whose reason says ``run_timeout`` (and the usage so far)."""

    idle_timeout: float | None = attrs.field(default=None, validator=_check_optional_seconds)
    """Seconds without any event from the CLI after which the execution is stopped (every
    event resets it), with one ``aborted`` event whose reason says ``idle_timeout``."""

    max_budget_usd: float | None = attrs.field(default=None, validator=_check_budget)
    """The CLI stops once the execution's cost reaches this; the result says so
    (``subtype="error_max_budget_usd"``)."""

    provider: str | None = attrs.field(default=None, validator=_check_provider)
    """A provider preset (``protocol/config/providers.py``): ``ollama``, ``openrouter``,
    ``minimax``;
    ``None`` or ``anthropic``: the Anthropic API."""

    fallback_model: str | None = attrs.field(default=None, validator=_check_fallback_model)
    """The model the CLI switches to when the main one is overloaded."""

    subagents: Mapping[str, SubagentDefinition] = attrs.field(
        factory=dict, converter=_freeze_mapping, validator=_check_subagents
    )
    """Subagents offered to the model (``protocol/config/subagents.py``)."""

    output_schema: Mapping[str, Any] | None = attrs.field(
        default=None, converter=_optional_mapping, validator=_check_schema
    )
    """A JSON Schema (an object) the final answer must follow; the result then carries it as
    ``structured_output``, checked against the schema."""

    allowed_tools: tuple[str, ...] = attrs.field(
        default=(), converter=_tool_tuple, validator=_check_tool_list
    )
    """Tools (and rules: ``Bash(git status:*)``) allowed without asking."""

    disallowed_tools: tuple[str, ...] = attrs.field(
        default=(), converter=_tool_tuple, validator=_check_tool_list
    )
    """Tools the model may not use (added to plan mode's and the scheduling tools' denials)."""

    tools: tuple[str, ...] | None = attrs.field(
        default=None, converter=_tool_tuple, validator=_check_tool_list
    )
    """The built-in tools offered at all (``None``: the CLI's whole set)."""

    inline_skills: tuple[InlineSkill, ...] = attrs.field(
        default=(), converter=_tool_tuple, validator=_check_inline_skills
    )
    """Skills given to this execution only (``protocol/extensions/skills.py``), written to a private
    folder that is removed when the session ends; the model sees them as ``inline:<name>``."""

    tool_timeout: float = attrs.field(default=DEFAULT_TOOL_TIMEOUT, validator=_check_timeout)
    """Seconds a call of one of the session's ``custom_tools`` may take (unless the tool sets
    its own ``timeout``); then it is cancelled and the model gets an error result."""

    hook_timeout: float = attrs.field(default=DEFAULT_HOOK_TIMEOUT, validator=_check_timeout)
    """Seconds a call of one of the session's ``hooks`` may take (unless the hook sets its own
    ``timeout``); then it is cancelled, an ``error`` event names it and the CLI gets the safe
    answer (``protocol/extensions/hooks.py``)."""

    fork_session: bool = attrs.field(default=False, validator=_check_bool)
    """With ``resume_session_id``: continue the old conversation under a NEW session id (the
    old one is left as it was, and can be resumed again). The settings a resume must keep
    (``protocol/config/resume.py``) apply to a fork too: it replays the same history."""

    session_id: str | None = attrs.field(default=None, validator=_check_new_session_id)
    """The id of the conversation this start creates (a UUID), instead of one the CLI picks:
    results, ``turn_started`` and ``adapter_ready`` carry it. With ``resume_session_id`` only
    for a fork (``fork_session=True``)."""

    resume_session_at: str | None = attrs.field(default=None, validator=_check_message_uuid)
    """With ``resume_session_id``: load the conversation only up to and including this
    message (its ``uuid``: an ``assistant_message``'s, or a transcript entry's) and go on from
    there. With ``fork_session=True`` the original stays whole."""

    resume_drops_turn: str | None = attrs.field(default=None, validator=_check_message_uuid)
    """With ``resume_session_at``: the uuid of the user prompt whose turn the truncation drops.
    The CLI then refuses the resume (the execution fails, its message says ``Resume rejected by
    --resume-drops-turn``) when anything else would be dropped with it, such as a push the
    session took in mid-turn."""

    file_checkpointing: bool = attrs.field(default=False, validator=_check_bool)
    """The CLI keeps a copy of each file before its tools change it, so that
    ``session.rewind_files(user_message_uuid)`` can restore the files as they were before that
    message."""

    allowed_paths: tuple[str, ...] = attrs.field(default=(), converter=_allowed_paths)
    """Absolute paths (folders or files, with all below them) the file tools may read and
    write; with this or ``read_only_paths`` they reach nothing else but ``cwd``
    (``protocol/extensions/scope.py``). Also given to the CLI as extra working directories."""

    read_only_paths: tuple[str, ...] = attrs.field(
        default=(), converter=_read_only_paths
    )
    """Absolute paths the file tools may read but not write (confines like ``allowed_paths``)."""

    disallowed_paths: tuple[str, ...] = attrs.field(
        default=(), converter=_disallowed_paths
    )
    """Absolute paths the tools may neither read nor write; a denial wins over everything."""

    scope_enforcement: ScopeEnforcement = attrs.field(
        default="hard", validator=_check_enforcement
    )
    """With a path scope: ``"hard"`` refuses to start when Bash cannot be confined by the
    CLI's OS sandbox; ``"soft"`` starts with a ``warning`` saying Bash is not confined."""

    setting_sources: tuple[SettingSource, ...] | None = attrs.field(
        default=None, converter=_setting_sources, validator=_check_setting_sources
    )
    """Which Claude Code settings files the CLI loads (``user``, ``project``, ``local``).
    ``None``: the CLI's default (all of them), except with a path scope: none, so no settings
    file can widen it. Name them to load them anyway."""

    @property
    def scoped(self) -> bool:
        """The execution has a path scope (``protocol/extensions/scope.py``)."""
        return bool(self.allowed_paths or self.read_only_paths or self.disallowed_paths)

    @property
    def confined(self) -> bool:
        """The file tools reach only ``cwd`` and the allowed and read-only paths."""
        return bool(self.allowed_paths or self.read_only_paths)

    @property
    def path_scope(self) -> dict[str, Any]:
        """The scope as ``scope.access`` and ``scope.scope_widenings`` take it."""
        return {
            "cwd": self.cwd,
            "allowed": self.allowed_paths,
            "read_only": self.read_only_paths,
            "disallowed": self.disallowed_paths,
            "enforcement": self.scope_enforcement,
        }

    def __attrs_post_init__(self) -> None:
        if self.fork_session and self.resume_session_id is None:
            raise InvalidParamsError(
                "fork_session",
                True,
                "only with resume_session_id (a fork starts a new session from an old one's "
                "history)",
            )
        check_with_resume(self)
        check_with_preset(self.system_prompt, self.architecture_config.preset)
        if self.confined and self.cwd is not None:
            # The working directory is in the scope: it must be a path the rules can name.
            normalize_path("cwd", self.cwd)
        # With a provider or a base URL the model id is the server's business (any id goes);
        # otherwise an unknown alias is refused now, naming the known ones.
        if not self.custom_server:
            for name in ("model", "fallback_model"):
                value = getattr(self, name)
                if value is not None:
                    resolve_model(value)  # raises UnknownModelError
        # Cross-field rules of the thinking keys depend on the model: check them now, not when
        # the options are built (which may be long after the caller's mistake).
        self.effective_thinking()

    @property
    def custom_server(self) -> bool:
        """The CLI talks to a server other than Anthropic's (a provider, a base URL)."""
        config = self.architecture_config
        return (
            (self.provider is not None and self.provider != "anthropic")
            or config.ollama_base_url is not None
            or "ANTHROPIC_BASE_URL" in config.custom_env
        )

    @property
    def resolved_model(self) -> str | None:
        """The model id the CLI gets (``None``: the CLI's default)."""
        if self.model is None:
            return None
        return self.model if self.custom_server else resolve_model(self.model)

    @property
    def resolved_fallback_model(self) -> str | None:
        if self.fallback_model is None:
            return None
        return self.fallback_model if self.custom_server else resolve_model(self.fallback_model)

    def effective_thinking(self) -> ThinkingConfig | None:
        """The SDK thinking config for this execution (see ``models.effective_thinking``)."""
        cfg = self.architecture_config
        return effective_thinking(
            self.resolved_model,
            mode=cfg.claude_thinking,
            budget_tokens=cfg.claude_thinking_budget,
            display=cfg.claude_thinking_display,
        )
