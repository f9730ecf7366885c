"""ExecuteParams and ArchitectureConfig validation (protocol/config/params.py)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from claude_trio.errors import UnknownModelError
from claude_trio.protocol.config.params import (
    CONFIG_KEYS,
    ArchitectureConfig,
    ExecuteParams,
)
from claude_trio.protocol.errors import InvalidParamsError

TS_CONFIG: dict[str, Any] = {
    "claude_thinking": "enabled",
    "claude_thinking_budget": 8000,
    "claude_thinking_display": "omitted",
    "claude_effort": "high",
    "claude_usePreset": True,
    "claude_skills": ["pdf", "plugin:review"],
    "claude_skillOverrides": {"pdf": "name-only", "legacy": "off"},
    "claude_skillListingBudgetFraction": 0.05,
    "claude_disableSkillShellExecution": True,
    "custom_env": {"FOO": "bar"},
    "ollama_baseUrl": "http://127.0.0.1:11434",
}


def test_from_mapping_accepts_every_typescript_config_key() -> None:
    config = ArchitectureConfig.from_mapping(TS_CONFIG)
    assert config.claude_thinking == "enabled"
    assert config.claude_thinking_budget == 8000
    assert config.claude_thinking_display == "omitted"
    assert config.claude_effort == "high"
    assert config.claude_use_preset is True
    assert config.preset == "claude_code"
    assert config.claude_skills == ("pdf", "plugin:review")
    assert dict(config.claude_skill_overrides or {}) == {"pdf": "name-only", "legacy": "off"}
    assert config.claude_skill_listing_budget_fraction == 0.05
    assert config.claude_disable_skill_shell_execution is True
    assert dict(config.custom_env) == {"FOO": "bar"}
    assert config.ollama_base_url == "http://127.0.0.1:11434"


def test_config_keys_cover_every_config_attribute() -> None:
    assert set(CONFIG_KEYS.values()) == {a.name for a in attrs.fields(ArchitectureConfig)}


def test_to_mapping_round_trips_the_config_keys() -> None:
    config = ArchitectureConfig.from_mapping(TS_CONFIG)
    assert config.to_mapping() == TS_CONFIG
    assert ArchitectureConfig.from_mapping(config.to_mapping()) == config
    assert ArchitectureConfig().to_mapping() == {}


def test_from_mapping_rejects_unknown_key_naming_it_and_listing_allowed_keys() -> None:
    with pytest.raises(InvalidParamsError) as info:
        ArchitectureConfig.from_mapping({"claude_thinking": "adaptive", "claude_usepreset": True})
    message = str(info.value)
    assert "'claude_usepreset'" in message
    for key in CONFIG_KEYS:
        assert key in message


def test_from_mapping_rejects_snake_case_attribute_names() -> None:
    with pytest.raises(InvalidParamsError, match="claude_use_preset"):
        ArchitectureConfig.from_mapping({"claude_use_preset": True})


def test_from_mapping_rejects_a_non_mapping() -> None:
    with pytest.raises(InvalidParamsError, match="architecture_config"):
        ArchitectureConfig.from_mapping(["claude_thinking"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("key", "value", "allowed_fragment"),
    [
        ("claude_thinking", "disabled", "'adaptive', 'enabled'"),
        ("claude_thinking", True, "'adaptive', 'enabled'"),
        ("claude_thinking_budget", 0, "positive int"),
        ("claude_thinking_budget", -5, "positive int"),
        ("claude_thinking_budget", 1.5, "positive int"),
        ("claude_thinking_budget", True, "positive int"),
        ("claude_thinking_display", "updates", "'summarized', 'omitted'"),
        ("claude_effort", "extreme", "'low', 'medium', 'high'"),
        ("claude_usePreset", "my_preset", "'claude_code'"),
        ("claude_usePreset", 1, "'claude_code'"),
        ("claude_skills", "pdf", "list of non-empty skill names"),
        ("claude_skills", ["pdf", ""], "list of non-empty skill names"),
        ("claude_skills", [3], "list of non-empty skill names"),
        ("claude_skillOverrides", {"pdf": "hidden"}, "'user-invocable-only'"),
        ("claude_skillOverrides", ["pdf"], "'name-only'"),
        ("claude_skillListingBudgetFraction", 0, "0 < x <= 1"),
        ("claude_skillListingBudgetFraction", 1.5, "0 < x <= 1"),
        ("claude_skillListingBudgetFraction", float("nan"), "0 < x <= 1"),
        ("claude_skillListingBudgetFraction", "0.1", "0 < x <= 1"),
        ("claude_disableSkillShellExecution", "yes", "True, False"),
        ("custom_env", {"A": 1}, "str -> str"),
        ("custom_env", {"": "x"}, "str -> str"),
        ("custom_env", "A=1", "str -> str"),
        ("ollama_baseUrl", "localhost:11434", "http:// or https://"),
        ("ollama_baseUrl", "ftp://host", "http:// or https://"),
        ("ollama_baseUrl", "http://", "http:// or https://"),
    ],
)
def test_invalid_config_value_names_field_value_and_what_is_allowed(
    key: str, value: Any, allowed_fragment: str
) -> None:
    with pytest.raises(InvalidParamsError) as info:
        ArchitectureConfig.from_mapping({key: value})
    assert info.value.field.startswith(key)
    assert allowed_fragment in info.value.allowed
    assert allowed_fragment in str(info.value)


@pytest.mark.parametrize("effort", ["low", "medium", "high", "xhigh", "max"])
def test_effort_accepts_the_sdks_levels(effort: str) -> None:
    assert ArchitectureConfig.from_mapping({"claude_effort": effort}).claude_effort == effort


@pytest.mark.parametrize(
    ("raw", "preset"), [(True, "claude_code"), ("claude_code", "claude_code"), (False, None)]
)
def test_use_preset_true_or_claude_code_selects_the_claude_code_preset(
    raw: object, preset: str | None
) -> None:
    assert ArchitectureConfig.from_mapping({"claude_usePreset": raw}).preset == preset


def test_skills_all_is_accepted() -> None:
    assert ArchitectureConfig.from_mapping({"claude_skills": "all"}).claude_skills == "all"


def test_empty_skill_list_is_kept_as_hide_every_skill() -> None:
    assert ArchitectureConfig.from_mapping({"claude_skills": []}).claude_skills == ()


def test_config_copies_mappings_so_later_caller_mutation_has_no_effect() -> None:
    env = {"A": "1"}
    overrides = {"pdf": "on"}
    config = ArchitectureConfig(custom_env=env, claude_skill_overrides=overrides)
    env["A"] = "2"
    overrides["pdf"] = "off"
    assert config.custom_env["A"] == "1"
    assert config.claude_skill_overrides is not None
    assert config.claude_skill_overrides["pdf"] == "on"


def test_ollama_base_url_conflicting_with_custom_env_base_url_is_invalid() -> None:
    with pytest.raises(InvalidParamsError, match="ANTHROPIC_BASE_URL"):
        ArchitectureConfig(
            ollama_base_url="http://a:1", custom_env={"ANTHROPIC_BASE_URL": "http://b:2"}
        )
    same = ArchitectureConfig(
        ollama_base_url="http://a:1", custom_env={"ANTHROPIC_BASE_URL": "http://a:1"}
    )
    assert same.ollama_base_url == "http://a:1"


def test_evolve_revalidates() -> None:
    config = ArchitectureConfig()
    with pytest.raises(InvalidParamsError):
        attrs.evolve(config, claude_effort="loud")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# ExecuteParams
# ---------------------------------------------------------------------------------------------


def test_execute_params_defaults() -> None:
    params = ExecuteParams(prompt="hello")
    assert params.model is None
    assert params.resolved_model is None
    assert params.system_prompt is None
    assert params.max_turns is None
    assert params.plan_mode is False
    assert params.cwd is None
    assert dict(params.mcp_servers) == {}
    assert params.resume_session_id is None
    assert params.streaming_input is True
    assert params.architecture_config == ArchitectureConfig()
    assert params.user_input_timeout == 300


def test_execute_params_is_keyword_only_and_frozen() -> None:
    with pytest.raises(TypeError):
        ExecuteParams("hello")  # type: ignore[call-arg]
    params = ExecuteParams(prompt="hello")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        params.prompt = "other"  # type: ignore[misc]


def test_permission_mode_is_checked_by_name_and_unset_by_default() -> None:
    assert ExecuteParams(prompt="x").permission_mode is None
    assert ExecuteParams(prompt="x", permission_mode="acceptEdits").permission_mode == "acceptEdits"
    with pytest.raises(InvalidParamsError, match=r"permission_mode.*'dontAsk'"):
        ExecuteParams(prompt="x", permission_mode="ask")  # type: ignore[arg-type]


@pytest.mark.parametrize("prompt", ["", "   \n", None, 42])
def test_empty_or_non_string_prompt_is_invalid(prompt: Any) -> None:
    with pytest.raises(InvalidParamsError) as info:
        ExecuteParams(prompt=prompt)
    assert info.value.field == "prompt"
    assert "non-empty string" in str(info.value)


def test_model_alias_is_resolved_and_kept_as_given() -> None:
    params = ExecuteParams(prompt="x", model="opus-4.6")
    assert params.model == "opus-4.6"
    assert params.resolved_model == "claude-opus-4-6"


def test_unknown_model_alias_is_rejected_at_construction() -> None:
    with pytest.raises(UnknownModelError, match="'gpt-5'"):
        ExecuteParams(prompt="x", model="gpt-5")


@pytest.mark.parametrize(
    ("field", "value", "fragment"),
    [
        ("system_prompt", 3, "a string, None"),
        ("max_turns", 0, "positive int"),
        ("max_turns", True, "positive int"),
        ("plan_mode", "yes", "True or False"),
        ("streaming_input", None, "True or False"),
        ("cwd", "", "non-empty string"),
        ("resume_session_id", "", "session id"),
        ("resume_session_id", "--dangerously-skip-permissions", "session id"),
        ("resume_session_id", " abc", "session id"),
        ("user_input_timeout", 0, "seconds > 0"),
        ("user_input_timeout", -1.0, "seconds > 0"),
        ("user_input_timeout", float("inf"), "seconds > 0"),
        ("user_input_timeout", True, "seconds > 0"),
        ("architecture_config", {"claude_effort": "low"}, "ArchitectureConfig.from_mapping"),
        ("mcp_servers", [], "mapping of server name"),
    ],
)
def test_invalid_param_names_field_value_and_what_is_allowed(
    field: str, value: Any, fragment: str
) -> None:
    with pytest.raises(InvalidParamsError) as info:
        ExecuteParams(prompt="x", **{field: value})
    assert info.value.field == field
    assert info.value.value == value
    assert fragment in str(info.value)


def test_user_input_timeout_accepts_positive_seconds() -> None:
    assert ExecuteParams(prompt="x", user_input_timeout=0.5).user_input_timeout == 0.5


def test_mcp_servers_accept_the_four_sdk_config_shapes() -> None:
    servers = {
        "files": {"command": "npx", "args": ["server"]},
        "stdio": {"type": "stdio", "command": "/bin/server"},
        "events": {"type": "sse", "url": "https://example.com/sse"},
        "api": {"type": "http", "url": "http://127.0.0.1:9000/mcp", "headers": {"X": "1"}},
        "local": {"type": "sdk", "name": "local", "instance": object()},
    }
    params = ExecuteParams(prompt="x", mcp_servers=servers)
    assert dict(params.mcp_servers) == servers


@pytest.mark.parametrize(
    ("config", "field_fragment", "fragment"),
    [
        ({"type": "websocket", "url": "ws://x"}, ".type", "'stdio', 'sse', 'http', 'sdk'"),
        ({"type": "stdio"}, ".command", "command"),
        ({"args": ["x"]}, ".command", "command"),
        ({"type": "sse", "url": "example.com"}, ".url", "http:// or https://"),
        ({"type": "http"}, ".url", "http:// or https://"),
        ({"type": "sdk", "name": "x"}, "", "create_sdk_mcp_server"),
        ("npx server", "", "config dict"),
    ],
)
def test_invalid_mcp_server_config_names_the_server(
    config: Any, field_fragment: str, fragment: str
) -> None:
    with pytest.raises(InvalidParamsError) as info:
        ExecuteParams(prompt="x", mcp_servers={"srv": config})
    assert info.value.field == "mcp_servers['srv']" + field_fragment
    assert fragment in str(info.value)


def test_enabled_thinking_without_budget_is_rejected_at_construction() -> None:
    config = ArchitectureConfig(claude_thinking="enabled")
    with pytest.raises(InvalidParamsError, match="claude_thinking_budget"):
        ExecuteParams(prompt="x", model="sonnet-4.5", architecture_config=config)
    with pytest.raises(InvalidParamsError, match="claude_thinking_budget"):
        ExecuteParams(prompt="x", architecture_config=config)  # the CLI default model
    # Adaptive-only models drop the budget, so it is not needed there.
    params = ExecuteParams(prompt="x", model="opus-4.7", architecture_config=config)
    assert params.effective_thinking() == {"type": "adaptive", "display": "summarized"}


def test_thinking_display_without_mode_is_rejected_unless_the_model_is_adaptive_only() -> None:
    config = ArchitectureConfig(claude_thinking_display="summarized")
    with pytest.raises(InvalidParamsError, match="claude_thinking_display"):
        ExecuteParams(prompt="x", model="sonnet-4.6", architecture_config=config)
    params = ExecuteParams(prompt="x", model="fable-5", architecture_config=config)
    assert params.effective_thinking() == {"type": "adaptive", "display": "summarized"}


def test_execute_params_copies_mcp_servers() -> None:
    servers: dict[str, Any] = {"a": {"command": "x"}}
    params = ExecuteParams(prompt="x", mcp_servers=servers)
    servers["b"] = {"command": "y"}
    assert list(params.mcp_servers) == ["a"]


def test_what_the_cli_gets_on_its_command_line_is_checked_before_anything_starts() -> None:
    with pytest.raises(InvalidParamsError, match=r"system_prompt.*no NUL"):
        ExecuteParams(prompt="hi", system_prompt="be\0 brief")
    with pytest.raises(InvalidParamsError, match=r"system_prompt='131073 bytes'.*CLAUDE\.md"):
        ExecuteParams(prompt="hi", system_prompt="x" * (128 * 1024 + 1))
    ExecuteParams(prompt="hi", system_prompt="x" * (128 * 1024 - 1))  # the largest that fits
    with pytest.raises(InvalidParamsError, match=r"cwd.*no NUL"):
        ExecuteParams(prompt="hi", cwd="/tmp/a\0b")
    with pytest.raises(InvalidParamsError, match=r"custom_env\['K'\].*no NUL"):
        ArchitectureConfig(custom_env={"K": "v\0"})


@pytest.mark.parametrize("value", [0, -1, True, float("nan"), float("inf"), 10**400, "5"])
def test_driver_deadlines_are_checked_by_name(value: object) -> None:
    from claude_trio import DriverConfig

    with pytest.raises(InvalidParamsError, match="connect_timeout"):
        DriverConfig(connect_timeout=value)  # type: ignore[arg-type]
