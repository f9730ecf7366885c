"""Hostile clients over real sockets on 127.0.0.1: one client never hurts another, every
resource has a bound, and a remote session is safe by default.

Bounds are asserted in counts and bytes, never in wall time; every test runs under
``trio.fail_after``. Different peers are different loopback addresses (127.0.0.x).
"""

from __future__ import annotations

import json
import logging
import sys
import textwrap
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from gateway_kit import (
    AUTH,
    QUESTION,
    TOKEN,
    RawPeer,
    client,
    gateway,
    is_final_result,
    raw_peer,
    say,
    tcp_from,
    text_of,
)
from wsproto.events import CloseConnection, Ping, RejectConnection, TextMessage

from claude_trio import ExecuteParams
from claude_trio.actors.fanout import gateway_connection
from claude_trio.actors.fanout.fleet import Subscription
from claude_trio.actors.fanout.gateway import GatewayOwner
from claude_trio.protocol.fanout.remote import GatewayLimits
from claude_trio.protocol.fanout.wire import (
    ErrorFrame,
    EventFrame,
    OpenedFrame,
    ReplyFrame,
    decode_frame,
)
from claude_trio.protocol.session.events import (
    Result,
    ToolUse,
    UserInputRequest,
    UserMessage,
)
from claude_trio.testing import FakeCLI, FakeTurn, check_contract


def errors_of(frames: list[Any]) -> list[ErrorFrame]:
    return [f for f in frames if isinstance(f, ErrorFrame)]


# -- one client never hurts another ------------------------------------------------------------


async def test_a_lone_surrogate_is_refused_and_nobody_else_notices() -> None:
    release = trio.Event()

    async def script(turn: FakeTurn) -> None:
        await turn.text("before ")
        await release.wait()
        await turn.text("after")

    with trio.fail_after(10):
        async with gateway(FakeCLI(script)) as (fleet, port):
            async with client(port) as a, client(port) as b:
                sid = await a.open(ExecuteParams(prompt="hi"))
                await b.send("attach", id="b", session=sid, last_seq=None)
                await b.receive_until(lambda f: isinstance(f, ReplyFrame))
                # The escape arrives as JSON text: valid UTF-8 on the wire, not a character.
                await a.ws.send_message(
                    f'{{"op":"push","id":"bad","session":"{sid}","text":"x\\ud800y"}}'
                )
                (error,) = errors_of(await a.receive_until(lambda f: isinstance(f, ErrorFrame)))
                assert error.code == "invalid_field"
                assert error.id == "bad"
                assert "lone UTF-16 surrogate" in error.message
                # A surrogate that did get into the session (pushed from Python) is sent
                # escaped, so it cannot break the replay either.
                pushed = fleet.get_nowait(sid).push_nowait("y\udfffz")
                assert pushed.__class__.__name__ == "Accepted"
                release.set()
                a_events = await a.events_until_final()
                b_events = await b.events_until_final()
            async with client(port) as late:
                await late.send("attach", id="late", session=sid, last_seq=None)
                assert await late.receive() == ReplyFrame(id="late", ok=True)
                replayed = await late.events_until_final()
    check_contract(replayed)  # the whole stream, from the replay buffer
    for events in (a_events, b_events, replayed):
        assert text_of(events).startswith("before ")
        (pushed,) = [e for e in events if isinstance(e, UserMessage)]
        assert pushed.text == "y\udfffz"


async def test_a_deeply_nested_answer_is_refused_and_the_question_still_answered() -> None:
    replies: list[dict[str, Any]] = []

    async def script(turn: FakeTurn) -> None:
        replies.append(await turn.ask_permission("AskUserQuestion", {"questions": [QUESTION]}))
        await turn.text("thanks")

    deep: Any = "red"
    for _ in range(600):
        deep = [deep]
    with trio.fail_after(10):
        async with gateway(FakeCLI(script)) as (_, port), client(port) as c:
            sid = await c.open(ExecuteParams(prompt="hi"))
            frames = await c.receive_until(
                lambda f: isinstance(f, EventFrame) and isinstance(f.event, UserInputRequest)
            )
            request = frames[-1].event  # type: ignore[union-attr]
            await c.send("answer", id="deep", session=sid, request=request.request_id,
                         answer={"Which color?": deep})  # fmt: skip
            (error,) = errors_of(await c.receive_until(lambda f: isinstance(f, ErrorFrame)))
            assert error.code == "invalid_field"
            assert "nested deeper than" in error.message
            await c.send("answer", id="ok", session=sid, request=request.request_id,
                         answer={"Which color?": "red"})  # fmt: skip
            assert (await c.receive_until(lambda f: isinstance(f, ReplyFrame)))[-1] == ReplyFrame(
                id="ok", ok=True
            )
            assert text_of(await c.events_until_final()) == "thanks"
    assert replies[0]["updatedInput"]["answers"] == {"Which color?": "red"}


