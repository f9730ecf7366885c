"""What a session can be told: providers, images, subagents, structured output, budgets,
timeouts, tools, redaction and the version gate (the pure part; e2e in tests/e2e)."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from claude_trio.errors import UnknownModelError
from claude_trio.protocol.config.images import MAX_IMAGE_BYTES, ImageInput, message_content
from claude_trio.protocol.config.options import IMAGE_LINE_BYTES, build_options
from claude_trio.protocol.config.params import ArchitectureConfig, ExecuteParams
from claude_trio.protocol.config.providers import PROVIDERS, provider_env
from claude_trio.protocol.config.redact import MASK, is_secret_key, redact_secrets
from claude_trio.protocol.config.subagents import SubagentDefinition, subagent_from_mapping
from claude_trio.protocol.config.versions import (
    VERIFIED_CLI,
    VERIFIED_SDK,
    in_range,
    version_warnings,
)
from claude_trio.protocol.errors import InvalidParamsError

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16
JPEG = b"\xff\xd8\xff\xe0" + b"\0" * 16
GIF = b"GIF89a" + b"\0" * 16
WEBP = b"RIFF\0\0\0\0WEBPVP8 " + b"\0" * 8


# -- providers ----------------------------------------------------------------------------------


def test_a_provider_preset_points_the_cli_at_its_server_with_its_credential() -> None:
    env = provider_env("openrouter", {"OPENROUTER_API_KEY": "or-key"})
    assert env == {
        "ANTHROPIC_BASE_URL": PROVIDERS["openrouter"].base_url,
        "ANTHROPIC_API_KEY": "",  # an Anthropic key is never sent to another server
        "ANTHROPIC_AUTH_TOKEN": "or-key",
    }


def test_a_missing_credential_names_the_variable_to_set() -> None:
    with pytest.raises(InvalidParamsError, match="set MINIMAX_API_KEY"):
        provider_env("minimax", {"ANTHROPIC_API_KEY": "sk-ant"})
    with pytest.raises(InvalidParamsError, match="set OPENROUTER_API_KEY"):
        build_options(ExecuteParams(prompt="hi", provider="openrouter"), environ={})


def test_ollama_needs_no_credential_and_anthropic_changes_nothing() -> None:
    assert provider_env("ollama", {})["ANTHROPIC_BASE_URL"] == "http://localhost:11434"
    assert provider_env(None, {}) == provider_env("anthropic", {}) == {}


def test_with_a_provider_any_model_id_is_accepted_and_passed_as_is() -> None:
    with pytest.raises(UnknownModelError):
        ExecuteParams(prompt="hi", model="qwen3-coder")
    params = ExecuteParams(prompt="hi", model="qwen3-coder", provider="ollama")
    assert params.resolved_model == "qwen3-coder"
    assert build_options(params).model == "qwen3-coder"
    base_url = ArchitectureConfig(custom_env={"ANTHROPIC_BASE_URL": "http://127.0.0.1:1"})
    assert ExecuteParams(prompt="hi", model="x-1", architecture_config=base_url).model == "x-1"
    with pytest.raises(InvalidParamsError, match="provider"):
        ExecuteParams(prompt="hi", provider="bedrockish")


def test_the_caller_s_env_wins_over_the_preset() -> None:
    options = build_options(
        ExecuteParams(prompt="hi", provider="openrouter"),
        environ={"OPENROUTER_API_KEY": "k"},
        extra_env={"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"},
    )
    assert options.env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"
    assert options.env["ANTHROPIC_AUTH_TOKEN"] == "k"


def test_fallback_model_budget_and_schema_reach_the_options() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    options = build_options(
        ExecuteParams(
            prompt="hi", fallback_model="sonnet-4.5", max_budget_usd=0.5, output_schema=schema
        )
    )
    assert options.fallback_model == "claude-sonnet-4-5"
    assert options.max_budget_usd == 0.5
    assert options.output_format == {"type": "json_schema", "schema": schema}


@pytest.mark.parametrize(
    ("schema", "match"),
    [({"type": "array"}, r"output_schema\.type"), ({"type": "object", "properties": 3}, "JSON")],
)
def test_an_output_schema_must_be_a_valid_object_schema(schema: Any, match: str) -> None:
    with pytest.raises(InvalidParamsError, match=match):
        ExecuteParams(prompt="hi", output_schema=schema)


@pytest.mark.parametrize("field", ["run_timeout", "idle_timeout", "max_budget_usd"])
@pytest.mark.parametrize("value", [0, -1, True, "5", float("nan"), 10**400])
def test_timeouts_and_budgets_are_checked_by_name(field: str, value: object) -> None:
    with pytest.raises(InvalidParamsError, match=field):
        ExecuteParams(prompt="hi", **{field: value})


# -- images -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "media_type"),
    [(PNG, "image/png"), (JPEG, "image/jpeg"), (GIF, "image/gif"), (WEBP, "image/webp")],
)
def test_image_types_are_sniffed_from_the_bytes(data: bytes, media_type: str) -> None:
    image = ImageInput.from_bytes(data)
    assert image.media_type == media_type
    assert image.block() == {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": media_type,
            "data": base64.b64encode(data).decode(),
        },
    }


def test_what_is_not_an_image_or_too_big_is_refused() -> None:
    with pytest.raises(InvalidParamsError, match="PNG, JPEG, GIF or WebP"):
        ImageInput.from_bytes(b"%PDF-1.7 not an image")
    with pytest.raises(InvalidParamsError, match=f"at most {MAX_IMAGE_BYTES} bytes"):
        ImageInput.from_bytes(PNG + b"\0" * MAX_IMAGE_BYTES)
    with pytest.raises(InvalidParamsError, match="a readable image file"):
        ImageInput.from_path("/nonexistent/picture.png")
    with pytest.raises(InvalidParamsError, match="ImageInput values"):
        ExecuteParams(prompt="hi", images=[PNG])


def test_a_message_with_images_is_image_blocks_then_the_text() -> None:
    image = ImageInput.from_bytes(PNG)
    assert message_content("look", []) == "look"
    assert message_content("look", [image]) == [image.block(), {"type": "text", "text": "look"}]


def test_images_raise_the_sdk_line_cap_for_their_echo() -> None:
    params = ExecuteParams(prompt="hi", images=[ImageInput.from_bytes(PNG)])
    assert build_options(params).max_buffer_size == IMAGE_LINE_BYTES


# -- subagents ----------------------------------------------------------------------------------


def test_subagents_become_the_sdk_s_agents() -> None:
    reviewer = SubagentDefinition(
        description="Reviews diffs",
        prompt="You review.",
        tools=["Read", "Grep"],
        disallowed_tools=["Bash"],
        model="sonnet-4.5",
        max_turns=3,
        background=True,
    )
    options = build_options(ExecuteParams(prompt="hi", subagents={"reviewer": reviewer}))
    assert options.agents is not None
    agent = options.agents["reviewer"]
    assert (agent.description, agent.prompt, agent.tools, agent.disallowedTools) == (
        "Reviews diffs",
        "You review.",
        ["Read", "Grep"],
        ["Bash"],
    )
    assert (agent.model, agent.maxTurns, agent.background) == ("claude-sonnet-4-5", 3, True)


@pytest.mark.parametrize(
    ("name", "definition", "match"),
    [
        ("Bad Name", {"description": "d", "prompt": "p"}, "lower-case"),
        ("ok", {"description": "", "prompt": "p"}, r"subagents\['ok'\]\.description"),
        ("ok", {"description": "d", "prompt": "p", "tools": ["Bash("]}, r"\.tools\[0\]"),
        ("ok", {"description": "d", "prompt": "p", "model": "gpt"}, r"subagents\['ok'\]\.model"),
        ("ok", {"description": "d", "prompt": "p", "maxTurns": 0}, r"\.max_turns"),
        ("ok", {"description": "d", "prompt": "p", "colour": "red"}, r"\.colour"),
    ],
)
def test_subagent_errors_name_the_subagent_and_the_field(
    name: str, definition: dict[str, Any], match: str
) -> None:
    def make() -> object:
        if "Bad" in name:
            subagents = {name: SubagentDefinition(description="d", prompt="p")}
            return ExecuteParams(prompt="hi", subagents=subagents)
        return subagent_from_mapping(name, definition)

    with pytest.raises(InvalidParamsError, match=match):
        make()


# -- redaction ----------------------------------------------------------------------------------


def test_redaction_masks_secret_keys_urls_auth_values_and_api_keys() -> None:
    config = {
        "env": {"ANTHROPIC_API_KEY": "sk-ant-abcdefgh1234", "PATH": "/usr/bin", "apiKey": 7},
        "base_url": "https://user:hunter2@example.com/v1",
        "headers": ["Authorization: Bearer abc.def", "x"],
        "note": "use sk-live-0123456789abcdef",
    }
    assert redact_secrets(config) == {
        "env": {"ANTHROPIC_API_KEY": MASK, "PATH": "/usr/bin", "apiKey": MASK},
        "base_url": f"https://{MASK}@example.com/v1",
        "headers": [f"Authorization: Bearer {MASK}", "x"],
        "note": f"use {MASK}",
    }


def test_a_url_with_a_long_scheme_still_has_its_userinfo_masked() -> None:
    assert redact_secrets("x" * 40 + "://user:pw@host") == "x" * 40 + f"://{MASK}@host"


def test_redaction_of_a_value_as_large_as_the_cli_takes_is_linear() -> None:
    # One 128 KiB run of letters took about a minute when the URL scheme was unbounded (every
    # start scanned to the end); now it is a moment. No clock here: a regression shows as a
    # test that runs for a minute.
    value = "v" * (128 * 1024 - 3)
    assert redact_secrets({"K": value}) == {"K": value}


SECRET_KEYS = st.sampled_from(
    ["API_KEY", "apiKey", "x-api-key", "AUTH_TOKEN", "client_secret", "PASSWORD", "passwd",
     "aws_session_token", "Credentials", "Authorization", "cookie", "SIGNATURE"]
)  # fmt: skip
VALUES = st.one_of(st.text(), st.integers(), st.none(), st.lists(st.text(), max_size=3))


@given(
    st.recursive(
        st.dictionaries(st.one_of(SECRET_KEYS, st.text(max_size=8)), VALUES, max_size=5),
        lambda inner: st.dictionaries(st.text(max_size=8), inner, max_size=3),
        max_leaves=10,
    )
)
def test_no_value_under_a_secret_key_gets_through(config: dict[str, Any]) -> None:
    def check(original: Any, redacted: Any) -> None:
        if isinstance(original, dict):
            for key, value in original.items():
                out_key = next(k for k in redacted if redact_secrets(key) == k)
                if is_secret_key(key):
                    assert redacted[out_key] == MASK
                else:
                    check(value, redacted[out_key])

    check(config, redact_secrets(config))


# -- the version gate ---------------------------------------------------------------------------


def test_versions_inside_the_verified_range_warn_nothing() -> None:
    assert in_range(VERIFIED_SDK[0], VERIFIED_SDK)
    assert version_warnings(VERIFIED_SDK[1], VERIFIED_CLI[0]) == []


def test_a_version_outside_the_range_is_named_with_the_range() -> None:
    [warning] = version_warnings(VERIFIED_SDK[0], "9.9.9")
    assert "the claude CLI 9.9.9" in warning
    assert VERIFIED_CLI[0] in warning
    [unknown] = version_warnings(None, VERIFIED_CLI[0])
    assert "claude-agent-sdk (unknown version)" in unknown
