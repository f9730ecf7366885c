"""The fan-out commands' shells: ``serve`` and ``batch`` parsing, the serve configuration (the
token rules, the tokens file), ``run --remote`` without a token, JSON log lines."""

from __future__ import annotations

import io
import json
import logging
import stat
from pathlib import Path

import pytest

from claude_trio import cli
from claude_trio.cli.logs import JsonLogFormatter, configure_logging
from claude_trio.cli.serve import is_loopback, read_tokens, serve_config, url_for
from claude_trio.errors import ServeUsageError
from claude_trio.protocol.fanout.remote import Principal

TOKEN = "a-token-chosen-on-purpose-0123"


def serve_args(*argv: str) -> object:
    return cli.parse_args(["serve", *argv])


def test_serve_parses_every_option(tmp_path: Path) -> None:
    args = cli.parse_args(
        [
            "serve", "--host", "0.0.0.0", "--port", "0", "--max-live", "8",
            "--replay-buffer", "50", "--allow-cwd", "--cwd-root", str(tmp_path), "--allow-env",
            "--allow-origin", "https://a.example", "--allow-origin", "https://b.example",
            "--tokens", "t.json", "--offline", "--log-json", "--drain-grace", "2.5",
            "--idempotency-ttl", "600",
        ]
    )  # fmt: skip
    assert (args.host, args.port, args.max_live, args.replay_buffer) == ("0.0.0.0", 0, 8, 50)
    assert (args.allow_cwd, args.allow_env, args.offline, args.log_json) == (True,) * 4
    assert args.allow_origin == ["https://a.example", "https://b.example"]
    assert (args.tokens, args.drain_grace, args.cwd_root) == ("t.json", 2.5, str(tmp_path))
    assert args.idempotency_ttl == 600.0
    defaults = cli.parse_args(["serve"])
    assert defaults.idempotency_ttl == 24 * 3600.0
    assert (defaults.host, defaults.port, defaults.max_live, defaults.offline) == (
        "127.0.0.1",
        8765,
        4,
        False,
    )


def test_batch_and_run_remote_parse() -> None:
    args = cli.parse_args(
        ["batch", "jobs.jsonl", "--out", "r.jsonl", "--max-live", "3", "--remote",
         "ws://h:1/", "--budget", "1.5", "--retries", "0", "--model", "opus", "--offline"]
    )  # fmt: skip
    assert (args.prompts, args.out, args.max_live, args.remote) == (
        "jobs.jsonl",
        "r.jsonl",
        3,
        ["ws://h:1/"],
    )
    assert (args.budget, args.retries, args.model, args.offline) == (1.5, 0, "opus", True)
    # the gateways of one cluster: tried in turn
    two = cli.parse_args(["batch", "j.jsonl", "--remote", "ws://a:1/", "--remote", "ws://b:2/"])
    assert two.remote == ["ws://a:1/", "ws://b:2/"]
    assert cli.parse_args(["run", "hi", "--remote", "ws://h:1/"]).remote == "ws://h:1/"


@pytest.mark.parametrize(
    "argv",
    [
        ["serve", "--port", "70000"],
        ["serve", "--max-live", "0"],
        ["serve", "--drain-grace", "-1"],
        ["serve", "--idempotency-ttl", "0"],
        ["batch"],
        ["batch", "x.jsonl", "--budget", "0"],
        ["batch", "x.jsonl", "--retries", "-1"],
    ],
)
def test_bad_fanout_arguments_exit_2(argv: list[str]) -> None:
    assert cli.main(argv) == 2


