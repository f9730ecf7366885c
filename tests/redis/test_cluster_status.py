"""Rule 8 (``protocol/cluster/records.py``): each worker publishes its status with its heartbeat,
and a cluster gateway's ``hello`` summarizes the workers alive, their slots and the degraded
ones."""

from __future__ import annotations

import time

import coredis
import trio
from cluster_kit import TOKEN, open_gateway, open_worker

from claude_trio import ExecuteParams
from claude_trio.client import ClientConfig, connect_gateway
from claude_trio.protocol.cluster.keys import RedisKeys
from claude_trio.protocol.cluster.records import WorkerStatus
from claude_trio.testing import FakeCLI, FakeTurn, RedisServer

CLIENT = ClientConfig(backoff_base=0.05, backoff_max=0.5, close_timeout=2.0)
KEYS = RedisKeys()


async def test_workers_publish_their_status_and_hello_summarizes_the_cluster(
    redis_server: RedisServer,
) -> None:
    release = trio.Event()

    async def held(turn: FakeTurn) -> None:
        await release.wait()
        await turn.text("done")

    url = redis_server.url
    with trio.fail_after(30):
        async with (
            coredis.Redis.from_url(url, decode_responses=True) as redis,
            open_worker(url, FakeCLI(held), max_live=3) as worker,
            open_gateway(url) as (_fleet, port),
            connect_gateway(f"ws://127.0.0.1:{port}/", token=TOKEN, config=CLIENT) as client,
        ):
            session = await client.open(ExecuteParams(prompt="x"))
            async for event in session.events:
                if event.kind == "turn_started":
                    break
            # Until a heartbeat after the claim published it (one per 0.2 s).
            for _ in range(500):
                text = await redis.get(KEYS.alive(worker.worker.id))
                if text and WorkerStatus.decode(text).running == 1:
                    break
                await trio.sleep(0.02)
            status = WorkerStatus.decode(text or "")
            # Another worker, degraded for 30 s (as a worker whose Redis writes fail
            # writes it), and one whose heartbeat expired (not alive: not listed).
            sick = WorkerStatus(
                worker="sick",
                at=time.time(),
                running=0,
                max_live=2,
                degraded_since=time.time() - 30,
                outages=1,
            )
            await redis.set(KEYS.alive("sick"), sick.encode(), px=60_000)
            await redis.zadd(KEYS.workers, {"sick": int(time.time() * 1000), "gone": 1})
            async with connect_gateway(
                f"ws://127.0.0.1:{port}/", token=TOKEN, config=CLIENT
            ) as fresh:
                assert fresh.hello is not None
                cluster = fresh.hello.cluster
            release.set()
            async for _ in session.events:
                pass

    assert status.worker == worker.worker.id
    assert (status.running, status.max_live, status.degraded_since) == (1, 3, None)
    assert cluster is not None
    assert cluster["workers_alive"] == 2
    assert cluster["running"] == 1
    assert cluster["slots"] == 5
    assert cluster["degraded"] == [{"worker": "sick", "since": sick.degraded_since}]
    assert sorted(w["worker"] for w in cluster["workers"]) == sorted([worker.worker.id, "sick"])


async def test_hello_without_a_cluster_has_no_cluster_summary(redis_server: RedisServer) -> None:
    """(A gateway over the in-process fleet: the ``cluster`` field is null.)"""
    from claude_trio import serve_gateway
    from claude_trio.actors.fanout.fleet import open_fleet

    with trio.fail_after(20):
        async with (
            open_fleet(transport_factory=FakeCLI()) as fleet,
            trio.open_nursery() as nursery,
        ):
            port = await nursery.start(
                lambda task_status: serve_gateway(
                    fleet, token=TOKEN, allowed_origins=None, task_status=task_status
                )
            )
            async with connect_gateway(
                f"ws://127.0.0.1:{port}/", token=TOKEN, config=CLIENT
            ) as client:
                assert client.hello is not None
                cluster = client.hello.cluster
            nursery.cancel_scope.cancel()
    assert cluster is None
