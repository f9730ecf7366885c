"""Stop means stop, over the scripted fake CLI, in exact virtual time.

The rule: once ``abort()`` returns, or the ``async with`` is left for any reason, the CLI starts
no new tool and is gone within a bounded time. Each script's "tool" records the virtual time it
would have its side effect; after a stop there must be none. The fake models what the real CLI
and the SDK do here: it answers an interrupt at once (and honours ``cancel_queued``), it starts
its turn ``init_delay`` after reading a message, and the SDK's own close would give it 5 s after
the end of its input before SIGTERM (``CLOSE_GRACE_SECONDS``), which a stop must never sit out.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from session_kit import CONFIG, assert_no_leak, check_stream, collect, fake_session

from claude_trio import (
    Aborted,
    Error,
    Event,
    ExecuteParams,
    Rejected,
    Result,
    Session,
    TextDelta,
    ToolUse,
    open_session,
)
from claude_trio.events import WarningEvent
from claude_trio.testing import FakeCLI, FakeTurn
from claude_trio.testing.fake_cli import SIGKILL_EXIT_CODE

TOOL_SECONDS = 2.0


def tool_script(effects: list[float], seconds: float = TOOL_SECONDS) -> Any:
    """A turn that runs a tool for ``seconds``, then has its side effect, then answers."""

    async def script(cli: FakeTurn) -> None:
        tool = await cli.tool_use("Bash", {"command": f"sleep {seconds:g}; touch mark"})
        await cli.sleep(seconds)
        effects.append(trio.current_time())
        await cli.tool_result(tool, "touched")
        await cli.text("done")

    return script


def timeouts(events: list[Event]) -> list[Error]:
    return [e for e in events if isinstance(e, Error) and e.code == "cli_timeout"]


async def abort_on_tool_use(
    fake: FakeCLI, *, after: float = 0.0
) -> tuple[Session, list[Event], float]:
    """Run a session on ``fake``; ``after`` its first ``tool_use`` event, abort it. Returns the
    session, its events and the virtual time ``abort()`` took."""
    took: list[float] = []

    async def on_event(event: Event) -> None:
        if isinstance(event, ToolUse) and not took:
            await trio.sleep(after)
            before = trio.current_time()
            await session.abort()
            took.append(trio.current_time() - before)

    async with fake_session(fake) as session:
        events = await collect(session, on_event)
    (elapsed,) = took
    return session, events, elapsed


def the_aborted(events: list[Event]) -> Aborted:
    check_stream(events)
    last = events[-1]
    assert isinstance(last, Aborted), last
    return last


async def test_abort_before_the_cli_started_its_turn_stops_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    effects: list[float] = []
    fake = FakeCLI(tool_script(effects), init_delay=0.5)
    async with fake_session(fake) as session:
        await trio.sleep(0.1)  # the prompt is written; the CLI has not started its turn
        assert fake.transport.user_messages
        before = trio.current_time()
        await session.abort()
        # Until the turn the CLI had begun starts - aborted at once - and ends.
        assert trio.current_time() - before == 0.4
        events = await collect(session)
    left = trio.current_time()
    await trio.sleep(10)
    assert effects == []
    assert fake.transport.interrupts == 1
    assert left == 0.5  # nothing waited out
    aborted = the_aborted(events)
    assert aborted.usage is not None  # the CLI's own result for the aborted turn
    assert not [e for e in events if isinstance(e, ToolUse)]
    assert timeouts(events) == []
    assert_no_leak(fake)


async def test_abort_mid_tool_returns_at_once_and_the_tool_never_finishes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    effects: list[float] = []
    fake = FakeCLI(tool_script(effects))
    session, events, took = await abort_on_tool_use(fake, after=0.5)
    assert took == 0.0
    assert trio.current_time() == 0.5  # the CLI exited on the end of its input at once
    await trio.sleep(10)
    assert effects == []
    aborted = the_aborted(events)
    assert aborted.usage is not None
    # The interrupted turn is a turn of the usage too, as it is of the execution's total.
    usage = session.usage_by_turn
    assert usage.turns == (aborted.usage,)
    assert usage.execution == aborted.usage
    assert fake.transport.exit_code is not None
    assert fake.transport.exit_code != SIGKILL_EXIT_CODE  # it settled: not killed
    assert_no_leak(fake)


@pytest.mark.parametrize("how", ["break", "exception", "deadline", "cancel"])
async def test_leaving_the_block_mid_tool_stops_the_cli_at_once(
    autojump_clock: trio.testing.MockClock, how: str
) -> None:
    effects: list[float] = []
    fake = FakeCLI(tool_script(effects))
    events: list[Event] = []

    class Stop(Exception):
        pass

    with trio.CancelScope() as scope:  # noqa: ASYNC912 - the block awaits
        if how == "deadline":
            scope.deadline = 1.25
        try:
            async with fake_session(fake) as session:
                async for event in session.events:
                    events.append(event)
                    if isinstance(event, ToolUse):
                        await trio.sleep(0.5)
                        if how == "break":
                            break
                        if how == "exception":
                            raise Stop
                        if how == "cancel":
                            scope.cancel()
                        await trio.sleep_forever()
        except Stop:  # the caller's exception, as itself (no ExceptionGroup)
            assert how == "exception"
    stopped = 1.25 if how == "deadline" else 0.5
    assert trio.current_time() == stopped  # the SDK's 5 s grace is never sat out
    events.extend([event async for event in session.events])
    await trio.sleep(10)
    assert effects == []
    assert fake.transport.interrupts == 1
    aborted = the_aborted(events)
    assert aborted.reason == "the session was closed before the execution ended"
    assert_no_leak(fake)


async def test_leaving_the_block_ends_the_cli_s_input_once_it_confirmed_the_interrupt(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The CLI takes 0.03 s to finish the interrupted turn after it confirmed the interrupt. Its
    # input ends at the confirmation (0.5), not after its idle (0.53): it finishes the turn,
    # reports its result, and exits on its own, with no round trip through the session after it.
    effects: list[float] = []
    fake = FakeCLI(tool_script(effects), interrupt_delay=0.03)
    events: list[Event] = []
    async with fake_session(fake) as session:
        async for event in session.events:
            events.append(event)
            if isinstance(event, ToolUse):
                await trio.sleep(0.5)
                break
    assert trio.current_time() == 0.53
    transport = fake.transport
    assert transport.input_ended_at == 0.5
    assert transport.interrupts == 1
    assert transport.exit_code == 1  # exited on the end of its input after an error result
    [result] = transport.results  # the interrupted turn's, with its usage
    assert result["subtype"] == "error_during_execution"
    events.extend([event async for event in session.events])
    the_aborted(events)
    assert not timeouts(events)
    await trio.sleep(10)
    assert effects == []
    assert_no_leak(fake)


async def test_abort_ends_the_cli_s_input_once_it_confirmed_the_interrupt(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The session tears its CLI down once the execution ended: an abort ends its input at the
    # confirmation too, and abort() returns once it finished the interrupted turn.
    effects: list[float] = []
    fake = FakeCLI(tool_script(effects), interrupt_delay=0.03)
    _, events, took = await abort_on_tool_use(fake, after=0.5)
    assert trio.current_time() == 0.53  # abort() returned at 0.5 + 0.03, the CLI exited then
    assert took == pytest.approx(0.03)
    assert fake.transport.input_ended_at == 0.5
    assert fake.transport.exit_code == 1  # exited on the end of its input, not killed
    assert the_aborted(events).usage is not None  # the interrupted turn's result
    assert not timeouts(events)
    await trio.sleep(10)
    assert effects == []
    assert_no_leak(fake)


async def test_abort_from_a_consumer_that_fell_behind_is_not_held_up(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A 2,000-delta turn; the consumer stops reading, the stream fills, backpressure parks the
    # SDK's reader - the very reader the CLI's answer to the interrupt arrives on.
    async def script(cli: FakeTurn) -> None:
        await cli.text("x" * 2000, chunk=1)

    fake = FakeCLI(script)
    took: list[float] = []

    async def on_event(event: Event) -> None:
        if isinstance(event, TextDelta) and not took:
            await trio.sleep(10)
            assert len(session.events) >= 256  # behind: the stream is full
            before = trio.current_time()
            await session.abort()
            took.append(trio.current_time() - before)

    async with fake_session(fake) as session:
        events = await collect(session, on_event)
    assert took == [0.0]
    aborted = the_aborted(events)
    assert aborted.usage is not None  # the interrupted turn's real usage, not lost
    assert timeouts(events) == []
    assert not [e for e in events if isinstance(e, Result)]
    assert_no_leak(fake)


async def test_abort_cancels_what_the_cli_has_queued_and_what_was_never_written(
    autojump_clock: trio.testing.MockClock,
) -> None:
    turns: list[int] = []

    async def script(cli: FakeTurn) -> None:
        turns.append(cli.number)
        await cli.text("streaming along", chunk=2, delay=0.5)

    fake = FakeCLI(script)
    outcomes: list[Any] = []

    async def on_event(event: Event) -> None:
        if isinstance(event, TextDelta) and not outcomes:
            outcomes.append(await session.push("queued by the CLI"))
            await trio.sleep(0.25)  # written: the CLI queued it as the next turn
            outcomes.append(session.push_nowait("never written"))
            await session.abort()

    async with fake_session(fake) as session:
        events = await collect(session, on_event)
    await trio.sleep(10)
    assert turns == [1]  # neither push became a turn
    written = [m["message"]["content"] for m in fake.transport.user_messages]
    assert written == ["hello", "queued by the CLI"]
    the_aborted(events)
    lost = [e for e in events if isinstance(e, WarningEvent) and e.code == "push_undelivered"]
    assert len(lost) == 2  # both were accepted, and both are reported undelivered
    assert session.push_nowait("after") == Rejected(reason="the execution was aborted")
    assert_no_leak(fake)


async def test_a_cli_that_ignores_cancel_queued_is_killed_before_it_runs_the_queue(
    autojump_clock: trio.testing.MockClock,
) -> None:
    turns: list[int] = []

    async def script(cli: FakeTurn) -> None:
        turns.append(cli.number)
        await cli.text("streaming along", chunk=2, delay=0.5)

    fake = FakeCLI(script, cancel_queued=False)
    pushed = False

    async def on_event(event: Event) -> None:
        nonlocal pushed
        if isinstance(event, TextDelta) and not pushed:
            pushed = True
            await session.push("queued by the CLI")
            await trio.sleep(0.25)
            await session.abort()

    async with fake_session(fake) as session:
        events = await collect(session, on_event)
    await trio.sleep(10)
    assert turns == [1]
    assert fake.transport.exit_code == SIGKILL_EXIT_CODE
    the_aborted(events)
    assert_no_leak(fake)


async def test_a_cli_that_never_confirms_the_interrupt_is_killed_after_interrupt_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    effects: list[float] = []
    fake = FakeCLI(tool_script(effects), unanswered={"interrupt"})
    _, events, took = await abort_on_tool_use(fake)
    assert took == CONFIG.interrupt_timeout
    await trio.sleep(10)
    assert effects == []
    assert fake.transport.exit_code == SIGKILL_EXIT_CODE
    [timeout] = timeouts(events)
    assert "did not confirm the interrupt" in timeout.message
    assert not timeout.fatal
    the_aborted(events)
    assert_no_leak(fake)


async def test_a_cli_that_does_not_settle_is_killed_after_abort_grace(
    autojump_clock: trio.testing.MockClock,
) -> None:
    effects: list[float] = []
    fake = FakeCLI(tool_script(effects, seconds=100), ignores_interrupts=True)
    _, events, took = await abort_on_tool_use(fake)
    assert took == CONFIG.abort_grace
    await trio.sleep(200)
    assert effects == []
    assert fake.transport.exit_code == SIGKILL_EXIT_CODE
    [timeout] = timeouts(events)
    assert "did not finish the interrupted turn" in timeout.message
    the_aborted(events)
    assert_no_leak(fake)


async def test_a_finished_execution_lets_the_cli_exit_on_its_own(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeCLI()
    async with fake_session(fake) as session:
        events = await collect(session)
    assert trio.current_time() == 0
    assert isinstance(events[-1], Result)
    assert fake.transport.interrupts == 0  # nothing to stop
    assert fake.transport.exit_code == 0  # exited on the end of its input, not killed
    assert_no_leak(fake)


async def test_the_caller_s_exception_comes_out_as_itself(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeCLI()
    with pytest.raises(ValueError, match="mine") as caught:
        async with open_session(ExecuteParams(prompt="hi"), transport_factory=fake):
            raise ValueError("mine")
    assert type(caught.value) is ValueError
    assert_no_leak(fake)


async def test_a_wedged_cli_ends_the_execution_at_stall_timeout_plus_the_probe(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The CLI stops producing mid-turn and answers no control request any more (SIGSTOPped,
    # a hung event loop): the session says so and the CLI is killed, no slot held forever.
    async def script(cli: FakeTurn) -> None:
        await cli.text("working")
        await cli.sleep(10_000)

    fake = FakeCLI(script, unanswered={"mcp_status", "interrupt"})
    async with fake_session(fake) as session:
        events = await collect(session)
    assert trio.current_time() == CONFIG.stall_timeout + CONFIG.control_timeout
    check_stream(events)
    last = events[-1]
    assert isinstance(last, Error)
    assert (last.code, last.fatal) == ("cli_timeout", True)
    assert "stopped responding" in last.message
    assert fake.transport.exit_code == SIGKILL_EXIT_CODE
    assert_no_leak(fake)


async def test_a_cli_silent_in_a_long_tool_but_answering_is_left_alone(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def script(cli: FakeTurn) -> None:
        tool = await cli.tool_use("Bash", {"command": "make world"})
        await cli.sleep(4.5 * CONFIG.stall_timeout)  # silent, but alive
        await cli.tool_result(tool, "built")
        await cli.text("done")

    fake = FakeCLI(script)
    async with fake_session(fake) as session:
        events = await collect(session)
    check_stream(events)
    assert isinstance(events[-1], Result)
    assert trio.current_time() == 4.5 * CONFIG.stall_timeout
    probes = [r for r in fake.transport.control_requests if r["request"]["subtype"] == "mcp_status"]
    assert len(probes) == 4  # one per stall_timeout of silence


# -- run_timeout and idle_timeout ---------------------------------------------------------------


async def test_run_timeout_stops_the_execution_when_it_says(
    autojump_clock: trio.testing.MockClock,
) -> None:
    effects: list[float] = []
    fake = FakeCLI(tool_script(effects, seconds=100))
    params = ExecuteParams(prompt="hello", run_timeout=5.0)
    async with fake_session(fake, params=params) as session:
        events = await collect(session)
    assert trio.current_time() == 5.0
    await trio.sleep(200)
    assert effects == []
    aborted = the_aborted(events)
    assert aborted.reason == "run_timeout: the execution ran for 5 s"
    assert aborted.usage is not None  # the usage so far: the CLI's own interrupted result
    assert_no_leak(fake)


async def test_idle_timeout_counts_from_the_cli_s_last_frame(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def chatty_then_silent(cli: FakeTurn) -> None:
        for _ in range(4):  # a frame every 2 s: under the idle limit every time
            await cli.text("still here ", delay=2.0)
        await cli.sleep(100)  # then nothing

    fake = FakeCLI(chatty_then_silent)
    params = ExecuteParams(prompt="hello", idle_timeout=3.0)
    async with fake_session(fake, params=params) as session:
        events = await collect(session)
    last_frame = 8.0  # the fourth delta
    assert trio.current_time() == last_frame + 3.0
    aborted = the_aborted(events)
    assert aborted.reason == "idle_timeout: no event from the CLI for 3 s"
    assert len([e for e in events if isinstance(e, TextDelta)]) == 4
    assert_no_leak(fake)
