"""Redis goes away during a run and comes back: the session goes on on its worker, which
reports degraded meanwhile and stores what it held once Redis is back; the stream is exact;
a gateway answers ops with a clear ``unavailable`` error meanwhile; nothing hangs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import coredis
import trio
from cluster_kit import FAST, TOKEN, open_gateway, open_worker

from claude_trio import ExecuteParams
from claude_trio.client import ClientConfig, connect_gateway
from claude_trio.errors import RemoteOpError
from claude_trio.protocol.cluster.keys import RedisKeys
from claude_trio.protocol.cluster.records import WorkerStatus, stored_events
from claude_trio.protocol.session.events import Result
from claude_trio.testing import FakeCLI, FakeTurn, open_redis_server

CLIENT = ClientConfig(backoff_base=0.05, backoff_max=0.5, close_timeout=2.0, connect_attempts=3)


async def test_redis_restarted_mid_run_loses_no_event(tmp_path: Path) -> None:
    async def chatty(turn: FakeTurn) -> None:
        for i in range(40):
            await turn.text(f"part {i} ")
            await turn.sleep(0.05)

    async with open_redis_server(tmp_path / "redis", persist=True) as server:
        url = server.url
        with trio.fail_after(60):
            async with (
                open_worker(url, FakeCLI(chatty)) as worker,
                open_gateway(url) as (_fleet, port),
                connect_gateway(f"ws://127.0.0.1:{port}/", token=TOKEN, config=CLIENT) as client,
            ):
                session = await client.open(ExecuteParams(prompt="talk"))
                async for event in session.events:
                    if event.kind == "text_delta":
                        break
                sid = session.id
                session.close()
                await server.stop()
                # The session goes on; its worker holds the events and says it is degraded.
                while not worker.worker.degraded:  # noqa: ASYNC110 (a flag of another task)
                    await trio.sleep(0.02)
                during = worker.worker.statistics()
                try:
                    await client.list()
                except RemoteOpError as exc:
                    refused = str(exc)
                else:
                    refused = ""
                # A client that connects now is answered hello, which says why it knows
                # nothing of the workers.
                async with connect_gateway(
                    f"ws://127.0.0.1:{port}/", token=TOKEN, config=CLIENT
                ) as late:
                    assert late.hello is not None
                    down = late.hello.cluster
                await trio.sleep(1.0)
                await server.start()
                await worker.worker.wait_idle(trio.current_time() + 20)
                # Each of its loops finds Redis back at its next retry, which may come after
                # the session's end (the pauses grow up to retry_max): bounded by fail_after.
                while worker.worker.degraded:  # noqa: ASYNC110 (a flag of another task)
                    await trio.sleep(0.02)
                after = worker.worker.statistics()
        async with coredis.Redis.from_url(url, decode_responses=True) as redis:
            entries = await redis.xrange(RedisKeys().events(sid))
            # Its last heartbeat published it: one outage, over (rule 8).
            published = WorkerStatus.decode(
                await redis.get(RedisKeys().alive(worker.worker.id)) or ""
            )
            stored = stored_events(entries)

    assert "unavailable" in refused
    assert down is not None
    assert down["workers_alive"] == 0
    assert "Redis is unavailable" in down["unavailable"]
    assert during.degraded_since is not None
    assert during.outages == 1
    assert (after.degraded_since, after.outages) == (None, 1)
    assert published.outages == 1
    assert "the cluster's Redis is unavailable: try again later" in refused
    assert "127.0.0.1" not in refused  # no address leaks
    assert f":{server.port}" not in refused
    assert [e.seq for e in stored] == list(range(1, len(stored) + 1))
    assert isinstance(stored[-1], Result)
    assert stored[-1].final
    text = "".join(e.text for e in stored if e.kind == "text_delta")
    assert text == "".join(f"part {i} " for i in range(40))


async def test_an_outage_longer_than_the_buffer_is_said_in_the_stream(tmp_path: Path) -> None:
    """The worker holds at most its replay buffer (20 events here): what was evicted while
    Redis was away is named by an ``events_lost`` warning where it was, never skipped
    silently; the rest, the final event included, is stored in order."""

    async def chatty(turn: FakeTurn) -> None:
        for i in range(40):
            await turn.text(f"part {i} ")
            await turn.sleep(0.02)

    # Its publisher's queue (``stream_max``) overflows too; the stream keeps the last 30 seqs,
    # the warning and the 20 events after it.
    small = attrs.evolve(FAST, stream_max=30)
    async with open_redis_server(tmp_path / "redis", persist=True) as server:
        url = server.url
        with trio.fail_after(60):
            async with (
                open_worker(url, FakeCLI(chatty), config=small, replay_buffer=20) as worker,
                open_gateway(url) as (_fleet, port),
                connect_gateway(f"ws://127.0.0.1:{port}/", token=TOKEN, config=CLIENT) as client,
            ):
                session = await client.open(ExecuteParams(prompt="talk"))
                async for event in session.events:
                    if event.kind == "text_delta":
                        break
                sid = session.id
                session.close()
                await server.stop()
                await trio.sleep(2.0)  # the CLI says everything meanwhile
                await server.start()
                await worker.worker.wait_idle(trio.current_time() + 20)
        async with coredis.Redis.from_url(url, decode_responses=True) as redis:
            entries = await redis.xrange(RedisKeys().events(sid))
            stored = stored_events(entries)

    seqs = [e.seq for e in stored]
    assert seqs == sorted(set(seqs))
    (lost,) = [e for e in stored if e.kind == "warning" and e.code == "events_lost"]
    assert "were lost while Redis was unavailable" in lost.message
    after = stored[stored.index(lost) + 1 :]
    assert after[0].seq == lost.seq + 1  # exact from there on
    assert [e.seq for e in after] == list(range(after[0].seq, after[0].seq + len(after)))
    assert isinstance(stored[-1], Result)
    assert stored[-1].final


async def test_a_worker_never_takes_over_its_own_job_grown_idle(tmp_path: Path) -> None:
    """After an outage a worker's own running job can be idle past ``dead_after`` until its
    next heartbeat re-claims it; a claim loop that comes first must leave it alone (taking it
    would fence the worker's own running execution and lose its end). The idle time is set
    past ``dead_after`` directly here, as a long outage would leave it, with a heartbeat that
    comes long after the claim loop's next pass."""

    async def chatty(turn: FakeTurn) -> None:
        for i in range(20):
            await turn.text(f"part {i} ")
            await turn.sleep(0.05)

    slow_beat = attrs.evolve(FAST, heartbeat=3.0, dead_after=5.0, block=0.05)
    async with open_redis_server(tmp_path / "redis") as server:
        url = server.url
        with trio.fail_after(60):
            async with (
                open_worker(url, FakeCLI(chatty), config=slow_beat) as worker,
                open_gateway(url) as (_fleet, port),
                connect_gateway(f"ws://127.0.0.1:{port}/", token=TOKEN, config=CLIENT) as client,
                coredis.Redis.from_url(url, decode_responses=True) as redis,
            ):
                session = await client.open(ExecuteParams(prompt="talk"))
                async for event in session.events:
                    if event.kind == "text_delta":
                        break
                sid = session.id
                (running,) = worker.worker.running.values()
                keys = RedisKeys()
                await redis.xclaim(
                    keys.jobs,
                    keys.workers_group,
                    worker.worker.id,
                    0,
                    [running.entry_id],
                    idle=60_000,
                    justid=True,
                )
                await worker.worker.wait_idle(trio.current_time() + 20)
                fenced = worker.worker.fenced
                session.close()
            entries = await redis_events(url, sid)

    assert fenced == 0
    assert isinstance(entries[-1], Result)
    assert entries[-1].final
    assert not any(e.kind == "warning" and e.code == "session_moved" for e in entries)


async def redis_events(url: str, sid: str) -> list[Any]:
    async with coredis.Redis.from_url(url, decode_responses=True) as redis:
        entries = await redis.xrange(RedisKeys().events(sid))
    return stored_events(entries)
