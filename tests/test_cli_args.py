"""The ``claude-trio`` command shell: parsing, params building, credentials and exit codes."""

from __future__ import annotations

import argparse
import io
import sys
import types
from collections.abc import Callable
from pathlib import Path

import pytest

from claude_trio import cli
from claude_trio.cli.render import EventSink, JsonLinesRenderer, Renderer
from claude_trio.protocol.config.params import ArchitectureConfig
from claude_trio.protocol.errors import CLIError, InvalidParamsError


@pytest.fixture
def no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in cli.CREDENTIAL_ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    # No login either, whatever this machine's user has.
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)


@pytest.fixture
def with_key(monkeypatch: pytest.MonkeyPatch, no_credentials: None) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")


class FakeRunner:
    """Stands in for ``claude_trio.cli.runner`` (imported lazily by ``main``)."""

    def __init__(self, behaviour: Callable[[], int]) -> None:
        self.behaviour = behaviour
        self.calls: list[tuple[argparse.Namespace, EventSink]] = []

    def run_command(self, args: argparse.Namespace, renderer: EventSink) -> int:
        self.calls.append((args, renderer))
        return self.behaviour()


def install_runner(monkeypatch: pytest.MonkeyPatch, behaviour: Callable[[], int]) -> FakeRunner:
    fake = FakeRunner(behaviour)
    module = types.ModuleType("claude_trio.cli.runner")
    module.run_command = fake.run_command  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "claude_trio.cli.runner", module)
    return fake


# ---------------------------------------------------------------------------------------------
# Parsing and params
# ---------------------------------------------------------------------------------------------


def test_run_parses_every_option(tmp_path: Path) -> None:
    args = cli.parse_args(
        [
            "run", "fix the bug", "--model", "opus-4.6", "--plan", "--resume", "sess-1",
            "--json", "--max-turns", "5", "--cwd", str(tmp_path), "--system-prompt", "Be terse",
            "--thinking", "enabled", "--thinking-budget", "2048", "--effort", "high",
            "--no-thinking-display", "--ollama-base-url", "http://localhost:11434",
        ]
    )  # fmt: skip
    assert args.command == "run"
    assert args.prompt == "fix the bug"
    assert args.model == "opus-4.6"
    assert args.plan is True
    assert args.resume == "sess-1"
    assert args.json is True
    assert args.max_turns == 5
    assert args.cwd == str(tmp_path)
    assert args.system_prompt == "Be terse"
    assert args.thinking == "enabled"
    assert args.thinking_budget == 2048
    assert args.effort == "high"
    assert args.show_thinking is False
    assert args.ollama_base_url == "http://localhost:11434"


def test_run_defaults() -> None:
    args = cli.parse_args(["run", "hi"])
    assert (args.model, args.plan, args.resume, args.json, args.max_turns) == (
        None, False, None, False, None,
    )  # fmt: skip
    assert (args.cwd, args.system_prompt, args.thinking, args.effort) == (None, None, None, None)
    assert args.show_thinking is True
    assert args.permission_mode is None


@pytest.mark.parametrize("mode", ["default", "acceptEdits", "plan", "dontAsk"])
def test_permission_mode_flag_reaches_the_params(mode: str) -> None:
    args = cli.parse_args(["run", "hi", "--permission-mode", mode])
    assert cli.build_execute_params(args).permission_mode == mode


def test_unknown_permission_mode_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.parse_args(["run", "hi", "--permission-mode", "ask"])
    assert exc.value.code == 2
    assert "--permission-mode" in capsys.readouterr().err


def test_demo_parses_json_flag() -> None:
    assert cli.parse_args(["demo"]).json is False
    args = cli.parse_args(["demo", "--json"])
    assert (args.command, args.json) == ("demo", True)