@pytest.mark.parametrize(
    "params",
    [
        {"prompt": "x", "user_input_timeout": 10**400},
        {"prompt": "x", "architecture_config": {"claude_skillListingBudgetFraction": 10**401}},
        {"prompt": "x", "max_turns": 10**30},
    ],
    ids=["timeout", "fraction", "max_turns"],
)
async def test_huge_integers_get_an_invalid_params_frame(params: dict[str, Any]) -> None:
    with trio.fail_after(10):
        async with gateway(FakeCLI(partial(say, "fine"))) as (_, port), client(port) as c:
            await c.send("open", id="huge", params=params)
            error = await c.receive()
            assert isinstance(error, ErrorFrame)
            assert error.code == "invalid_params"
            assert error.message.startswith("params.")
            await c.open(ExecuteParams(prompt="hi"))  # the connection goes on
            assert text_of(await c.events_until_final()) == "fine"


# -- a client that never reads -----------------------------------------------------------------

BLOB = "y" * (16 * 1024)


async def test_a_client_that_never_reads_is_closed_and_its_queue_freed() -> None:
    # 300 tool calls of 16 KiB (two events each, none mergeable: ~10 MB of frames) while a
    # raw client with a 4 KiB receive buffer reads nothing: once the kernel's buffers are full,
    # its subscription overflows (64 events) and is dropped, and the connection is closed.
    go = trio.Event()

    async def flood(turn: FakeTurn) -> None:
        await go.wait()
        for i in range(300):
            await turn.tool_use("Read", {"blob": BLOB, "n": i})
        await turn.text("done")

    limits = GatewayLimits(close_grace=0.5)
    big = {"max_buffer_size": 64 * 2**20}
    with trio.fail_after(20):
        async with gateway(FakeCLI(flood), client_queue=64, limits=limits,
                           fleet_options=big) as (fleet, port):  # fmt: skip
            fs = await fleet.start(ExecuteParams(prompt="hi"))
            watcher = fs.subscribe_nowait(None, max_queue=10**6, max_bytes=2**40)
            assert isinstance(watcher, Subscription)
            stream = await tcp_from(port, rcvbuf=4096)
            peer = await _raw_attach(stream, fs.id)
            assert fs.subscribers == 2
            go.set()
            with watcher:
                everything = [event async for event in watcher]
            # The session went on at full speed and ended; the silent client was dropped.
            assert fs.ended
            assert fs.subscribers == 0
            # What the silent client finally reads: some frames, then the end of TCP (it was
            # closed while the kernel buffers were full, so no close frame could follow).
            received = 0
            while (got := await peer.next_events()) is not None:
                received += sum(isinstance(e, TextMessage) and e.message_finished for e in got)
            await stream.aclose()
    tools = [e for e in everything if isinstance(e, ToolUse)]
    assert len(tools) == 300
    assert isinstance(everything[-1], Result)
    assert received < len(everything) // 2


async def _raw_attach(stream: trio.SocketStream, session_id: str) -> RawPeer:
    from wsproto import ConnectionType, WSConnection
    from wsproto.events import AcceptConnection, Request

    ws = WSConnection(ConnectionType.CLIENT)
    await stream.send_all(ws.send(Request(host="127.0.0.1", target="/", extra_headers=AUTH)))
    peer = RawPeer(stream=stream, ws=ws)
    while not any(isinstance(e, AcceptConnection) for e in peer.events):
        assert await peer.next_events() is not None
    op = {"op": "attach", "id": "a", "session": session_id, "last_seq": None}
    await stream.send_all(ws.send(TextMessage(data=json.dumps(op))))
    while not any(isinstance(e, TextMessage) for e in peer.events):
        assert await peer.next_events() is not None
    return peer


