"""The websocket gateway over real sockets on 127.0.0.1, with FakeCLI-backed fleet sessions.

Real time (autojump cannot drive sockets): every test is short and runs under
``trio.fail_after``. Scripts that must wait for the client block on ``trio.Event`` s the
test sets, never on wall-clock sleeps.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

import pytest
import trio
from gateway_kit import (
    AUTH,
    ORIGIN,
    QUESTION,
    TOKEN,
    Client,
    client,
    drain,
    gateway,
    is_event,
    say,
    text_of,
)
from trio_websocket import (
    ConnectionClosed,
    ConnectionRejected,
    connect_websocket_url,
    open_websocket_url,
)
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, Request

from claude_trio import ExecuteParams, serve_gateway
from claude_trio.actors.fanout.fleet import open_fleet
from claude_trio.protocol.fanout.remote import GatewayLimits
from claude_trio.protocol.fanout.wire import (
    ErrorFrame,
    EventFrame,
    ReplyFrame,
    ResyncRequiredFrame,
)
from claude_trio.protocol.session.events import (
    AssistantMessage,
    Event,
    Result,
    TextDelta,
    ToolUse,
    UserInputRequest,
    UserInputResolved,
)
from claude_trio.testing import FakeCLI, FakeTurn, check_contract

# -- handshake ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "path"),
    [
        ([], "/"),
        ([(b"authorization", b"Bearer not-the-token")], "/"),
        ([(b"authorization", f"Basic {TOKEN}".encode())], "/"),
        ([], "/?token=not-the-token"),
        # The header, when sent, decides alone: a right query token does not rescue it.
        ([(b"authorization", b"Bearer not-the-token")], f"/?token={TOKEN}"),
    ],
    ids=["no-token", "wrong-bearer", "not-bearer", "wrong-query", "wrong-header-right-query"],
)
async def test_missing_or_wrong_token_is_refused_with_401_before_accept(
    headers: list[tuple[bytes, bytes]], path: str
) -> None:
    with trio.fail_after(10):
        async with gateway(FakeCLI()) as (fleet, port):
            with pytest.raises(ConnectionRejected) as refused:
                async with open_websocket_url(
                    f"ws://127.0.0.1:{port}{path}", extra_headers=headers
                ):
                    pass
            assert refused.value.status_code == 401
            assert refused.value.body is not None
            assert b"unauthorized" in refused.value.body
            assert TOKEN.encode() not in refused.value.body
            assert fleet.statistics().live == 0


async def test_query_token_is_accepted_for_browsers() -> None:
    with trio.fail_after(10):
        async with gateway(FakeCLI(partial(say, "via query"))) as (_, port):
            url = f"ws://127.0.0.1:{port}/?token={TOKEN}"
            async with open_websocket_url(url) as ws:
                c = Client(ws)
                await c.open(ExecuteParams(prompt="hi"))
                assert text_of(await c.events_until_final()) == "via query"


async def test_origin_not_allowed_is_refused_with_403() -> None:
    with trio.fail_after(10):
        async with gateway(FakeCLI()) as (_, port):
            with pytest.raises(ConnectionRejected) as refused:
                async with open_websocket_url(
                    f"ws://127.0.0.1:{port}/",
                    extra_headers=[*AUTH, (b"origin", b"https://evil.example")],
                ):
                    pass
            assert refused.value.status_code == 403
            # The allowed origin, and no Origin at all (not a browser), are let in.
            for headers in ([*AUTH, (b"origin", ORIGIN.encode())], AUTH):
                async with client(port, extra_headers=headers) as c:
                    await c.send("abort", id="a1", session="nope")
                    frame = await c.receive()
                    assert isinstance(frame, ErrorFrame)
                    assert frame.code == "unknown_session"


async def test_the_token_never_appears_in_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = "wrong-token-0c9e"
    with trio.fail_after(10):
        async with gateway(FakeCLI()) as (_, port):
            for headers, path in (
                ([(b"authorization", f"Bearer {wrong}".encode())], "/"),
                ([], f"/?token={wrong}"),
                ([], f"/?token={TOKEN}"),
                (AUTH, f"/?token={TOKEN}"),
            ):
                try:
                    async with open_websocket_url(
                        f"ws://127.0.0.1:{port}{path}", extra_headers=headers
                    ) as ws:
                        await ws.send_message("{}")
                        await ws.get_message()
                except ConnectionRejected:
                    pass
    # trio-websocket's *client* logs the URL it connects to at DEBUG ("Connecting to
    # ws://...?token=..."): a client-side choice (one more reason to prefer the header). Every
    # other line - the gateway's, wsproto's, the server side of trio-websocket - is checked.
    records = [
        r.getMessage()
        for r in caplog.records
        if not (r.name == "trio-websocket" and r.getMessage().startswith(("Connecting", "client-")))
    ]
    assert any("refused" in line for line in records)  # the gateway did log
    assert any("connected" in line for line in records)
    assert any(line.startswith("server-") for line in records)
    for secret in (TOKEN, wrong):
        assert not [line for line in records if secret in line]


# -- close codes --------------------------------------------------------------------------------


async def test_oversize_message_closes_with_1009() -> None:
    with trio.fail_after(10):
        async with gateway(FakeCLI(), max_message_size=1000) as (fleet, port):
            async with client(port) as c:
                await c.ws.send_message("x" * 1001)
                with pytest.raises(ConnectionClosed) as closed:
                    await c.receive()
                assert closed.value.reason.code == 1009
            # The server goes on.
            async with client(port) as c:
                await c.send("push", id="p1", session="nope", text="hi")
                assert isinstance(await c.receive(), ErrorFrame)
            assert fleet.statistics().live == 0


async def test_binary_message_closes_with_1002() -> None:
    with trio.fail_after(10):
        async with gateway(FakeCLI()) as (_, port), client(port) as c:
            await c.ws.send_message(b'{"op": "abort"}')
            with pytest.raises(ConnectionClosed) as closed:
                await c.receive()
            assert closed.value.reason.code == 1002
            assert "binary" in (closed.value.reason.reason or "")


def _masked_frame(opcode: int, payload: bytes) -> bytes:
    mask = b"\x01\x02\x03\x04"
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + masked


async def _raw_close_code(port: int, frame: bytes) -> CloseConnection:
    """Handshake with a raw wsproto client, send ``frame`` as is, return the server's close."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        ws = WSConnection(ConnectionType.CLIENT)
        await stream.send_all(
            ws.send(Request(host="127.0.0.1", target="/", extra_headers=AUTH))
        )
        events: list[Any] = []
        while True:
            data = await stream.receive_some(65536)
            ws.receive_data(data or None)
            events.extend(ws.events())
            if any(isinstance(e, AcceptConnection) for e in events):
                break
        await stream.send_all(frame)
        while True:
            data = await stream.receive_some(65536)
            ws.receive_data(data or None)
            for event in ws.events():
                if isinstance(event, CloseConnection):
                    return event


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        (_masked_frame(0x1, b"\xff\xfe{}"), 1007),  # a text frame that is not UTF-8
        (bytes([0x81, 0x02]) + b"{}", 1002),  # an unmasked client frame
        (_masked_frame(0x3, b"{}"), 1002),  # a reserved opcode
    ],
    ids=["invalid-utf8", "unmasked", "reserved-opcode"],
)
async def test_invalid_frames_get_a_close_frame_with_their_code(frame: bytes, code: int) -> None:
    # trio-websocket alone cuts the TCP connection without a close frame here (the client sees
    # 1006); the gateway's _FailingWSConnection sends wsproto's code.
    with trio.fail_after(10):
        async with gateway(FakeCLI()) as (_, port):
            closed = await _raw_close_code(port, frame)
            assert closed.code == code
            assert closed.reason


