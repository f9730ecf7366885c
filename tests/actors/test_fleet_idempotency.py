"""A local fleet's idempotency keys: a start or continue sent again with its key returns the
session the first one created and starts no CLI; the key with another request is refused;
keys expire after ``idempotency_ttl`` (exact virtual time under ``autojump_clock``)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from claude_trio.actors.fanout.fleet import open_fleet
from claude_trio.actors.fanout.owners import GatewayOwner
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.errors import (
    IdempotencyConflictError,
    InvalidParamsError,
    UnknownSessionError,
)
from claude_trio.testing import FakeCLI, FakeTurn


class Counted:
    """A FakeCLI script that counts the turns it was asked to run (one per CLI start)."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    async def __call__(self, turn: FakeTurn) -> None:
        self.prompts.append(turn.prompt)
        await turn.text(f"ran {turn.prompt}")


async def test_the_same_open_twice_with_one_key_starts_one_session(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = Counted()
    async with open_fleet(transport_factory=FakeCLI(script)) as fleet:
        params = ExecuteParams(prompt="one")
        first = await fleet.open(params, label="x", idempotency_key="item-1")
        again = await fleet.open(params, label="x", idempotency_key="item-1")
        await first.wait_closed()
        after_end = await fleet.open(params, label="x", idempotency_key="item-1")
        other = await fleet.open(params, label="x", idempotency_key="item-2")
        await other.wait_closed()
        listed = await fleet.list()
    assert again is first
    assert after_end is first
    assert other is not first
    assert script.prompts == ["one", "one"]  # one CLI turn per key
    assert [info.session for info in listed] == [first.id, other.id]


async def test_the_key_with_other_params_is_refused(autojump_clock: trio.testing.MockClock) -> None:
    script = Counted()
    async with open_fleet(transport_factory=FakeCLI(script)) as fleet:
        first = await fleet.open(ExecuteParams(prompt="one"), idempotency_key="k")
        with pytest.raises(IdempotencyConflictError, match="different open request"):
            await fleet.open(ExecuteParams(prompt="two"), idempotency_key="k")
        with pytest.raises(IdempotencyConflictError):
            await fleet.open(ExecuteParams(prompt="one"), label="renamed", idempotency_key="k")
        with pytest.raises(InvalidParamsError, match="idempotency_key"):
            await fleet.open(ExecuteParams(prompt="one"), idempotency_key="")
        await first.wait_closed()
    assert script.prompts == ["one"]


async def test_keys_are_the_principals_not_the_connections(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = Counted()
    params = ExecuteParams(prompt="one")
    async with open_fleet(transport_factory=FakeCLI(script)) as fleet:
        alice, alice_again = GatewayOwner("alice", "10.0.0.1"), GatewayOwner("alice", "10.0.0.2")
        first = await fleet.open(params, owner=alice, idempotency_key="k")
        # alice again from another address (a reconnect): the same key, the same session
        again = await fleet.open(params, owner=alice_again, idempotency_key="k")
        # bob's "k" is his own
        bobs = await fleet.open(params, owner=GatewayOwner("bob", "10.0.0.1"), idempotency_key="k")
        await first.wait_closed()
        await bobs.wait_closed()
    assert again is first
    assert bobs is not first
    assert len(script.prompts) == 2


async def test_a_key_expires_after_its_ttl(autojump_clock: trio.testing.MockClock) -> None:
    script = Counted()
    params = ExecuteParams(prompt="one")
    async with open_fleet(transport_factory=FakeCLI(script), idempotency_ttl=60) as fleet:
        start = trio.current_time()
        first = await fleet.open(params, idempotency_key="k")
        await first.wait_closed()
        await trio.sleep_until(start + 59.5)
        assert await fleet.open(params, idempotency_key="k") is first
        await trio.sleep_until(start + 60)
        later = await fleet.open(params, idempotency_key="k")
        await later.wait_closed()
    assert later is not first
    assert len(script.prompts) == 2


async def test_a_forgotten_session_is_named_not_started_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = Counted()
    params = ExecuteParams(prompt="one")
    async with open_fleet(transport_factory=FakeCLI(script), keep_finished=0) as fleet:
        first = await fleet.open(params, idempotency_key="k")
        await first.wait_closed()
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(UnknownSessionError):
            await fleet.open(params, idempotency_key="k")
    assert script.prompts == ["one"]


async def test_the_same_continue_twice_with_one_key_runs_one_execution() -> None:
    # The real clock: a continued session reads its transcript's cost in a worker thread.
    script = Counted()
    async with open_fleet(transport_factory=FakeCLI(script)) as fleet:
        with trio.fail_after(20):
            session = await fleet.open(ExecuteParams(prompt="one"))
            await session.wait_closed()
            first = await fleet.continue_(session.id, "two", idempotency_key="c-1")
            again = await fleet.continue_(session.id, "two", idempotency_key="c-1")  # running
            await session.wait_closed()
            after_end = await fleet.continue_(session.id, "two", idempotency_key="c-1")
            with pytest.raises(IdempotencyConflictError, match="different continue request"):
                await fleet.continue_(session.id, "three", idempotency_key="c-1")
    assert first is again is after_end is session
    assert session.executions == 2
    assert script.prompts == ["one", "two"]
