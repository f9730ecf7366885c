"""A gateway that goes away under an ``async for``: the client notices at once, says what it
is doing (``ClientConfig.on_connection``), comes back exactly where it was when the gateway
returns, and raises ``GatewayUnavailableError`` when it does not (a port nobody answers on, or
a silent peer). Real sockets on 127.0.0.1 under trio's MockClock (autojump): every process is
in this one, so the clock only jumps when every task waits for a timer, and the times asserted
are exact virtual times."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import pytest
import trio
import trio.testing
from gateway_kit import TOKEN
from trio_websocket import WebSocketRequest, serve_websocket

from claude_trio import ExecuteParams, serve_gateway
from claude_trio.actors.fanout.fleet import Fleet, open_fleet
from claude_trio.client import (
    ClientConfig,
    ConnectionNotice,
    GaveUp,
    Reconnected,
    Reconnecting,
    connect_gateway,
)
from claude_trio.client import config as client_config
from claude_trio.errors import (
    ClaudeTrioError,
    GatewayRefusedError,
    GatewayUnavailableError,
    InvalidParamsError,
)
from claude_trio.protocol.session.events import Event, Result, TextDelta
from claude_trio.testing import FakeCLI, FakeTurn

DELTAS = 60


async def stream(turn: FakeTurn) -> None:
    for i in range(DELTAS):
        await turn.text(f"<{i}>")
        await turn.sleep(0.5)  # virtual: the whole execution takes 30 s of the MockClock


class Notices:
    """``on_connection``: each notice with the virtual time it came at."""

    def __init__(self) -> None:
        self.got: list[tuple[float, ConnectionNotice]] = []
        self._changed = trio.Event()

    def __call__(self, notice: ConnectionNotice) -> None:
        self.got.append((trio.current_time(), notice))
        self._changed.set()

    async def wait_for(self, count: int) -> None:
        while len(self.got) < count:
            self._changed = trio.Event()
            await self._changed.wait()

    @property
    def notices(self) -> list[ConnectionNotice]:
        return [notice for _, notice in self.got]


class Gateway:
    """``serve_gateway`` of one fleet on one port, stopped and started again at will."""

    def __init__(self, fleet: Fleet, nursery: trio.Nursery) -> None:
        self.fleet = fleet
        self.nursery = nursery
        self.port = 0
        self._scope: trio.CancelScope | None = None
        self._stopped = trio.Event()

    async def start(self) -> None:
        self._stopped = trio.Event()
        listening = trio.Event()
        self.nursery.start_soon(self._serve, listening)
        await listening.wait()

    async def _serve(self, listening: trio.Event) -> None:
        gateway = partial(serve_gateway, self.fleet, token=TOKEN, allowed_origins=None)
        with trio.CancelScope() as self._scope:
            try:
                async with trio.open_nursery() as nursery:
                    self.port = await nursery.start(partial(gateway, port=self.port))
                    listening.set()
            finally:
                self._stopped.set()

    async def stop(self) -> None:
        assert self._scope is not None
        self._scope.cancel()
        await self._stopped.wait()

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/"


@asynccontextmanager
async def gateway_of(script: Any) -> AsyncIterator[Gateway]:
    async with (
        open_fleet(transport_factory=FakeCLI(script)) as fleet,
        trio.open_nursery() as nursery,
    ):
        gateway = Gateway(fleet, nursery)
        await gateway.start()
        yield gateway
        nursery.cancel_scope.cancel()


async def silent_peer(port: int, listening: trio.Event) -> None:
    """A TCP server on ``port`` that accepts every connection and never sends a byte."""
    (listener,) = await trio.open_tcp_listeners(port, host="127.0.0.1")
    held: list[trio.SocketStream] = []
    async with listener:
        listening.set()
        try:
            while True:
                held.append(await listener.accept())
        finally:
            for held_stream in held:
                held_stream.socket.close()


class HalfJitter:
    """The client's jitter source, fixed: the middle of the range it asks for."""

    def uniform(self, low: float, high: float) -> float:
        assert (low, high) == (0.5, 1.0)
        return 0.75


