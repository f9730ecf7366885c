"""Fencing (``protocol/cluster.py`` rule 7), in one process with fake CLIs: a worker whose
Redis traffic stops for longer than ``dead_after`` (what Redis sees of a paused process) loses
its session to another worker; when its traffic flows again, every write it had queued or
makes is refused, it stops its CLI, acknowledges nothing, and the client's stream is exact."""

from __future__ import annotations

import coredis
import trio
from cluster_kit import TOKEN, open_gateway, open_worker, pause_proxy

from claude_trio import ExecuteParams
from claude_trio.client import ClientConfig, connect_gateway
from claude_trio.protocol.cluster import SessionRecord, decode_event
from claude_trio.protocol.events import Event, Result
from claude_trio.protocol.lifecycle import Accepted
from claude_trio.protocol.redis_keys import RedisKeys
from claude_trio.testing import FakeCLI, FakeTurn, RedisServer

CLIENT = ClientConfig(backoff_base=0.05, backoff_max=0.5, close_timeout=2.0)
KEYS = RedisKeys()


async def test_a_paused_worker_is_fenced_when_it_resumes(redis_server: RedisServer) -> None:
    async def stuck(turn: FakeTurn) -> None:
        await turn.text("partial answer ")
        await turn.sleep(60)  # still in its turn when its worker resumes
        await turn.text("never")

    async def quick(turn: FakeTurn) -> None:
        await turn.sleep(0.1)
        await turn.text(f"answered {turn.messages[-1].text}")

    slow_cli, heir_cli = FakeCLI(stuck), FakeCLI(quick)
    url = redis_server.url
    with trio.fail_after(40):
        async with (
            coredis.Redis.from_url(url, decode_responses=True) as redis,
            pause_proxy(redis_server.port) as proxy,
            open_gateway(url) as (_fleet, port),
            connect_gateway(f"ws://127.0.0.1:{port}/", token=TOKEN, config=CLIENT) as client,
            open_worker(proxy.url, slow_cli) as slow,
        ):
            session = await client.open(ExecuteParams(prompt="first"))
            events: list[Event] = []
            async for event in session.events:
                events.append(event)
                if event.kind == "text_delta":
                    break
            before = SessionRecord.from_fields(await redis.hgetall(KEYS.session(session.id)))
            assert before.worker == slow.worker.id
            proxy.pause()  # the slow worker's Redis traffic stops; its CLI goes on
            async with open_worker(url, heir_cli) as heir:
                async for event in session.events:
                    events.append(event)
                    if event.kind == "warning" and event.code == "session_moved":
                        # A push now reaches the new owner (the record names it).
                        pushed = await session.push("second")
                        assert isinstance(pushed, Accepted), pushed
                await heir.worker.wait_idle(trio.current_time() + 10)
                moved = SessionRecord.from_fields(
                    await redis.hgetall(KEYS.session(session.id))
                )
                entries = await redis.xrange(KEYS.events(session.id))
                proxy.resume()
                # Until the slow worker found out and stopped (its own abort at the
                # deadline never comes: fail_after is sooner).
                await slow.worker.wait_idle(trio.current_time() + 600)
                slow_cli_stopped = not slow_cli.transport.process_alive
                interrupts = slow_cli.transport.interrupts
                # Whatever the slow worker had queued or wrote since has been refused.
                after = await redis.xrange(KEYS.events(session.id))
                pending = await redis.xpending(KEYS.jobs, KEYS.workers_group)
                slow_stats = slow.worker.statistics()
                heir_stats = heir.worker.statistics()

    whole = [decode_event(e.field_values) for e in entries]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events == whole  # the client's stream is exactly what was stored
    finals = [e for e in whole if isinstance(e, Result) and e.final]
    assert len(finals) == 1
    assert finals[0] == whole[-1]
    assert finals[0].text == "answered second"
    assert "never" not in "".join(getattr(e, "text", "") or "" for e in whole)
    (move,) = [e for e in whole if e.kind == "warning" and e.code == "session_moved"]
    assert f"from worker {slow.worker.id} to worker {heir.worker.id}" in move.message
    # The stream did not change once the slow worker resumed, and each entry names the token
    # that stored it: the first owner's before the move, the heir's from it on.
    assert after == entries
    tokens = [entry.field_values["t"] for entry in entries]
    at = whole.index(move)
    assert set(tokens[:at]) == {str(before.epoch)}
    assert set(tokens[at:]) == {str(moved.epoch)}
    assert moved.epoch == before.epoch + 1
    assert moved.worker == heir.worker.id
    # The slow worker stopped its CLI (interrupted, then closed) and acknowledged nothing.
    assert slow_stats.fenced == 1
    assert slow_stats.acknowledged == 0
    assert slow_stats.running == 0
    assert slow_cli_stopped
    assert interrupts >= 1
    assert heir_stats.acknowledged == 1
    assert heir.worker.acknowledged_twice == 0
    assert pending.pending == 0
