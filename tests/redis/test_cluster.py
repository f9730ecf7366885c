"""Workers and gateways on a real Redis, in one process (fake CLIs): what reaches a client
through a gateway is what the worker ran, exactly; commands reach the worker and come back."""

from __future__ import annotations

from collections import Counter

import trio
from cluster_kit import TOKEN, open_gateway, open_worker

from claude_trio import ExecuteParams
from claude_trio.client import ClientConfig, connect_gateway
from claude_trio.protocol.events import Event, Result, TextDelta
from claude_trio.testing import FakeCLI, FakeTurn, RedisServer

CLIENT = ClientConfig(backoff_base=0.05, backoff_max=0.5, close_timeout=2.0)


async def read_all(session: object) -> list[Event]:
    events = []
    async for event in session.events:  # type: ignore[attr-defined]
        events.append(event)
    return events


async def test_sessions_spread_over_workers_and_stream_exactly(
    redis_server: RedisServer,
) -> None:
    async def answer(turn: FakeTurn) -> None:
        await turn.sleep(0.05)
        await turn.text("hello from the cluster")

    fake = FakeCLI(answer)
    url = redis_server.url
    with trio.fail_after(30):
        async with (
            open_worker(url, fake, max_live=2) as one,
            open_worker(url, fake, max_live=2) as two,
            open_gateway(url) as (_fleet, port),
            connect_gateway(f"ws://127.0.0.1:{port}/", token=TOKEN, config=CLIENT) as client,
        ):
            sessions = [await client.open(ExecuteParams(prompt=f"p{i}")) for i in range(6)]
            streams = [await read_all(s) for s in sessions]

    for events in streams:
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        final = events[-1]
        assert isinstance(final, Result)
        assert final.text == "hello from the cluster"
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) in (
            "",
            "hello from the cluster",
        )
    ran = Counter({one.worker.id: one.worker.acknowledged, two.worker.id: two.worker.acknowledged})
    assert sum(ran.values()) == 6
    assert all(count >= 1 for count in ran.values())