async def test_a_stopped_gateway_is_reconnected_to_when_it_comes_back_exactly(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client_config, "random", HalfJitter())
    notices = Notices()
    config = ClientConfig(
        reconnect_attempts=50, backoff_base=1.0, backoff_max=4.0, on_connection=notices
    )
    events: list[Event] = []
    with trio.fail_after(300):
        async with (
            gateway_of(stream) as gateway,
            connect_gateway(gateway.url, token=TOKEN, config=config) as gw,
        ):
            session = await gw.open(ExecuteParams(prompt="go"))
            async for event in session.events:
                events.append(event)
                if len(events) == 10:
                    await gateway.stop()
                    stopped_at = trio.current_time()
                    await notices.wait_for(3)  # dropped, then two attempts refused
                    await gateway.start()
                    restarted_at = trio.current_time()
            assert gw.statistics().connections == 2

    # Every event once, in order: no gap, no duplicate across the outage.
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "".join(
        f"<{i}>" for i in range(DELTAS)
    )
    assert isinstance(events[-1], Result)

    first, second, third, back = notices.got
    # The drop is seen at once (the closed socket), not after a ping.
    assert first == (stopped_at, first[1])
    assert isinstance(first[1], Reconnecting)
    assert (first[1].attempt, first[1].delay) == (1, 0.0)
    assert "closed" in first[1].error
    for (_, notice), number in ((second, 2), (third, 3)):
        assert isinstance(notice, Reconnecting)
        assert notice.attempt == number
        assert "connect" in notice.error  # refused: nobody listens on the port
    assert isinstance(second[1], Reconnecting)
    assert isinstance(third[1], Reconnecting)
    assert second[1].delay == 0.75  # backoff_base, times the jitter
    assert third[1].delay == 1.5  # doubled
    assert second[0] == stopped_at  # a refused connect costs no time
    assert third[0] == stopped_at + second[1].delay
    assert restarted_at == third[0]
    # The third attempt, after its delay, finds the gateway back.
    assert back == (third[0] + third[1].delay, Reconnected(attempts=3))


async def test_a_gateway_gone_for_good_ends_the_async_for_with_an_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The gateway stops and a silent peer takes its port: each attempt waits
    ``connect_timeout`` for a handshake that never comes; after ``reconnect_attempts`` the
    ``async for`` raises, with what happened in the message."""
    notices = Notices()
    config = ClientConfig(
        reconnect_attempts=3,
        backoff_base=1.0,
        backoff_max=4.0,
        connect_timeout=2.0,
        on_connection=notices,
    )
    events: list[Event] = []
    with trio.fail_after(300):
        async with (
            gateway_of(stream) as gateway,
            trio.open_nursery() as nursery,
            connect_gateway(gateway.url, token=TOKEN, config=config) as gw,
        ):
            session = await gw.open(ExecuteParams(prompt="go"))
            with pytest.raises(GatewayUnavailableError) as caught:  # noqa: PT012
                async for event in session.events:
                    events.append(event)
                    if len(events) == 5:
                        await gateway.stop()
                        listening = trio.Event()
                        nursery.start_soon(silent_peer, gateway.port, listening)
                        await listening.wait()
                        stopped_at = trio.current_time()
            failed_at = trio.current_time()
            with pytest.raises(GatewayUnavailableError):
                await gw.list()  # every op says so too
            nursery.cancel_scope.cancel()

    assert len(events) == 5
    error = caught.value
    assert isinstance(error, ClaudeTrioError)
    assert "could not reconnect" in str(error)
    assert "3 attempts" in str(error)
    assert "ClientConfig.reconnect_attempts" in str(error)
    *attempts, (gave_up_at, gave_up) = notices.got
    assert [n.attempt for _, n in attempts] == [1, 2, 3]  # type: ignore[union-attr]
    assert gave_up == GaveUp(error=error)
    delays = [n.delay for _, n in attempts]  # type: ignore[union-attr]
    assert delays[0] == 0.0
    # Why each attempt failed: told by the next notice, and by the error for the last. The
    # first one may have found the port still closed (refused at once) or the silent peer.
    why = [n.error for _, n in attempts[1:]] + [str(error)]  # type: ignore[union-attr]
    silent = sum("TooSlowError" in text for text in why)
    assert silent >= 2
    assert all("TooSlowError" in text for text in why[1:])
    # Each handshake that never came cost connect_timeout, plus the waits between attempts.
    assert gave_up_at == failed_at
    assert failed_at - stopped_at == pytest.approx(  # exact, but for the float sum's rounding
        silent * config.connect_timeout + sum(delays), abs=1e-9
    )


async def test_a_server_that_never_says_hello_is_given_up_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A websocket server that takes the handshake and then says nothing (pongs, but no
    ``hello``): ``connect_timeout`` bounds the wait."""

    async def mute(request: WebSocketRequest) -> None:
        ws = await request.accept()
        await ws.get_message()  # the hello op, never answered
        await trio.sleep_forever()

    config = ClientConfig(connect_attempts=1, connect_timeout=3.0)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            server = await nursery.start(partial(serve_websocket, mute, "127.0.0.1", 0, None))
            port = server.port
            start = trio.current_time()
            with pytest.raises(GatewayUnavailableError, match="did not say hello within 3 s"):
                async with connect_gateway(f"ws://127.0.0.1:{port}/", token=TOKEN, config=config):
                    pass  # pragma: no cover
            assert trio.current_time() == start + 3.0
            nursery.cancel_scope.cancel()


