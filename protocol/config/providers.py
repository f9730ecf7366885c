"""Model providers: where the CLI sends its requests, and the credential it needs (pure).

The ``claude`` CLI speaks the Anthropic Messages API; a provider preset points it at another
server that speaks it too. Rules:

1. ``anthropic`` (the default, ``provider=None``) changes nothing: the CLI finds its own
   credentials (``ANTHROPIC_API_KEY``, ``ANTHROPIC_AUTH_TOKEN``, a ``claude login``).
2. A preset sets ``ANTHROPIC_BASE_URL`` to its server and passes the credential the user keeps
   under the preset's own variable (``OPENROUTER_API_KEY``, ``MINIMAX_API_KEY``) to the CLI as
   ``ANTHROPIC_AUTH_TOKEN`` (a bearer token), clearing ``ANTHROPIC_API_KEY`` so an Anthropic key
   in the environment is never sent to another server.
3. The credential is checked before anything starts: :func:`provider_env` raises
   ``InvalidParamsError`` naming the variable to set. Ollama needs none (a local server).
4. With a provider (or any base URL) the model id is the server's business: any id is accepted.
5. The caller's environment wins over the preset (``open_session(env=...)``, ``custom_env``),
   so a preset can be pointed at another server, a test double for instance.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import attrs

from claude_trio.protocol.errors import InvalidParamsError


@attrs.frozen(kw_only=True)
class ProviderPreset:
    """One server that speaks the Messages API, and how the CLI authenticates to it."""

    name: str
    base_url: str
    credential_env: str | None
    """The variable the user keeps the credential in (None: the server needs none)."""
    models: tuple[str, ...]
    """Model ids the server serves (examples: any id is accepted)."""


PROVIDERS: Mapping[str, ProviderPreset] = MappingProxyType(
    {
        "ollama": ProviderPreset(
            name="ollama",
            base_url="http://localhost:11434",
            credential_env=None,
            models=("qwen3-coder", "gpt-oss:20b", "gpt-oss:120b", "glm-4.6"),
        ),
        "openrouter": ProviderPreset(
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
        "minimax": ProviderPreset(
            name="minimax",
            base_url="https://api.minimax.io/anthropic",
            credential_env="MINIMAX_API_KEY",
            models=("MiniMax-M2",),
        ),
    }
)
"""The provider presets by name."""

PROVIDER_NAMES: tuple[str, ...] = ("anthropic", *PROVIDERS)


def check_provider(name: object) -> None:
    if name is not None and name not in PROVIDER_NAMES:
        raise InvalidParamsError("provider", name, "one of " + ", ".join(PROVIDER_NAMES))


def provider_env(name: str | None, environ: Mapping[str, str]) -> dict[str, str]:
    """The CLI environment a provider needs (rule 2), given the environment it will run with
    (this process's, then the caller's). Raises ``InvalidParamsError`` when the credential is
    missing (rule 3)."""
    if name is None or name == "anthropic":
        return {}
    check_provider(name)
    preset = PROVIDERS[name]
    env = {"ANTHROPIC_BASE_URL": preset.base_url, "ANTHROPIC_API_KEY": ""}
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