# -- error frames -------------------------------------------------------------------------------


async def test_bad_messages_get_error_frames_and_the_connection_goes_on() -> None:
    with trio.fail_after(10):
        async with gateway(FakeCLI(partial(say, "fine"))) as (_, port), client(port) as c:
            await c.ws.send_message("{not json")
            await c.send("launch", id="x1")
            await c.send("push", id="x2", session="no-such-session", text="hi")
            await c.send("push", id="x3", session="no-such-session")
            await c.send("open", id="x4", params={"prompt": "hi", "model": 42})
            await c.send("open", id="x5", params={"prompt": "hi", "cwd": "/etc"})
            got = [await c.receive() for _ in range(6)]
            assert all(isinstance(f, ErrorFrame) for f in got), got
            codes = [(f.id, f.code) for f in got]  # type: ignore[union-attr]
            assert codes == [
                (None, "malformed_json"),
                ("x1", "unknown_op"),
                ("x2", "unknown_session"),
                ("x3", "missing_field"),
                ("x4", "invalid_params"),
                ("x5", "forbidden_field"),
            ]
            assert "no-such-session" in got[2].message  # type: ignore[union-attr]
            assert "text" in got[3].message  # type: ignore[union-attr]
            assert "model" in got[4].message  # type: ignore[union-attr]
            # Still usable.
            await c.open(ExecuteParams(prompt="hi"))
            assert text_of(await c.events_until_final()) == "fine"