async def test_what_on_connection_raises_ends_the_block() -> None:
    def broken(notice: ConnectionNotice) -> None:
        raise RuntimeError("the notice handler broke")

    config = ClientConfig(backoff_base=0.01, backoff_max=0.02, on_connection=broken)
    with trio.fail_after(20):
        async with gateway_of(stream) as gateway:
            with pytest.raises(RuntimeError, match="the notice handler broke"):  # noqa: PT012
                async with connect_gateway(gateway.url, token=TOKEN, config=config) as gw:
                    session = await gw.open(ExecuteParams(prompt="go"))
                    await session.events.receive()
                    await gateway.stop()
                    await trio.sleep_forever()


def test_on_connection_must_be_a_function() -> None:
    with pytest.raises(InvalidParamsError, match="on_connection"):
        ClientConfig(on_connection="print")  # type: ignore[arg-type]


async def test_the_token_comes_from_the_environment_unless_one_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with trio.fail_after(20):
        async with gateway_of(stream) as gateway:
            monkeypatch.setenv("CLAUDE_TRIO_TOKEN", TOKEN)
            async with connect_gateway(gateway.url) as gw:
                assert gw.hello is not None
            monkeypatch.setenv("CLAUDE_TRIO_TOKEN", "w" * 20)
            async with connect_gateway(gateway.url, token=TOKEN) as gw:  # the argument wins
                assert gw.hello is not None
            with pytest.raises(GatewayRefusedError) as refused:
                async with connect_gateway(gateway.url):
                    pass  # pragma: no cover
            assert refused.value.status == 401
            monkeypatch.setenv("CLAUDE_TRIO_TOKEN", "short")
            with pytest.raises(InvalidParamsError) as bad:
                async with connect_gateway(gateway.url):
                    pass  # pragma: no cover
            assert bad.value.field == "CLAUDE_TRIO_TOKEN"
            assert "short" not in str(bad.value)  # a token is never shown
            monkeypatch.delenv("CLAUDE_TRIO_TOKEN")
            with pytest.raises(InvalidParamsError, match="CLAUDE_TRIO_TOKEN") as missing:
                async with connect_gateway(gateway.url):
                    pass  # pragma: no cover
            assert missing.value.field == "token"


async def test_several_urls_are_tried_in_turn_when_a_gateway_goes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Two gateways over one host (as the gateways of a cluster): the client given both
    starts on the first; when it stops, the next attempt goes to the second at once, and the
    session's stream goes on there exactly."""
    notices = Notices()
    config = ClientConfig(reconnect_attempts=2, backoff_base=1.0, on_connection=notices)
    events: list[Event] = []
    with trio.fail_after(300):
        async with (
            gateway_of(stream) as one,
            trio.open_nursery() as nursery,
        ):
            two = Gateway(one.fleet, nursery)
            await two.start()
            async with connect_gateway([one.url, two.url], token=TOKEN, config=config) as gw:
                session = await gw.open(ExecuteParams(prompt="go"))
                async for event in session.events:
                    events.append(event)
                    if len(events) == 10:
                        await one.stop()
                        stopped_at = trio.current_time()
                assert gw.statistics().connections == 2
            nursery.cancel_scope.cancel()

    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "".join(
        f"<{i}>" for i in range(DELTAS)
    )
    assert isinstance(events[-1], Result)
    (dropped_at, dropped), (back_at, back) = notices.got
    assert isinstance(dropped, Reconnecting)
    assert dropped_at == back_at == stopped_at  # no backoff: the other gateway answered
    assert back == Reconnected(attempts=1)


async def test_a_first_url_nobody_answers_on_is_passed_over(
    autojump_clock: trio.testing.MockClock,
) -> None:
    (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
    closed = f"ws://127.0.0.1:{listener.socket.getsockname()[1]}/"
    await listener.aclose()  # a port nobody listens on
    config = ClientConfig(connect_attempts=2, backoff_base=1.0)
    with trio.fail_after(300):
        async with (
            gateway_of(stream) as gateway,
            connect_gateway([closed, gateway.url], token=TOKEN, config=config) as gw,
        ):
            assert trio.current_time() == 0  # a refused connect costs no time, and no backoff
            session = await gw.open(ExecuteParams(prompt="go"))
            result = await session.result()
    assert isinstance(result.events[-1], Result)


async def test_an_empty_list_of_urls_is_refused() -> None:
    with pytest.raises(InvalidParamsError, match="url"):
        async with connect_gateway([], token=TOKEN):
            pass
