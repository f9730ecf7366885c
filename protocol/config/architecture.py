"""The TypeScript library's ``architectureConfig`` for the claude-code architecture:
:class:`ArchitectureConfig`, its keys (:data:`CONFIG_KEYS`) and their checks.

``ArchitectureConfig`` holds the TypeScript library's ``claude_*`` keys (plus ``custom_env``
and ``ollama_baseUrl``) under snake_case attribute names;
:meth:`ArchitectureConfig.from_mapping` accepts the TypeScript library's exact keys and
:meth:`ArchitectureConfig.to_mapping` gives them back. It is validated once, at construction,
as :class:`~claude_trio.protocol.config.params.ExecuteParams` is (the field validators here
serve both).
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal, TypeAlias
from urllib.parse import urlsplit

import attrs
from claude_agent_sdk.types import EffortLevel

from claude_trio.protocol.checks import check_bool, check_env, check_int, check_number
from claude_trio.protocol.config.models import ThinkingDisplay, ThinkingMode
from claude_trio.protocol.errors import InvalidParamsError

SkillOverride: TypeAlias = Literal["on", "name-only", "user-invocable-only", "off"]

THINKING_MODES: tuple[str, ...] = typing.get_args(ThinkingMode)
THINKING_DISPLAYS: tuple[str, ...] = typing.get_args(ThinkingDisplay)
# The TypeScript library lists low/medium/high; the SDK also knows xhigh and max, so we accept
# its whole set.
EFFORT_LEVELS: tuple[str, ...] = typing.get_args(EffortLevel)
SKILL_OVERRIDES: tuple[str, ...] = typing.get_args(SkillOverride)
KNOWN_PRESETS: frozenset[str] = frozenset({"claude_code"})
"""System prompt presets the SDK can express (``SystemPromptPreset.preset`` is a Literal of
these). The SDK drops the preset name on the way to the CLI, so accepting another name would
silently give ``claude_code``; we refuse it instead."""


def _freeze_mapping(value: Any) -> Any:
    """Copy a mapping into a read-only view so the caller's dict cannot change a frozen value.

    Anything else is returned as is, for the validator to reject with a clear message.
    """
    if isinstance(value, Mapping):
        return MappingProxyType(dict(value))
    return value


def _optional_str_list(value: Any) -> Any:
    """A list becomes a tuple (frozen); anything else is left for the validator."""
    if isinstance(value, list | tuple):
        return tuple(value)
    return value


def _optional_mapping(value: Any) -> Any:
    return None if value is None else _freeze_mapping(value)


CONFIG_KEYS: Mapping[str, str] = MappingProxyType(
    {
        "claude_thinking": "claude_thinking",
        "claude_thinking_budget": "claude_thinking_budget",
        "claude_thinking_display": "claude_thinking_display",
        "claude_effort": "claude_effort",
        "claude_usePreset": "claude_use_preset",
        "claude_skills": "claude_skills",
        "claude_skillOverrides": "claude_skill_overrides",
        "claude_skillListingBudgetFraction": "claude_skill_listing_budget_fraction",
        "claude_disableSkillShellExecution": "claude_disable_skill_shell_execution",
        "custom_env": "custom_env",
        "ollama_baseUrl": "ollama_base_url",
    }
)
"""The TypeScript library's ``architectureConfig`` keys -> our attribute names."""

_ATTR_TO_CONFIG_KEY = {attr: key for key, attr in CONFIG_KEYS.items()}


def _label(attribute: attrs.Attribute[Any]) -> str:
    """The name users know a field by: the TypeScript library's key for config fields, else
    the attribute."""
    return _ATTR_TO_CONFIG_KEY.get(attribute.name, attribute.name)


def _one_of(choices: tuple[str, ...]) -> str:
    return "one of " + ", ".join(repr(c) for c in choices)


