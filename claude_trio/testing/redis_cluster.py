"""A real three-master Redis Cluster for tests: ``redis-server --cluster-enabled yes`` on free
loopback ports, each in a directory of its own, joined with ``redis-cli --cluster create``
(no replicas), stopped when the block ends and killed when the process that started them dies
(``actors/children.py``, through :class:`~claude_trio.testing.RedisServer`).

``url`` is a ``redis+cluster://`` URL naming one master (the client discovers the others);
:func:`claude_trio.redis_url.open_redis` opens a ``coredis.RedisCluster`` for it. The nodes keep
nothing on disk. ``scripts/ensure-redis`` installs ``redis-server`` and ``redis-cli``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import attrs
import trio

from claude_trio.testing.redis_server import (
    RedisServer,
    RedisServerError,
    _free_port,
    open_redis_server,
)

__all__ = ["RedisClusterNodes", "open_redis_cluster"]

_FORM_TIMEOUT = 30.0


@attrs.frozen(kw_only=True)
class RedisClusterNodes:
    """The nodes of a running Redis Cluster (every one a master)."""

    nodes: tuple[RedisServer, ...]

    @property
    def url(self) -> str:
        """A ``redis+cluster://`` URL naming the first master (any one would do)."""
        return f"redis+cluster://127.0.0.1:{self.nodes[0].port}"

    @property
    def addresses(self) -> tuple[str, ...]:
        return tuple(f"127.0.0.1:{node.port}" for node in self.nodes)


async def _cli(binary: str, *argv: str) -> str:
    done = await trio.run_process(
        [binary, *argv], capture_stdout=True, capture_stderr=True, check=False
    )
    out = done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
    if done.returncode != 0:
        raise RedisServerError(f"redis-cli {' '.join(argv)} failed: {out.strip()}")
    return out


async def _wait_formed(binary: str, cluster: RedisClusterNodes) -> None:
    await trio.lowlevel.checkpoint()
    with trio.move_on_after(_FORM_TIMEOUT):
        while True:
            states = []
            for node in cluster.nodes:
                info = await _cli(binary, "-p", str(node.port), "cluster", "info")
                states.append("cluster_state:ok" in info)
            if all(states):
                return
            await trio.sleep(0.05)
    raise RedisServerError(
        f"the Redis Cluster on {', '.join(cluster.addresses)} did not reach cluster_state:ok "
        f"within {_FORM_TIMEOUT:g} s; see the nodes' redis.log"
    )


def _cluster_args(node_dir: Path) -> tuple[str, ...]:
    return (
        "--cluster-enabled", "yes",
        "--cluster-config-file", str(node_dir / "nodes.conf"),
        "--cluster-node-timeout", "5000",
        # The bus port of its own (by default the port + 10000, which may be taken or
        # past 65535).
        "--cluster-port", str(_free_port()),
    )  # fmt: skip


@asynccontextmanager
async def open_redis_cluster(
    directory: str | os.PathLike[str], *, masters: int = 3
) -> AsyncIterator[RedisClusterNodes]:
    """Run a Redis Cluster of ``masters`` masters (at least 3, no replicas) under
    ``directory`` for the block; it is ready (``cluster_state:ok``) when yielded."""
    if masters < 3:
        raise ValueError(f"a Redis Cluster needs at least 3 masters, got {masters}")
    binary = shutil.which("redis-cli")
    if binary is None:
        raise RedisServerError(
            "redis-cli is not installed: run scripts/ensure-redis (it installs the Debian "
            "packages redis-server and redis-tools)"
        )
    async with AsyncExitStack() as stack:
        nodes = []
        for i in range(masters):
            node_dir = Path(directory) / f"node{i}"
            nodes.append(
                await stack.enter_async_context(
                    open_redis_server(
                        node_dir,
                        extra_args=_cluster_args(node_dir),
                    )
                )
            )
        cluster = RedisClusterNodes(nodes=tuple(nodes))
        await _cli(
            binary, "--cluster", "create", *cluster.addresses,
            "--cluster-replicas", "0", "--cluster-yes",
        )  # fmt: skip
        await _wait_formed(binary, cluster)
        yield cluster
