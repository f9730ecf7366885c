"""The contract kit: ``check_contract``, ``assert_contract`` and the ``event_contract`` fixture."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
import trio.testing

from claude_trio import Event, ExecuteParams, ToolUse, observe, open_fleet
from claude_trio.testing import (
    ContractRecorder,
    ContractViolationError,
    FakeCLI,
    FakeTurn,
    check_contract,
)
from claude_trio.testing.pytest_plugin import assert_contract


async def tools(cli: FakeTurn) -> None:
    await cli.tool_use("Read", {"file_path": "a"}, id="t-1")
    await cli.tool_result("t-1", "contents")
    await cli.text("read it")


async def captured(scripted_session: Any) -> list[Event]:
    async with scripted_session(tools) as session:
        return [event async for event in session.events]


async def test_a_real_sessions_stream_keeps_the_contract(
    scripted_session: Any, autojump_clock: trio.testing.MockClock
) -> None:
    events = await captured(scripted_session)
    check_contract(events)
    assert_contract(events)


async def test_every_violation_is_reported_with_the_seq_of_its_event(
    scripted_session: Any, autojump_clock: trio.testing.MockClock
) -> None:
    events = await captured(scripted_session)
    [use] = [e for e in events if isinstance(e, ToolUse)]
    # Break it three ways: the tool call reported twice, a seq going back, an event after the
    # end.
    broken = [*events[:-1], attrs.evolve(use, seq=events[-2].seq), events[-1]]
    broken.append(attrs.evolve(events[0], seq=events[-1].seq + 1, turn=2))
    with pytest.raises(ContractViolationError) as caught:
        check_contract(broken)
    violations = caught.value.violations
    assert [(v.seq, v.rule) for v in violations] == [
        (events[-2].seq, "seq"),
        (events[-2].seq, "tool_use"),
        (events[-1].seq + 1, "final"),
    ]
    lines = str(caught.value).splitlines()
    assert lines[0] == "3 violations of the event contract:"
    assert lines[2] == (
        f"  seq {events[-2].seq} [tool_use]: tool_use 't-1' reported again (first at seq {use.seq})"
    )
    assert isinstance(caught.value, AssertionError)  # any test runner reports it as a failure


async def test_assert_contract_fails_the_test_with_the_list_and_no_kit_traceback(
    scripted_session: Any, autojump_clock: trio.testing.MockClock
) -> None:
    events = await captured(scripted_session)
    with pytest.raises(pytest.fail.Exception) as caught:
        assert_contract(events[:-1])
    assert str(caught.value).startswith("1 violation of the event contract:\n  seq ")
    assert "[final]: the stream ended without the event that ends the execution" in str(
        caught.value
    )
    assert not caught.value.pytrace
    assert_contract(events[:-1], complete=False)


async def test_the_recorder_checks_every_stream_it_watched(
    scripted_session: Any, autojump_clock: trio.testing.MockClock
) -> None:
    recorder = ContractRecorder()
    async with scripted_session(tools) as session:
        async for _ in observe(session.events, recorder.watch("whole")):
            pass
    recorder.check()
    cut = recorder.watch("cut short")
    async with scripted_session(tools) as session:
        async for event in observe(session.events, cut):
            if isinstance(event, ToolUse):
                break
    [problem] = recorder.problems()
    assert problem.startswith("cut short: 1 violation of the event contract:")
    with pytest.raises(ContractViolationError, match="cut short: 1 violation"):
        recorder.check()
    recorder.watch("on purpose", complete=False)(cut.events[0])
    assert len(recorder.problems()) == 1


async def test_the_event_contract_fixture_watches_a_fleet_subscription(
    event_contract: ContractRecorder, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_fleet(transport_factory=FakeCLI(tools)) as fleet:
        fs = await fleet.start(ExecuteParams(prompt="hi"))
        subscription = fs.subscribe_nowait(None, max_queue=100)
        assert not isinstance(subscription, type(None))
        with subscription:
            async for _ in observe(subscription, event_contract.watch("fleet")):
                pass
    # Checked at teardown: a failure there would fail this test.
    assert event_contract.problems() == []
