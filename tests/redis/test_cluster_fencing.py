"""Fencing (``protocol/cluster/records.py`` rule 7), in one process with fake CLIs: a worker whose
Redis traffic stops for longer than ``dead_after`` (what Redis sees of a paused process) loses
its session to another worker; when its traffic flows again, every write it had queued or
makes is refused, it stops its CLI, acknowledges nothing, and the client's stream is exact."""

from __future__ import annotations

import coredis
import trio
from cluster_kit import TOKEN, open_gateway, open_worker, pause_proxy

from claude_trio import ExecuteParams
from claude_trio.client import ClientConfig, connect_gateway
from claude_trio.protocol.cluster.keys import RedisKeys
from claude_trio.protocol.cluster.records import (
    SessionRecord,
    entry_texts,
    is_final,
    stored_events,
)
from claude_trio.protocol.session.events import Event, Result
from claude_trio.protocol.session.lifecycle import Accepted
from claude_trio.testing import FakeCLI, FakeTurn, RedisServer

CLIENT = ClientConfig(backoff_base=0.05, backoff_max=0.5, close_timeout=2.0)
KEYS = RedisKeys()


async def test_a_paused_worker_is_fenced_when_it_resumes(redis_server: RedisServer) -> None:
    """A push sent while the owner is paused waits in its command stream; the owner, resumed
    after the move, refuses it as fenced and the gateway sends it to the new owner."""

    async def stuck(turn: FakeTurn) -> None:
        await turn.text("partial answer ")
        await turn.sleep(60)  # still in its turn when its worker resumes
        await turn.text("never")

    async def heir_turn(turn: FakeTurn) -> None:
        await turn.sleep(1.0)
        await turn.text(f"answered {turn.messages[-1].text}")

    slow_cli, heir_cli = FakeCLI(stuck), FakeCLI(heir_turn)
    url = redis_server.url
    pushed: list[object] = []
    with trio.fail_after(40):
        async with (
            coredis.Redis.from_url(url, decode_responses=True) as redis,
            pause_proxy(redis_server.port) as proxy,
            open_gateway(url, command_timeout=20) as (_fleet, port),
            connect_gateway(f"ws://127.0.0.1:{port}/", token=TOKEN, config=CLIENT) as client,
            open_worker(proxy.url, slow_cli) as slow,
            trio.open_nursery() as nursery,
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

            async def push() -> None:
                pushed.append(await session.push("second"))

            nursery.start_soon(push)  # to the slow worker: it waits in its command stream
            async with open_worker(url, heir_cli) as heir:
                async for event in session.events:
                    events.append(event)
                    if event.kind == "warning" and event.code == "session_moved":
                        proxy.resume()  # the slow worker goes on, past dead_after
                # Until the slow worker found out and stopped (its own abort at the
                # deadline never comes: fail_after is sooner).
                await slow.worker.wait_idle(trio.current_time() + 600)
                await heir.worker.wait_idle(trio.current_time() + 600)
                moved = SessionRecord.from_fields(
                    await redis.hgetall(KEYS.session(session.id))
                )
                entries = await redis.xrange(KEYS.events(session.id))
                pending = await redis.xpending(KEYS.jobs, KEYS.workers_group)
                slow_stats = slow.worker.statistics()
                heir_stats = heir.worker.statistics()

    whole = stored_events(entries)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events == whole  # the client's stream is exactly what was stored
    finals = [e for e in whole if is_final(e)]
    assert finals == [whole[-1]]
    # The push reached the new owner once, through the fenced one's refusal.
    assert [type(p) for p in pushed] == [Accepted]
    results = [e.text for e in whole if isinstance(e, Result)]
    assert results == ["answered first", "answered second"]
    assert "never" not in "".join(getattr(e, "text", "") or "" for e in whole)
    (move,) = [e for e in whole if e.kind == "warning" and e.code == "session_moved"]
    assert f"from worker {slow.worker.id} to worker {heir.worker.id}" in move.message
    # Each entry names the token that stored it: the first owner's before the move, the
    # heir's from it on (nothing stored by the slow worker once it was fenced).
    tokens = [
        entry.field_values["t"]
        for entry in entries
        for _ in entry_texts(entry.identifier, entry.field_values)
    ]
    at = whole.index(move)
    assert set(tokens[:at]) == {str(before.epoch)}
    assert set(tokens[at:]) == {str(moved.epoch)}
    assert moved.epoch == before.epoch + 1
    assert moved.worker == heir.worker.id
    # The slow worker stopped its CLI (interrupted, then closed) and acknowledged nothing.
    assert slow_stats.fenced == 1
    assert slow_stats.acknowledged == 0
    assert slow_stats.running == 0
    assert not slow_cli.transport.process_alive
    assert slow_cli.transport.interrupts >= 1
    assert heir_stats.acknowledged == 1
    assert heir.worker.acknowledged_twice == 0
    assert pending.pending == 0
