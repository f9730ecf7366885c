"""A local fleet's inbox: the requests waiting across its sessions, their arrivals and
resolutions, answered through the sessions' brokers (FakeCLI sessions, virtual clock)."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from claude_trio.actors.extensions.broker import AnswerAccepted, AnswerRejected
from claude_trio.actors.fanout.fleet import open_fleet
from claude_trio.actors.fanout.inbox import InboxChannel
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.fanout.inbox import (
    InboxArrived,
    InboxChange,
    InboxResolved,
    InboxSnapshot,
)
from claude_trio.protocol.session.events import Result
from claude_trio.testing import FakeCLI, FakeTurn

REPLIES: dict[str, dict[str, Any]] = {}


async def bash_asker(turn: FakeTurn) -> None:
    """Asks to run its prompt as a Bash command, then says what it was told."""
    reply = await turn.ask_permission("Bash", {"command": turn.prompt}, tool_use_id="toolu_1")
    REPLIES[turn.prompt] = reply
    await turn.text(f"{reply['behavior']}")


def asking(command: str, timeout: float) -> ExecuteParams:
    return ExecuteParams(prompt=command, permission_mode="default", user_input_timeout=timeout)


async def next_change(inbox: InboxChannel) -> InboxChange:
    with trio.fail_after(1000):
        return await inbox.receive()


async def test_three_sessions_ask_at_once_and_each_resolution_is_announced(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The default governor lets two first turns go at once (slow start); a turn waiting for a
    # person gives its place back, so the third asks at once too.
    fake = FakeCLI(bash_asker)
    async with open_fleet(transport_factory=fake, max_live=4) as fleet:
        async with fleet.inbox() as inbox:
            assert await next_change(inbox) == InboxSnapshot(items=())
            start = trio.current_time()
            answered = await fleet.open(asking("ls", 50.0), label="answered")
            expires = await fleet.open(asking("make", 10.0), label="expires")
            aborted = await fleet.open(asking("rm -rf /", 50.0), label="aborted")
            arrivals = [await next_change(inbox) for _ in range(3)]
            assert all(isinstance(change, InboxArrived) for change in arrivals)
            assert trio.current_time() == start  # the requests are asked at once
            figures = fleet.statistics().governor
            assert figures is not None
            assert (figures.limit, figures.running, figures.asking) == (2, 3, 3)
            # A second consumer's snapshot holds all three, in the order they arrived.
            async with fleet.inbox() as second:
                snapshot = await next_change(second)
                assert isinstance(snapshot, InboxSnapshot)
                assert len(snapshot.items) == 3
                assert second.items == snapshot.items
            by_label = {item.label: item for item in inbox.items}
            assert set(by_label) == {"answered", "expires", "aborted"}
            item = by_label["answered"]
            assert (item.session, item.tool, item.input) == (answered.id, "Bash", {"command": "ls"})
            assert item.source == "tool_permission"
            assert item.owner is None
            assert 0.0 <= item.age(item.asked_at + 2.5) == 2.5

            # Answered through the inbox: it reaches the CLI, leaves, and is announced.
            outcome = await inbox.answer(answered.id, item.request_id, "allow")
            assert outcome == AnswerAccepted(request_id=item.request_id)
            assert await next_change(inbox) == InboxResolved(
                session=answered.id, request_id=item.request_id, outcome="answered"
            )
            # The first answer won: a second one is refused by the broker.
            again = await inbox.answer(answered.id, item.request_id, "deny")
            assert isinstance(again, AnswerRejected)
            transcript = await answered.result()
            assert isinstance(transcript.events[-1], Result)
            assert transcript.text == "allow"

            # Nobody answers the second: it expires at its deadline, exactly.
            change = await next_change(inbox)
            assert change == InboxResolved(
                session=expires.id, request_id=by_label["expires"].request_id, outcome="expired"
            )
            assert trio.current_time() == start + 10.0
            assert (await expires.result()).text == "deny"
            assert REPLIES["make"]["behavior"] == "deny"

            # The third session is aborted: its request leaves with it.
            await aborted.abort()
            change = await next_change(inbox)
            assert isinstance(change, InboxResolved)
            assert (change.session, change.request_id) == (
                aborted.id,
                by_label["aborted"].request_id,
            )
            assert change.outcome in ("cancelled", "ended")
            assert inbox.items == ()
            unknown = await inbox.answer("no-such-session", "r1", "allow")
            assert isinstance(unknown, AnswerRejected)
        # Leaving the consumer's block detaches it from the fleet.
        assert fleet._inbox.watches == 0


async def test_a_slow_consumer_costs_a_snapshot_not_memory(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # No governor: its start spacing would let the fifth session ask a quarter second later.
    async with (
        open_fleet(transport_factory=FakeCLI(bash_asker), max_live=8, governor=None) as fleet,
        fleet.inbox(max_changes=2) as inbox,
    ):
        assert await next_change(inbox) == InboxSnapshot(items=())
        sessions = [await fleet.open(asking(f"cmd {i}", 50.0)) for i in range(5)]
        await trio.testing.wait_all_tasks_blocked()
        assert inbox.statistics().queued <= 2 + 1
        change = await next_change(inbox)  # it fell behind: a snapshot of all five
        assert isinstance(change, InboxSnapshot)
        assert {item.session for item in change.items} == {s.id for s in sessions}
        assert inbox.resyncs == 1
        # Read as they come, the changes are each resolution in turn.
        await sessions[0].abort()
        assert isinstance(await next_change(inbox), InboxResolved)
        assert len(inbox.items) == 4
        # Behind again: five changes queued would be more than two, so a snapshot.
        for session in sessions[1:]:
            await session.abort()
        assert await next_change(inbox) == InboxSnapshot(items=())
        assert inbox.resyncs == 2


async def test_a_principal_sees_only_its_sessions(autojump_clock: trio.testing.MockClock) -> None:
    from claude_trio.actors.fanout.owners import GatewayOwner

    async with open_fleet(transport_factory=FakeCLI(bash_asker)) as fleet:
        alice = GatewayOwner("alice", "127.0.0.1")
        bob = GatewayOwner("bob", "127.0.0.1")
        async with fleet.inbox(may_see=lambda owner: owner == "alice") as inbox:
            assert await next_change(inbox) == InboxSnapshot(items=())
            mine = await fleet.open(asking("a", 50.0), owner=alice)
            theirs = await fleet.open(asking("b", 50.0), owner=bob)
            change = await next_change(inbox)
            assert isinstance(change, InboxArrived)
            assert (change.item.session, change.item.owner) == (mine.id, "alice")
            await theirs.abort()
            await mine.abort()
            change = await next_change(inbox)
            assert isinstance(change, InboxResolved)
            assert change.session == mine.id