def test_a_generated_token_is_only_for_loopback(tmp_path: Path) -> None:
    local = serve_config(serve_args(), {})
    assert serve_config(serve_args("--idempotency-ttl", "60"), {}).idempotency_ttl == 60.0
    assert local.token_generated
    assert local.token is not None
    assert len(local.token) >= 32
    assert local.tokens is None
    with pytest.raises(ServeUsageError, match=r"refusing to listen on 0\.0\.0\.0 with a generated"):
        serve_config(serve_args("--host", "0.0.0.0"), {})
    chosen = serve_config(serve_args("--host", "0.0.0.0"), {"CLAUDE_TRIO_TOKEN": TOKEN})
    assert (chosen.token, chosen.token_generated) == (TOKEN, False)
    with pytest.raises(ServeUsageError, match="CLAUDE_TRIO_TOKEN") as short:
        serve_config(serve_args(), {"CLAUDE_TRIO_TOKEN": "short"})
    assert "short" not in str(short.value).replace("CLAUDE_TRIO_TOKEN", "")


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.3.4.5", True), ("::1", True), ("localhost", True),
     ("0.0.0.0", False), ("10.0.0.1", False), ("example.org", False), ("::", False)],
)  # fmt: skip
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_urls_bracket_ipv6() -> None:
    assert url_for("127.0.0.1", 8765) == "ws://127.0.0.1:8765/"
    assert url_for("::1", 9) == "ws://[::1]:9/"


def test_the_tokens_file_names_principals(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(
        json.dumps(
            [
                {"principal": "alice", "token": "alice-0123456789abcdef"},
                {"principal": "ops", "token": "ops-0123456789abcdefgh", "admin": True},
            ]
        )
    )
    assert read_tokens(str(path)) == {
        "alice-0123456789abcdef": Principal(name="alice"),
        "ops-0123456789abcdefgh": Principal(name="ops", admin=True),
    }
    config = serve_config(serve_args("--tokens", str(path), "--host", "0.0.0.0"), {})
    assert config.token is None
    assert config.tokens is not None
    assert len(config.tokens) == 2
    with pytest.raises(ServeUsageError, match="both --tokens and CLAUDE_TRIO_TOKEN"):
        serve_config(serve_args("--tokens", str(path)), {"CLAUDE_TRIO_TOKEN": TOKEN})


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("not json", "not JSON"),
        ("[]", "non-empty JSON list"),
        ('{"alice": "x"}', "non-empty JSON list"),
        ('["x"]', "entry 1: expected an object"),
        ('[{"token": "0123456789abcdefgh"}]', "entry 1: 'principal' is missing"),
        ('[{"principal": "a"}]', "entry 1: 'token' is missing"),
        ('[{"principal": "a", "token": "short-secret"}]', "entry 1: invalid token"),
        ('[{"principal": " a", "token": "0123456789abcdefgh"}]', "entry 1: invalid name"),
        ('[{"principal": "a", "token": "0123456789abcdefgh", "admin": "yes"}]',
         "entry 1: invalid admin"),
        ('[{"principal": "a", "token": "0123456789abcdefgh", "role": 1}]', "unknown key(s)"),
        ('[{"principal": "a", "token": "0123456789abcdefgh"},'
         ' {"principal": "b", "token": "0123456789abcdefgh"}]', "entry 2: the same token"),
    ],
)  # fmt: skip
def test_a_bad_tokens_file_names_the_entry_and_never_the_token(
    tmp_path: Path, content: str, problem: str
) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(content)
    with pytest.raises(ServeUsageError) as caught:
        read_tokens(str(path))
    assert problem in str(caught.value)
    assert "0123456789abcdefgh" not in str(caught.value)
    assert "short-secret" not in str(caught.value)


def test_a_missing_tokens_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(ServeUsageError, match="cannot read it"):
        read_tokens(str(tmp_path / "nope.json"))


def test_serve_usage_errors_exit_2_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CLAUDE_TRIO_TOKEN", raising=False)
    assert cli.main(["serve", "--host", "0.0.0.0"]) == 2
    assert "refusing to listen on 0.0.0.0" in capsys.readouterr().err
    for name in cli.CREDENTIAL_ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no login either
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    assert cli.main(["serve"]) == 2
    err = capsys.readouterr().err
    assert "no credentials" in err
    assert "claude-trio serve --offline" in err
    assert cli.main(["serve", "--cwd-root", str(tmp_path / "missing")]) == 2


