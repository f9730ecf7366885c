"""The gateway's hello, list and continue ops, and principals named by tokens, over real
sockets on 127.0.0.1 with FakeCLI-backed fleet sessions (real time, short, under fail_after)."""

from __future__ import annotations

from functools import partial

import pytest
import trio
from gateway_kit import Client, bearer, client, gateway, is_final_result, say, text_of
from trio_websocket import ConnectionRejected, open_websocket_url

from claude_trio import ExecuteParams
from claude_trio.actors.fanout import gateway_connection
from claude_trio.actors.fanout.gateway import GatewayOwner
from claude_trio.protocol.fanout.remote import GatewayLimits, Principal
from claude_trio.protocol.fanout.wire import (
    OP_NAMES,
    ContinuedFrame,
    ErrorFrame,
    EventFrame,
    Frame,
    HelloFrame,
    OpenedFrame,
    ReplyFrame,
    SessionsFrame,
)
from claude_trio.protocol.session.events import Event, Result, TextDelta, TurnStarted
from claude_trio.testing import FakeCLI, FakeTurn

ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef00"
ROOT = "root-token-0123456789abcdef0"
TOKENS = {
    ALICE: Principal(name="alice"),
    BOB: Principal(name="bob"),
    ROOT: Principal(name="ops", admin=True),
}


async def echo(turn: FakeTurn) -> None:
    await turn.text(f"you said: {turn.prompt}", chunk=4)


def events_of(frames: list[Frame]) -> list[Event]:
    return [f.event for f in frames if isinstance(f, EventFrame)]


async def list_sessions(c: Client, op_id: str = "l") -> SessionsFrame:
    await c.send("list", id=op_id)
    frames = await c.receive_until(lambda f: isinstance(f, SessionsFrame))
    listing = frames[-1]
    assert isinstance(listing, SessionsFrame)
    return listing


async def test_hello_says_who_the_server_is_who_you_are_and_what_it_allows() -> None:
    limits = GatewayLimits(max_sessions_per_client=5, ping_timeout=7.0)
    with trio.fail_after(10):
        async with (
            gateway(FakeCLI(), tokens=TOKENS, limits=limits, fleet_options={"max_live": 3}) as (
                _,
                port,
            ),
            client(port, extra_headers=bearer(ALICE)) as c,
        ):
            await c.send("hello", id="h")
            hello = await c.receive()
    assert isinstance(hello, HelloFrame)
    assert hello.id == "h"
    assert hello.server.startswith("claude-trio ")
    assert (hello.protocol, hello.principal, hello.admin) == (1, "alice", False)
    assert hello.ops == OP_NAMES
    assert {"continue", "list", "hello"} <= set(hello.ops)
    assert hello.capabilities["mid_turn_push"] is True
    assert hello.capabilities["resume"] is True
    assert hello.limits["max_sessions_per_client"] == 5
    assert hello.limits["ping_timeout"] == 7.0
    assert hello.limits["max_live"] == 3
    assert hello.limits["max_message_size"] == 64 * 1024
    # the fleet's governor (on by default), its figures in wall-clock time
    assert hello.governor is not None
    # (the default governor starts at two turns at once: slow start raises it from there)
    assert (hello.governor.limit, hello.governor.max_live, hello.governor.paused) == (2, 3, False)
    assert hello.policy == {
        "remote_tools": "read-only",
        "cwd_root_set": False,
        "allow_cwd": False,
        "allow_env": False,
    }


