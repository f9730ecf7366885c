"""The model table: aliases, full ids, and what a model implies for thinking.

Rules (as the TypeScript library's model table):

1. A known short alias (``opus-4.6``, ``fable-5``, ...) resolves to its full id
   (``claude-opus-4-6``, ``claude-fable-5``, ...).
2. A full id (anything starting with ``claude-``) passes through unchanged, so a model the table
   does not know yet still works.
3. The CLI's own family aliases (``opus``, ``sonnet``, ``haiku``) pass through unchanged: the CLI
   resolves them to whatever it currently considers the family's default.
4. Anything else raises :class:`UnknownModelError`, which lists the known aliases and, for a
   mistyped one, the closest ("did you mean 'opus-4.6'?"). With a provider or a base URL
   (``providers.py``) none of this applies: any model id is the server's business.
5. ``ADAPTIVE_THINKING_ONLY`` models reject fixed-budget thinking: ``enabled`` becomes ``adaptive``
   and the thinking display defaults to ``summarized`` (Opus 4.7 and Fable 5 silently default to
   ``omitted``). Membership also covers dated and context-suffixed variants of a listed id
   (``claude-opus-4-6-20260101``, ``claude-opus-4-6[1m]``).
6. ``REJECTS_DISABLED_THINKING`` models answer ``{"type": "disabled"}`` with a 400. We never send
   ``disabled`` at all (unset thinking is omitted), so this set is informational data.

Keep both sets in sync when Anthropic ships a new adaptive-only model.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal, TypeAlias, assert_never

from claude_agent_sdk.types import ThinkingConfig, ThinkingConfigAdaptive, ThinkingConfigEnabled

from claude_trio.protocol.errors import InvalidParamsError, UnknownModelError

ThinkingMode: TypeAlias = Literal["adaptive", "enabled"]
ThinkingDisplay: TypeAlias = Literal["summarized", "omitted"]

MODEL_ALIASES: Mapping[str, str] = MappingProxyType(
    {
        "opus-4.6": "claude-opus-4-6",
        "opus-4.7": "claude-opus-4-7",
        "opus-4.8": "claude-opus-4-8",
        "sonnet-4.6": "claude-sonnet-4-6",
        "sonnet-4.5": "claude-sonnet-4-5",
        "haiku-4.5": "claude-haiku-4-5",
        "fable-5": "claude-fable-5",
    }
)
"""Our short aliases -> full model ids."""

CLI_FAMILY_ALIASES: frozenset[str] = frozenset({"opus", "sonnet", "haiku"})
"""Aliases the ``claude`` CLI resolves itself; passed through untouched."""

ADAPTIVE_THINKING_ONLY: frozenset[str] = frozenset(
    {"claude-fable-5", "claude-opus-4-6", "claude-opus-4-7", "claude-opus-4-8"}
)
"""Models that reject ``{"type": "enabled", "budget_tokens": N}`` thinking."""

REJECTS_DISABLED_THINKING: frozenset[str] = frozenset({"claude-fable-5"})
"""Models that answer an explicit ``{"type": "disabled"}`` with a 400 (we never send it)."""

FULL_ID_PREFIX = "claude-"

CONTEXT_WINDOWS: Mapping[str, int] = MappingProxyType(
    {
        "claude-sonnet-4-5": 200_000,
        "claude-sonnet-4-6": 200_000,
        "claude-haiku-4-5": 200_000,
        "claude-opus-4-6": 200_000,
        "claude-opus-4-7": 200_000,
        "claude-opus-4-8": 200_000,
        "claude-fable-5": 200_000,
    }
)
"""Context windows (tokens) of the known models; a ``[1m]`` suffix means one million. The CLI's
own figure (``model_usage[...]["contextWindow"]``) wins when it reports one."""


def context_window(model_id: str | None) -> int | None:
    """The context window of ``model_id`` (dated and ``[1m]`` variants included), or None."""
    if not model_id:
        return None
    if model_id.endswith("[1m]"):
        return 1_000_000
    for known, window in CONTEXT_WINDOWS.items():
        if model_id == known or model_id.startswith(known + "-"):
            return window
    return None


def _unknown_model(value: object) -> UnknownModelError:
    aliases = sorted([*MODEL_ALIASES, *CLI_FAMILY_ALIASES])
    hint = ""
    if isinstance(value, str) and value.strip():
        typed = value.strip().lower()
        # A mistyped alias is compared with the aliases, a mistyped id with the known ids.
        close = difflib.get_close_matches(typed, [*aliases, *MODEL_ALIASES.values()], n=1)
        if close and close[0] != value:
            hint = f"did you mean {close[0]!r}? "
    return UnknownModelError(
        "model",
        value,
        f"{hint}unknown model alias; use one of {', '.join(aliases)} or a full model id "
        f"starting with {FULL_ID_PREFIX!r} (with a provider or a base URL any id is accepted)",
    )


def resolve_model(model: str) -> str:
    """The model id to hand the CLI for ``model`` (an alias or a full id); see the module rules."""
    if not isinstance(model, str):
        raise _unknown_model(model)
    if model.startswith(FULL_ID_PREFIX) and len(model) > len(FULL_ID_PREFIX):
        return model
    if model in CLI_FAMILY_ALIASES:
        return model
    try:
        return MODEL_ALIASES[model]
    except KeyError:
        raise _unknown_model(model) from None


def _member(model_id: str | None, table: frozenset[str]) -> bool:
    if model_id is None:
        return False
    # "claude-opus-4-6[1m]" selects the 1M-context variant of the same model.
    base = model_id.split("[", 1)[0]
    return any(base == known or base.startswith(known + "-") for known in table)


def is_adaptive_only(model_id: str | None) -> bool:
    """Whether ``model_id`` (a resolved id, or ``None`` for the CLI default) is adaptive-only.

    ``None`` and the CLI family aliases are not: we cannot know what the CLI maps them to, and the
    CLI converts ``enabled`` to ``adaptive`` by itself for the models that need it.
    """
    return _member(model_id, ADAPTIVE_THINKING_ONLY)


def rejects_disabled_thinking(model_id: str | None) -> bool:
    """Whether ``model_id`` answers an explicit ``{"type": "disabled"}`` with a 400."""
    return _member(model_id, REJECTS_DISABLED_THINKING)


def effective_thinking(
    model_id: str | None,
    *,
    mode: ThinkingMode | None,
    budget_tokens: int | None,
    display: ThinkingDisplay | None,
) -> ThinkingConfig | None:
    """The thinking config the SDK gets for a resolved model and the ``claude_thinking*`` keys.

    * ``mode=None`` -> ``None`` (thinking omitted, never ``disabled``), except on adaptive-only
      models: there it is ``{"type": "adaptive", "display": "summarized"}`` (or the display asked
      for). Adaptive is those models' own default anyway; the display undoes their silent
      ``omitted`` default (the TypeScript library: "passes display: 'summarized' automatically
      for any model in ADAPTIVE_THINKING_ONLY"), and the SDK carries display only inside the config.
    * ``adaptive`` -> ``{"type": "adaptive"}``.
    * ``enabled`` -> ``{"type": "enabled", "budget_tokens": N}``, or ``adaptive`` for adaptive-only
      models (the budget is then dropped).
    * ``display`` is added when given, else ``"summarized"`` for adaptive-only models.

    Raises :class:`InvalidParamsError` for ``display`` without ``mode`` on a model that is not
    adaptive-only, and for ``enabled`` without a budget on a model that needs one.
    """
    adaptive_only = is_adaptive_only(model_id)
    if mode is None and display is None and not adaptive_only:
        return None
    if display is None and adaptive_only:
        display = "summarized"
    match mode:
        case None:
            if not adaptive_only:
                raise InvalidParamsError(
                    "claude_thinking_display",
                    display,
                    f"needs claude_thinking ('adaptive' or 'enabled') for model {model_id!r}: "
                    "the display is part of the thinking config",
                )
            return _adaptive(display)
        case "adaptive":
            return _adaptive(display)
        case "enabled":
            if adaptive_only:
                return _adaptive(display)
            if budget_tokens is None:
                raise InvalidParamsError(
                    "claude_thinking_budget",
                    None,
                    f"claude_thinking='enabled' on model {model_id!r} needs a positive "
                    "claude_thinking_budget",
                )
            enabled: ThinkingConfigEnabled = {"type": "enabled", "budget_tokens": budget_tokens}
            if display is not None:
                enabled["display"] = display
            return enabled
        case _:
            assert_never(mode)


def _adaptive(display: ThinkingDisplay | None) -> ThinkingConfigAdaptive:
    config: ThinkingConfigAdaptive = {"type": "adaptive"}
    if display is not None:
        config["display"] = display
    return config