async def test_a_peer_that_does_not_answer_pings_is_cut_and_one_that_does_stays() -> None:
    limits = GatewayLimits(ping_interval=0.05, ping_timeout=3.0)
    with trio.fail_after(20):
        async with gateway(FakeCLI(), limits=limits) as (_, port):
            alive = await raw_peer(port, source="127.0.0.2")
            silent = await raw_peer(port, source="127.0.0.3")
            assert isinstance(alive, RawPeer)
            assert isinstance(silent, RawPeer)

            async def answer_pings() -> None:
                while (got := await alive.next_events()) is not None:
                    for event in got:
                        if isinstance(event, Ping):
                            await alive.stream.send_all(alive.ws.send(event.response()))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(answer_pings)
                # The silent peer reads (so its socket never fills) but never answers.
                while await silent.next_events() is not None:
                    pass
                nursery.cancel_scope.cancel()
            silent_pings = [e for e in silent.events if isinstance(e, Ping)]
            assert len(silent_pings) >= 1
            assert not any(isinstance(e, CloseConnection) for e in silent.events)
            # The one that answers got a ping every interval meanwhile and is still served.
            alive_pings = [e for e in alive.events if isinstance(e, Ping)]
            assert len(alive_pings) > len(silent_pings)
            op = {"op": "detach", "id": "still-here", "session": "s"}
            await alive.stream.send_all(alive.ws.send(TextMessage(data=json.dumps(op))))
            replies: list[Any] = []
            while not replies:
                got = await alive.next_events()
                assert got is not None
                replies = [e for e in got if isinstance(e, TextMessage)]
            assert decode_frame(replies[0].data) == ReplyFrame(
                id="still-here", ok=False, reason="not attached"
            )
            await alive.stream.aclose()
            await silent.stream.aclose()


# -- connections and handshakes ----------------------------------------------------------------


async def _read_to_eof(stream: trio.SocketStream) -> bytes:
    data = b""
    try:
        while chunk := await stream.receive_some(4096):
            data += chunk
    except trio.BrokenResourceError:
        pass
    return data


