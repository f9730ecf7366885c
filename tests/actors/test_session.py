"""open_session over the scripted fake CLI: the lifecycle, pushes, abort, faults.

Everything runs under ``autojump_clock`` (MockClock with autojump), so times are exact.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing
from session_kit import CONFIG, assert_no_leak, check_stream, collect, fake_session, kinds

from claude_trio import (
    Aborted,
    Accepted,
    Error,
    Event,
    ExecuteParams,
    Rejected,
    Result,
    TextDelta,
    ToolUse,
)
from claude_trio.events import UserMessage, WarningEvent
from claude_trio.testing import FakeCLI, FakeTurn


async def test_a_normal_turn_streams_then_ends_with_one_final_result(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.thinking("hmm", chunk=2)
        await cli.text("Hello world", chunk=5, delay=0.5)
        await cli.result(usage={"input_tokens": 3, "cache_read_input_tokens": 4,
                                "output_tokens": 6}, cost_usd=0.25)

    fake = FakeCLI(script)
    start = trio.current_time()
    async with fake_session(fake) as session:
        events = await collect(session)
    check_stream(events)
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert "".join(d.text for d in deltas) == "Hello world"
    assert [d.text for d in deltas] == ["Hello", " worl", "d"]
    assert "thinking" in kinds(events)
    assert kinds(events).index("thinking") < kinds(events).index("text_delta")
    result = events[-1]
    assert isinstance(result, Result)
    assert result.final
    assert not result.is_error
    assert result.usage.input_tokens == 7  # fresh 3 + cache read 4
    assert result.usage.cache_read_input_tokens == 4
    assert result.usage.cost_usd == pytest.approx(0.25)
    assert session.usage == result.session_usage
    assert session.usage_by_turn.session == session.usage
    # three text deltas, each 0.5 s after the previous event: exactly 1.5 s of virtual time
    assert trio.current_time() - start == pytest.approx(1.5)
    # the first prompt went to the CLI as a user message with our uuid, listed in the result
    (prompt,) = fake.transport.user_messages
    assert prompt["message"]["content"] == "hello"
    assert result.user_message_uuids == (prompt["uuid"],)
    assert_no_leak(fake)


async def test_push_while_a_tool_runs_is_folded_into_the_same_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def script(cli: FakeTurn) -> None:
        tool = await cli.tool_use("Bash", {"command": "make"})
        await cli.sleep(2.0)
        await cli.tool_result(tool, "built")
        await cli.text("done")

    fake = FakeCLI(script)
    outcomes: list[Accepted | Rejected] = []
    async with fake_session(fake) as session:

        async def on_event(event: object) -> None:
            if isinstance(event, ToolUse):
                outcomes.append(await session.push("and run the tests"))

        events = await collect(session, on_event)
    check_stream(events)
    (outcome,) = outcomes
    assert isinstance(outcome, Accepted)
    results = [e for e in events if isinstance(e, Result)]
    assert len(results) == 1
    assert results[0].final
    assert outcome.uuid in results[0].user_message_uuids
    pushed = [e for e in events if isinstance(e, UserMessage)]
    assert [p.uuid for p in pushed] == [outcome.uuid]
    assert kinds(events).index("user_message") < kinds(events).index("tool_result")
    assert_no_leak(fake)


async def test_push_while_text_streams_becomes_the_next_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def first(cli: FakeTurn) -> None:
        await cli.text("a long answer", chunk=2, delay=0.1)

    async def second(cli: FakeTurn) -> None:
        await cli.text("about the push")

    fake = FakeCLI([first, second])
    pushed: list[Accepted | Rejected] = []
    async with fake_session(fake) as session:

        async def on_event(event: object) -> None:
            if isinstance(event, TextDelta) and not pushed:
                pushed.append(await session.push("one more thing"))

        events = await collect(session, on_event)
        late = await session.push("too late")
    check_stream(events)
    results = [e for e in events if isinstance(e, Result)]
    assert [(r.turn, r.final) for r in results] == [(1, False), (2, True)]
    assert isinstance(pushed[0], Accepted)
    assert results[1].user_message_uuids == (pushed[0].uuid,)
    assert late == Rejected(reason="the execution has ended")
    assert len(fake.transport.user_messages) == 2  # the late push never reached the CLI
    assert_no_leak(fake)


async def test_a_push_from_inside_the_event_loop_never_deadlocks(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The consumer pushes from its own `async for` loop while the driver is blocked on it.
    async def script(cli: FakeTurn) -> None:
        tool = await cli.tool_use("Bash", {"command": "x"})
        await cli.sleep(1)
        await cli.tool_result(tool, "ok")

    fake = FakeCLI(script)
    async with fake_session(fake) as session:

        async def on_event(event: object) -> None:
            if isinstance(event, ToolUse):
                for i in range(10):
                    assert isinstance(await session.push(f"push {i}"), Accepted)

        with trio.fail_after(30):
            events = await collect(session, on_event)
    check_stream(events)
    assert len([e for e in events if isinstance(e, UserMessage)]) == 10


async def test_abort_mid_stream_gives_one_aborted_event_with_the_clis_confirmation(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.text("x" * 50, chunk=1, delay=1.0)

    fake = FakeCLI(script)
    async with fake_session(fake) as session:

        async def on_event(event: object) -> None:
            if isinstance(event, TextDelta) and event.text == "x" and event.seq > 5:
                before = trio.current_time()
                await session.abort()
                await session.abort()  # idempotent
                # the fake confirms the interrupt at once: no deadline was waited for
                assert trio.current_time() == before

        events = await collect(session, on_event)
        assert isinstance(await session.push("after abort"), Rejected)
    check_stream(events)
    assert isinstance(events[-1], Aborted)
    assert events[-1].reason == "aborted_streaming"
    assert len([e for e in events if isinstance(e, Aborted)]) == 1
    assert fake.transport.interrupts == 1
    assert_no_leak(fake)


async def test_abort_when_the_cli_never_confirms_is_synthesized_after_our_deadlines(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.text("slow", chunk=1, delay=100.0)

    fake = FakeCLI(script, unanswered={"interrupt"})
    async with fake_session(fake) as session:

        async def on_event(event: object) -> None:
            if isinstance(event, TextDelta):
                before = trio.current_time()
                await session.abort()
                # the interrupt reply is waited for interrupt_timeout, not the SDK's 60 s
                assert trio.current_time() - before == CONFIG.interrupt_timeout

        events = await collect(session, on_event)
    check_stream(events)
    assert isinstance(events[-1], Aborted)
    assert events[-1].reason == "aborted"
    assert any(isinstance(e, Error) and not e.fatal and "interrupt" in e.message for e in events)
    assert_no_leak(fake)


async def test_the_cli_dying_mid_turn_is_a_fatal_error_naming_exit_code_and_stderr(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def script(cli: FakeTurn) -> None:
        tool = await cli.tool_use("Bash", {"command": "x"})
        await cli.sleep(1)
        del tool
        await cli.exit(3, stderr=["fatal: out of cheese"])

    fake = FakeCLI(script)
    async with fake_session(fake) as session:

        async def on_event(event: object) -> None:
            if isinstance(event, ToolUse):
                assert isinstance(await session.push("never delivered"), Accepted)

        events = await collect(session, on_event)
        assert isinstance(await session.push("after death"), Rejected)
    check_stream(events)
    error = events[-1]
    assert isinstance(error, Error)
    assert error.fatal
    assert error.code == "cli_exited"
    assert "3" in error.message
    assert "out of cheese" in error.message
    lost = [e for e in events if isinstance(e, WarningEvent) and e.code == "push_undelivered"]
    assert len(lost) == 1
    assert_no_leak(fake)


async def test_initialize_never_answered_fails_at_our_connect_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeCLI(unanswered={"initialize"})
    start = trio.current_time()
    async with fake_session(fake) as session:
        assert trio.current_time() - start == CONFIG.connect_timeout
        events = await collect(session)
        assert isinstance(await session.push("x"), Rejected)
    assert kinds(events) == ["error"]
    assert isinstance(events[0], Error)
    assert events[0].code == "cli_timeout"
    assert "initialize" in events[0].message
    assert_no_leak(fake)


async def test_an_oversize_line_is_a_transport_error_naming_the_cap(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.raw('{"type": "assistant", "pad": "' + "x" * 5000 + '"}')

    fake = FakeCLI(script)
    async with fake_session(fake, max_buffer_size=4096) as session:
        events = await collect(session)
    error = events[-1]
    assert isinstance(error, Error)
    assert error.code == "transport"
    assert error.fatal
    assert "4096" in error.message
    assert "max_buffer_size" in error.message
    assert_no_leak(fake)


async def test_a_malformed_line_is_surfaced_never_dropped(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.raw('{"type": "assistant", broken')

    fake = FakeCLI(script)
    async with fake_session(fake) as session:
        events = await collect(session)
    error = events[-1]
    assert isinstance(error, Error)
    assert error.code == "transport"
    assert "broken" in error.message
    assert_no_leak(fake)


async def test_noise_blank_and_crlf_lines_are_skipped_and_nothing_is_lost(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.raw("[SandboxDebug] hello")
        await cli.raw("")
        await cli.text("kept")

    fake = FakeCLI(script, line_ending="\r\n")
    async with fake_session(fake) as session:
        events = await collect(session)
    check_stream(events)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "kept"
    assert isinstance(events[-1], Result)
    assert events[-1].final


async def test_a_background_subagent_keeps_the_execution_open_until_its_follow_up_result(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def script(cli: FakeTurn) -> None:
        tool = await cli.tool_use("Agent", {"prompt": "dig", "run_in_background": True})
        await cli.task_started("task-1", tool_use_id=tool, description="dig")
        await cli.tool_result(tool, "started in background")
        await cli.text("I started it")
        await cli.result()

        async def finish() -> None:
            await cli.sleep(5)
            await cli.task_notification("task-1", status="completed", summary="found it")

            async def follow_up(turn: FakeTurn) -> None:
                await turn.text("the agent found it")

            cli.wake(follow_up)

        cli.background(finish)

    fake = FakeCLI(script)
    start = trio.current_time()
    async with fake_session(fake) as session:
        events = await collect(session)
    check_stream(events)
    results = [e for e in events if isinstance(e, Result)]
    assert [(r.turn, r.final) for r in results] == [(1, False), (2, True)]
    assert kinds(events).index("subagent_started") < kinds(events).index("subagent_completed")
    assert trio.current_time() - start == pytest.approx(5.0)
    assert_no_leak(fake)


async def test_cancelling_the_callers_scope_mid_turn_leaves_nothing_behind(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.text("forever", chunk=1, delay=10.0)

    fake = FakeCLI(script)
    seen: list[str] = []
    with trio.move_on_after(25):
        async with fake_session(fake) as session:
            async for event in session.events:
                seen.append(event.kind)
    assert "text_delta" in seen
    assert_no_leak(fake)
    # the stream got its one terminal event even though nobody read it
    assert session.ended


async def test_leaving_the_block_early_aborts_with_one_terminal_event(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.text("forever", chunk=1, delay=10.0)

    fake = FakeCLI(script)
    async with fake_session(fake) as session:
        async for event in session.events:
            if isinstance(event, TextDelta):
                break
    remaining = []
    while True:
        try:
            remaining.append(session.events.receive_nowait())
        except (trio.EndOfChannel, trio.WouldBlock):
            break
    assert [e.kind for e in remaining][-1:] == ["aborted"]
    assert_no_leak(fake)


async def test_streaming_input_off_rejects_pushes(autojump_clock: trio.testing.MockClock) -> None:
    fake = FakeCLI()
    params = ExecuteParams(prompt="hi", streaming_input=False)
    async with fake_session(fake, params=params) as session:
        outcome = await session.push("x")
        await collect(session)
    assert outcome == Rejected(reason="streaming input is off for this execution")


async def test_abort_before_the_prompt_is_consumed_reports_no_lost_push(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeCLI(replay_user_messages=False)  # no echo: the prompt is never seen consumed
    async with fake_session(fake) as session:
        await session.abort()
        events = await collect(session)
    # Whether the prompt reached the CLI before the abort (its turn then starts, interrupted)
    # or not (never written), it is the execution's own prompt, not a lost push.
    assert [e.kind for e in events] in (
        ["adapter_ready", "aborted"],
        ["adapter_ready", "turn_started", "aborted"],
    )


@pytest.mark.parametrize("cancel_at", [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5])
async def test_cancelling_at_any_point_of_a_session_leaves_one_terminal_and_no_cli(
    autojump_clock: trio.testing.MockClock, cancel_at: float
) -> None:
    # A turn with activity at every half second: the caller's deadline lands in connect (0.0),
    # mid-stream, mid-tool, at the result (3.0) and after it, while closing.
    async def script(cli: FakeTurn) -> None:
        await cli.text("ab", chunk=1, delay=0.5)
        tool = await cli.tool_use("Bash", {"command": "x"})
        await cli.sleep(1.0)
        await cli.tool_result(tool, "ok")
        await cli.text("c", delay=0.5)

    fake = FakeCLI(script)
    seen: list[Event] = []
    with trio.move_on_after(cancel_at):
        async with fake_session(fake) as session:
            async for event in session.events:
                seen.append(event)
    assert_no_leak(fake)
    if fake.transports and fake.transport.connected:
        assert session.ended
        rest = []
        while True:
            try:
                rest.append(session.events.receive_nowait())
            except (trio.EndOfChannel, trio.WouldBlock):
                break
        check_stream([*seen, *rest])


async def test_one_sessions_broken_cli_does_not_disturb_another(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def broken(cli: FakeTurn) -> None:
        await cli.sleep(1)
        await cli.raw('{"type": "assistant", "pad": "' + "x" * 5000 + '"}')

    async def healthy(cli: FakeTurn) -> None:
        await cli.text("fine", chunk=1, delay=0.5)

    bad, good = FakeCLI(broken), FakeCLI(healthy)
    results: dict[str, list[Event]] = {}

    async def run(name: str, fake: FakeCLI) -> None:
        async with fake_session(fake, max_buffer_size=4096) as session:
            results[name] = await collect(session)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, "bad", bad)
        nursery.start_soon(run, "good", good)
    assert isinstance(results["bad"][-1], Error)
    assert isinstance(results["good"][-1], Result)
    check_stream(results["good"])
    assert_no_leak(bad)
    assert_no_leak(good)
