"""A cluster as a user runs it: one ``redis-server``, three ``claude-trio worker --offline``
processes (the real CLI against the built-in offline model) and two ``claude-trio serve
--redis`` processes on 127.0.0.1, driven with the client.

It runs on one ``redis-server`` and on a three-master Redis Cluster. A batch of 30 sessions
is spread over the workers; one worker is killed with SIGKILL while a
session it runs is in a turn, right after a push to it was accepted: that session finishes on
another worker, its stream read through the *other* gateway is exact apart from the declared
move event, the push is delivered, every job is acknowledged exactly once, nothing hangs.
"""

from __future__ import annotations

import json
import signal
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import coredis
import psutil
import pytest
import trio

from claude_trio import ExecuteParams
from claude_trio.client import ClientConfig, RemoteSession, connect_gateway
from claude_trio.errors import RemoteOpError
from claude_trio.protocol.cluster.keys import RedisKeys
from claude_trio.protocol.cluster.records import SessionRecord, is_final, stored_events
from claude_trio.protocol.session.events import Event, Result
from claude_trio.protocol.session.lifecycle import Accepted
from claude_trio.redis_url import open_redis
from claude_trio.testing import RedisServer
from claude_trio.testing.processes import (
    CommandProcess,
    command_env,
    open_gateway_process,
    open_worker_process,
)

pytestmark = pytest.mark.e2e

TOKEN = "cluster-e2e-token-0123456789"
CLIENT = ClientConfig(backoff_base=0.05, backoff_max=0.5, close_timeout=2.0)
KEYS = RedisKeys()
ENV = command_env({"CLAUDE_TRIO_TOKEN": TOKEN})


async def records(redis: Any, ids: list[str]) -> dict[str, SessionRecord]:
    out = {}
    for sid in ids:
        fields = await redis.hgetall(KEYS.session(sid))
        if fields:
            out[sid] = SessionRecord.from_fields(fields)
    return out


async def drain(session: RemoteSession, into: list[Event]) -> None:
    async for event in session.events:
        into.append(event)


async def test_a_batch_over_three_workers_survives_a_worker_killed_mid_turn(
    tmp_path: Path, redis_url: str
) -> None:
    url = redis_url
    work = tmp_path / "work"
    work.mkdir()
    async with AsyncExitStack() as stack:
        workers = [
            await stack.enter_async_context(
                open_worker_process(
                    tmp_path,
                    f"w{i}",
                    url,
                    "--offline",
                    "--max-live",
                    "2",
                    "--drain-grace",
                    "30",
                    "--log-json",
                    env=ENV,
                )
            )
            for i in range(3)
        ]
        gateways = [
            await stack.enter_async_context(
                open_gateway_process(
                    tmp_path, f"g{i}", url, "--cwd-root", str(work), "--log-json", env=ENV
                )
            )
            for i in range(2)
        ]
        urls = [g.url for g in gateways]
        redis = await stack.enter_async_context(open_redis(url))
        one = await stack.enter_async_context(connect_gateway(urls[0], token=TOKEN, config=CLIENT))
        two = await stack.enter_async_context(connect_gateway(urls[1], token=TOKEN, config=CLIENT))

        with trio.fail_after(150):
            sessions = []
            for i in range(30):
                while True:  # one client may have 8 sessions waiting for a slot
                    try:
                        sessions.append(await one.open(ExecuteParams(prompt=f"question {i}")))
                        break
                    except RemoteOpError as exc:
                        if "limit_reached" not in str(exc):
                            raise
                        await trio.sleep(0.1)
            ids = [s.id for s in sessions]
            streams: dict[str, list[Event]] = {sid: [] for sid in ids}

            # A session live on w0, in a turn, with a push accepted: then w0 dies.
            victim: RemoteSession | None = None
            while victim is None:
                for sid, record in (await records(redis, ids)).items():
                    if record.worker == "w0" and record.state == "live":
                        session = sessions[ids.index(sid)]
                        async for event in session.events:
                            streams[sid].append(event)
                            if event.kind == "turn_started":
                                break
                        pushed = await session.push("also remember 42")
                        if isinstance(pushed, Accepted):
                            victim = session
                            break
                else:
                    await trio.sleep(0.05)
            # SIGKILL, and its CLIs, orphaned: not this test's to leave behind.
            children_gone = await workers[0].kill()

            # The victim's stream, read on through the other gateway.
            last = streams[victim.id][-1].seq  # the last event this client took
            victim.close()
            rest: list[Event] = []
            await drain(await two.attach(victim.id, last_seq=last), rest)
            whole: list[Event] = []
            async with connect_gateway(urls[1], token=TOKEN, config=CLIENT) as fresh:
                await drain(await fresh.attach(victim.id, last_seq=0), whole)

            async with trio.open_nursery() as nursery:
                for session in sessions:
                    if session is not victim:
                        nursery.start_soon(drain, session, streams[session.id])

            done = await records(redis, ids)
            pending = await redis.xpending(KEYS.jobs, KEYS.workers_group)

    assert children_gone
    first = streams[victim.id]
    shown = [(e.seq, e.kind, getattr(e, "message", None), getattr(e, "text", None)) for e in whole]
    assert [e.seq for e in whole] == list(range(1, len(whole) + 1))
    assert first + rest == whole  # exact: nothing lost, nothing twice, in order
    moved = [e for e in whole if e.kind == "warning" and e.code == "session_moved"]
    assert len(moved) == 1, shown
    assert "from worker w0 to worker w" in moved[0].message
    results = [e for e in whole if isinstance(e, Result)]
    assert results[-1].final
    assert not results[-1].is_error, repr(results[-1])
    assert any("also remember 42" in (r.text or "") for r in results), [r.text for r in results]
    for sid in ids:
        if sid == victim.id:
            continue
        final = streams[sid][-1]
        assert isinstance(final, Result), final
        assert final.final
        assert not final.is_error
    assert {r.state for r in done.values()} == {"ended"}
    ran_on = {r.worker for r in done.values()}
    assert ran_on >= {"w1", "w2"}
    assert pending.pending == 0  # every job acknowledged
    for w in workers[1:]:
        log = w.stderr_path.read_text()
        assert "acknowledged already" not in log
    ended_lines = sum(
        json.loads(line).get("logger") == "claude_trio.cli.worker"
        and json.loads(line).get("event") == "ended"
        for w in workers
        for line in w.stderr_path.read_text().splitlines()
        if line.startswith("{")
    )
    # One end per execution, the killed worker's unfinished one excepted.
    assert ended_lines == 30
    # The test's Redis keeps nothing on disk: every worker said so when it started.
    assert all(log_events(w, "no_persistence") for w in workers)


