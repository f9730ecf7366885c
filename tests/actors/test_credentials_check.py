"""A session with no credential ends with one error event and starts no CLI; one with any
credential source starts its CLI as before (actors/session/credentials.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from claude_trio.events import Error, Event
from claude_trio.params import ExecuteParams
from claude_trio.session import open_session

MISSING_CLI = "/nonexistent/claude"  # a CLI that is started fails as cli_not_found


@pytest.fixture
def no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """This process with no credential anywhere: no variable, a HOME and config folder of its
    own (the machine's ~/.claude is not looked at). The project folder is returned."""
    for name in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "CLAUDE_CODE_USE_BEDROCK",
        "CLAUDE_CODE_USE_VERTEX",
        "CLAUDE_CODE_USE_FOUNDRY",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setattr("sys.platform", "linux")
    (tmp_path / "config").mkdir()
    project = tmp_path / "project"
    project.mkdir()
    return project


async def run(project: Path, env: dict[str, str] | None = None) -> list[Event]:
    # IS_SANDBOX: the CLI's root check (tests run as root) is not what is tested here.
    params = ExecuteParams(prompt="hi", cwd=str(project))
    async with open_session(
        params, env={"IS_SANDBOX": "1", **(env or {})}, cli_path=MISSING_CLI
    ) as session:
        return [event async for event in session.events]


async def test_no_credential_is_one_error_event_naming_what_to_set(no_credentials: Path) -> None:
    [error] = await run(no_credentials)
    assert isinstance(error, Error)
    assert (error.code, error.fatal) == ("config", True)
    assert "no credentials" in error.message
    assert "ANTHROPIC_API_KEY" in error.message
    assert "claude login" in error.message
    assert MISSING_CLI not in error.message  # the CLI was never started


@pytest.mark.parametrize(
    "env",
    [
        {"ANTHROPIC_API_KEY": "sk-ant-test"},
        {"CLAUDE_CODE_OAUTH_TOKEN": "sk-ant-oat01-test"},
        {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"},
        {"CLAUDE_CODE_USE_BEDROCK": "1"},
    ],
)
async def test_a_credential_in_the_sessions_env_starts_the_cli(
    no_credentials: Path, env: dict[str, str]
) -> None:
    [error] = await run(no_credentials, env)
    assert isinstance(error, Error)
    assert error.code == "cli_not_found"  # it got as far as starting the CLI


async def test_a_credential_in_this_processs_env_starts_the_cli(
    no_credentials: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "bearer-token")
    [error] = await run(no_credentials)
    assert isinstance(error, Error)
    assert error.code == "cli_not_found"


@pytest.mark.parametrize(
    ("where", "content"),
    [
        ("config/.credentials.json", {"claudeAiOauth": {"accessToken": "x"}}),
        ("config/settings.json", {"apiKeyHelper": "~/bin/key.sh"}),
        ("home/.claude.json", {"primaryApiKey": "sk-ant-x"}),
        ("project/.claude/settings.local.json", {"apiKeyHelper": "op read key"}),
    ],
)
async def test_a_login_or_a_key_helper_starts_the_cli(
    no_credentials: Path, where: str, content: dict[str, object]
) -> None:
    path = no_credentials.parent / where
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content))
    [error] = await run(no_credentials)
    assert isinstance(error, Error)
    assert error.code == "cli_not_found"
