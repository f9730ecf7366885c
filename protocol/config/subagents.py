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
Every error names the subagent and the field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from claude_trio.protocol.checks import check_bool, check_int
from claude_trio.protocol.config.models import CLI_FAMILY_ALIASES, FULL_ID_PREFIX, MODEL_ALIASES
from claude_trio.protocol.config.tools import check_tool_names
from claude_trio.protocol.errors import InvalidParamsError

_NAME = re.compile(r"[a-z][a-z0-9-]{0,63}")


def _as_tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


@attrs.frozen(kw_only=True)
class SubagentDefinition:
    """One subagent (see the module rules); checked when made, errors name the field."""

    description: str
    prompt: str
    tools: tuple[str, ...] | None = attrs.field(default=None, converter=_as_tuple)
    disallowed_tools: tuple[str, ...] | None = attrs.field(default=None, converter=_as_tuple)
    model: str | None = None
    max_turns: int | None = None
    background: bool = False

    def check(self, name: str) -> None:
        """Raise ``InvalidParamsError`` naming ``subagents[name].<field>`` (rules 2-5)."""
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


def subagent_from_mapping(name: str, raw: object) -> SubagentDefinition:
    """A definition from JSON-like data (``--agents FILE``, the gateway): keys as the fields,
    ``disallowedTools`` / ``maxTurns`` accepted too."""
    field = f"subagents[{name!r}]"
    if not isinstance(raw, Mapping):
        raise InvalidParamsError(field, raw, "an object with description and prompt")
    aliases = {"disallowedTools": "disallowed_tools", "maxTurns": "max_turns"}
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
    return definition
