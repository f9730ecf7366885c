"""A reply and the frames right behind it, read back to back: what the reply sets up (the
session an ``open`` starts, the follow an ``attach`` starts) must see those frames. The
client's reader is driven frame by frame here, with no scheduling point in between."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from claude_trio import ExecuteParams, Result, TextDelta
from claude_trio.client import ClientConfig, GatewayClient
from claude_trio.protocol.fanout.wire import (
    EventFrame,
    Frame,
    OpenedFrame,
    ReplyFrame,
    SessionInfo,
    SessionsFrame,
)
from claude_trio.protocol.session.events import Event
from claude_trio.protocol.session.usage import Usage


class _Connection:
    def __init__(self) -> None:
        self.pending: dict[str, Any] = {}


def stream(session: str) -> list[Event]:
    usage = Usage(output_tokens=2)
    return [
        TextDelta(text="a", seq=1, turn=1),
        TextDelta(text="b", seq=2, turn=1),
        Result(
            subtype="success",
            is_error=False,
            text="ab",
            seq=3,
            turn=1,
            final=True,
            session_id="cli-1",
            usage=usage,
            execution_usage=usage,
            session_usage=usage,
        ),
    ]


async def take_request(client: GatewayClient, conn: _Connection) -> str:
    """The op the caller submitted (there is no connection: it waits in the queue)."""
    await trio.testing.wait_all_tasks_blocked()  # the caller waits for its reply
    pending = client._waiting.popleft()
    conn.pending[pending.op.id] = pending
    return str(pending.op.id)


def read(client: GatewayClient, conn: _Connection, *frames: Frame) -> None:
    for frame in frames:  # back to back, as one network read delivers them
        client._dispatch(conn, frame)  # type: ignore[arg-type]


async def test_the_first_events_right_behind_opened_reach_the_session() -> None:
    client = GatewayClient("ws://127.0.0.1:1/", [], ClientConfig())
    conn = _Connection()
    opened: list[Any] = []
    async with trio.open_nursery() as nursery:

        async def open_() -> None:
            opened.append(await client.open(ExecuteParams(prompt="hi")))

        nursery.start_soon(open_)
        op_id = await take_request(client, conn)
        read(
            client,
            conn,
            OpenedFrame(id=op_id, session="s1"),
            *(EventFrame(session="s1", event=e) for e in stream("s1")),
        )
    [session] = opened
    with trio.fail_after(5):
        seen = [event.seq async for event in session.events]
    assert seen == [1, 2, 3]


async def test_the_replay_right_behind_the_attach_reply_reaches_the_session() -> None:
    client = GatewayClient("ws://127.0.0.1:1/", [], ClientConfig())
    conn = _Connection()
    attached: list[Any] = []
    info = SessionInfo(
        session="s1",
        label=None,
        owner=None,
        state="ended",
        executions=1,
        first_seq=1,
        last_seq=3,
        usage=Usage(),
        created_at=0.0,
        ended_at=1.0,
    )
    async with trio.open_nursery() as nursery:

        async def attach() -> None:
            attached.append(await client.attach("s1", last_seq=0))

        nursery.start_soon(attach)
        read(client, conn, SessionsFrame(id=await take_request(client, conn), sessions=(info,)))
        op_id = await take_request(client, conn)
        read(
            client,
            conn,
            ReplyFrame(id=op_id, ok=True),
            *(EventFrame(session="s1", event=e) for e in stream("s1")),
        )
    [session] = attached
    with trio.fail_after(5):
        seen = [event.seq async for event in session.events]
    assert seen == [1, 2, 3]
