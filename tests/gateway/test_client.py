"""``connect_gateway`` against the real gateway over real sockets on 127.0.0.1, with
FakeCLI-backed fleet sessions, and a proxy in between that cuts, refuses, freezes connections
and loses ops on the way (real time: short, under fail_after, no wall-clock asserts)."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import pytest
import trio
from gateway_kit import TOKEN, gateway, say, text_of
from proxy_kit import CutProxy, cut_proxy

from claude_trio import ExecuteParams, allow_tool
from claude_trio.actors.extensions.broker import AnswerAccepted, AnswerRejected
from claude_trio.actors.fanout import gateway as gateway_module
from claude_trio.actors.fanout.fleet import Fleet, Subscription, open_fleet
from claude_trio.client import ClientConfig, GatewayClient, connect_gateway
from claude_trio.errors import (
    ConnectionLostError,
    GatewayRefusedError,
    GatewayUnavailableError,
    RemoteOpError,
    ResyncRequiredError,
    SessionLostError,
)
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.fanout.codec import event_to_json
from claude_trio.protocol.fanout.remote import RemotePolicy, remote_params
from claude_trio.protocol.session.events import (
    Aborted,
    Event,
    Result,
    TextDelta,
    UserInputRequest,
    UserMessage,
)
from claude_trio.protocol.session.lifecycle import Accepted
from claude_trio.testing import FakeCLI, FakeTurn

PATIENT = ClientConfig(reconnect_attempts=1000, backoff_base=0.01, backoff_max=0.02)
FAST = ClientConfig(
    backoff_base=0.01,
    backoff_max=0.05,
    connect_timeout=2.0,
    ping_interval=5.0,
    ping_timeout=5.0,
    close_timeout=1.0,
)
QUESTION = {
    "question": "Which color?",
    "header": "Color",
    "options": [{"label": "red", "description": ""}, {"label": "blue", "description": ""}],
    "multiSelect": False,
}
VOLATILE = {"user_message_uuids", "duration_ms", "timestamp", "uuid"}


def comparable(events: list[Event]) -> list[dict[str, Any]]:
    """The events as JSON, without what differs from one run to the next (random uuids,
    wall-clock times)."""
    return [
        {k: v for k, v in event_to_json(e).items() if k not in VOLATILE} for e in events
    ]


async def local_run(script: Callable[[FakeTurn], Any], prompt: str) -> list[Event]:
    """The same script through a local fleet, with the params the gateway runs a remote
    session with (its default policy): what a remote client must see too."""
    params = remote_params(ExecuteParams(prompt=prompt), RemotePolicy(), None)
    async with open_fleet(transport_factory=FakeCLI(script)) as fleet:
        fs = await fleet.start(params)
        sub = fs.subscribe_nowait(None, max_queue=10**6)
        assert not isinstance(sub, type(None))
        with sub:  # type: ignore[union-attr]
            return [event async for event in sub]  # type: ignore[union-attr]


@asynccontextmanager
async def served(
    script: Callable[[FakeTurn], Any], **fleet_options: Any
) -> AsyncIterator[tuple[Fleet, CutProxy]]:
    """A gateway of ``script`` sessions behind a cut proxy."""
    replay_buffer = fleet_options.pop("replay_buffer", 2000)
    async with (
        gateway(
            FakeCLI(script),
            replay_buffer=replay_buffer,
            fleet_options=fleet_options,
            allowed_origins=None,
        ) as (fleet, port),
        cut_proxy(port) as proxy,
    ):
        yield fleet, proxy


async def collect(session_events: Any) -> list[Event]:
    return [event async for event in session_events]


async def read_until_it_raises(events: Any, into: list[Event]) -> None:
    while True:
        into.append(await events.receive())


async def stream(turn: FakeTurn, deltas: int = 150) -> None:
    await turn.thinking("thinking it over", chunk=5)
    for i in range(deltas):
        await turn.text(f"<{i}>")
        await turn.sleep(0.004)
    tool = await turn.tool_use("Read", {"file_path": "a.py"})
    await turn.tool_result(tool, "print('a')")
    await turn.text("done")


async def test_a_remote_session_yields_the_classes_a_local_one_does() -> None:
    script = partial(say, "hello from far away")
    with trio.fail_after(15):
        async with (
            served(script) as (_, proxy),
            connect_gateway(proxy.url, token=TOKEN, config=FAST) as gw,
        ):
            assert gw.hello is not None
            assert gw.hello.principal == "default"
            session = await gw.open(ExecuteParams(prompt="hi"), label="greeting")
            remote = await collect(session.events)
            assert await collect(session.events) == []  # ended, like a local session
            (info,) = await gw.list()
            assert (info.session, info.label, info.state) == (session.id, "greeting", "ended")
            assert gw.statistics().sessions == 1
            governor = await gw.governor()  # the server's fleet governor, asked again
            assert governor is not None
            assert (governor.starts, governor.running, governor.paused) == (1, 0, False)
            del session  # nobody holds it (nor its events) any more: the client forgets it
            gc.collect()
            assert gw.statistics().sessions == 0
    local = await local_run(script, "hi")
    assert comparable(remote) == comparable(local)
    assert all(e.raw is None for e in remote)
    assert isinstance(remote[-1], Result)
    assert text_of(remote) == "hello from far away"


async def test_the_client_survives_three_cut_connections_mid_stream_exactly() -> None:
    with trio.fail_after(30):
        async with (
            served(stream) as (_, proxy),
            connect_gateway(proxy.url, token=TOKEN, config=FAST) as gw,
        ):
            session = await gw.open(ExecuteParams(prompt="go"))
            remote: list[Event] = []
            cuts = 0
            async for event in session.events:
                remote.append(event)
                if len(remote) in (20, 60, 110):
                    cuts += proxy.cut()
            statistics = gw.statistics()
    local = await local_run(stream, "go")
    assert comparable(remote) == comparable(local)
    assert [e.seq for e in remote] == list(range(1, len(remote) + 1))
    assert cuts == 3
    assert statistics.connections == 4


async def test_a_consumer_that_falls_behind_is_detached_and_replayed_exactly() -> None:
    config = ClientConfig(max_queue=8, backoff_base=0.01, backoff_max=0.05)
    with trio.fail_after(30):
        async with (
            served(stream) as (fleet, proxy),
            connect_gateway(proxy.url, token=TOKEN, config=config) as gw,
        ):
            session = await gw.open(ExecuteParams(prompt="go"))
            await fleet.get_nowait(session.id).wait_ended()  # the consumer read nothing meanwhile
            remote = await collect(session.events)
            statistics = gw.statistics()
    local = await local_run(stream, "go")
    assert comparable(remote) == comparable(local)
    assert statistics.replayed > 0  # it did detach and attach again
    assert statistics.connections == 1


async def test_push_answer_abort_and_continue_over_the_client() -> None:
    release = trio.Event()

    async def script(turn: FakeTurn) -> None:
        if turn.prompt == "ask me":
            await turn.text("a question:")
            await turn.ask_permission("AskUserQuestion", {"questions": [QUESTION]})
            await release.wait()
            await turn.text(" thanks")
        elif turn.prompt == "more please":
            await turn.text("got more please")
        else:
            await turn.text(f"then: {turn.prompt}")
            await turn.sleep(30)

    with trio.fail_after(20):
        async with (
            served(script) as (_, proxy),
            connect_gateway(proxy.url, token=TOKEN, config=FAST) as gw,
        ):
            session = await gw.open(ExecuteParams(prompt="ask me"))
            events: list[Event] = []
            async for event in session.events:
                events.append(event)
                if isinstance(event, UserInputRequest):
                    wrong = await session.answer("no-such-request", "red")
                    assert isinstance(wrong, AnswerRejected)
                    assert await session.answer(event.request_id, {"Which color?": "blue"}) == (
                        AnswerAccepted(request_id=event.request_id)
                    )
                    pushed = await session.push("more please")
                    assert isinstance(pushed, Accepted)
                    release.set()
            with pytest.raises(InvalidParamsError, match="prompt"):
                await session.continue_(" ")  # refused before it is sent
            await session.continue_("and now this")
            second: list[Event] = []
            async for event in session.events:
                second.append(event)
                if isinstance(event, TextDelta):
                    with pytest.raises(RemoteOpError) as busy:
                        await session.continue_("not yet")
                    await session.abort()
            late = await session.push("too late")
    (message,) = [e for e in events if isinstance(e, UserMessage)]
    assert message.uuid == pushed.uuid
    results = [e for e in events if isinstance(e, Result)]
    assert results[-1].user_message_uuids == (pushed.uuid,)
    assert text_of(events) == "a question: thanksgot more please"
    assert busy.value.code == "cannot_continue"
    assert isinstance(second[-1], Aborted)
    assert second[0].seq == events[-1].seq + 1
    assert not isinstance(late, Accepted)


async def test_an_op_lost_with_the_connection_raises_or_is_sent_again() -> None:
    async def script(turn: FakeTurn) -> None:
        await turn.text("working")
        await turn.sleep(30)

    with trio.fail_after(20):
        async with (
            served(script) as (fleet, proxy),
            connect_gateway(proxy.url, token=TOKEN, config=FAST) as gw,
        ):
            session = await gw.open(ExecuteParams(prompt="go"))
            events = session.events
            assert isinstance(await events.receive(), Event)
            # a push may or may not have reached the server: it is not sent twice
            cut = proxy.cut_at_next_client_message()
            with pytest.raises(ConnectionLostError, match="may or may not"):
                await session.push("are you there?")
            assert cut.is_set()
            await gw.list()  # connected again (list waits for it)
            # an abort may be repeated: it is sent again on the next connection
            proxy.cut_at_next_client_message()
            await session.abort()
            rest = await collect(events)
            listed = await gw.list()
    assert isinstance(rest[-1], Aborted)
    assert fleet.get_nowait(session.id).ended
    assert [s.state for s in listed] == ["ended"]
    assert proxy.accepted == 3


@pytest.mark.parametrize("reached_the_server", [False, True], ids=["op-lost", "answer-lost"])
async def test_continue_is_exactly_once_when_its_answer_is_lost(
    reached_the_server: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def echo(turn: FakeTurn) -> None:
        await turn.text(f"you said: {turn.prompt}")

    handled: list[str] = []
    real = gateway_module._Client._continue

    async def counting(self: Any, op: Any) -> None:
        handled.append(op.prompt)
        await real(self, op)

    monkeypatch.setattr(gateway_module._Client, "_continue", counting)

    with trio.fail_after(20):
        async with (
            served(echo) as (fleet, proxy),
            connect_gateway(proxy.url, token=TOKEN, config=FAST) as gw,
        ):
            session = await gw.open(ExecuteParams(prompt="one"))
            first = await collect(session.events)
            await fleet.get_nowait(session.id).wait_closed()
            cut = proxy.cut_at_next_client_message(forward=reached_the_server)
            await session.continue_("two")
            assert cut.is_set()
            second = await collect(session.events)
            (info,) = await gw.list()
    assert text_of(first) == "you said: one"
    assert text_of(second) == "you said: two"
    assert second[0].seq == first[-1].seq + 1
    assert isinstance(second[-1], Result)
    assert info.executions == 2  # once, not twice
    assert handled == ["two"]  # the server saw it once: sent again only when it never came


async def test_an_open_whose_reply_is_lost_is_sent_again_and_starts_one_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[str] = []

    async def once(turn: FakeTurn) -> None:
        started.append(turn.prompt)
        await turn.text("ran once")

    handled: list[str | None] = []
    real = gateway_module._Client._open

    async def counting(self: Any, op: Any) -> None:
        handled.append(op.idempotency_key)
        await real(self, op)

    monkeypatch.setattr(gateway_module._Client, "_open", counting)

    with trio.fail_after(20):
        async with (
            served(once) as (_fleet, proxy),
            connect_gateway(proxy.url, token=TOKEN, config=FAST) as gw,
        ):
            # the open reaches the server, and the connection drops before its reply
            cut = proxy.cut_at_next_client_message(forward=True)
            session = await gw.open(ExecuteParams(prompt="go"))
            assert cut.is_set()
            events = await collect(session.events)
            listed = await gw.list()
    assert len(handled) == 2  # the server received it twice, with one key
    assert handled[0] is not None
    assert handled[0] == handled[1]
    assert started == ["go"]  # and started one session
    assert [info.session for info in listed] == [session.id]
    assert text_of(events) == "ran once"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert proxy.accepted == 2


async def test_one_key_is_one_session_for_every_client_of_a_principal() -> None:
    started: list[str] = []

    async def once(turn: FakeTurn) -> None:
        started.append(turn.prompt)
        await turn.text("ran once")

    params = ExecuteParams(prompt="go")
    with trio.fail_after(20):
        async with (
            served(once) as (_fleet, proxy),
            connect_gateway(proxy.url, token=TOKEN, config=FAST) as one,
            connect_gateway(proxy.url, token=TOKEN, config=FAST) as two,
        ):
            first = await one.open(params, label="item", idempotency_key="item-1")
            events = await collect(first.events)
            again = await two.open(params, label="item", idempotency_key="item-1")
            replayed = await collect(again.events)
            with pytest.raises(RemoteOpError) as refused:
                await two.open(ExecuteParams(prompt="other"), idempotency_key="item-1")
            await first.continue_("more", idempotency_key="c-1")
            await collect(first.events)
            listed = await one.list()
    assert again.id == first.id
    assert replayed == events
    assert refused.value.code == "idempotency_conflict"
    assert "different open request" in str(refused.value)
    assert started == ["go", "more"]
    assert [(info.session, info.executions) for info in listed] == [(first.id, 2)]


async def test_a_silent_connection_is_replaced_after_a_missed_pong() -> None:
    config = ClientConfig(
        backoff_base=0.01, backoff_max=0.05, ping_interval=0.05, ping_timeout=0.3,
        close_timeout=0.2,
    )  # fmt: skip
    with trio.fail_after(20):
        async with (
            served(stream) as (_, proxy),
            connect_gateway(proxy.url, token=TOKEN, config=config) as gw,
        ):
            session = await gw.open(ExecuteParams(prompt="go"))
            remote: list[Event] = []
            async for event in session.events:
                remote.append(event)
                if len(remote) == 30:
                    proxy.freeze()  # nothing moves, nothing closes: a dead peer
                    await proxy.next_connection()  # the client replaced it
                    proxy.thaw()
            assert gw.statistics().connections == 2
    local = await local_run(stream, "go")
    assert comparable(remote) == comparable(local)


async def test_events_evicted_while_away_raise_resync_required() -> None:
    with trio.fail_after(20):
        async with (
            served(stream, replay_buffer=10) as (fleet, proxy),
            connect_gateway(proxy.url, token=TOKEN, config=PATIENT) as gw,
        ):
            session = await gw.open(ExecuteParams(prompt="go"))
            events = session.events
            first = await events.receive()
            proxy.refusing = True
            proxy.cut()
            await fleet.get_nowait(session.id).wait_ended()  # far more than 10 events meanwhile
            proxy.refusing = False
            got = [first]
            with pytest.raises(ResyncRequiredError) as caught:
                await read_until_it_raises(events, got)
    assert caught.value.last_seq == got[-1].seq
    assert caught.value.oldest_seq is not None
    assert caught.value.oldest_seq > got[-1].seq + 1
    assert "fell too far behind" in str(caught.value)


async def test_a_session_the_server_forgot_raises_session_lost() -> None:
    with trio.fail_after(20):
        async with (
            served(stream, keep_finished=0) as (fleet, proxy),
            connect_gateway(proxy.url, token=TOKEN, config=PATIENT) as gw,
        ):
            session = await gw.open(ExecuteParams(prompt="go"))
            events = session.events
            await events.receive()
            proxy.refusing = True
            proxy.cut()
            fs = fleet.get_nowait(session.id)
            await fs.wait_closed()  # ended and forgotten (keep_finished=0)
            proxy.refusing = False
            with pytest.raises(SessionLostError, match="no longer knows it"):
                await read_until_it_raises(events, [])


async def test_a_wrong_token_is_refused_and_no_server_gives_up_after_its_attempts() -> None:
    with trio.fail_after(20):
        async with served(stream) as (_, proxy):
            with pytest.raises(GatewayRefusedError) as refused:
                async with connect_gateway(proxy.url, token="w" * 20, config=FAST):
                    pass  # pragma: no cover
            assert refused.value.status == 401
            proxy.refusing = True
            with pytest.raises(GatewayUnavailableError, match="3 attempts"):
                async with connect_gateway(proxy.url, token=TOKEN, config=FAST):
                    pass  # pragma: no cover
            assert proxy.refused == 3


async def test_when_reconnecting_fails_every_op_and_session_says_so() -> None:
    config = ClientConfig(reconnect_attempts=2, backoff_base=0.01, backoff_max=0.02)
    with trio.fail_after(20):
        async with (
            served(stream) as (_, proxy),
            connect_gateway(proxy.url, token=TOKEN, config=config) as gw,
        ):
            session = await gw.open(ExecuteParams(prompt="go"))
            await session.events.receive()
            proxy.refusing = True
            proxy.cut()
            with pytest.raises(GatewayUnavailableError, match="could not reconnect"):
                await read_until_it_raises(session.events, [])
            with pytest.raises(GatewayUnavailableError):
                await gw.list()


@pytest.mark.parametrize(
    ("url", "token", "field"),
    [
        ("http://127.0.0.1:1/", TOKEN, "url"),
        ("ws:///nohost", TOKEN, "url"),
        ("ws://127.0.0.1:1/", "short", "token"),
    ],
)
async def test_bad_arguments_are_refused_before_connecting(
    url: str, token: str, field: str
) -> None:
    with pytest.raises(InvalidParamsError) as caught:
        async with connect_gateway(url, token=token):
            pass  # pragma: no cover
    assert caught.value.field == field


async def test_a_client_opened_session_can_be_attached_from_a_second_client() -> None:
    hold = trio.Event()

    async def script(turn: FakeTurn) -> None:
        await turn.text("part one")
        await hold.wait()
        await turn.text(" part two")

    with trio.fail_after(20):
        async with (
            served(script) as (_, proxy),
            connect_gateway(proxy.url, token=TOKEN, config=FAST) as first,
            connect_gateway(proxy.url, token=TOKEN, config=FAST) as second,
        ):
            session = await first.open(ExecuteParams(prompt="go"))
            mine = session.events
            seen = [await mine.receive(), await mine.receive()]
            follower = await second.attach(session.id, last_seq=seen[-1].seq)
            hold.set()
            rest = await collect(mine)
            theirs = await collect(follower.events)
            with pytest.raises(Exception, match="does not follow yet"):
                await second.attach(session.id)
            with pytest.raises(SessionLostError):
                await second.attach("no-such-session")
            assert isinstance(first, GatewayClient)
    assert comparable(theirs) == comparable(rest)
    assert text_of(seen + rest) == "part one part two"


async def test_leaving_a_remote_run_early_stops_the_session_on_the_server() -> None:
    from claude_trio.cli.runner import open_remote_session

    async def forever(turn: FakeTurn) -> None:
        await turn.text("working")
        await turn.sleep(1000)

    with trio.fail_after(20):
        async with served(forever) as (fleet, proxy):
            async with open_remote_session(
                proxy.url, TOKEN, ExecuteParams(prompt="go")
            ) as run:
                first = await run.events.receive()
            (session,) = fleet.sessions()
            assert session.ended  # stopped on the server, not left running
            replay = session.subscribe_nowait(None, max_queue=1000)
            assert isinstance(replay, Subscription)
            with replay:
                events = [event async for event in replay]
    assert first.kind == "adapter_ready"
    assert isinstance(events[-1], Aborted)


async def test_the_client_answers_a_tool_approval_with_an_approval_answer() -> None:
    replies: list[dict[str, Any]] = []

    async def script(turn: FakeTurn) -> None:
        replies.append(await turn.ask_permission("Bash", {"command": "make"}))
        await turn.text("done")

    with trio.fail_after(20):
        async with (
            served(script) as (_, proxy),
            connect_gateway(proxy.url, token=TOKEN, config=FAST) as gw,
        ):
            session = await gw.open(ExecuteParams(prompt="build", permission_mode="default"))
            async for event in session.events:
                if isinstance(event, UserInputRequest):
                    assert event.source == "tool_permission"
                    assert event.tool_input == {"command": "make"}
                    answer = allow_tool({"command": "make -j2"})
                    assert await session.answer(event.request_id, answer) == AnswerAccepted(
                        request_id=event.request_id
                    )
    assert replies == [{"behavior": "allow", "updatedInput": {"command": "make -j2"}}]
