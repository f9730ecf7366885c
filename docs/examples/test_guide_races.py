"""docs/testing.md, "Races": a push against the end of the turn, forced in both orders."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from claude_trio import Accepted, ExecuteParams, Rejected, Result, open_session
from claude_trio.testing import FakeCLI, FakeTurn


@pytest.mark.parametrize("first", ["push", "result"])
async def test_a_push_at_the_end_of_a_turn(
    first: str, autojump_clock: trio.testing.MockClock
) -> None:
    sequencer = trio.testing.Sequencer()
    cli_step, user_step = (1, 0) if first == "push" else (0, 1)

    async def answer(turn: FakeTurn) -> None:
        await turn.text("done")
        async with sequencer(cli_step):  # the result waits for its turn in the race
            await turn.result()

    async def follow_up(turn: FakeTurn) -> None:
        await turn.text("and the tests too")

    outcomes: list[Accepted | Rejected] = []
    async with open_session(
        ExecuteParams(prompt="fix it"), transport_factory=FakeCLI([answer, follow_up])
    ) as session:

        async def user() -> None:
            async with sequencer(user_step):
                if first == "result":
                    await session.wait_ended()  # the result was processed: the end
                outcomes.append(await session.push("run the tests too"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(user)
            results = [e async for e in session.events if isinstance(e, Result)]

    [outcome] = outcomes
    if first == "push":
        assert isinstance(outcome, Accepted)  # delivered: it became turn 2
        assert [(r.turn, r.final) for r in results] == [(1, False), (2, True)]
    else:
        assert outcome == Rejected(reason="the execution has ended")
        assert [(r.turn, r.final) for r in results] == [(1, True)]
