"""Model providers: where the CLI sends its requests, and the credential it needs (pure).

The ``claude`` CLI speaks the Anthropic Messages API; a provider points it at another server
that speaks it too. Three are built in (``ollama``, ``openrouter``, ``minimax``);
:func:`register_provider` adds more. Rules:

1. ``anthropic`` (the default, ``provider=None``) changes nothing: the CLI finds its own
   credentials (``ANTHROPIC_API_KEY``, ``ANTHROPIC_AUTH_TOKEN``, a ``claude login``).
2. A provider sets ``ANTHROPIC_BASE_URL`` to its server and passes the credential the user keeps
   under the provider's own variable (``OPENROUTER_API_KEY``, ``MINIMAX_API_KEY``) to the CLI as
   ``ANTHROPIC_AUTH_TOKEN`` (a bearer token), clearing ``ANTHROPIC_API_KEY`` so an Anthropic key
   in the environment is never sent to another server. Its own ``env`` (say
   ``ANTHROPIC_DEFAULT_HAIKU_MODEL``, for the CLI's side requests) comes first.
3. The credential is checked before anything starts: :func:`provider_env` raises
   ``InvalidParamsError`` naming the variable to set. A provider without ``credential_env``
   (a local server such as Ollama) needs none.
4. With a provider (or any base URL) the model id is the server's business: any id is accepted
   and passed as is; a provider's ``models`` are examples, never a closed list.
5. The caller's environment wins over the provider (``open_session(env=...)``, ``custom_env``),
   so a provider can be pointed at another server, a test double for instance.
6. A registered provider is known to the process that registered it: a fleet worker or a
   gateway that runs sessions for it must register it too (at import of the code that starts
   them). Registering the same provider twice is harmless; another one under a taken name
   needs ``replace=True``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

import attrs

from claude_trio.protocol.errors import InvalidParamsError

__all__ = [
    "PROVIDERS",
    "PROVIDER_NAMES",
    "ProviderPreset",
    "check_provider",
    "provider_env",
    "provider_names",
    "register_provider",
]

_NAME = re.compile(r"[a-z][a-z0-9_-]{0,63}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SET_BY_PROVIDER = ("ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_API_KEY")


def _check_name(_inst: object, _attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or not _NAME.fullmatch(value) or value == "anthropic":
        raise InvalidParamsError(
            "provider.name",
            value,
            "lower-case letters, digits, '-' or '_', starting with a letter (not 'anthropic': "
            "that is the default, provider=None)",
        )


def _check_base_url(_inst: object, _attribute: attrs.Attribute[Any], value: object) -> None:
    parts = urlsplit(value) if isinstance(value, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        raise InvalidParamsError(
            "provider.base_url",
            value,
            "an http:// or https:// URL of a server that speaks the Messages API "
            "(the CLI appends /v1/messages)",
        )


def _check_credential_env(_inst: object, _attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (not isinstance(value, str) or not _ENV_NAME.fullmatch(value)):
        raise InvalidParamsError(
            "provider.credential_env",
            value,
            "the name of the environment variable holding the credential (OPENROUTER_API_KEY), "
            "or None when the server needs none",
        )


def _models(value: object) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InvalidParamsError("provider.models", value, "a list of model ids (examples)")
    for model in value:
        if not isinstance(model, str) or not model.strip():
            raise InvalidParamsError("provider.models", value, "non-empty model id strings")
    return tuple(value)


def _env(value: object) -> Mapping[str, str]:
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and _ENV_NAME.fullmatch(k) and isinstance(v, str)
        for k, v in value.items()
    ):
        raise InvalidParamsError("provider.env", value, "a mapping of variable names to strings")
    taken = sorted(set(value) & set(_SET_BY_PROVIDER))
    if taken:
        raise InvalidParamsError(
            "provider.env",
            value,
            f"no {', '.join(taken)}: the provider sets them from base_url and credential_env",
        )
    return MappingProxyType(dict(value))


@attrs.frozen(kw_only=True)
class ProviderPreset:
    """One server that speaks the Messages API, and how the CLI authenticates to it."""

    name: str = attrs.field(validator=_check_name)
    """What ``ExecuteParams(provider=...)`` names it by."""
    base_url: str = attrs.field(validator=_check_base_url)
    """The server, as ``ANTHROPIC_BASE_URL``."""
    credential_env: str | None = attrs.field(default=None, validator=_check_credential_env)
    """The variable the user keeps the credential in (None: the server needs none)."""
    models: tuple[str, ...] = attrs.field(default=(), converter=_models)
    """Model ids the server serves (examples: any id is accepted, rule 4)."""
    env: Mapping[str, str] = attrs.field(factory=dict, converter=_env)
    """More variables the CLI gets with this provider (rule 2), e.g.
    ``ANTHROPIC_DEFAULT_HAIKU_MODEL`` for the CLI's side requests."""