def test_params_kwargs_and_execute_params(tmp_path: Path) -> None:
    args = cli.parse_args(
        ["run", "hi", "--model", "sonnet-4.5", "--plan", "--max-turns", "3", "--cwd",
         str(tmp_path), "--resume", "abc", "--thinking", "enabled", "--thinking-budget", "1024",
         "--effort", "low"]
    )  # fmt: skip
    kwargs = cli.execute_params_kwargs(args)
    assert kwargs == {
        "prompt": "hi",
        "model": "sonnet-4.5",
        "system_prompt": None,
        "max_turns": 3,
        "plan_mode": True,
        "permission_mode": None,
        "cwd": str(tmp_path),
        "resume_session_id": "abc",
        "fork_session": False,
        "session_id": None,
        "resume_session_at": None,
        "resume_drops_turn": None,
        "strict_mcp_config": False,
        "betas": [],
        "task_budget": None,
        "include_hook_events": False,
        "verbatim_prompts": False,
        "client_app": None,
        "run_timeout": None,
        "idle_timeout": None,
        "max_budget_usd": None,
        "provider": None,
        "fallback_model": None,
        "allowed_tools": [],
        "disallowed_tools": [],
        "allowed_paths": [],
        "read_only_paths": [],
        "disallowed_paths": [],
        "scope_enforcement": "hard",
        "setting_sources": None,
        "architecture_config": {
            "claude_thinking": "enabled",
            "claude_thinking_budget": 1024,
            "claude_effort": "low",
            "claude_use_preset": True,  # no --system-prompt: Claude Code's own prompt
            "ollama_base_url": None,
        },
    }
    params = cli.build_execute_params(args)
    assert params.prompt == "hi"
    assert params.resolved_model == "claude-sonnet-4-5"
    assert params.plan_mode is True
    assert params.max_turns == 3
    assert params.resume_session_id == "abc"
    assert params.architecture_config == ArchitectureConfig(
        claude_thinking="enabled",
        claude_thinking_budget=1024,
        claude_effort="low",
        claude_use_preset=True,
    )
    assert params.effective_thinking() == {"type": "enabled", "budget_tokens": 1024}


def test_system_prompt_replaces_the_preset_and_cwd_is_absolute(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path)
    params = cli.build_execute_params(
        cli.parse_args(["run", "hi", "--system-prompt", "You are a cat.", "--cwd", "work"])
    )
    assert params.system_prompt == "You are a cat."
    assert params.architecture_config.preset is None
    assert params.cwd == str(tmp_path / "work")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "hi", "--model", "gpt-4"], "invalid model='gpt-4'"),
        (["run", "hi", "--cwd", "/no/such/dir"], "invalid --cwd='/no/such/dir'"),
        (["run", "hi", "--model", "sonnet-4.5", "--thinking", "enabled"], "claude_thinking_budget"),
        (["run", "   "], "invalid prompt="),
    ],
)
def test_invalid_params_are_one_line_and_exit_2(
    argv: list[str],
    message: str,
    with_key: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake = install_runner(monkeypatch, lambda: 0)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("claude-trio: invalid ")
    assert message in err
    assert err.count("\n") == 1
    assert "Traceback" not in err
    assert fake.calls == []  # nothing started


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "the following arguments are required: COMMAND"),
        (["run"], "the following arguments are required: PROMPT"),
        (["run", "hi", "--max-turns", "0"], "argument --max-turns: 0 is not positive"),
        (["run", "hi", "--max-turns", "x"], "'x' is not a whole number"),
        (["run", "hi", "--thinking", "always"], "argument --thinking: invalid choice: 'always'"),
        (["run", "hi", "--effort", "max"], "argument --effort: invalid choice: 'max'"),
        (["fly"], "invalid choice: 'fly'"),
    ],
)
def test_usage_errors_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err


def test_version_and_help_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == "claude-trio 0.1.0"
    assert cli.main(["run", "--help"]) == 0
    assert "--no-thinking-display" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------
# Credentials
# ---------------------------------------------------------------------------------------------


