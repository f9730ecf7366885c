"""A gateway's governor watch under ``autojump_clock``: it reads the host's figures only while
a connection follows them, every ``interval`` exactly; a follower is sent a change once, only
the latest of several, nothing when they did not change; a read that fails is logged once and
the followers keep what they have; a follower that leaves is told nothing more."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import attrs
import pytest
import trio
import trio.testing

from claude_trio.actors.fanout.gateway_governor import GovernorFollower, GovernorWatch
from claude_trio.protocol.fanout.governor import GovernorFigures

IDLE = GovernorFigures(
    limit=2,
    max_live=4,
    running=0,
    waiting=0,
    paused=False,
    resumes_at=None,
    starts=0,
    refusals=0,
    rejections=0,
    spent_usd=0.0,
    budget_usd=None,
    overshoot_usd=0.0,
)


class Host:
    """The figures a host would say, and when it was asked (virtual time)."""

    def __init__(self) -> None:
        self.figures: GovernorFigures | None = IDLE
        self.reads: list[float] = []
        self.failing = False

    async def read(self) -> GovernorFigures | None:
        await trio.lowlevel.checkpoint()
        self.reads.append(trio.current_time())
        if self.failing:
            raise ConnectionError("redis is down")
        return self.figures


class Writer:
    """A connection's writer: how often it was woken."""

    def __init__(self) -> None:
        self.wakes = 0

    def wake(self) -> None:
        self.wakes += 1


@asynccontextmanager
async def watching(
    shown: GovernorFigures | None = IDLE,
) -> AsyncIterator[tuple[Host, Writer, GovernorFollower]]:
    """A watch (reading every 0.5 s) running over a host, and one follower that was sent
    ``shown``: ``(host, writer, follower)``."""
    host, writer = Host(), Writer()
    watch = GovernorWatch(host.read, interval=0.5)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch.run)
        yield host, writer, watch.follow(shown, writer.wake)
        nursery.cancel_scope.cancel()


def sent(frame: str | None) -> GovernorFigures | None:
    assert frame is not None
    obj = json.loads(frame)
    assert (obj["type"], obj["id"]) == ("governor", None)
    return None if obj["governor"] is None else GovernorFigures(**obj["governor"])


async def test_it_reads_only_while_followed_every_interval(
    autojump_clock: trio.testing.MockClock,
) -> None:
    host = Host()
    watch = GovernorWatch(host.read, interval=0.5)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch.run)
        await trio.sleep(10)
        assert host.reads == []  # nobody follows: the host is not asked
        follower = watch.follow(await watch.figures(), Writer().wake)
        assert host.reads == [10.0]  # the op's answer
        await trio.sleep(1.25)
        assert host.reads == [10.0, 10.5, 11.0]
        follower.close()
        await trio.sleep(5)
        assert host.reads == [10.0, 10.5, 11.0, 11.5]  # the round under way, then none
        assert watch.followers == 0
        nursery.cancel_scope.cancel()


async def test_a_change_is_sent_once_the_latest_only_and_nothing_unchanged(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with watching() as (host, writer, follower):
        await trio.sleep(2.25)  # read at 0.5, 1.0, 1.5, 2.0
        assert (follower.next_frame(), writer.wakes) == (None, 0)  # nothing changed
        host.figures = attrs.evolve(IDLE, running=1, starts=1)
        await trio.sleep(0.5)
        paused = attrs.evolve(IDLE, paused=True, resumes_at=1_800_000_009.0, rejections=1)
        host.figures = paused
        await trio.sleep(1)  # two changes and a repeat before the writer takes any
        assert writer.wakes == 2  # once per change
        assert sent(follower.next_frame()) == paused  # the latest only
        assert follower.next_frame() is None
        await trio.sleep(2)
        assert (follower.next_frame(), writer.wakes) == (None, 2)  # it has them already
        host.figures = None  # the host has no governor (any more): said once
        await trio.sleep(0.5)
        assert sent(follower.next_frame()) is None
        assert follower.next_frame() is None


async def test_a_change_undone_before_it_was_sent_is_not_sent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with watching() as (host, writer, follower):
        await trio.sleep(0.25)
        host.figures = attrs.evolve(IDLE, waiting=1)
        await trio.sleep(0.5)
        host.figures = IDLE
        await trio.sleep(0.5)
        assert writer.wakes == 1
        assert follower.next_frame() is None  # the client has these figures


async def test_a_read_that_fails_is_logged_once_and_the_followers_keep_their_figures(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    async with watching() as (host, writer, follower):
        with caplog.at_level(logging.INFO, logger="claude_trio.actors.fanout.gateway"):
            host.failing = True
            await trio.sleep(2.25)
            assert len(host.reads) == 4  # it tries every round
            assert (follower.next_frame(), writer.wakes) == (None, 0)
            host.failing = False
            host.figures = attrs.evolve(IDLE, starts=3)
            await trio.sleep(0.5)
        assert sent(follower.next_frame()) == host.figures
        messages = [r.getMessage() for r in caplog.records]
        assert messages == [
            "gateway: cannot read the governor figures: redis is down",
            "gateway: the governor's figures can be read again",
        ]
        assert caplog.records[0].exc_info is not None  # with its traceback