def _check_optional_choice(choices: tuple[str, ...]) -> Any:
    def check(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is not None and value not in choices:
            raise InvalidParamsError(_label(attribute), value, _one_of(choices) + " or None")

    return check


MAX_COUNT = 2**31 - 1
"""The largest value of an int parameter (turns, token budgets): what the CLI can take."""


def _check_optional_positive_int(
    _inst: object, attribute: attrs.Attribute[Any], value: object
) -> None:
    if value is not None:
        allowed = f"a positive int (at most {MAX_COUNT}) or None"
        check_int(_label(attribute), value, 1, MAX_COUNT, allowed=allowed)


def _check_optional_bool(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        check_bool(_label(attribute), value, allowed="True, False or None")


def _check_bool(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    check_bool(_label(attribute), value)


def _check_optional_nonempty_str(
    _inst: object, attribute: attrs.Attribute[Any], value: object
) -> None:
    if value is not None and not (isinstance(value, str) and value.strip()):
        raise InvalidParamsError(_label(attribute), value, "a non-empty string or None")


def _check_use_preset(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str) and value in KNOWN_PRESETS:
        return
    raise InvalidParamsError(
        _label(attribute),
        value,
        "True (the 'claude_code' preset), False/None (no preset), or a preset name: "
        + ", ".join(repr(p) for p in sorted(KNOWN_PRESETS)),
    )


def _check_skills(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None or value == "all":
        return
    if isinstance(value, tuple) and all(isinstance(s, str) and s.strip() for s in value):
        return
    raise InvalidParamsError(
        _label(attribute), value, "a list of non-empty skill names, 'all', or None"
    )


def _check_skill_overrides(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    allowed = "a mapping of skill name -> " + _one_of(SKILL_OVERRIDES)
    if not isinstance(value, Mapping):
        raise InvalidParamsError(_label(attribute), value, allowed)
    for name, override in value.items():
        if not (isinstance(name, str) and name) or override not in SKILL_OVERRIDES:
            raise InvalidParamsError(f"{_label(attribute)}[{name!r}]", override, allowed)


def _check_fraction(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        allowed = "a number x with 0 < x <= 1, or None"
        check_number(_label(attribute), value, above=0, maximum=1, allowed=allowed)


def _check_env(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    check_env(_label(attribute), value)


def _check_base_url(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    allowed = "an http:// or https:// URL with a host, or None"
    if not isinstance(value, str):
        raise InvalidParamsError(_label(attribute), value, allowed)
    try:
        parts = urlsplit(value)
    except ValueError:
        raise InvalidParamsError(_label(attribute), value, allowed) from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InvalidParamsError(_label(attribute), value, allowed)


@attrs.frozen(kw_only=True)
class ArchitectureConfig:
    """The TypeScript library's ``architectureConfig`` for the claude-code architecture.

    Build it from the TypeScript library's keys with :meth:`from_mapping`. Every field is optional.
    """

    claude_thinking: ThinkingMode | None = attrs.field(
        default=None, validator=_check_optional_choice(THINKING_MODES)
    )
    """``'adaptive'`` or ``'enabled'``; unset omits thinking (never ``disabled``)."""

    claude_thinking_budget: int | None = attrs.field(
        default=None, validator=_check_optional_positive_int
    )
    """Budget tokens for ``'enabled'``; ignored for adaptive (and for adaptive-only models)."""

    claude_thinking_display: ThinkingDisplay | None = attrs.field(
        default=None, validator=_check_optional_choice(THINKING_DISPLAYS)
    )
    """``'summarized'`` or ``'omitted'``; defaults to ``'summarized'`` on adaptive-only models."""

    claude_effort: EffortLevel | None = attrs.field(
        default=None, validator=_check_optional_choice(EFFORT_LEVELS)
    )

    claude_use_preset: bool | str | None = attrs.field(default=None, validator=_check_use_preset)
    """``True`` or a preset name uses Claude Code's system prompt; a ``system_prompt`` given
    alongside is appended to it."""

    claude_skills: tuple[str, ...] | Literal["all"] | None = attrs.field(
        default=None, converter=_optional_str_list, validator=_check_skills
    )
    """Skills to enable (``ClaudeAgentOptions.skills``); ``[]`` hides every skill."""

    claude_skill_overrides: Mapping[str, SkillOverride] | None = attrs.field(
        default=None, converter=_optional_mapping, validator=_check_skill_overrides
    )
    claude_skill_listing_budget_fraction: float | None = attrs.field(
        default=None, validator=_check_fraction
    )
    claude_disable_skill_shell_execution: bool | None = attrs.field(
        default=None, validator=_check_optional_bool
    )

    custom_env: Mapping[str, str] = attrs.field(
        factory=dict, converter=_freeze_mapping, validator=_check_env
    )
    """Extra environment for the CLI process."""

    ollama_base_url: str | None = attrs.field(default=None, validator=_check_base_url)
    """Legacy shortcut: becomes ``ANTHROPIC_BASE_URL`` in the CLI's environment."""

    def __attrs_post_init__(self) -> None:
        env_url = self.custom_env.get("ANTHROPIC_BASE_URL")
        if self.ollama_base_url is not None and env_url not in (None, self.ollama_base_url):
            raise InvalidParamsError(
                "ollama_baseUrl",
                self.ollama_base_url,
                f"conflicts with custom_env['ANTHROPIC_BASE_URL']={env_url!r}; set only one",
            )

    @property
    def preset(self) -> str | None:
        """The system prompt preset asked for, or ``None``."""
        match self.claude_use_preset:
            case True:
                return "claude_code"
            case None | False:
                return None
            case str(name):
                return name
        raise AssertionError(self.claude_use_preset)  # pragma: no cover - validated at init

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> ArchitectureConfig:
        """Build from the TypeScript library's exact keys (``claude_usePreset``,
        ``ollama_baseUrl``, ...)."""
        if not isinstance(raw, Mapping):
            raise InvalidParamsError(
                "architecture_config",
                raw,
                "a mapping of the TypeScript library's architectureConfig keys",
            )
        kwargs: dict[str, Any] = {}
        for key, value in raw.items():
            try:
                kwargs[CONFIG_KEYS[key]] = value
            except (KeyError, TypeError):
                raise InvalidParamsError(
                    "architecture_config key",
                    key,
                    "unknown key; allowed keys: " + ", ".join(CONFIG_KEYS),
                ) from None
        return cls(**kwargs)

    def to_mapping(self) -> dict[str, Any]:
        """The TypeScript library's keys for every field that is set (the inverse of
        :meth:`from_mapping`)."""
        out: dict[str, Any] = {}
        for key, attr in CONFIG_KEYS.items():
            value = getattr(self, attr)
            if value is None or (attr == "custom_env" and not value):
                continue
            if isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, Mapping):
                value = dict(value)
            out[key] = value
        return out