# -- sessions over the wire ---------------------------------------------------------------------


async def test_open_streams_every_event_to_the_final_result() -> None:
    fake = FakeCLI(partial(say, "hello world"))
    with trio.fail_after(10):
        async with gateway(fake) as (fleet, port):
            async with client(port) as c:
                session_id = await c.open(ExecuteParams(prompt="hi"))
                events = await c.events_until_final()
            await fleet.get_nowait(session_id).wait_ended()
    check_contract(events)
    kinds = [e.kind for e in events]
    assert kinds[:2] == ["adapter_ready", "turn_started"]
    assert kinds[-1] == "result"
    assert text_of(events) == "hello world"
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["hel", "lo ", "wor", "ld"]
    seqs = [e.seq for e in events]
    assert seqs == sorted(set(seqs))
    (message,) = [e for e in events if isinstance(e, AssistantMessage)]
    assert message.message.content[0].text == "hello world"  # type: ignore[union-attr]
    assert fake.transport.user_messages[0]["message"]["content"] == "hi"


async def test_push_and_answer_over_the_wire() -> None:
    replies: list[dict[str, Any]] = []
    release = trio.Event()

    async def first(turn: FakeTurn) -> None:
        replies.append(await turn.ask_permission("AskUserQuestion", {"questions": [QUESTION]}))
        await turn.text("asked")
        await release.wait()  # the push arrives while this turn runs: it becomes turn 2

    async def second(turn: FakeTurn) -> None:
        await turn.text(f"got {turn.prompt}")

    fake = FakeCLI([first, second])
    with trio.fail_after(10):
        async with gateway(fake) as (_, port), client(port) as c:
            session_id = await c.open(ExecuteParams(prompt="hi"))
            frames = await c.receive_until(
                lambda f: isinstance(f, EventFrame) and isinstance(f.event, UserInputRequest)
            )
            request = frames[-1].event  # type: ignore[union-attr]
            assert request.questions[0].question == "Which color?"
            await c.send(
                "answer",
                id="a1",
                session=session_id,
                request=request.request_id,
                answer={"Which color?": "blue"},
            )
            frames = await c.receive_until(lambda f: isinstance(f, ReplyFrame))
            assert frames[-1] == ReplyFrame(id="a1", ok=True)
            # Answering twice is refused with a reason, over the wire.
            await c.send(
                "answer", id="a2", session=session_id, request=request.request_id, answer="red"
            )
            frames = await c.receive_until(lambda f: isinstance(f, ReplyFrame))
            assert frames[-1].ok is False  # type: ignore[union-attr]
            assert frames[-1].reason  # type: ignore[union-attr]
            await c.send("push", id="p1", session=session_id, text="more please")
            frames = await c.receive_until(lambda f: isinstance(f, ReplyFrame))
            pushed = frames[-1]
            assert isinstance(pushed, ReplyFrame)
            assert (pushed.id, pushed.ok, pushed.reason) == ("p1", True, None)
            release.set()
            events = await c.events_until_final()
            # The whole stream, read in pieces around the ops, keeps the contract.
            check_contract(c.received_events(session_id))
            # After the end, a push is rejected with the reason.
            await c.send("push", id="p2", session=session_id, text="too late")
            late = await c.receive_until(lambda f: isinstance(f, ReplyFrame))
            assert late[-1].ok is False  # type: ignore[union-attr]
    (reply,) = replies
    assert reply["updatedInput"]["answers"] == {"Which color?": "blue"}
    all_events = [f.event for f in c.frames if isinstance(f, EventFrame)]
    (resolved,) = [e for e in all_events if isinstance(e, UserInputResolved)]
    assert resolved.outcome == "answered"
    results = [e for e in all_events if isinstance(e, Result)]
    assert [r.final for r in results] == [False, True]
    assert text_of(events).endswith("got more please")
    # the push's reply carries its uuid: the one the result says it consumed
    assert results[1].user_message_uuids == (pushed.uuid,)