async def test_a_principal_cannot_see_or_touch_another_principals_sessions() -> None:
    hold = trio.Event()

    async def waits(turn: FakeTurn) -> None:
        await turn.text("working")
        await hold.wait()
        await turn.text(" done")

    with trio.fail_after(10):
        async with (
            gateway(FakeCLI(waits), tokens=TOKENS) as (fleet, port),
            client(port, source="127.0.5.1", extra_headers=bearer(ALICE)) as alice,
            client(port, source="127.0.5.2", extra_headers=bearer(BOB)) as bob,
            client(port, source="127.0.5.3", extra_headers=bearer(ROOT)) as root,
        ):
            await alice.send("open", id="o", params={"prompt": "mine"}, label="alice's job")
            opened = await alice.receive()
            assert isinstance(opened, OpenedFrame)
            mine = opened.session
            assert fleet.get_nowait(mine).owner == GatewayOwner("alice", "127.0.5.1")

            # Every op on alice's session gets bob exactly what an id nobody knows gets.
            ops = [
                ("attach", {"last_seq": None}),
                ("push", {"text": "hi"}),
                ("answer", {"request": "r", "answer": "x"}),
                ("abort", {}),
                ("continue", {"prompt": "again"}),
                ("detach", {}),
            ]
            for op, fields in ops:
                for session in (mine, "no-such-session"):
                    await bob.send(op, id=op, session=session, **fields)
                    got = await bob.receive()
                    if op == "detach":  # detach only knows what this connection follows
                        assert got == ReplyFrame(id="detach", ok=False, reason="not attached")
                        continue
                    assert isinstance(got, ErrorFrame), (op, got)
                    assert got.code == "unknown_session"
                    assert got.message == (
                        f"unknown session {session!r} (never opened, or forgotten)"
                    )
            assert (await list_sessions(bob)).sessions == ()
            assert not fleet.get_nowait(mine).ended  # bob's abort did nothing

            # alice sees hers; the admin sees everyone's and may follow it.
            (listed,) = (await list_sessions(alice)).sessions
            assert (listed.session, listed.owner, listed.label) == (mine, "alice", "alice's job")
            await bob.send("open", id="ob", params={"prompt": "bob's"})
            theirs = await bob.receive_until(lambda f: isinstance(f, OpenedFrame))
            bobs = theirs[-1]
            assert isinstance(bobs, OpenedFrame)
            everyone = await list_sessions(root)
            assert [(s.session, s.owner) for s in everyone.sessions] == [
                (mine, "alice"),
                (bobs.session, "bob"),
            ]
            await root.send("attach", id="a", session=mine, last_seq=None)
            got = await root.receive_until(
                lambda f: isinstance(f, EventFrame) and isinstance(f.event, TextDelta)
            )
            assert ReplyFrame(id="a", ok=True) in got
            assert text_of(events_of(got)) == "working"
            hold.set()
            done = await root.receive_until(
                lambda f: is_final_result(f) and f.session == mine  # type: ignore[attr-defined]
            )
            assert text_of([e for e in events_of(done)]).endswith(" done")


async def test_an_unknown_token_is_refused_and_names_no_principal() -> None:
    with trio.fail_after(10):
        async with gateway(FakeCLI(), tokens=TOKENS) as (_, port):
            with pytest.raises(ConnectionRejected) as refused:
                async with open_websocket_url(
                    f"ws://127.0.0.1:{port}/", extra_headers=bearer("x" * 30)
                ):
                    pass  # pragma: no cover
    assert refused.value.status_code == 401
    assert refused.value.body is not None
    assert b"alice" not in refused.value.body
    assert ALICE.encode() not in refused.value.body


async def test_list_shows_state_seqs_usage_and_times() -> None:
    with trio.fail_after(10):
        async with (
            gateway(FakeCLI(partial(say, "hello there"))) as (_, port),
            client(port) as c,
        ):
            session = await c.open(ExecuteParams(prompt="hi"))
            events = await c.events_until_final()
            (info,) = (await list_sessions(c)).sessions
    result = events[-1]
    assert isinstance(result, Result)
    assert info.session == session
    assert (info.state, info.executions, info.first_seq, info.last_seq) == (
        "ended",
        1,
        1,
        result.seq,
    )
    assert info.usage == result.usage
    assert info.ended_at is not None
    assert info.created_at <= info.ended_at
    assert info.owner == "default"
    assert info.label is None


