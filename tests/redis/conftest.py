"""Fixtures of the Redis tests besides the testing kit's (``redis_server``, ``redis_cluster``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from claude_trio.testing import open_redis_cluster, open_redis_server


@pytest.fixture(params=["redis-server", "redis-cluster"])
async def redis_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """The URL of one ``redis-server``, or of a three-master Redis Cluster
    (``redis+cluster://``): a test taking it runs on both."""
    if request.param == "redis-server":
        async with open_redis_server(tmp_path / "redis") as server:
            yield server.url
    else:
        async with open_redis_cluster(tmp_path / "redis-cluster") as cluster:
            yield cluster.url
