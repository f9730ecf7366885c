"""``--redis URL``: checked before anything starts; AUTH from the URL or ``REDISCLI_AUTH``;
the password never printed."""

from __future__ import annotations

from pathlib import Path

import pytest

from claude_trio.cli import main
from claude_trio.errors import RedisUnavailableError, RedisUsageError
from claude_trio.redis_url import check_redis_url, open_redis
from claude_trio.testing import open_redis_server


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://127.0.0.1:6379/0", "not a Redis URL"),
        ("redis:///0", "names no host"),
        ("redis://127.0.0.1:port/0", "port is not a number"),
    ],
)
def test_a_bad_url_says_what_to_use(url: str, message: str) -> None:
    with pytest.raises(RedisUsageError, match=message):
        check_redis_url(url)


def test_the_commands_refuse_a_bad_url_and_hide_the_password(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["worker", "--redis", "http://:hunter2-secret@127.0.0.1/0", "--offline"]) == 2
    err = capsys.readouterr().err
    assert "not a Redis URL" in err
    assert "hunter2-secret" not in err
    assert main(["serve", "--redis", "redis://127.0.0.1/0", "--offline"]) == 2
    assert "--offline is a worker's option" in capsys.readouterr().err


async def test_auth_from_the_url_or_the_environment(tmp_path: Path) -> None:
    async with open_redis_server(tmp_path, password="s3cret-pass-word") as server:
        async with open_redis(server.url, environ={}) as redis:
            assert await redis.ping() == "PONG"
        bare = server.url.replace(":s3cret-pass-word@", "")
        async with open_redis(bare, environ={"REDISCLI_AUTH": "s3cret-pass-word"}) as redis:
            assert await redis.ping() == "PONG"
        with pytest.raises(RedisUnavailableError, match=r"requires a password.*REDISCLI_AUTH"):
            async with open_redis(bare, environ={}):
                pytest.fail("connected without the password")  # pragma: no cover


async def test_a_closed_port_fails_at_once(tmp_path: Path) -> None:
    async with open_redis_server(tmp_path) as server:
        url = server.url
    with pytest.raises(RedisUnavailableError, match=r"cannot use Redis at redis://127\.0\.0\.1"):
        async with open_redis(url, environ={}):
            pytest.fail("connected to a stopped server")  # pragma: no cover
