"""A fleet session as a session handle: ``subscribe()`` serves a consumer that fell behind a
replay instead of an error, says when the replay is gone (``ReplayGapError``), and
``result()`` waits for the execution's final event (under trio's mock clock)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from session_kit import CONFIG

from claude_trio.actors.fanout import fleet as fleet_module
from claude_trio.actors.fanout import subscription as subscription_module
from claude_trio.actors.fanout.fleet import open_fleet
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.errors import ReplayGapError
from claude_trio.protocol.session.events import AssistantMessage, Result
from claude_trio.protocol.session.transcript import Transcript
from claude_trio.testing import FakeCLI, FakeTurn

PARAMS = ExecuteParams(prompt="talk")


async def chatty(turn: FakeTurn) -> None:
    """Ten messages of text: none of their events merges with the next message's."""
    for i in range(10):
        await turn.text(f"part {i}", chunk=2, delay=0.01)
        await turn.end_message()


async def test_a_consumer_that_falls_behind_gets_every_event_once_in_order(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its subscription is dropped (a queue of 2 events) while it reads nothing; the next
    receive renews it from the last seq it got: the consumer sees each event once."""
    monkeypatch.setattr(subscription_module, "DEFAULT_SUBSCRIBER_QUEUE", 2)
    async with open_fleet(transport_factory=FakeCLI(chatty), config=CONFIG) as fleet:
        fs = await fleet.open(PARAMS)
        subscriptions: list[int | None] = []
        subscribe_nowait = fs.subscribe_nowait

        def counted(last_seq: int | None, **options: Any) -> Any:
            subscriptions.append(last_seq)
            return subscribe_nowait(last_seq, **options)

        monkeypatch.setattr(fs, "subscribe_nowait", counted)
        async with fs.subscribe() as events:
            first = await events.receive()
            await fs.wait_ended()  # far more than 2 events meanwhile: dropped
            rest = [event async for event in events]
        assert subscriptions == [None, first.seq]  # renewed once, from the last event it got
        everything = subscribe_nowait(0, max_queue=10_000)
        assert not isinstance(everything, fleet_module.ResyncRequired)
        with everything:
            expected = [event async for event in everything]
    got = [first, *rest]
    assert [e.seq for e in got] == [e.seq for e in expected]
    assert got == expected
    assert isinstance(got[-1], Result)
    assert sum(isinstance(e, AssistantMessage) for e in got) == 10


async def test_subscribe_says_when_the_events_after_last_seq_are_gone(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_fleet(
        transport_factory=FakeCLI(chatty), config=CONFIG, replay_buffer=5
    ) as fleet:
        fs = await fleet.open(PARAMS)
        transcript = await fs.result()
        last = fs.last_seq
        with pytest.raises(ReplayGapError) as caught:
            async with fs.subscribe(0):
                pass
        assert (caught.value.session_id, caught.value.last_seq) == (fs.id, 0)
        assert caught.value.oldest_seq == last - 4
        async with fs.subscribe() as events:  # what is left
            assert [e.seq for e in [event async for event in events]] == list(
                range(last - 4, last + 1)
            )
    # result() waited for the end and says what is left of the execution: its final
    # event, hence its text and usage, are there.
    assert isinstance(transcript, Transcript)
    assert transcript.text == "".join(f"part {i}" for i in range(10))
    assert isinstance(transcript.terminal, Result)
    assert transcript.usage is not None


async def test_result_waits_for_the_final_event(autojump_clock: trio.testing.MockClock) -> None:
    async with open_fleet(transport_factory=FakeCLI(chatty), config=CONFIG) as fleet:
        start = trio.current_time()
        fs = await fleet.open(PARAMS)
        transcript = await fs.result()
        assert fs.ended
        # Ten messages of three two-character deltas each, 0.01 s apart.
        assert trio.current_time() - start == pytest.approx(0.3)
        assert transcript.events == tuple(
            [e async for e in (await _replay(fs))]
        )


async def _replay(fs: fleet_module.FleetSession) -> fleet_module.Subscription:
    await trio.lowlevel.checkpoint()
    sub = fs.subscribe_nowait(0, max_queue=10_000)
    assert isinstance(sub, fleet_module.Subscription)
    return sub
