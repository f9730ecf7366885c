"""Whether the CLI has a credential, decided before it starts (protocol/config/credentials.py)."""

from __future__ import annotations

import pytest

from claude_trio.protocol.config.credentials import (
    NO_CREDENTIALS,
    credential_files,
    missing_credentials,
)


@pytest.mark.parametrize(
    "env",
    [
        {"ANTHROPIC_API_KEY": "sk-ant-x"},
        {"ANTHROPIC_AUTH_TOKEN": "bearer"},
        {"CLAUDE_CODE_OAUTH_TOKEN": "sk-ant-oat01-x"},
        {"ANTHROPIC_BASE_URL": "http://localhost:11434"},
        {"CLAUDE_CODE_USE_BEDROCK": "1"},
        {"CLAUDE_CODE_USE_VERTEX": "true"},
        {"CLAUDE_CODE_USE_FOUNDRY": "1"},
    ],
)
def test_a_variable_or_a_cloud_switch_is_a_credential(env: dict[str, str]) -> None:
    assert missing_credentials(env, logged_in=False) is None


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"ANTHROPIC_API_KEY": ""},  # a provider preset clears it: empty is none
        {"CLAUDE_CODE_USE_BEDROCK": "0"},
        {"CLAUDE_CODE_USE_VERTEX": "false"},
        {"OPENAI_API_KEY": "sk-x"},
    ],
)
def test_no_credential_is_one_message_that_says_what_to_set(env: dict[str, str]) -> None:
    problem = missing_credentials(env, logged_in=False)
    assert problem == NO_CREDENTIALS
    for source in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "claude login",
        "apiKeyHelper",
        "CLAUDE_CODE_USE_BEDROCK",
        "open_offline_model",
    ):
        assert source in problem


def test_a_login_a_stored_key_or_a_key_helper_is_a_credential() -> None:
    assert missing_credentials({}, logged_in=True) is None
    assert missing_credentials({}, logged_in=False, texts=['{"apiKeyHelper": "~/key.sh"}']) is None
    assert missing_credentials({}, logged_in=False, texts=['{"primaryApiKey": "sk"}']) is None
    assert missing_credentials({}, logged_in=False, texts=['{"theme": "dark"}']) == NO_CREDENTIALS


def test_on_macos_the_keychain_may_hold_a_login_so_nothing_is_refused() -> None:
    assert missing_credentials({}, logged_in=False, platform="darwin") is None
    assert missing_credentials({}, logged_in=False, platform="linux") == NO_CREDENTIALS


def test_the_files_are_those_of_the_cli_config_folder_home_and_project() -> None:
    logins, searched = credential_files(
        {"CLAUDE_CONFIG_DIR": "/cfg"}, cwd="/work/p", home="/home/u"
    )
    assert logins == ("/cfg/.credentials.json",)
    assert set(searched) == {
        "/etc/claude-code/managed-settings.json",
        "/cfg/settings.json",
        "/cfg/.claude.json",
        "/home/u/.claude.json",
        "/work/p/.claude/settings.json",
        "/work/p/.claude/settings.local.json",
    }
    # Without CLAUDE_CONFIG_DIR the folder is ~/.claude, of the CLI's HOME first.
    logins, _ = credential_files({"HOME": "/h"}, cwd=None, home="/home/u")
    assert logins == ("/h/.claude/.credentials.json",)