def log_events(node_: CommandProcess, event: str) -> list[dict[str, object]]:
    return node_.log_events(event, "claude_trio.cli.worker")


async def test_a_worker_paused_past_dead_after_is_fenced_when_it_resumes(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """w0 is stopped (SIGSTOP) in a turn for longer than ``--dead-after``: w1 takes the
    session over and finishes it; then w0 goes on (SIGCONT): its first write is refused, it
    stops and reaps its CLI, stores nothing, acknowledges nothing. The client's stream through
    the gateway is exact apart from the declared move event, with one final event."""
    url = redis_server.url
    work = tmp_path / "work"
    work.mkdir()
    worker_argv = ("--offline", "--max-live", "1", "--dead-after", "2", "--log-json")
    async with AsyncExitStack() as stack:
        w0 = await stack.enter_async_context(
            open_worker_process(tmp_path, "w0", url, *worker_argv, env=ENV)
        )
        gateway = await stack.enter_async_context(
            open_gateway_process(
                tmp_path, "g0", url, "--cwd-root", str(work), "--log-json", env=ENV
            )
        )
        gateway_url = gateway.url
        redis = await stack.enter_async_context(coredis.Redis.from_url(url, decode_responses=True))
        client = await stack.enter_async_context(
            connect_gateway(gateway_url, token=TOKEN, config=CLIENT)
        )
        with trio.fail_after(50):
            session = await client.open(ExecuteParams(prompt="count to three"))
            events: list[Event] = []
            async for event in session.events:
                events.append(event)
                if event.kind == "turn_started":
                    break  # w0 stops now: its CLI's turn has (at least) a model request ahead
            w0_clis = psutil.Process(w0.process.pid).children()
            w0.process.send_signal(signal.SIGSTOP)
            try:
                w1 = await stack.enter_async_context(
                    open_worker_process(tmp_path, "w1", url, *worker_argv, env=ENV)
                )
                async for event in session.events:
                    events.append(event)
                moved = SessionRecord.from_fields(await redis.hgetall(KEYS.session(session.id)))
                entries = await redis.xrange(KEYS.events(session.id))
                # w1 acknowledges the job after it stored the final event, which the client
                # may read first: wait (bounded) for the acknowledgement.
                for _ in range(250):
                    pending = await redis.xpending(KEYS.jobs, KEYS.workers_group)
                    if pending.pending == 0:
                        break
                    await trio.sleep(0.02)
            finally:
                w0.process.send_signal(signal.SIGCONT)
            for _ in range(1000):  # until w0 found out (its next heartbeat or write)
                if log_events(w0, "fenced"):
                    break
                await trio.sleep(0.02)
            for _ in range(1000):  # and its CLI is gone
                if not any(c.is_running() for c in w0_clis):
                    break
                await trio.sleep(0.02)
            left = [
                c.pid
                for c in psutil.Process(w0.process.pid).children(recursive=True)
                if c.status() == psutil.STATUS_ZOMBIE or "claude" in " ".join(c.cmdline())
            ]
            after = await redis.xrange(KEYS.events(session.id))
            pending_after = await redis.xpending(KEYS.jobs, KEYS.workers_group)

    assert w0_clis, "w0 ran a CLI for the session"
    assert not any(c.is_running() for c in w0_clis)
    assert left == []
    assert len(log_events(w0, "fenced")) == 1
    assert log_events(w0, "ended") == []  # w0 acknowledged nothing
    assert len(log_events(w1, "ended")) == 1
    assert "acknowledged already" not in w1.stderr_path.read_text()
    assert pending.pending == 0
    assert pending_after.pending == 0
    # The client's stream: exact, one declared move, one final event, last.
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events == stored_events(entries)
    (move,) = [e for e in events if e.kind == "warning" and e.code == "session_moved"]
    assert "from worker w0 to worker w1" in move.message
    finals = [e for e in events if is_final(e)]
    assert finals == [events[-1]]
    assert isinstance(events[-1], Result)
    assert not events[-1].is_error, "\n".join(repr(e)[:300] for e in events)
    # w0 stored nothing after the move: the stream did not change once it resumed, and every
    # entry from the move on carries w1's token.
    assert after == entries
    at = events.index(move)
    assert moved.worker == "w1"
    assert {e.field_values["t"] for e in entries[at:]} == {str(moved.epoch)}
    assert {e.field_values["t"] for e in entries[:at]} == {str(moved.epoch - 1)}
