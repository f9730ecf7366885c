"""The ``governor`` op: a client follows the server's fleet governor figures and sees a pause,
its end and the starts as they happen, across a reconnect; ``"follow": false`` answers only.
Real gateway, real sockets on 127.0.0.1, FakeCLI-backed sessions (real time, under
``fail_after``, no wall-clock asserts). The watch's own rules (when it reads, what it offers,
a read that fails) are checked under ``MockClock`` in ``tests/actors/test_governor_watch.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest
import trio
from gateway_kit import TOKEN, client, gateway
from proxy_kit import CutProxy
from test_client import FAST, served

from claude_trio import ExecuteParams
from claude_trio.actors.fanout.fleet import Fleet
from claude_trio.client import GatewayClient, GovernorFeed, connect_gateway
from claude_trio.protocol.errors import GatewayUnavailableError
from claude_trio.protocol.fanout.governor import GovernorConfig, GovernorFigures
from claude_trio.protocol.fanout.wire import GovernorFrame
from claude_trio.testing import FakeCLI, FakeTurn

NO_JITTER = GovernorConfig(max_live=2, resume_jitter=0.0)


async def rate_limited_once(turn: FakeTurn) -> None:
    """The first session's CLI is told to retry a 429 after 3 s: the fleet pauses (long
    enough for a loaded machine's gateway to read the figures of the pause several times)."""
    if turn.prompt == "first":
        await turn.sleep(0.2)
        await turn.api_retry(1, max_retries=3, retry_delay_ms=3000, error_status=429)
        await turn.sleep(3.0)
    await turn.text("ok")
    await turn.result(cost_usd=0.01)


@asynccontextmanager
async def following() -> AsyncIterator[tuple[Fleet, CutProxy, GatewayClient, GovernorFeed]]:
    """A gateway of ``rate_limited_once`` sessions behind a cut proxy, and a client that
    follows its governor's figures."""
    async with (
        served(rate_limited_once, governor=NO_JITTER) as (fleet, proxy),
        connect_gateway(proxy.url, token=TOKEN, config=FAST) as gw,
        gw.follow_governor() as feed,
    ):
        yield fleet, proxy, gw, feed


async def next_where(
    feed: GovernorFeed, wanted: Callable[[GovernorFigures], bool]
) -> GovernorFigures:
    """The latest figures if ``wanted(figures)`` holds, else the next that do."""
    figures = feed.latest
    while figures is None or not wanted(figures):
        figures = await feed.receive()
    return figures


async def test_a_following_client_sees_the_pause_when_it_resumes_and_the_starts() -> None:
    with trio.fail_after(20):
        async with following() as (fleet, _, gw, feed):
            now = await feed.receive()  # the figures when it started following
            assert now is not None
            assert now == fleet.statistics().governor
            assert (now.paused, now.starts) == (False, 0)
            first = await gw.open(ExecuteParams(prompt="first"))
            paused = await next_where(feed, lambda f: f.paused)
            local = fleet.statistics().governor
            assert local is not None
            # the pause as the fleet holds it: its end in wall-clock time, the rejection
            assert local.resumes_at is not None
            assert paused.rejections == 1
            assert paused.resumes_at == local.resumes_at  # read once per pause
            assert paused.last_notice == local.last_notice is not None
            later = await gw.open(ExecuteParams(prompt="later"))
            waiting = await next_where(feed, lambda f: f.waiting == 1)
            assert waiting.paused  # "later" waits for the pause to end
            resumed = await next_where(feed, lambda f: not f.paused and f.starts == 2)
            assert resumed.rejections == 1
            for session in (first, later):
                async for _ in session.events:
                    pass
            ended = await next_where(feed, lambda f: f.running == 0)
            assert ended == fleet.statistics().governor


async def test_the_client_follows_the_figures_again_after_a_reconnect() -> None:
    with trio.fail_after(20):
        async with following() as (fleet, proxy, gw, feed):
            assert (await feed.receive()) is not None
            assert proxy.cut() == 1
            await gw.list()  # answered on the new connection: it is up
            session = await gw.open(ExecuteParams(prompt="after the cut"))
            async for _ in session.events:
                pass
            # the new connection follows the figures too: the start is pushed
            done = await next_where(feed, lambda f: f.starts == 1 and f.running == 0)
            assert done == fleet.statistics().governor
            assert gw.statistics().connections == 2


async def test_a_feed_raises_once_the_client_gives_up() -> None:
    with trio.fail_after(10):
        async with following() as (_, _, _, feed):
            assert (await feed.receive()) is not None
        with pytest.raises(GatewayUnavailableError, match="closed"):
            await feed.receive()


async def test_follow_false_answers_the_figures_and_pushes_nothing_after() -> None:
    async def quick(turn: FakeTurn) -> None:
        await turn.text("ok")
        await turn.result(cost_usd=0.01)

    with trio.fail_after(15):
        async with (
            gateway(FakeCLI(quick), fleet_options={"governor": NO_JITTER}) as (_, port),
            client(port) as c,
        ):
            await c.send("governor", id="g1", follow=False)
            answer = await c.receive()
            assert isinstance(answer, GovernorFrame)
            assert answer.id == "g1"
            assert answer.governor is not None
            assert answer.governor.starts == 0
            await c.send("governor", id="g2")  # follows
            assert (await c.receive()) == GovernorFrame(id="g2", governor=answer.governor)
            await c.send("governor", id="g3", follow=False)  # answers, and stops following
            assert (await c.receive()) == GovernorFrame(id="g3", governor=answer.governor)
            await c.open(ExecuteParams(prompt="go"))
            await c.events_until_final()
            with trio.move_on_after(2.0):  # four reads of the watch, had it still followed
                await c.receive()
            assert not any(isinstance(f, GovernorFrame) and f.id is None for f in c.frames)
            await c.send("governor", id="g4", follow=False)
            now = await c.receive()
            assert isinstance(now, GovernorFrame)
            assert now.governor is not None
            assert now.governor.starts == 1  # the figures did change meanwhile