ROUNDS = 40
PER_ROUND = 10
BLOB = "x" * (16 * 1024)


async def test_slow_client_is_dropped_while_another_client_of_the_session_gets_every_event() -> (
    None
):
    # Bounded by counts, not by timing: the session sends 400 tool calls of 16 KiB (each a
    # tool_use event and an assistant message: ~13 MB of frames, none of which can merge), in
    # rounds of 10, and starts a round only once `fast` has read the previous one. So `fast`
    # never lags by more than a round (about 30 events, 1 MiB counted) whatever the machine's
    # load, while `slow` reads nothing: the kernel holds at most ~4 MB for it (its receive
    # buffer is 4 KiB), its queue 64 events, and the rest overflows it.
    go = trio.Event()
    rounds = [trio.Event() for _ in range(ROUNDS)]

    async def flood(turn: FakeTurn) -> None:
        await go.wait()
        for r in range(ROUNDS):
            for i in range(PER_ROUND):
                await turn.tool_use("Read", {"blob": BLOB, "n": f"{r}-{i}"})
            await rounds[r].wait()
        await turn.text("done")

    fake = FakeCLI(flood)
    limits = GatewayLimits(client_queue_bytes=16 * 2**20, close_grace=60)
    with trio.fail_after(30):
        big = {"max_buffer_size": 64 * 2**20}
        async with gateway(fake, client_queue=64, limits=limits, fleet_options=big) as (
            fleet,
            port,
        ), client(port) as fast, client(port, rcvbuf=4096) as slow:
            session_id = await fast.open(ExecuteParams(prompt="hi"))
            await slow.send("attach", id="att", session=session_id, last_seq=None)
            assert await slow.receive() == ReplyFrame(id="att", ok=True)
            go.set()  # `slow` reads nothing from now on
            events: list[Event] = []
            tools = 0
            while not (events and isinstance(events[-1], Result) and events[-1].final):
                frame = await fast.receive()
                assert isinstance(frame, EventFrame)
                events.append(frame.event)
                if isinstance(frame.event, ToolUse):
                    tools += 1
                    if tools % PER_ROUND == 0:
                        rounds[tools // PER_ROUND - 1].set()
            # `slow` was dropped on the way (its queue overflowed, nothing left to merge); it
            # now reads what the kernel held for it, then the close frame with the reason.
            with pytest.raises(ConnectionClosed) as closed:
                await drain(slow)
            assert fleet.get_nowait(session_id).ended
    assert closed.value.reason.code == 1008
    assert (closed.value.reason.reason or "").startswith("slow consumer")
    assert tools == ROUNDS * PER_ROUND
    assert [e.input["n"] for e in events if isinstance(e, ToolUse)] == [
        f"{r}-{i}" for r in range(ROUNDS) for i in range(PER_ROUND)
    ]
    seqs = [e.seq for e in events]
    assert seqs == list(range(1, len(seqs) + 1))  # every event, none merged, none missing
    slow_events = [f.event for f in slow.frames if isinstance(f, EventFrame)]
    assert len(slow_events) < len(events) // 2


async def _open_and_read(port: int, params: ExecuteParams, count: int) -> tuple[str, list[Event]]:
    """Open a session, read ``count`` events, disconnect."""
    async with client(port) as c:
        session_id = await c.open(params)
        frames = [(await c.receive_until(is_event))[-1] for _ in range(count)]
    return session_id, [f.event for f in frames]  # type: ignore[union-attr]


async def test_reconnect_with_last_seq_replays_exactly_the_missed_events() -> None:
    release = trio.Event()

    async def script(turn: FakeTurn) -> None:
        await turn.text("before", chunk=2)
        await release.wait()
        await turn.text("after", chunk=2)

    with trio.fail_after(10):
        async with gateway(FakeCLI(script)) as (_, port):
            session_id, seen = await _open_and_read(port, ExecuteParams(prompt="hi"), 2)
            release.set()  # events flow while nobody is connected
            last_seq = seen[-1].seq
            async with client(port) as c:
                await c.send("attach", id="r1", session=session_id, last_seq=last_seq)
                assert await c.receive() == ReplyFrame(id="r1", ok=True)
                rest = await c.events_until_final()
            async with client(port) as c:
                await c.send("attach", id="r2", session=session_id, last_seq=None)
                assert await c.receive() == ReplyFrame(id="r2", ok=True)
                everything = await c.events_until_final()
    assert seen == everything[:2]
    assert rest == everything[2:]
    check_contract(everything)
    assert text_of(everything) == "beforeafter"


async def test_attach_older_than_the_replay_buffer_gets_resync_required() -> None:
    with trio.fail_after(10):
        async with gateway(FakeCLI(partial(say, "a long enough answer")), replay_buffer=3) as (
            _,
            port,
        ):
            async with client(port) as c:
                session_id = await c.open(ExecuteParams(prompt="hi"))
                everything = await c.events_until_final()
            assert len(everything) > 3
            async with client(port) as c:
                await c.send("attach", id="old", session=session_id, last_seq=1)
                resync = await c.receive()
                assert resync == ResyncRequiredFrame(
                    id="old", session=session_id, oldest_seq=everything[-3].seq
                )
                # Still usable; attaching from what the buffer holds works.
                await c.send("attach", id="new", session=session_id, last_seq=None)
                assert await c.receive() == ReplyFrame(id="new", ok=True)
                assert await c.events_until_final() == everything[-3:]
                await c.send("attach", id="bad", session=session_id, last_seq=10_000)
                bad = await c.receive()
                assert isinstance(bad, ErrorFrame)
                assert bad.code == "invalid_field"
                assert "last_seq" in bad.message


async def test_pending_question_is_sent_again_on_attach() -> None:
    replies: list[dict[str, Any]] = []

    async def script(turn: FakeTurn) -> None:
        await turn.text("thinking about it")
        replies.append(await turn.ask_permission("AskUserQuestion", {"questions": [QUESTION]}))
        await turn.text("thanks")

    with trio.fail_after(10):
        async with gateway(FakeCLI(script)) as (_, port):
            async with client(port) as c:
                session_id = await c.open(ExecuteParams(prompt="hi"))
                frames = await c.receive_until(
                    lambda f: isinstance(f, EventFrame) and isinstance(f.event, UserInputRequest)
                )
                asked = frames[-1].event  # type: ignore[union-attr]
            # Reconnect having seen the question itself: it is still pending, so it comes again.
            async with client(port) as c:
                await c.send("attach", id="r", session=session_id, last_seq=asked.seq)
                assert await c.receive() == ReplyFrame(id="r", ok=True)
                again = await c.receive()
                assert isinstance(again, EventFrame)
                assert again.event == asked
                await c.send(
                    "answer", id="a", session=session_id, request=asked.request_id, answer="red"
                )
                events = await c.events_until_final()
    assert replies[0]["updatedInput"]["answers"] == {"Which color?": "red"}
    assert text_of(events) == "thanks"


async def test_server_shutdown_closes_clients_with_1001() -> None:
    with trio.fail_after(10):
        async with open_fleet(transport_factory=FakeCLI()) as fleet, trio.open_nursery() as outer:
            async with trio.open_nursery() as server:
                port = await server.start(
                    partial(serve_gateway, fleet, token=TOKEN, allowed_origins=None)
                )
                # The client's reader runs in `outer`, so it outlives the server.
                ws = await connect_websocket_url(
                    outer, f"ws://127.0.0.1:{port}/", extra_headers=AUTH
                )
                server.cancel_scope.cancel()
            with pytest.raises(ConnectionClosed) as closed:
                await ws.get_message()
            assert closed.value.reason.code == 1001
            await ws.aclose()


async def slow_text(release: trio.Event, turn: FakeTurn) -> None:
    await turn.text("streaming ", chunk=1)
    await release.wait()
    await turn.text("the rest", chunk=1)


async def test_detach_while_events_stream_sends_no_event_of_that_session_after_the_reply() -> None:
    release = trio.Event()
    with trio.fail_after(10):
        async with (
            gateway(FakeCLI(partial(slow_text, release))) as (fleet, port),
            client(port) as c,
        ):
            session_id = await c.open(ExecuteParams(prompt="hi"))
            await c.receive_until(is_event)
            await c.send("detach", id="d", session=session_id)
            release.set()  # events keep coming while the detach is in flight
            before = await c.receive_until(lambda f: isinstance(f, ReplyFrame))
            assert before[-1] == ReplyFrame(id="d", ok=True)
            await fleet.get_nowait(session_id).wait_ended()
            # The next frame is the probe's answer: nothing of the session came after.
            await c.send("detach", id="probe", session=session_id)
            assert await c.receive() == ReplyFrame(id="probe", ok=False, reason="not attached")


async def test_reattach_on_the_same_connection_replaces_the_subscription_without_duplicates() -> (
    None
):
    release = trio.Event()
    with trio.fail_after(10):
        async with gateway(FakeCLI(partial(slow_text, release))) as (_, port):
            async with client(port) as c:
                session_id = await c.open(ExecuteParams(prompt="hi"))
                first = [f.event for f in await c.receive_until(is_event)]  # type: ignore[union-attr]
                await c.send("attach", id="again", session=session_id, last_seq=first[-1].seq)
                release.set()
                frames = await c.receive_until(lambda f: isinstance(f, ReplyFrame))
                assert frames[-1] == ReplyFrame(id="again", ok=True)
                before_reply = [f.event for f in frames if isinstance(f, EventFrame)]
                after_reply = await c.events_until_final()
            async with client(port) as c:
                await c.send("attach", id="all", session=session_id, last_seq=None)
                assert await c.receive() == ReplyFrame(id="all", ok=True)
                everything = await c.events_until_final()
    # Events the old subscription delivered before the reply, then the new one's replay of
    # everything after first[-1]: those already seen come again only from the replay, so the
    # client sees every seq after the reply exactly once and in order.
    check_contract(everything)
    assert after_reply == [e for e in everything if e.seq > first[-1].seq]
    assert all(e.seq > first[-1].seq for e in before_reply)
    assert text_of(everything) == "streaming the rest"
