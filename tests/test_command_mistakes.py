"""Operator mistakes, as a user makes them: the ``claude-trio`` command in a subprocess answers
each with one line on stderr and a nonzero exit, never a traceback.

None of these starts a ``claude`` CLI: each command stops before it would.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
import trio

from claude_trio.testing import RedisServer

COMMAND = (sys.executable, "-m", "claude_trio.cli")
TOKEN = "a-token-chosen-on-purpose-0123456789"


def command_env(extra: Mapping[str, str] = {}) -> dict[str, str]:
    """This process's environment without any credential, plus ``extra``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("ANTHROPIC_") and key not in ("CLAUDE_CODE_OAUTH_TOKEN",)
    }
    env.update(extra)
    return env


async def claude_trio(
    *argv: str, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(60):
        return await trio.run_process(
            [*COMMAND, *argv],
            env=dict(command_env() if env is None else env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )


def one_error_line(done: subprocess.CompletedProcess[bytes]) -> str:
    """The one line on stderr (asserting there is exactly one, and no traceback)."""
    err = done.stderr.decode()
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port something else listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


async def test_serve_on_a_port_in_use_says_the_port_is_taken(taken_port: int) -> None:
    done = await claude_trio("serve", "--offline", "--port", str(taken_port))
    line = one_error_line(done)
    assert done.returncode == 1
    assert line.startswith(f"claude-trio serve: cannot listen on 127.0.0.1:{taken_port}: ")
    assert f"port {taken_port} is taken" in line
    assert "--port" in line
    assert b"listening" not in done.stdout


async def test_serve_on_a_host_that_is_not_this_machine_says_so() -> None:
    env = command_env({"CLAUDE_TRIO_TOKEN": TOKEN})
    done = await claude_trio("serve", "--offline", "--host", "no-such-host.invalid", env=env)
    line = one_error_line(done)
    assert done.returncode == 1
    assert "--host no-such-host.invalid is not an address of this machine" in line


async def test_serve_of_a_cluster_on_a_port_in_use_says_the_port_is_taken(
    redis_server: RedisServer,
) -> None:
    # The Redis server's own port is one that is taken.
    port = redis_server.port
    done = await claude_trio("serve", "--redis", redis_server.url, "--port", str(port))
    line = one_error_line(done)
    assert done.returncode == 1
    assert f"port {port} is taken" in line


async def test_batch_against_an_unreachable_server_says_so_on_stderr(tmp_path: Path) -> None:
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('"hi"\n')
    env = command_env({"CLAUDE_TRIO_TOKEN": TOKEN})
    done = await claude_trio("batch", str(prompts), "--remote", "ws://127.0.0.1:1/", env=env)
    line = one_error_line(done)
    assert done.returncode == 1
    assert line.startswith(
        "claude-trio batch: could not connect to the gateway at ws://127.0.0.1:1/"
    )
    assert b"could not connect" not in done.stdout


@pytest.mark.parametrize("command", ["batch", "run"])
async def test_a_remote_url_that_is_not_a_websocket_url_is_a_usage_error(
    command: str, tmp_path: Path
) -> None:
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('"hi"\n')
    first = str(prompts) if command == "batch" else "hi"
    env = command_env({"CLAUDE_TRIO_TOKEN": TOKEN})
    done = await claude_trio(command, first, "--remote", "http://example.com/", env=env)
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert "Traceback" not in err
    assert "'http://example.com/' is not a ws:// or wss:// URL" in err.splitlines()[-1]
    assert not (tmp_path / "p.results.jsonl").exists()  # no results file was started


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["batch", "{dir}/missing.jsonl", "--offline"], "cannot read"),
        (["batch", "{dir}/bad.jsonl", "--offline"], "line 1: not JSON"),
        (["run", "hi", "--offline", "--output-schema", "{dir}/bad.json"], "a JSON file"),
        (
            ["run", "hi", "--offline", "--output-schema", "{dir}/schema.json"],
            "invalid output_schema.properties.a.type='strin': 'strin' is not one of",
        ),
        (["run", "hi", "--offline", "--agents", "{dir}/missing.json"], "a readable file"),
        (["run", "hi", "--offline", "--image", "{dir}/missing.png"], "a readable image"),
        (["run", "hi", "--offline", "--cwd", "{dir}/missing"], "an existing directory"),
        (["run", "hi", "--offline", "--record", "{dir}/missing/c.jsonl"], "existing folder"),
        (["record", "hi", "--offline", "--out", "{dir}/missing/c.jsonl"], "existing folder"),
        (["demo", "--record", "{dir}/missing/c.jsonl"], "existing folder"),
        (["worker", "--redis", "http://localhost/", "--offline"], "not a Redis URL"),
        (["serve", "--redis", "http://localhost/"], "not a Redis URL"),
        (["serve", "--offline", "--tokens", "{dir}/bad.json"], "not JSON"),
        (["serve", "--offline", "--cwd-root", "{dir}/missing"], "not a directory"),
    ],
)
async def test_each_bad_file_path_url_or_json_is_one_line_and_exit_2(
    argv: list[str], says: str, tmp_path: Path
) -> None:
    (tmp_path / "bad.jsonl").write_text("{bad\n")
    (tmp_path / "bad.json").write_text("{\n")
    schema = {"type": "object", "properties": {"a": {"type": "strin"}}}
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    done = await claude_trio(*(a.format(dir=tmp_path) for a in argv))
    line = one_error_line(done)
    assert done.returncode == 2
    assert says in line