async def test_silent_connections_over_the_per_peer_cap_are_shed_and_others_get_in(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    limits = GatewayLimits(max_handshakes_per_peer=3, handshake_timeout=60)
    with trio.fail_after(10):
        async with gateway(FakeCLI(partial(say, "welcome")), limits=limits) as (_, port):
            silent = [await tcp_from(port, "127.0.0.7") for _ in range(3)]
            shed = [await tcp_from(port, "127.0.0.7") for _ in range(7)]
            for stream in shed:
                assert (await _read_to_eof(stream)).startswith(b"HTTP/1.1 503")
                await stream.aclose()
            # Another peer gets in while the 3 silent handshakes still hold their slots.
            async with client(port, source="127.0.0.8") as c:
                await c.open(ExecuteParams(prompt="hi"))
                assert text_of(await c.events_until_final()) == "welcome"
            for stream in silent:
                await stream.aclose()
    shed_lines = [r for r in caplog.records if "shedding" in r.getMessage()]
    assert len(shed_lines) == 1  # one line per cause, not one per connection
    assert "handshakes per peer" in shed_lines[0].getMessage()
    assert not [r for r in caplog.records if r.exc_info]


async def test_the_total_connection_cap_sheds_every_peer_over_it() -> None:
    limits = GatewayLimits(max_connections=3)
    with trio.fail_after(10):
        async with gateway(FakeCLI(), limits=limits) as (_, port):
            held = [await raw_peer(port, source=f"127.0.1.{i}") for i in range(3)]
            assert all(isinstance(p, RawPeer) for p in held)
            extra = await tcp_from(port, "127.0.1.9")
            assert (await _read_to_eof(extra)).startswith(b"HTTP/1.1 503")
            await extra.aclose()
            for peer in held:
                assert isinstance(peer, RawPeer)
                await peer.stream.aclose()


SERVER_SCRIPT = textwrap.dedent(
    """
    import logging, resource, sys
    from functools import partial
    import trio
    from claude_trio import serve_gateway
    from claude_trio.actors.fanout.fleet import open_fleet
    from claude_trio.testing import FakeCLI

    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)

    async def say(turn):
        await turn.text("still served")

    async def main():
        async with open_fleet(transport_factory=FakeCLI(say)) as fleet:
            async with trio.open_nursery() as nursery:
                port = await nursery.start(partial(
                    serve_gateway, fleet, token=sys.argv[1], allowed_origins=None))
                print(port, flush=True)
                await trio.sleep_forever()

    trio.run(main)
    """
)


async def test_300_silent_connects_under_a_256_descriptor_limit_lock_nobody_out(
    tmp_path: Path,
) -> None:
    script = tmp_path / "server.py"
    script.write_text(SERVER_SCRIPT)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            proc = await nursery.start(
                partial(
                    trio.run_process,
                    [sys.executable, str(script), TOKEN],
                    stdout=-1,
                    stderr=-1,
                    check=False,
                )
            )
            assert proc.stdout is not None
            assert proc.stderr is not None
            port = int((await proc.stdout.receive_some(100)).split()[0])
            stderr = bytearray()

            async def collect() -> None:
                assert proc.stderr is not None
                while chunk := await proc.stderr.receive_some(65536):
                    stderr.extend(chunk)

            nursery.start_soon(collect)
            silent = [await tcp_from(port, "127.0.2.1") for _ in range(300)]
            async with client(port, source="127.0.2.2") as c:
                await c.open(ExecuteParams(prompt="hi"))
                assert text_of(await c.events_until_final()) == "still served"
            for stream in silent:
                await stream.aclose()
            proc.terminate()
    log = stderr.decode()
    assert "Traceback" not in log
    assert "accept failed" not in log  # shed before the descriptor limit, never EMFILE
    assert log.count("shedding connections") == 1


@pytest.mark.parametrize("header", [b"authorization", b"origin"])
async def test_duplicate_authorization_or_origin_headers_are_refused(header: bytes) -> None:
    value = f"Bearer {TOKEN}".encode() if header == b"authorization" else b"https://app.example"
    headers = [*AUTH, (header, value)] if header == b"authorization" else [
        *AUTH, (header, value), (header, b"https://evil.example")
    ]  # fmt: skip
    with trio.fail_after(10):
        async with gateway(FakeCLI()) as (_, port):
            refused = await raw_peer(port, headers=headers)
            assert isinstance(refused, RejectConnection)
            assert refused.status_code == 400


# -- sessions per client and fair slots --------------------------------------------------------


async def test_session_caps_per_client_and_fair_slots_between_clients() -> None:
    gates: dict[str, trio.Event] = {}

    async def script(turn: FakeTurn) -> None:
        await gates.setdefault(turn.prompt, trio.Event()).wait()
        await turn.text(turn.prompt)

    fake = FakeCLI(script)
    limits = GatewayLimits(max_sessions_per_client=5, max_waiting_per_client=3)
    with trio.fail_after(10):
        async with (
            gateway(fake, limits=limits, fleet_options={"max_live": 1}) as (fleet, port),
            client(port, source="127.0.3.1") as busy,
            client(port, source="127.0.3.2") as other,
        ):
            for i in range(10):
                await busy.send("open", id=f"b{i}", params={"prompt": f"busy {i}"})
            frames = []
            while len(frames) < 10:
                frame = await busy.receive()
                if not isinstance(frame, EventFrame):
                    frames.append(frame)
            opened = [f.id for f in frames if isinstance(f, OpenedFrame)]
            refused = errors_of(frames)
            assert opened == ["b0", "b1", "b2", "b3"]  # 1 live + 3 waiting
            assert [e.code for e in refused] == ["limit_reached"] * 6
            assert "waiting for a slot" in refused[0].message
            first = await other.open(ExecuteParams(prompt="other 0"))
            stats = fleet.owner_statistics(GatewayOwner("default", "127.0.3.1"))
            assert (stats.live, stats.waiting, stats.active) == (1, 3, 4)
            # Each release lets the next session in: the other client's first session
            # waits behind one of busy's, not behind all three.
            for prompt in ["busy 0", "busy 1", "other 0", "busy 2", "busy 3"]:
                gates.setdefault(prompt, trio.Event()).set()
            await fleet.get_nowait(first).wait_ended()
            for frame in frames:
                if isinstance(frame, OpenedFrame):
                    await fleet.get_nowait(frame.session).wait_ended()
    started = [t.user_messages[0]["message"]["content"] for t in fake.transports]
    assert started == ["busy 0", "busy 1", "other 0", "busy 2", "busy 3"]


# -- replies are never starved by events -------------------------------------------------------


async def test_a_steady_reader_with_a_small_queue_gets_every_reply_and_is_not_closed() -> None:
    text = "abcdefghij" * 300

    async def stream(turn: FakeTurn) -> None:
        await turn.text(text, chunk=1)

    with trio.fail_after(20):
        limits = GatewayLimits(ops_per_second=10_000, ops_burst=1000)
        async with (
            gateway(FakeCLI(stream), client_queue=8, limits=limits) as (_, port),
            client(port) as c,
        ):
            sid = await c.open(ExecuteParams(prompt="hi"))
            for i in range(300):
                await c.send("detach", id=f"d{i}", session=f"nope-{i}")
            frames = await c.receive_until(lambda f: isinstance(f, ReplyFrame) and f.id == "d299")
            if not any(is_final_result(f) for f in frames):
                frames += await c.receive_until(is_final_result)
            replies = [f for f in frames if isinstance(f, ReplyFrame)]
            assert [r.id for r in replies] == [f"d{i}" for i in range(300)]
            events = [f.event for f in frames if isinstance(f, EventFrame)]
            assert text_of(events) == text  # merged when the client lagged, never lost
            await c.send("detach", id="last", session=sid)
            assert await c.receive() == ReplyFrame(id="last", ok=False, reason="not attached")


# -- encode once -------------------------------------------------------------------------------


async def test_each_event_is_encoded_once_per_session_not_once_per_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    encoded: list[int] = []
    real = gateway_connection.remote_entry_frame

    def counting(session: str, entry: Any) -> str:
        encoded.append(entry.seq)
        return real(session, entry)

    monkeypatch.setattr(gateway_connection, "remote_entry_frame", counting)
    release = trio.Event()

    async def script(turn: FakeTurn) -> None:
        await release.wait()
        await turn.text("one two three four", chunk=2)

    with trio.fail_after(10):
        async with gateway(FakeCLI(script)) as (_, port), client(port) as first:
            sid = await first.open(ExecuteParams(prompt="hi"))
            async with trio.open_nursery() as nursery:
                for i in range(5):
                    attached = trio.Event()
                    nursery.start_soon(_attached_client, port, sid, i, attached)
                    await attached.wait()
                release.set()
                events = await first.events_until_final()
    assert len(events) > 10
    assert sorted(encoded) == sorted({e.seq for e in events})  # each seq exactly once


async def _attached_client(port: int, sid: str, i: int, attached: trio.Event) -> None:
    async with client(port, source=f"127.0.4.{i + 1}") as c:
        await c.send("attach", id="a", session=sid, last_seq=None)
        assert await c.receive() == ReplyFrame(id="a", ok=True)
        attached.set()
        await c.events_until_final()


async def test_a_connection_follows_a_bounded_number_of_sessions() -> None:
    release = trio.Event()

    async def script(turn: FakeTurn) -> None:
        await release.wait()

    limits = GatewayLimits(max_attached_per_client=2)
    with trio.fail_after(10):
        async with (
            gateway(FakeCLI(script), limits=limits) as (fleet, port),
            client(port) as c,
        ):
            first = await c.open(ExecuteParams(prompt="one"), op_id="o1")
            await c.open(ExecuteParams(prompt="two"), op_id="o2")
            await c.send("open", id="o3", params={"prompt": "three"})
            refused = await c.receive_until(lambda f: isinstance(f, ErrorFrame))
            assert refused[-1].code == "limit_reached"  # type: ignore[union-attr]
            other = await fleet.start(ExecuteParams(prompt="elsewhere"))
            await c.send("attach", id="a", session=other.id)
            refused = await c.receive_until(lambda f: isinstance(f, ErrorFrame))
            assert refused[-1].code == "limit_reached"  # type: ignore[union-attr]
            assert "detach one first" in refused[-1].message  # type: ignore[union-attr]
            await c.send("detach", id="d", session=first)
            await c.receive_until(lambda f: isinstance(f, ReplyFrame) and f.id == "d")
            await c.send("attach", id="a2", session=other.id)
            got = await c.receive_until(lambda f: isinstance(f, ReplyFrame) and f.id == "a2")
            assert got[-1] == ReplyFrame(id="a2", ok=True)
            release.set()


async def test_a_peer_that_floods_during_the_closing_handshake_is_cut(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # After our close frame, trio-websocket discards what the peer sends until its close
    # frame: no backpressure. A peer that keeps flooding instead is cut after 64 KiB, not read
    # for the whole close grace (a minute here: the test would time out).
    from wsproto.events import BytesMessage

    limits = GatewayLimits(close_grace=60, ops_per_second=1e6, ops_burst=10**6)
    with trio.fail_after(10):
        async with gateway(FakeCLI(), limits=limits) as (_, port):
            peer = await raw_peer(port)
            assert isinstance(peer, RawPeer)
            await peer.stream.send_all(peer.ws.send(BytesMessage(data=b"binary")))  # -> 1002
            chunk = b"".join(
                peer.ws.send(TextMessage(data='{"op":"abort","id":"x","session":"s"}'))
                for _ in range(1000)
            )
            sent = 0
            cut = False
            while not cut:
                try:
                    await peer.stream.send_all(chunk)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    cut = True
                else:
                    sent += len(chunk)
            await peer.stream.aclose()
    assert sent > 16 * 1024
    assert any("flood while being closed" in r.getMessage() for r in caplog.records)
