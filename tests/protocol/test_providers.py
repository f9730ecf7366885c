"""Providers beyond the built-in ones (``register_provider``), and which model ids a session
takes with and without one (protocol/config/providers.py, models.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from claude_trio.errors import InvalidParamsError, UnknownModelError
from claude_trio.params import ExecuteParams, ProviderPreset, register_provider, resolve_model
from claude_trio.protocol.config import providers
from claude_trio.protocol.config.options import build_options
from claude_trio.protocol.config.providers import PROVIDERS, provider_env, provider_names
from claude_trio.protocol.extensions.controls import model_for_switch


@pytest.fixture(autouse=True)
def registry() -> Iterator[None]:
    """Each test starts from the built-in providers and leaves them as they were."""
    saved = dict(providers._REGISTRY)
    yield
    providers._REGISTRY.clear()
    providers._REGISTRY.update(saved)


def together(**kwargs: Any) -> ProviderPreset:
    kwargs.setdefault("base_url", "https://api.together.example/anthropic")
    kwargs.setdefault("credential_env", "TOGETHER_API_KEY")
    return register_provider("together", **kwargs)


def test_a_registered_provider_is_taken_by_name_with_any_model_id() -> None:
    with pytest.raises(InvalidParamsError, match="register_provider adds one"):
        ExecuteParams(prompt="hi", provider="together")
    preset = together(models=("Qwen/Qwen3-Coder",))
    assert PROVIDERS["together"] is preset
    assert "together" in provider_names()
    made = ExecuteParams(
        prompt="hi", provider="together", model="Qwen/Qwen3-Coder", fallback_model="whatever-7b"
    )
    assert made.resolved_model == "Qwen/Qwen3-Coder"
    assert made.resolved_fallback_model == "whatever-7b"
    assert model_for_switch("another-model", custom_server=made.custom_server) == "another-model"


def test_a_registered_provider_points_the_cli_at_its_server_with_its_credential() -> None:
    together(env={"ANTHROPIC_DEFAULT_HAIKU_MODEL": "small-model"})
    params = ExecuteParams(prompt="hi", provider="together", model="big-model")
    environ = {"TOGETHER_API_KEY": "tg-key", "ANTHROPIC_API_KEY": "x"}
    options = build_options(params, environ=environ)
    assert options.model == "big-model"
    assert {k: options.env[k] for k in ("ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN")} == {
        "ANTHROPIC_BASE_URL": "https://api.together.example/anthropic",
        "ANTHROPIC_AUTH_TOKEN": "tg-key",
    }
    assert options.env["ANTHROPIC_API_KEY"] == ""  # an Anthropic key never goes elsewhere
    assert options.env["ANTHROPIC_DEFAULT_HAIKU_MODEL"] == "small-model"
    with pytest.raises(InvalidParamsError, match="set TOGETHER_API_KEY"):
        build_options(params, environ={})


def test_a_provider_without_a_credential_variable_needs_none() -> None:
    register_provider("lab", base_url="http://10.0.0.5:8080")
    env = provider_env("lab", {})
    assert env["ANTHROPIC_BASE_URL"] == "http://10.0.0.5:8080"
    assert env["ANTHROPIC_AUTH_TOKEN"] == "lab"


def test_registering_the_same_provider_again_is_harmless_another_needs_replace() -> None:
    first = together()
    assert together() == first
    with pytest.raises(InvalidParamsError, match="replace=True"):
        together(base_url="https://elsewhere.example")
    replaced = together(base_url="https://elsewhere.example", replace=True)
    assert PROVIDERS["together"] is replaced
    with pytest.raises(InvalidParamsError, match="already a provider"):
        register_provider("ollama", base_url="http://gpu-box:11434")
    register_provider("ollama", base_url="http://gpu-box:11434", replace=True)
    assert provider_env("ollama", {})["ANTHROPIC_BASE_URL"] == "http://gpu-box:11434"


@pytest.mark.parametrize(
    ("kwargs", "field", "says"),
    [
        ({"name": "Together AI"}, "provider.name", "lower-case"),
        ({"name": "anthropic"}, "provider.name", "the default"),
        ({"name": ""}, "provider.name", "lower-case"),
        ({"base_url": "api.together.example"}, "provider.base_url", "http:// or https://"),
        ({"base_url": "ftp://x"}, "provider.base_url", "http:// or https://"),
        ({"credential_env": "TOGETHER KEY"}, "provider.credential_env", "environment variable"),
        ({"models": "qwen"}, "provider.models", "a list of model ids"),
        ({"models": ["ok", ""]}, "provider.models", "non-empty"),
        ({"env": {"ANTHROPIC_BASE_URL": "x"}}, "provider.env", "sets them from base_url"),
        ({"env": {"A": 1}}, "provider.env", "mapping of variable names"),
    ],
)
def test_a_bad_provider_is_refused_naming_the_field(
    kwargs: dict[str, Any], field: str, says: str
) -> None:
    args: dict[str, Any] = {"name": "together", "base_url": "https://api.together.example"}
    args.update(kwargs)
    with pytest.raises(InvalidParamsError) as info:
        register_provider(args.pop("name"), **args)
    assert info.value.field == field
    assert says in str(info.value)
    assert "together" not in PROVIDERS


def test_a_mistyped_provider_name_gets_a_suggestion() -> None:
    with pytest.raises(InvalidParamsError, match="did you mean 'openrouter'"):
        ExecuteParams(prompt="hi", provider="openruter")


def test_a_base_url_alone_also_accepts_any_model_id() -> None:
    from claude_trio.params import ArchitectureConfig

    config = ArchitectureConfig(custom_env={"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"})
    made = ExecuteParams(prompt="hi", model="llama-3-70b", architecture_config=config)
    assert made.resolved_model == "llama-3-70b"


# -- the default Anthropic case keeps its check ---------------------------------------------------


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("opus4.6", "opus-4.6"),
        ("Opus-4.6", "opus-4.6"),
        ("sonet", "sonnet"),
        ("fable5", "fable-5"),
        ("sonnet-4-5", "sonnet-4.5"),
        ("haiku4.5", "haiku-4.5"),
    ],
)
def test_a_mistyped_alias_gets_a_did_you_mean(typo: str, meant: str) -> None:
    with pytest.raises(UnknownModelError) as info:
        ExecuteParams(prompt="hi", model=typo)
    assert f"did you mean {meant!r}?" in str(info.value)
    assert resolve_model(meant)  # the suggestion is itself accepted


def test_a_model_close_to_nothing_gets_no_suggestion_but_the_list() -> None:
    with pytest.raises(UnknownModelError) as info:
        resolve_model("gpt-4o")
    message = str(info.value)
    assert "did you mean" not in message
    assert "opus-4.6" in message
    assert "with a provider or a base URL any id is accepted" in message
