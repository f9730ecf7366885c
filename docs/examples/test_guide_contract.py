"""docs/testing.md, "The contract kit": check what your code saw against the invariants."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
import trio.testing

from claude_trio import Event, ToolUse, observe
from claude_trio.testing import ContractRecorder, ContractViolationError, FakeTurn, check_contract


async def uses_a_tool(turn: FakeTurn) -> None:
    tool = await turn.tool_use("Bash", {"command": "ls"}, id="toolu_ls")
    await turn.tool_result(tool, "app.py")
    await turn.text("One file.")


async def test_a_captured_stream_keeps_the_contract(
    scripted_session: Any, autojump_clock: trio.testing.MockClock
) -> None:
    async with scripted_session(uses_a_tool) as session:
        events: list[Event] = [event async for event in session.events]
    check_contract(events)  # raises ContractViolationError listing every violation

    # A stream your own code rewrote wrongly: a tool call reported twice.
    tool_use = next(event for event in events if isinstance(event, ToolUse))
    tampered = [*events[:-1], attrs.evolve(tool_use, seq=events[-1].seq), events[-1]]
    with pytest.raises(ContractViolationError) as caught:
        check_contract(tampered)
    assert [(v.rule, v.seq) for v in caught.value.violations] == [
        ("tool_use", events[-1].seq),
        ("seq", events[-1].seq),
    ]


async def test_the_fixture_checks_what_your_code_consumed(
    scripted_session: Any, event_contract: ContractRecorder, autojump_clock: trio.testing.MockClock
) -> None:
    async with scripted_session(uses_a_tool) as session:
        # Your code reads the stream; the fixture watches it and checks it at teardown.
        async for _ in observe(session.events, event_contract.watch("review session")):
            pass