async def test_batch_names_every_bad_line_of_its_file_and_runs_nothing(tmp_path: Path) -> None:
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('"fine"\n{bad\n"fine too"\n[1]\n')
    done = await claude_trio("batch", str(prompts), "--offline")
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert lines[0] == f"claude-trio batch: {prompts}: 2 lines are not items:"
    assert lines[1].startswith(f"{prompts}, line 2: not JSON")
    assert lines[2] == f"{prompts}, line 4: expected a prompt (a JSON string) or an object"
    assert not (tmp_path / "p.results.jsonl").exists()


async def test_inbox_without_a_token_a_bad_url_or_no_server_is_one_line() -> None:
    done = await claude_trio("inbox", "ws://127.0.0.1:1/", env=command_env({}))
    assert done.returncode == 2
    assert "inbox needs the server's token in CLAUDE_TRIO_TOKEN" in one_error_line(done)
    env = command_env({"CLAUDE_TRIO_TOKEN": TOKEN})
    done = await claude_trio("inbox", "http://example.com/", env=env)
    assert done.returncode == 2
    assert "'http://example.com/'" in one_error_line(done)
    done = await claude_trio("inbox", "ws://127.0.0.1:1/", env=env)
    assert done.returncode == 1
    assert "could not connect to the gateway at ws://127.0.0.1:1/" in one_error_line(done)


async def test_a_worker_whose_redis_cannot_be_reached_says_so_in_one_line() -> None:
    done = await claude_trio("worker", "--redis", "redis://127.0.0.1:1/0", "--offline")
    line = one_error_line(done)
    assert done.returncode == 1
    assert "cannot use Redis at redis://127.0.0.1:1/0" in line


async def test_acp_remote_mistakes_are_one_line_each() -> None:
    both = await claude_trio("acp", "--remote", "ws://127.0.0.1:1/", "--offline")
    assert both.returncode == 2
    assert "--offline is for sessions run here" in one_error_line(both)
    tokenless = await claude_trio("acp", "--remote", "ws://127.0.0.1:1/")
    assert tokenless.returncode == 2
    assert "CLAUDE_TRIO_TOKEN" in one_error_line(tokenless)
    unreachable = await claude_trio(
        "acp", "--remote", "ws://127.0.0.1:1/", env=command_env({"CLAUDE_TRIO_TOKEN": TOKEN})
    )
    assert unreachable.returncode == 1
    assert "could not connect to the gateway at ws://127.0.0.1:1/" in one_error_line(unreachable)


async def test_acp_without_credentials_says_how_to_get_them() -> None:
    done = await claude_trio("acp")
    assert done.returncode == 2
    err = done.stderr.decode()
    assert "Traceback" not in err
    assert err.startswith("claude-trio: no credentials for the Anthropic API.")
    assert done.stdout == b""


def test_the_commands_under_audit_are_every_command() -> None:
    from claude_trio.cli import COMMANDS

    # A new command joins the audit above (an operator mistake of it gets a test here).
    assert set(COMMANDS) == {"run", "demo", "record", "serve", "batch", "worker", "acp", "inbox"}
