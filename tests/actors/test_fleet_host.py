"""The local fleet is a session host: the conformance suite on FakeCLI sessions; and the suite
itself tells a host that breaks a contract which one it broke, and when.

The whole suite runs on the real clock: a continued session reads its transcript's cost in a
worker thread, and the autojump clock would jump to the suite's deadline meanwhile (the fake's
turns take no time, so the real clock costs little).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import attrs
import pytest
import trio

from claude_trio.actors.fanout.fleet import Fleet, open_fleet
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.fanout.wire import SessionInfo
from claude_trio.protocol.session.usage import ZERO_USAGE
from claude_trio.testing import (
    FakeCLI,
    FakeTurn,
    HostConformanceError,
    conformance_cli,
    run_host_conformance,
)
from claude_trio.testing.host_conformance import CONTRACT_DEADLINE, CONTRACTS


async def test_the_local_fleet_keeps_every_host_contract() -> None:
    made: list[Fleet] = []

    @asynccontextmanager
    async def fleet() -> AsyncIterator[Fleet]:
        async with open_fleet(transport_factory=conformance_cli()) as fleet:
            made.append(fleet)
            yield fleet

    await run_host_conformance(fleet)
    assert len(made) == len(CONTRACTS)  # a fresh host for every contract


class ZeroUsageFleet:
    """A fleet whose listing says every session used nothing (what a cluster's said)."""

    def __init__(self, fleet: Fleet) -> None:
        self._fleet = fleet
        self.open = fleet.open
        self.continue_ = fleet.continue_
        self.get = fleet.get

    async def list(self) -> Sequence[SessionInfo]:
        return [attrs.evolve(info, usage=ZERO_USAGE) for info in await self._fleet.list()]


async def test_a_broken_contract_is_named(autojump_clock: trio.abc.Clock) -> None:
    """Named with what broke, also when the host's own nursery wraps the failure in an
    exception group (as ``open_redis_fleet``'s does)."""

    @asynccontextmanager
    async def host() -> AsyncIterator[ZeroUsageFleet]:
        async with (
            open_fleet(transport_factory=conformance_cli()) as fleet,
            trio.open_nursery(),
        ):
            yield ZeroUsageFleet(fleet)

    with pytest.raises(HostConformanceError) as caught:
        await run_host_conformance(host)
    assert (caught.value.number, caught.value.contract) == (4, "list")
    assert caught.value.problem == "list() says the session used nothing"


async def test_a_host_that_hangs_breaks_the_first_contract_at_its_deadline(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Sessions whose CLI never ends a turn cannot end: the first contract is reported at its
    deadline, on trio's clock."""

    async def forever(turn: FakeTurn) -> None:
        await trio.sleep_forever()

    @asynccontextmanager
    async def stuck() -> AsyncIterator[Fleet]:
        async with open_fleet(transport_factory=FakeCLI(forever)) as fleet:
            yield fleet

    started = trio.current_time()
    with pytest.raises(HostConformanceError) as caught:
        await run_host_conformance(stuck)
    assert (caught.value.number, caught.value.contract) == (1, "open")
    assert "did not finish within 60 s" in str(caught.value)
    assert trio.current_time() - started == CONTRACT_DEADLINE


async def test_the_factory_may_return_a_host_or_an_awaitable_of_one() -> None:
    async with open_fleet(transport_factory=conformance_cli()) as fleet:

        async def awaitable() -> Fleet:
            await trio.lowlevel.checkpoint()
            return fleet

        await run_host_conformance(lambda: fleet)
        await run_host_conformance(awaitable)
        handle = await fleet.open(ExecuteParams(prompt="say:still here"))
        assert (await handle.result()).text == "still here"
