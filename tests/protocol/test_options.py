"""ExecuteParams -> ClaudeAgentOptions (protocol/config/options.py).

Besides the options object itself, several tests run it through the SDK's own command builder
(``SubprocessCLITransport._build_command``, pure) to pin what the CLI actually receives.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
import trio
from claude_agent_sdk import ClaudeAgentOptions, PermissionResultAllow, ToolPermissionContext

from claude_trio.actors.session.sdk_private import SubprocessCLITransport
from claude_trio.protocol.config.options import (
    DEFAULT_ENV,
    MUTATING_BUILTINS,
    READONLY_BUILTINS,
    build_options,
    check_root_bypass,
)
from claude_trio.protocol.config.params import ArchitectureConfig, ExecuteParams
from claude_trio.protocol.config.tools import SCHEDULING_TOOLS
from claude_trio.protocol.errors import InvalidParamsError


def params(**kwargs: Any) -> ExecuteParams:
    config = kwargs.pop("config", None)
    if config is not None:
        kwargs["architecture_config"] = ArchitectureConfig.from_mapping(config)
    return ExecuteParams(prompt=kwargs.pop("prompt", "hello"), **kwargs)


def cli_argv(options: ClaudeAgentOptions) -> list[str]:
    """The argv the SDK would start the CLI with (no process is started)."""
    options = dataclasses.replace(options, cli_path="/opt/claude")
    return SubprocessCLITransport(prompt="unused", options=options)._build_command()


def flag_value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


async def allow_all(
    tool: str, tool_input: dict[str, Any], ctx: ToolPermissionContext
) -> PermissionResultAllow:
    await trio.lowlevel.checkpoint()
    return PermissionResultAllow()


def test_model_alias_is_resolved() -> None:
    options = build_options(params(model="opus-4.7"))
    assert options.model == "claude-opus-4-7"
    assert flag_value(cli_argv(options), "--model") == "claude-opus-4-7"


def test_no_model_leaves_the_cli_default() -> None:
    options = build_options(params())
    assert options.model is None
    assert "--model" not in cli_argv(options)


def test_enabled_thinking_becomes_adaptive_for_opus_4_6() -> None:
    options = build_options(
        params(
            model="opus-4.6",
            config={"claude_thinking": "enabled", "claude_thinking_budget": 10_000},
        )
    )
    assert options.thinking == {"type": "adaptive", "display": "summarized"}
    argv = cli_argv(options)
    assert flag_value(argv, "--thinking") == "adaptive"
    assert "--max-thinking-tokens" not in argv


@pytest.mark.parametrize("model", ["opus-4.7", "opus-4.8", "fable-5", "claude-opus-4-6-20260101"])
def test_enabled_thinking_becomes_adaptive_for_every_adaptive_only_model(model: str) -> None:
    options = build_options(
        params(model=model, config={"claude_thinking": "enabled", "claude_thinking_budget": 500})
    )
    assert options.thinking == {"type": "adaptive", "display": "summarized"}


def test_enabled_thinking_with_budget_is_sent_as_is_for_sonnet_4_5() -> None:
    options = build_options(
        params(
            model="sonnet-4.5",
            config={"claude_thinking": "enabled", "claude_thinking_budget": 2048},
        )
    )
    assert options.thinking == {"type": "enabled", "budget_tokens": 2048}
    argv = cli_argv(options)
    assert flag_value(argv, "--max-thinking-tokens") == "2048"
    assert "--thinking-display" not in argv


def test_adaptive_thinking_is_adaptive() -> None:
    options = build_options(params(model="sonnet-4.6", config={"claude_thinking": "adaptive"}))
    assert options.thinking == {"type": "adaptive"}


@pytest.mark.parametrize("model", [None, "sonnet-4.6"])
def test_unset_thinking_is_omitted_never_disabled(model: str | None) -> None:
    options = build_options(params(model=model))
    assert options.thinking is None
    assert options.max_thinking_tokens is None
    argv = cli_argv(options)
    assert "--thinking" not in argv
    assert "disabled" not in argv


@pytest.mark.parametrize("model", ["fable-5", "opus-4.7"])
def test_unset_thinking_on_adaptive_only_models_asks_for_summarized_display(model: str) -> None:
    options = build_options(params(model=model))
    assert options.thinking == {"type": "adaptive", "display": "summarized"}
    argv = cli_argv(options)
    assert "disabled" not in argv
    assert "summarized" in argv


def test_fable_5_never_gets_disabled_thinking_for_any_config() -> None:
    for config in (
        {},
        {"claude_thinking": "adaptive"},
        {"claude_thinking": "enabled", "claude_thinking_budget": 100},
        {"claude_thinking_display": "omitted"},
    ):
        thinking = build_options(params(model="fable-5", config=config)).thinking
        assert thinking is None or thinking["type"] == "adaptive"


def test_thinking_display_defaults_to_summarized_for_adaptive_only_models() -> None:
    options = build_options(params(model="opus-4.7", config={"claude_thinking": "adaptive"}))
    assert options.thinking == {"type": "adaptive", "display": "summarized"}
    assert flag_value(cli_argv(options), "--thinking-display") == "summarized"


def test_explicit_thinking_display_is_used() -> None:
    options = build_options(
        params(
            model="opus-4.7",
            config={"claude_thinking": "adaptive", "claude_thinking_display": "omitted"},
        )
    )
    assert options.thinking == {"type": "adaptive", "display": "omitted"}
    assert flag_value(cli_argv(options), "--thinking-display") == "omitted"


def test_effort_is_passed_as_effort() -> None:
    options = build_options(params(config={"claude_effort": "medium"}))
    assert options.effort == "medium"
    assert flag_value(cli_argv(options), "--effort") == "medium"


def test_use_preset_true_selects_the_claude_code_preset() -> None:
    options = build_options(params(config={"claude_usePreset": True}))
    assert options.system_prompt == {"type": "preset", "preset": "claude_code"}
    argv = cli_argv(options)
    # The preset is the CLI's own prompt: no --system-prompt override at all.
    assert "--system-prompt" not in argv
    assert "--append-system-prompt" not in argv


def test_preset_name_string_selects_that_preset() -> None:
    options = build_options(params(config={"claude_usePreset": "claude_code"}))
    assert options.system_prompt == {"type": "preset", "preset": "claude_code"}


def test_system_prompt_with_preset_is_appended_to_the_preset() -> None:
    options = build_options(params(system_prompt="Be terse.", config={"claude_usePreset": True}))
    assert options.system_prompt == {
        "type": "preset",
        "preset": "claude_code",
        "append": "Be terse.",
    }
    assert flag_value(cli_argv(options), "--append-system-prompt") == "Be terse."


def test_system_prompt_without_preset_is_the_string_as_is() -> None:
    options = build_options(params(system_prompt="You are a parser."))
    assert options.system_prompt == "You are a parser."
    assert flag_value(cli_argv(options), "--system-prompt") == "You are a parser."


def test_no_system_prompt_stays_none_which_the_sdk_sends_as_empty() -> None:
    options = build_options(params())
    assert options.system_prompt is None
    assert flag_value(cli_argv(options), "--system-prompt") == ""


def test_plan_mode_offers_the_read_only_tools_and_denies_the_mutating_ones() -> None:
    # Today's names: both todo families and ToolSearch are read-only too.
    assert {"TodoWrite", "TaskCreate", "TaskUpdate", "TaskList", "TaskGet", "ToolSearch"} <= set(
        READONLY_BUILTINS
    )
    assert {"Bash", "Edit", "Write", "NotebookEdit", "Task", "Agent"} <= set(MUTATING_BUILTINS)
    assert not set(READONLY_BUILTINS) & set(MUTATING_BUILTINS)
    options = build_options(params(plan_mode=True))
    assert options.tools == list(READONLY_BUILTINS)
    assert options.disallowed_tools == [*MUTATING_BUILTINS, *SCHEDULING_TOOLS]
    assert options.permission_mode == "bypassPermissions"
    argv = cli_argv(options)
    assert flag_value(argv, "--tools") == ",".join(READONLY_BUILTINS)
    assert flag_value(argv, "--disallowedTools") == ",".join(options.disallowed_tools)


def test_plan_mode_narrows_the_tools_the_caller_names_to_read_only_ones() -> None:
    options = build_options(params(plan_mode=True, tools=["Read", "Bash", "Grep"]))
    assert options.tools == ["Read", "Grep"]


def test_tool_lists_pass_through_and_scheduling_tools_are_always_denied() -> None:
    options = build_options(
        params(
            tools=["Read", "Bash"],
            allowed_tools=["Bash(git status:*)"],
            disallowed_tools=["WebFetch", "CronList"],
        )
    )
    assert options.tools == ["Read", "Bash"]
    assert options.allowed_tools == ["Bash(git status:*)"]
    assert options.disallowed_tools == [*SCHEDULING_TOOLS, "WebFetch"]


@pytest.mark.parametrize("bad", ["", "Bash(", "mcp_", 7])
def test_malformed_tool_names_are_refused_naming_the_field(bad: object) -> None:
    with pytest.raises(InvalidParamsError, match=r"allowed_tools\[0\]"):
        params(allowed_tools=[bad])


def test_plan_mode_never_uses_permission_mode_plan() -> None:
    for plan_mode in (True, False):
        options = build_options(params(plan_mode=plan_mode))
        assert options.permission_mode != "plan"
        assert flag_value(cli_argv(options), "--permission-mode") != "plan"


def test_plan_mode_keeps_mcp_servers() -> None:
    servers = {"docs": {"type": "http", "url": "http://127.0.0.1:1/mcp"}}
    options = build_options(params(plan_mode=True, mcp_servers=servers))
    assert options.mcp_servers == servers


def test_non_plan_mode_has_all_tools_and_bypass_permissions() -> None:
    options = build_options(params())
    assert options.tools is None
    assert options.disallowed_tools == list(SCHEDULING_TOOLS)
    assert options.permission_mode == "bypassPermissions"
    argv = cli_argv(options)
    assert "--tools" not in argv
    assert flag_value(argv, "--permission-mode") == "bypassPermissions"


@pytest.mark.parametrize("mode", ["default", "acceptEdits"])
def test_asking_permission_modes_need_a_can_use_tool_gate(mode: str) -> None:
    with pytest.raises(InvalidParamsError, match=f"permission_mode.*{mode}.*on_user_input"):
        build_options(params(permission_mode=mode))
    options = build_options(params(permission_mode=mode), can_use_tool=allow_all)
    assert options.permission_mode == mode
    assert options.can_use_tool is allow_all
    assert flag_value(cli_argv(options), "--permission-mode") == mode


@pytest.mark.parametrize("mode", ["plan", "dontAsk", "auto", "bypassPermissions"])
def test_modes_that_never_ask_need_no_gate(mode: str) -> None:
    options = build_options(params(permission_mode=mode))
    assert options.permission_mode == mode
    assert flag_value(cli_argv(options), "--permission-mode") == mode


def test_unknown_permission_mode_is_rejected() -> None:
    with pytest.raises(InvalidParamsError, match=r"permission_mode.*'acceptEdits'"):
        params(permission_mode="ask")


def test_can_use_tool_and_stderr_are_passed_through() -> None:
    lines: list[str] = []
    options = build_options(params(), can_use_tool=allow_all, stderr=lines.append)
    assert options.can_use_tool is allow_all
    assert options.stderr is not None
    options.stderr("boom")
    assert lines == ["boom"]


def test_env_is_custom_env_plus_extra_env() -> None:
    options = build_options(
        params(config={"custom_env": {"A": "1", "B": "custom"}}), extra_env={"B": "extra", "C": "3"}
    )
    assert options.env == {**DEFAULT_ENV, "A": "1", "B": "extra", "C": "3"}


def test_ollama_base_url_sets_anthropic_base_url() -> None:
    options = build_options(params(config={"ollama_baseUrl": "http://127.0.0.1:11434"}))
    assert options.env == {**DEFAULT_ENV, "ANTHROPIC_BASE_URL": "http://127.0.0.1:11434"}


def test_extra_env_has_the_last_word_over_ollama_base_url() -> None:
    options = build_options(
        params(config={"ollama_baseUrl": "http://127.0.0.1:11434"}),
        extra_env={"ANTHROPIC_BASE_URL": "http://127.0.0.1:9999"},
    )
    assert options.env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9999"


def test_build_options_does_not_share_mutable_state_with_params() -> None:
    p = params(config={"custom_env": {"A": "1"}}, mcp_servers={"s": {"command": "x"}})
    options = build_options(p)
    options.env["A"] = "changed"
    options.mcp_servers["t"] = {"command": "y"}  # type: ignore[index]
    assert p.architecture_config.custom_env["A"] == "1"
    assert list(p.mcp_servers) == ["s"]
    assert build_options(p).env == {**DEFAULT_ENV, "A": "1"}


def test_resume_session_id_becomes_resume() -> None:
    options = build_options(params(resume_session_id="0b6c2f5e-1111-4222-8333-944445555666"))
    assert options.resume == "0b6c2f5e-1111-4222-8333-944445555666"
    assert "--resume=0b6c2f5e-1111-4222-8333-944445555666" in cli_argv(options)


@pytest.mark.parametrize("max_turns", [None, 1, 7])
def test_max_turns_is_passed_through_untouched(max_turns: int | None) -> None:
    options = build_options(params(max_turns=max_turns, resume_session_id="abc"))
    assert options.max_turns == max_turns


def test_cwd_is_passed_through() -> None:
    assert build_options(params(cwd="/srv/project")).cwd == "/srv/project"


def test_mcp_servers_are_passed_through() -> None:
    instance = object()
    servers = {
        "files": {"command": "npx", "args": ["-y", "server"]},
        "events": {"type": "sse", "url": "https://example.com/sse"},
        "api": {"type": "http", "url": "https://example.com/mcp"},
        "local": {"type": "sdk", "name": "local", "instance": instance},
    }
    options = build_options(params(mcp_servers=servers))
    assert options.mcp_servers == servers
    assert isinstance(options.mcp_servers, dict)
    assert options.mcp_servers["local"]["instance"] is instance  # type: ignore[typeddict-item]


def test_partial_messages_are_on_and_user_messages_are_replayed() -> None:
    options = build_options(params())
    assert options.include_partial_messages is True
    assert options.extra_args == {"replay-user-messages": None}
    argv = cli_argv(options)
    assert "--include-partial-messages" in argv
    assert "--replay-user-messages" in argv


def test_skills_list_becomes_the_sdk_skills_field() -> None:
    options = build_options(params(config={"claude_skills": ["pdf", "plugin:review"]}))
    assert options.skills == ["pdf", "plugin:review"]
    assert flag_value(cli_argv(options), "--allowedTools") == "Skill(pdf),Skill(plugin:review)"


def test_skills_all_and_empty_list_pass_through() -> None:
    assert build_options(params(config={"claude_skills": "all"})).skills == "all"
    assert build_options(params(config={"claude_skills": []})).skills == []
    assert build_options(params()).skills is None


def test_skill_settings_travel_as_inline_settings_json() -> None:
    options = build_options(
        params(
            config={
                "claude_skillOverrides": {"pdf": "user-invocable-only"},
                "claude_skillListingBudgetFraction": 0.02,
                "claude_disableSkillShellExecution": True,
            }
        )
    )
    assert options.settings is not None
    expected = {
        "skillOverrides": {"pdf": "user-invocable-only"},
        "skillListingBudgetFraction": 0.02,
        "disableSkillShellExecution": True,
    }
    assert json.loads(options.settings) == expected
    assert json.loads(flag_value(cli_argv(options), "--settings")) == expected


def test_no_skill_settings_means_no_settings_flag() -> None:
    options = build_options(params())
    assert options.settings is None
    assert "--settings" not in cli_argv(options)


# ---------------------------------------------------------------------------------------------
# check_root_bypass
# ---------------------------------------------------------------------------------------------


def test_root_with_bypass_and_no_is_sandbox_gets_a_clear_error() -> None:
    options = build_options(params())
    message = check_root_bypass(options, is_root=True, env={"PATH": "/usr/bin"})
    assert message is not None
    assert "root" in message
    assert "bypassPermissions" in message
    assert "IS_SANDBOX=1" in message
    assert "non-root" in message
    assert "Plan mode does not help" in message
    # Only what the public API can set: open_session(env=...) and custom_env.
    assert "open_session(..., env={'IS_SANDBOX': '1'})" in message
    assert "ArchitectureConfig(custom_env={'IS_SANDBOX': '1'})" in message
    assert "can_use_tool" not in message
    assert "ExecuteParams(permission_mode='default')" in message
    assert "open_session(on_user_input=...)" in message


def test_root_bypass_is_fine_with_is_sandbox_in_the_process_env() -> None:
    options = build_options(params())
    assert check_root_bypass(options, is_root=True, env={"IS_SANDBOX": "1"}) is None


def test_root_bypass_is_fine_with_is_sandbox_in_custom_env() -> None:
    options = build_options(params(config={"custom_env": {"IS_SANDBOX": "1"}}))
    assert check_root_bypass(options, is_root=True, env={}) is None


def test_options_env_overrides_the_process_env_for_is_sandbox() -> None:
    options = build_options(params(config={"custom_env": {"IS_SANDBOX": "0"}}))
    assert check_root_bypass(options, is_root=True, env={"IS_SANDBOX": "1"}) is not None


@pytest.mark.parametrize("value", ["true", "yes", "0", ""])
def test_only_is_sandbox_1_counts(value: str) -> None:
    options = build_options(params())
    assert check_root_bypass(options, is_root=True, env={"IS_SANDBOX": value}) is not None


def test_non_root_bypass_is_fine() -> None:
    assert check_root_bypass(build_options(params()), is_root=False, env={}) is None


def test_root_with_default_permission_mode_is_fine() -> None:
    options = build_options(params(permission_mode="default"), can_use_tool=allow_all)
    assert check_root_bypass(options, is_root=True, env={}) is None


def test_plan_mode_as_root_still_needs_is_sandbox() -> None:
    options = build_options(params(plan_mode=True))
    assert check_root_bypass(options, is_root=True, env={}) is not None