def test_run_without_credentials_explains_how_to_get_a_key(
    no_credentials: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = install_runner(monkeypatch, lambda: 0)
    assert cli.main(["run", "hello"]) == 2
    captured = capsys.readouterr()
    assert "console.anthropic.com" in captured.err
    assert "export ANTHROPIC_API_KEY=" in captured.err
    assert "claude-trio demo" in captured.err
    assert captured.out == ""
    assert fake.calls == []


def test_empty_key_does_not_count(
    no_credentials: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "")
    assert cli.main(["run", "hello"]) == 2
    assert "console.anthropic.com" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("env", "argv_extra"),
    [
        ({"ANTHROPIC_API_KEY": "sk-ant-x"}, []),
        ({"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}, []),
        ({"ANTHROPIC_AUTH_TOKEN": "ollama"}, []),
        ({"CLAUDE_CODE_OAUTH_TOKEN": "tok"}, []),
        ({}, ["--ollama-base-url", "http://localhost:11434"]),
    ],
)
def test_any_credential_setting_lets_run_start(
    env: dict[str, str],
    argv_extra: list[str],
    no_credentials: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    fake = install_runner(monkeypatch, lambda: 0)
    assert cli.main(["run", "hello", *argv_extra]) == 0
    [(args, _renderer)] = fake.calls
    assert args.prompt == "hello"


def test_demo_needs_no_key_and_picks_the_renderer(
    no_credentials: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = install_runner(monkeypatch, lambda: 0)
    assert cli.main(["demo"]) == 0
    assert cli.main(["demo", "--json"]) == 0
    assert cli.main(["demo", "--no-thinking-display"]) == 0
    renderers = [renderer for _args, renderer in fake.calls]
    assert isinstance(renderers[0], Renderer)
    assert renderers[0].show_thinking is True
    assert isinstance(renderers[1], JsonLinesRenderer)
    assert isinstance(renderers[2], Renderer)
    assert renderers[2].show_thinking is False


# ---------------------------------------------------------------------------------------------
# Exit codes of the session run
# ---------------------------------------------------------------------------------------------


def _raise(exc: BaseException) -> Callable[[], int]:
    def behaviour() -> int:
        raise exc

    return behaviour


@pytest.mark.parametrize(
    ("behaviour", "code", "stderr"),
    [
        (lambda: 0, 0, ""),
        (lambda: 1, 1, ""),
        (_raise(KeyboardInterrupt()), 130, "claude-trio: interrupted\n"),
        (
            _raise(BaseExceptionGroup("nursery", [KeyboardInterrupt()])),
            130,
            "claude-trio: interrupted\n",
        ),
        (
            _raise(InvalidParamsError("resume_session_id", "x y", "a session id")),
            2,
            "claude-trio: invalid resume_session_id='x y': a session id\n",
        ),
        (
            _raise(CLIError("claude not found at /usr/bin/claude")),
            1,
            "claude-trio: error: claude not found at /usr/bin/claude\n",
        ),
    ],
)
def test_exit_codes(
    behaviour: Callable[[], int],
    code: int,
    stderr: str,
    with_key: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    install_runner(monkeypatch, behaviour)
    assert cli.main(["run", "hi"]) == code
    assert capsys.readouterr().err == stderr


def test_unexpected_errors_are_not_swallowed(
    with_key: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    group = ExceptionGroup("nursery", [ValueError("bug")])
    install_runner(monkeypatch, _raise(group))
    with pytest.RaisesGroup(ValueError) as info:
        cli.main(["run", "hi"])
    assert info.value is group
    mixed = BaseExceptionGroup("nursery", [KeyboardInterrupt(), ValueError("bug")])
    install_runner(monkeypatch, _raise(mixed))
    with pytest.RaisesGroup(KeyboardInterrupt, ValueError):
        cli.main(["run", "hi"])


# ---------------------------------------------------------------------------------------------
# Reading answers from stdin
# ---------------------------------------------------------------------------------------------


async def test_read_stdin_line_reads_lines_then_none_at_eof(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("blue\n"))
    assert await cli.read_stdin_line("Color? ") == "blue"
    assert await cli.read_stdin_line("Again? ") is None
    assert capsys.readouterr().out == "Color? Again? "


PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16


def test_the_session_surface_options_reach_the_params(tmp_path: Path) -> None:
    image = tmp_path / "shot.png"
    image.write_bytes(PNG)
    agents = tmp_path / "agents.json"
    agents.write_text('{"reviewer": {"description": "Reviews", "prompt": "Review.", '
                      '"tools": ["Read"], "maxTurns": 2}}')  # fmt: skip
    schema = tmp_path / "schema.json"
    schema.write_text('{"type": "object", "properties": {"ok": {"type": "boolean"}}}')
    args = cli.parse_args(
        ["run", "hi", "--image", str(image), "--image", str(image), "--timeout", "90",
         "--idle-timeout", "30", "--max-budget", "0.5", "--provider", "ollama",
         "--model", "qwen3-coder", "--fallback-model", "sonnet", "--agents", str(agents),
         "--output-schema", str(schema), "--allowed-tools", "Read,Bash(git status:*)",
         "--disallowed-tools", "WebFetch"]
    )  # fmt: skip
    params = cli.build_execute_params(args)
    assert [i.media_type for i in params.images] == ["image/png", "image/png"]
    assert (params.run_timeout, params.idle_timeout, params.max_budget_usd) == (90, 30, 0.5)
    assert (params.provider, params.resolved_model, params.fallback_model) == (
        "ollama",
        "qwen3-coder",
        "sonnet",
    )
    assert params.subagents["reviewer"].tools == ("Read",)
    assert params.subagents["reviewer"].max_turns == 2
    assert params.output_schema == {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    assert params.allowed_tools == ("Read", "Bash(git status:*)")
    assert params.disallowed_tools == ("WebFetch",)


def test_the_path_scope_options_reach_the_params_as_absolute_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    args = cli.parse_args(
        ["run", "hi", "--cwd", ".", "--allow-path", "src", "--allow-path", "/data/",
         "--read-path", "docs", "--deny-path", "src/secrets", "--scope", "soft",
         "--setting-source", "project"]
    )  # fmt: skip
    params = cli.build_execute_params(args)
    assert params.allowed_paths == (str(tmp_path / "src"), "/data")
    assert params.read_only_paths == (str(tmp_path / "docs"),)
    assert params.disallowed_paths == (str(tmp_path / "src" / "secrets"),)
    assert params.scope_enforcement == "soft"
    assert params.setting_sources == ("project",)
    plain = cli.build_execute_params(cli.parse_args(["run", "hi"]))
    assert (plain.scoped, plain.scope_enforcement, plain.setting_sources) == (False, "hard", None)


def test_a_bad_scope_option_is_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.parse_args(["run", "hi", "--scope", "strict"])
    assert info.value.code == 2
    assert "--scope" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--image", "/nonexistent.png"], "a readable image file"),
        (["--agents", "/nonexistent.json"], r"--agents.*a readable file"),
        (["--output-schema", "{schema}"], r"output_schema\.type"),
        (["--allowed-tools", "Bash("], r"allowed_tools\[0\]"),
    ],
)
def test_bad_session_surface_options_name_the_problem(
    tmp_path: Path, argv: list[str], match: str
) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text('{"type": "array"}')
    args = cli.parse_args(["run", "hi", *(a.format(schema=schema) for a in argv)])
    with pytest.raises(InvalidParamsError, match=match):
        cli.build_execute_params(args)


def test_skill_folders_become_inline_skills(tmp_path: Path) -> None:
    folder = tmp_path / "release-notes"
    (folder / "templates").mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: release-notes\ndescription: Write release notes\n---\nGroup by area.\n"
    )
    (folder / "templates" / "notes.md").write_text("# Notes")
    args = cli.parse_args(["run", "hi", "--skill", str(folder)])
    [skill] = cli.build_execute_params(args).inline_skills
    assert (skill.name, skill.description, skill.body) == (
        "release-notes",
        "Write release notes",
        "Group by area.\n",
    )
    assert dict(skill.files) == {"templates/notes.md": b"# Notes"}
    args = cli.parse_args(["run", "hi", "--skill", str(tmp_path / "nope")])
    with pytest.raises(InvalidParamsError, match=r"skill folder.*readable UTF-8 SKILL\.md"):
        cli.build_execute_params(args)


# ---------------------------------------------------------------------------------------------
# Recording cassettes
# ---------------------------------------------------------------------------------------------


def test_run_and_demo_record_a_cassette_with_the_same_option(tmp_path: Path) -> None:
    out = tmp_path / "c.jsonl"
    args = cli.parse_args(["run", "fix it", "--model", "sonnet", "--record", str(out)])
    assert (args.command, args.prompt, args.model, args.record) == (
        "run",
        "fix it",
        "sonnet",
        str(out),
    )
    assert cli.cassette_path(args) == str(out)
    assert cli.build_execute_params(args).prompt == "fix it"
    assert cli.cassette_path(cli.parse_args(["demo", "--record", str(out)])) == str(out)
    assert cli.cassette_path(cli.parse_args(["demo"])) is None
    assert cli.cassette_path(cli.parse_args(["run", "hi"])) is None


def test_record_runs_the_prompt_and_writes_its_cassette_offline_too(
    no_credentials: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake = install_runner(monkeypatch, lambda: 0)
    out = tmp_path / "c.jsonl"
    # One command, no key: the prompt runs on the offline model, its cassette goes to --out.
    assert cli.main(["record", "hi", "--offline", "--out", str(out)]) == 0
    [(args, _)] = fake.calls
    assert (args.command, args.prompt, args.offline) == ("record", "hi", True)
    assert cli.cassette_path(args) == str(out)
    assert f"cassette written to {out}" in capsys.readouterr().err
    # Without --offline it needs credentials, as run does; --out is required.
    assert cli.main(["record", "hi", "--out", str(out)]) == 2
    assert "no credentials" in capsys.readouterr().err
    assert cli.main(["record", "hi"]) == 2
    assert "--out" in capsys.readouterr().err
    assert len(fake.calls) == 1


@pytest.mark.parametrize("command", [["run", "hi", "--record"], ["demo", "--record"]])
def test_a_cassette_path_that_cannot_be_written_is_refused_before_anything_starts(
    command: list[str],
    with_key: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake = install_runner(monkeypatch, lambda: 0)
    assert cli.main([*command, str(tmp_path / "missing" / "c.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "invalid record_to=" in err
    assert "does not exist" in err
    assert fake.calls == []


def test_run_record_needs_credentials_as_run_does(
    no_credentials: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake = install_runner(monkeypatch, lambda: 0)
    assert cli.main(["run", "hi", "--record", str(tmp_path / "c.jsonl")]) == 2
    assert "no credentials" in capsys.readouterr().err
    assert fake.calls == []


# ---------------------------------------------------------------------------------------------
# Offline, and one table of commands
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "hi"],
        ["demo"],
        ["serve"],
        ["batch", "prompts.jsonl"],
        ["worker", "--redis", "redis://127.0.0.1:6379/0"],
    ],
)
def test_every_command_that_runs_sessions_takes_offline(argv: list[str]) -> None:
    assert cli.parse_args(argv).offline is False
    assert cli.parse_args([*argv, "--offline"]).offline is True


def test_run_offline_needs_no_credentials(
    no_credentials: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake = install_runner(monkeypatch, lambda: 0)
    assert cli.main(["run", "hi", "--offline"]) == 0
    [(args, _renderer)] = fake.calls
    assert (args.prompt, args.offline) == ("hi", True)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("extra", "option"), [(["--offline"], "--offline"), (["--record", "c.jsonl"], "--record")]
)
def test_a_remote_run_is_neither_offline_nor_recorded_here(
    extra: list[str],
    option: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CLAUDE_TRIO_TOKEN", "a-token-chosen-on-purpose-0123")
    fake = install_runner(monkeypatch, lambda: 0)
    assert cli.main(["run", "hi", "--remote", "ws://127.0.0.1:1/", *extra]) == 2
    err = capsys.readouterr().err
    assert (
        f"claude-trio: {option} is for a session run here; with --remote the server runs it" in err
    )
    assert fake.calls == []


def test_one_table_holds_every_command() -> None:
    parser = cli.build_parser()
    [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(cli.COMMANDS) == set(commands.choices)
    for name in cli.COMMANDS:
        assert callable(cli.load_command(name)), name


def test_main_runs_the_command_the_table_names(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[argparse.Namespace] = []
    module = types.ModuleType("claude_trio.cli.serve")
    module.serve_command = lambda args: ran.append(args) or 7  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "claude_trio.cli.serve", module)
    assert cli.main(["serve", "--port", "0"]) == 7
    [args] = ran
    assert (args.command, args.port) == ("serve", 0)


@pytest.mark.parametrize(("code", "said"), [(0, True), (1, True), (130, False)])
def test_the_cassette_is_named_when_the_session_ran(
    code: int,
    said: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    install_runner(monkeypatch, lambda: code)
    out = tmp_path / "demo.jsonl"
    assert cli.main(["demo", "--record", str(out)]) == code
    assert (f"claude-trio: cassette written to {out}" in capsys.readouterr().err) == said


@pytest.mark.parametrize(
    ("argv", "offered"),
    [
        (["run", "hi"], True),
        (["run", "hi", "--offline"], False),  # its CLI's folder is deleted at the end
        (["record", "hi", "--out", "c.jsonl", "--offline"], False),
        (["demo"], False),
    ],
)
def test_resume_is_offered_only_for_a_session_that_is_kept(argv: list[str], offered: bool) -> None:
    from claude_trio.events import Result
    from claude_trio.protocol.session.usage import ZERO_USAGE

    out = io.StringIO()
    renderer = cli.make_renderer(cli.parse_args(argv), out)
    assert isinstance(renderer, Renderer)
    renderer.feed(
        Result(
            subtype="success",
            is_error=False,
            session_id="sess-9",
            usage=ZERO_USAGE,
            execution_usage=ZERO_USAGE,
            session_usage=ZERO_USAGE,
            final=True,
        )
    )
    renderer.close()
    assert ("--resume sess-9" in out.getvalue()) is offered


def test_a_logged_in_cli_has_credentials_without_a_key(tmp_path: Path) -> None:
    """``claude login`` leaves a credentials file: the commands accept it as a session does."""
    home = tmp_path / "home"
    env = {"HOME": str(home), "PATH": "/usr/bin"}
    assert not cli.has_credentials(env)
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / ".credentials.json").write_text('{"claudeAiOauth": {}}')
    assert cli.has_credentials(env)
    assert "claude login" in cli.NO_CREDENTIALS_MESSAGE