async def test_continue_runs_the_next_execution_and_its_events_follow_on_the_connection() -> None:
    fake = FakeCLI(echo)
    with trio.fail_after(10):
        async with gateway(fake) as (fleet, port), client(port) as c:
            session = await c.open(ExecuteParams(prompt="one"))
            first = await c.events_until_final()
            await fleet.get_nowait(session).wait_closed()
            await c.send("continue", id="c1", session=session, prompt="two")
            continued = await c.receive()
            assert continued == ContinuedFrame(
                id="c1", session=session, first_seq=first[-1].seq + 1
            )
            second = await c.events_until_final()
            # continuing a session that runs is refused, with what to do instead
            await fleet.get_nowait(session).wait_closed()
            await c.send("continue", id="c2", session=session, prompt="three")
            assert isinstance(await c.receive(), ContinuedFrame)
            await c.send("continue", id="c3", session=session, prompt="four")
            busy = await c.receive_until(lambda f: isinstance(f, ErrorFrame) and f.id == "c3")
            third = [*events_of(busy), *await c.events_until_final()]
            (info,) = (await list_sessions(c)).sessions
    error = busy[-1]
    assert isinstance(error, ErrorFrame)
    assert error.code == "cannot_continue"
    assert "still running" in error.message
    assert text_of(first) == "you said: one"
    assert text_of(second) == "you said: two"
    assert text_of(third) == "you said: three"
    seqs = [e.seq for e in first + second + third]
    assert seqs == list(range(1, len(seqs) + 1))
    assert second[0].kind == "adapter_ready"  # a new execution, with its own CLI
    assert [e.turn for e in second if isinstance(e, TurnStarted)] == [1]
    assert [t.options.resume for t in fake.transports] == [
        None,
        fake.transports[0].session_id,
        fake.transports[1].session_id,
    ]
    assert (info.executions, info.first_seq, info.last_seq) == (3, third[0].seq, third[-1].seq)


async def test_a_connection_still_reading_the_old_execution_follows_the_continued_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The first execution writes about 6 MB of frames to a client with a 4 KiB receive
    # buffer that reads nothing (more than the kernel's buffers hold), so when the session
    # ends and the client continues it, the connection's subscription still holds the end of
    # the first execution: the writer sends all of it, then follows the next execution on
    # the same connection, with no gap and no duplicate.
    followed: list[bool] = []
    real = gateway_connection._Client._follow_next_execution

    def spy(self: gateway_connection._Client, attached: gateway_connection._Attached) -> bool:
        followed.append(real(self, attached))
        return followed[-1]

    monkeypatch.setattr(gateway_connection._Client, "_follow_next_execution", spy)
    big = "x" * 30_000

    async def script(turn: FakeTurn) -> None:
        if turn.prompt == "one":
            for _ in range(50):
                await turn.text(big)
        else:
            await turn.text("and two")

    fake = FakeCLI(script)
    limits = GatewayLimits(client_queue_bytes=2**26)
    with trio.fail_after(20):
        async with (
            gateway(fake, limits=limits, fleet_options={"max_buffer_size": 2**23}) as (
                fleet,
                port,
            ),
            client(port, rcvbuf=4096, max_message_size=2**23) as c,
        ):
            session_id = await c.open(ExecuteParams(prompt="one"))
            session = fleet.get_nowait(session_id)
            await session.wait_closed()
            await c.send("continue", id="c", session=session_id, prompt="two")
            frames = await c.receive_until(
                lambda f: is_final_result(f) and f.event.seq >= session.first_seq  # type: ignore[attr-defined]
            )
    assert followed == [True, False]  # followed into the next execution, then its end
    assert ContinuedFrame(id="c", session=session_id, first_seq=session.first_seq) in frames
    events = events_of(frames)
    assert [e.seq for e in events] == list(range(1, session.last_seq + 1))
    assert text_of(events) == big * 50 + "and two"