_BUILT_IN: tuple[ProviderPreset, ...] = (
    ProviderPreset(
        name="ollama",
        base_url="http://localhost:11434",
        credential_env=None,
        models=("qwen3-coder", "gpt-oss:20b", "gpt-oss:120b", "glm-4.6"),
    ),
    ProviderPreset(
        name="openrouter",
        base_url="https://openrouter.ai/api",
        credential_env="OPENROUTER_API_KEY",
        models=(
            "anthropic/claude-sonnet-4.5",
            "anthropic/claude-opus-4.1",
            "qwen/qwen3-coder",
            "z-ai/glm-4.6",
        ),
    ),
    ProviderPreset(
        name="minimax",
        base_url="https://api.minimax.io/anthropic",
        credential_env="MINIMAX_API_KEY",
        models=("MiniMax-M2",),
    ),
)

_REGISTRY: dict[str, ProviderPreset] = {preset.name: preset for preset in _BUILT_IN}

PROVIDERS: Mapping[str, ProviderPreset] = MappingProxyType(_REGISTRY)
"""The providers by name: the built-in ones and every one registered since (a live view)."""

PROVIDER_NAMES: tuple[str, ...] = ("anthropic", *_REGISTRY)
"""The built-in provider names (``run --provider`` offers these); :func:`provider_names` has
the registered ones too."""


def provider_names() -> tuple[str, ...]:
    """Every provider name ``ExecuteParams(provider=...)`` takes now: ``anthropic``, the
    built-in ones, and the registered ones."""
    return ("anthropic", *_REGISTRY)


def register_provider(
    name: str,
    *,
    base_url: str,
    credential_env: str | None = None,
    models: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    replace: bool = False,
) -> ProviderPreset:
    """Make ``name`` a provider ``ExecuteParams(provider=name)`` takes: the CLI then sends its
    requests to ``base_url``, with the credential kept in ``credential_env`` as a bearer
    token, and ``env`` set too; any model id is accepted (the module's rules).

    Returns the preset. Registering the same preset again returns it; a different one under
    a name already taken (a built-in one too) raises ``InvalidParamsError`` unless
    ``replace=True``. Bad values raise ``InvalidParamsError`` naming the field.
    """
    preset = ProviderPreset(
        name=name, base_url=base_url, credential_env=credential_env, models=models, env=env
    )
    existing = _REGISTRY.get(preset.name)
    if existing is not None and existing != preset and not replace:
        raise InvalidParamsError(
            "provider.name",
            name,
            f"a name not taken: {name!r} is already a provider (at {existing.base_url}); "
            "pass replace=True to replace it",
        )
    _REGISTRY[preset.name] = preset
    return preset


def check_provider(name: object) -> None:
    """Nothing if ``name`` is ``None`` or a provider; ``InvalidParamsError`` naming the known
    ones (and the closest, for a typo) else."""
    if name is None or name == "anthropic" or (isinstance(name, str) and name in _REGISTRY):
        return
    names = provider_names()
    close = difflib.get_close_matches(name, names, n=1) if isinstance(name, str) else []
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise InvalidParamsError(
        "provider",
        name,
        f"{hint}one of {', '.join(names)} (register_provider adds one)",
    )


def provider_env(name: str | None, environ: Mapping[str, str]) -> dict[str, str]:
    """The CLI environment a provider needs (rule 2), given the environment it will run with
    (this process's, then the caller's). Raises ``InvalidParamsError`` when the credential is
    missing (rule 3)."""
    if name is None or name == "anthropic":
        return {}
    check_provider(name)
    preset = _REGISTRY[name]
    env = {**preset.env, "ANTHROPIC_BASE_URL": preset.base_url, "ANTHROPIC_API_KEY": ""}
    if preset.credential_env is None:
        env["ANTHROPIC_AUTH_TOKEN"] = name  # the server ignores it; the CLI wants one
        return env
    credential = environ.get(preset.credential_env, "")
    if not credential.strip():
        raise InvalidParamsError(
            "provider",
            name,
            f"a credential for {name}: set {preset.credential_env} in the environment "
            f"(or in custom_env / open_session(env=...))",
        )
    env["ANTHROPIC_AUTH_TOKEN"] = credential
    return env
