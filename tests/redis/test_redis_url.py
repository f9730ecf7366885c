"""``--redis URL``: checked before anything starts; AUTH from the URL or ``REDISCLI_AUTH``;
the password never printed."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from claude_trio.cli import main
from claude_trio.errors import RedisUnavailableError, RedisUsageError
from claude_trio.redis_url import (
    check_redis_url,
    is_cluster_url,
    open_redis,
    persistence_warning,
)
from claude_trio.testing import RedisClusterNodes, open_redis_server


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://127.0.0.1:6379/0", "not a Redis URL"),
        ("redis:///0", "names no host"),
        ("redis://127.0.0.1:port/0", "port is not a number"),
        ("redis+cluster://127.0.0.1:7000/3", "a Redis Cluster has only database 0"),
        ("redis+cluster:///", "names no host"),
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


async def test_a_redis_without_persistence_is_named_in_one_line(tmp_path: Path) -> None:
    async with (
        open_redis_server(tmp_path / "bare") as bare,
        open_redis_server(tmp_path / "aof", persist=True) as aof,
    ):
        async with open_redis(bare.url) as redis:
            warning = await persistence_warning(redis, bare.url)
        async with open_redis(aof.url) as redis:
            fine = await persistence_warning(redis, aof.url)
    assert warning is not None
    assert "\n" not in warning
    assert f"127.0.0.1:{bare.port} has no persistence" in warning
    assert "appendonly yes" in warning
    assert fine is None


async def test_every_master_of_a_cluster_is_checked(redis_cluster: RedisClusterNodes) -> None:
    async with open_redis(redis_cluster.url) as redis:
        warning = await persistence_warning(redis, redis_cluster.url)
        # One master with the append-only file on: the others are still named.
        first = redis_cluster.nodes[0]
        async with open_redis(first.url) as one:
            await one.config_set({"appendonly": "yes"})
        partly = await persistence_warning(redis, redis_cluster.url)
    assert warning is not None
    assert all(address in warning for address in redis_cluster.addresses)
    assert partly is not None
    assert redis_cluster.addresses[0] not in partly
    assert all(address in partly for address in redis_cluster.addresses[1:])


def test_cluster_urls_are_told_apart() -> None:
    assert is_cluster_url("redis+cluster://10.0.0.1:7000")
    assert is_cluster_url("rediss+cluster://:pw@10.0.0.1:7000?ssl_ca_certs=/ca.pem")
    assert not is_cluster_url("redis://10.0.0.1:6379/0")
    check_redis_url("rediss+cluster://10.0.0.1:7000/0")  # db 0 may be named


async def test_a_cluster_client_opens_without_coredis_deprecation_warnings(
    redis_cluster: RedisClusterNodes,
) -> None:
    """The URL's node is handed to coredis as a ``TCPLocation``: given none, coredis made a
    startup node of a deprecated kind and warned on every open."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        async with open_redis(redis_cluster.url) as redis:
            assert await redis.set("ct-url-check", "1")
            assert await redis.get("ct-url-check") == "1"
