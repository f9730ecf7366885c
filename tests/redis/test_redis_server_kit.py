"""The testing kit's ``redis-server``: a real process on a free port, gone after the block."""

from __future__ import annotations

import os
from pathlib import Path

import coredis
import pytest
import trio

from claude_trio.testing import RedisServerError, open_redis_server
from claude_trio.testing import redis_server as kit


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_starts_answers_and_leaves_no_process(tmp_path: Path) -> None:
    async with open_redis_server(tmp_path) as server:
        assert server._process is not None
        pid = server._process.pid
        async with coredis.Redis.from_url(server.url, decode_responses=True) as client:
            assert await client.ping() == "PONG"
        assert alive(pid)
    assert not alive(pid)


async def test_persist_keeps_data_across_a_restart_and_password_is_required(
    tmp_path: Path,
) -> None:
    async with open_redis_server(tmp_path, persist=True, password="s3cret-pass") as server:
        async with coredis.Redis.from_url(server.url, decode_responses=True) as client:
            await client.set("k", "v")
        await server.restart()
        async with coredis.Redis.from_url(server.url, decode_responses=True) as client:
            assert await client.get("k") == "v"
        url = server.url.replace(":s3cret-pass@", "")
        async with coredis.Redis.from_url(url, decode_responses=True) as client:
            with pytest.raises(coredis.exceptions.AuthenticationRequiredError):
                await client.get("k")


async def test_missing_binary_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kit.shutil, "which", lambda name: None)
    with pytest.raises(RedisServerError, match="scripts/ensure-redis"):
        async with open_redis_server(tmp_path):
            await trio.lowlevel.checkpoint()  # pragma: no cover