def test_remote_commands_need_the_token(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.delenv("CLAUDE_TRIO_TOKEN", raising=False)
    assert cli.main(["run", "hi", "--remote", "ws://127.0.0.1:1/"]) == 2
    assert "CLAUDE_TRIO_TOKEN" in capsys.readouterr().err
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text('"hello"\n')
    assert cli.main(["batch", str(jobs), "--remote", "ws://127.0.0.1:1/"]) == 2
    assert "CLAUDE_TRIO_TOKEN" in capsys.readouterr().err


def test_batch_refuses_a_bad_file_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text('"fine"\n{"prompt": "x", "colour": "red"}\n')
    assert cli.main(["batch", str(jobs), "--offline"]) == 2
    assert "jobs.jsonl, line 2: unknown field(s) ['colour']" in capsys.readouterr().err
    assert cli.main(["batch", str(tmp_path / "missing.jsonl"), "--offline"]) == 2
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    assert cli.main(["batch", str(empty), "--offline"]) == 2


def test_json_log_lines_carry_the_structured_fields_and_no_traceback() -> None:
    stream = io.StringIO()
    configure_logging(stream, json_lines=True)
    logger = logging.getLogger("claude_trio.test")
    logger.info(
        "opened %s", "s-1", extra={"event": "opened", "session": "s-1", "principal": "alice"}
    )
    try:
        raise ValueError("/secret/path/in/a/message")
    except ValueError:
        logger.exception("it failed")
    logging.getLogger("claude_agent_sdk").error("not ours: %s", "/another/path")
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert lines[0]["message"] == "opened s-1"
    assert (lines[0]["event"], lines[0]["session"], lines[0]["principal"]) == (
        "opened",
        "s-1",
        "alice",
    )
    assert (lines[0]["level"], lines[0]["logger"]) == ("info", "claude_trio.test")
    assert lines[1]["exception"] == "ValueError"
    assert len(lines) == 2  # other libraries' records stay out
    assert "/secret/path" not in stream.getvalue()
    assert isinstance(JsonLogFormatter().format(logging.makeLogRecord({"msg": "x"})), str)


def test_a_tokens_file_readable_by_others_is_noted(tmp_path: Path) -> None:
    from claude_trio.cli.serve import _tokens_file_readable_by_others

    path = tmp_path / "tokens.json"
    path.write_text("[]")
    path.chmod(stat.S_IRUSR | stat.S_IWUSR)
    assert not _tokens_file_readable_by_others(str(path))
    path.chmod(0o644)
    assert _tokens_file_readable_by_others(str(path))


def test_remote_tools_is_the_operators_choice_read_only_unless_all() -> None:
    from claude_trio.cli.serve import _gateway_options

    default = serve_config(serve_args(), {})
    assert default.remote_tools == "read-only"
    assert _gateway_options(default)["remote_tools"] == "read-only"
    opted_in = serve_config(serve_args("--remote-tools", "all"), {})
    assert _gateway_options(opted_in)["remote_tools"] == "all"
    assert cli.main(["serve", "--remote-tools", "everything"]) == 2


def test_the_console_is_on_for_loopback_unless_turned_off() -> None:
    from claude_trio.cli.serve import _console_url_of, _gateway_options, console_url

    local = serve_config(serve_args(), {})
    assert local.console
    assert _gateway_options(local)["console"] is True
    assert not serve_config(serve_args("--no-console"), {}).console
    env = {"CLAUDE_TRIO_TOKEN": TOKEN}
    assert not serve_config(serve_args("--host", "0.0.0.0"), env).console
    assert serve_config(serve_args("--host", "0.0.0.0", "--console"), env).console
    # The token travels in the fragment (never sent to the server), and only when generated:
    # a chosen token is typed into the login form.
    assert _console_url_of(local, 8765) == f"http://127.0.0.1:8765/#token={local.token}"
    chosen = serve_config(serve_args(), env)
    assert _console_url_of(chosen, 8765) == "http://127.0.0.1:8765/"
    assert console_url("::1", 9, None) == "http://[::1]:9/"
