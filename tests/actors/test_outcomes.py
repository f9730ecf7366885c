"""Every way an execution ends, produced by a real path, and the typed outcome it carries.

Each test runs ``open_session`` over the scripted fake CLI (or, for a CLI that cannot start,
no CLI at all) under ``autojump_clock``, so the deadlines are exact virtual times. The terminal
event's ``outcome`` is what a program dispatches on; ``Aborted.phase`` is what the execution was
doing when it was stopped.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, assert_never

import pytest
import trio
import trio.testing
from claude_agent_sdk import ClaudeAgentOptions
from session_kit import CONFIG, assert_no_leak, check_stream, collect, fake_session

from claude_trio import (
    Aborted,
    Error,
    Event,
    ExecuteParams,
    Outcome,
    Result,
    TextDelta,
    ToolUse,
    open_session,
)
from claude_trio.events import AbortPhase
from claude_trio.testing import FakeCLI, FakeTurn


def ending(events: list[Event]) -> Result | Aborted | Error:
    """The execution's terminal event, after the stream's invariants are checked; no other
    event carries an outcome."""
    check_stream(events)
    last = events[-1]
    assert isinstance(last, Result | Aborted | Error)
    for event in events[:-1]:
        assert not isinstance(event, Aborted), "an aborted event always ends the execution"
        if isinstance(event, Result | Error):
            assert event.outcome is None, f"{event.kind} that does not end the execution"
    return last


def what_to_do(outcome: Outcome) -> str:
    """A program's dispatch: every outcome handled, and the type checker knows it."""
    match outcome:
        case Outcome.COMPLETED:
            return "use the answer"
        case Outcome.MAX_TURNS | Outcome.BUDGET_EXCEEDED | Outcome.OUTPUT_RETRIES_EXCEEDED:
            return "raise the limit"
        case Outcome.API_ERROR:
            return "retry later"
        case Outcome.TOOL_ABORTED | Outcome.HOOK_STOPPED:
            return "see why the tool or hook stopped it"
        case Outcome.ABORTED | Outcome.CLOSED:
            return "stopped on purpose"
        case Outcome.RUN_TIMEOUT | Outcome.IDLE_TIMEOUT:
            return "give it more time"
        case Outcome.CLI_EXITED | Outcome.CLI_TIMEOUT | Outcome.INTERNAL | Outcome.FAILED:
            return "report a failure"
        case Outcome.NOT_STARTED:
            return "fix the configuration"
        case _:
            assert_never(outcome)


async def run(fake: FakeCLI, **kwargs: Any) -> Result | Aborted | Error:
    async with fake_session(fake, **kwargs) as session:
        events = await collect(session)
    assert_no_leak(fake)
    return ending(events)


# -- the CLI's last result ----------------------------------------------------------------------


def result_with(**fields: Any) -> Callable[[FakeTurn], Any]:
    async def script(cli: FakeTurn) -> None:
        await cli.text("partial")
        await cli.result(**fields)

    return script


async def api_failure(cli: FakeTurn) -> None:
    await cli.api_error(529, "Overloaded")


@pytest.mark.parametrize(
    ("script", "outcome"),
    [
        (result_with(), Outcome.COMPLETED),
        (result_with(subtype="error_max_turns"), Outcome.MAX_TURNS),
        (
            result_with(subtype="error_max_budget_usd", terminal_reason="budget_exhausted"),
            Outcome.BUDGET_EXCEEDED,
        ),
        (
            result_with(subtype="error_max_structured_output_retries"),
            Outcome.OUTPUT_RETRIES_EXCEEDED,
        ),
        (api_failure, Outcome.API_ERROR),
        # A tool approval denied with interrupt: the CLI ends the turn itself, no abort().
        (
            result_with(subtype="error_during_execution", terminal_reason="aborted_tools"),
            Outcome.TOOL_ABORTED,
        ),
        (result_with(terminal_reason="hook_stopped"), Outcome.HOOK_STOPPED),
        # "Not logged in": a success that is an error, with no API status.
        (result_with(is_error=True, terminal_reason="completed"), Outcome.FAILED),
    ],
    ids=lambda value: value.value if isinstance(value, Outcome) else "",
)
async def test_the_final_result_says_how_the_execution_ended(
    autojump_clock: trio.testing.MockClock,
    script: Callable[[FakeTurn], Any],
    outcome: Outcome,
) -> None:
    terminal = await run(FakeCLI(script))
    assert isinstance(terminal, Result)
    assert terminal.final
    assert terminal.outcome is outcome


async def test_a_result_that_does_not_end_the_execution_has_no_outcome(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A background subagent keeps the execution open past the first result.
    async def script(cli: FakeTurn) -> None:
        await start_background_agent(cli)

        async def finish() -> None:
            await cli.sleep(2)
            await cli.task_notification("task-1", status="completed", summary="found it")

            async def follow_up(turn: FakeTurn) -> None:
                await turn.result(subtype="error_max_turns")

            cli.wake(follow_up)

        cli.background(finish)

    fake = FakeCLI(script)
    async with fake_session(fake) as session:
        events = await collect(session)
    results = [e for e in events if isinstance(e, Result)]
    assert [(r.final, r.outcome) for r in results] == [
        (False, None),
        (True, Outcome.MAX_TURNS),
    ]
    ending(events)


async def start_background_agent(cli: FakeTurn) -> None:
    tool = await cli.tool_use("Agent", {"prompt": "dig", "run_in_background": True})
    await cli.task_started("task-1", tool_use_id=tool, description="dig")
    await cli.tool_result(tool, "started in background")
    await cli.result()


# -- stopped: abort(), a deadline, the block left ----------------------------------------------


async def test_run_timeout_is_its_own_outcome_at_the_exact_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.tool_use("Bash", {"command": "sleep 100"})
        await cli.sleep(100)

    params = ExecuteParams(prompt="hello", run_timeout=5.0)
    terminal = await run(FakeCLI(script), params=params)
    assert trio.current_time() == 5.0
    assert isinstance(terminal, Aborted)
    assert (terminal.outcome, terminal.phase) == (Outcome.RUN_TIMEOUT, "tools")
    assert terminal.reason == "run_timeout: the execution ran for 5 s"  # kept as it was


async def test_idle_timeout_is_its_own_outcome_at_the_exact_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.text("thinking aloud", delay=2.0)
        await cli.sleep(100)

    params = ExecuteParams(prompt="hello", idle_timeout=3.0)
    terminal = await run(FakeCLI(script), params=params)
    assert trio.current_time() == 2.0 + 3.0
    assert isinstance(terminal, Aborted)
    assert (terminal.outcome, terminal.phase) == (Outcome.IDLE_TIMEOUT, "streaming")


async def abort_at(fake: FakeCLI, when: Callable[[Event], bool]) -> Aborted:
    async with fake_session(fake) as session:

        async def on_event(event: Event) -> None:
            if when(event):
                await session.abort()

        events = await collect(session, on_event)
    assert_no_leak(fake)
    terminal = ending(events)
    assert isinstance(terminal, Aborted)
    return terminal


async def long_text(cli: FakeTurn) -> None:
    await cli.text("x" * 20, chunk=1, delay=1.0)


async def long_tool(cli: FakeTurn) -> None:
    await cli.tool_use("Bash", {"command": "make"})
    await cli.sleep(100)


@pytest.mark.parametrize("confirmed", [True, False], ids=["cli-confirms", "no-confirmation"])
@pytest.mark.parametrize(
    ("script", "trigger", "phase"),
    [
        (long_text, TextDelta, "streaming"),
        (long_tool, ToolUse, "tools"),
    ],
    ids=["streaming", "tools"],
)
async def test_abort_is_aborted_with_the_phase_it_was_stopped_in(
    autojump_clock: trio.testing.MockClock,
    script: Callable[[FakeTurn], Any],
    trigger: type[Event],
    phase: AbortPhase,
    confirmed: bool,
) -> None:
    fake = FakeCLI(script, unanswered=() if confirmed else {"interrupt"})
    terminal = await abort_at(fake, lambda event: isinstance(event, trigger))
    assert (terminal.outcome, terminal.phase) == (Outcome.ABORTED, phase)
    # The CLI's own words stay in the reason: aborted_streaming / aborted_tools.
    assert terminal.reason == (f"aborted_{phase}" if confirmed else "aborted")


async def test_abort_before_the_first_turn_is_in_phase_starting(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The CLI takes 5 s to start its turn; the abort lands before it (the CLI then reports
    # the turn as aborted_streaming, but nothing had run).
    fake = FakeCLI(long_text, init_delay=5.0)
    async with fake_session(fake) as session:
        await session.abort()
        events = await collect(session)
    terminal = ending(events)
    assert isinstance(terminal, Aborted)
    assert (terminal.outcome, terminal.phase) == (Outcome.ABORTED, "starting")
    assert not any(isinstance(e, TextDelta) for e in events)


async def test_abort_between_turns_is_in_phase_between_turns(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The first turn ends while a background subagent still runs: the execution waits.
    async def script(cli: FakeTurn) -> None:
        await start_background_agent(cli)

        async def work() -> None:
            await cli.sleep(100)

        cli.background(work)

    terminal = await abort_at(
        FakeCLI(script), lambda event: isinstance(event, Result) and not event.final
    )
    assert (terminal.outcome, terminal.phase) == (Outcome.ABORTED, "between_turns")


async def test_leaving_the_block_is_closed_with_its_phase(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeCLI(long_text)
    async with fake_session(fake) as session:
        async for event in session.events:
            if isinstance(event, TextDelta):
                break
    rest: list[Event] = []
    while True:
        try:
            rest.append(session.events.receive_nowait())
        except (trio.EndOfChannel, trio.WouldBlock):
            break
    terminal = rest[-1]
    assert isinstance(terminal, Aborted)
    assert (terminal.outcome, terminal.phase) == (Outcome.CLOSED, "streaming")
    assert_no_leak(fake)


async def test_a_user_abort_stays_aborted_when_the_block_is_left_while_it_stops(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeCLI(long_tool, unanswered={"interrupt"})  # the stop takes interrupt_timeout
    events: list[Event] = []
    with trio.move_on_after(30):
        async with fake_session(fake) as session:
            async for event in session.events:
                events.append(event)
                if isinstance(event, ToolUse):
                    with trio.move_on_after(CONFIG.interrupt_timeout / 2):
                        await session.abort()
                    break  # left mid-stop
    while True:
        try:
            events.append(session.events.receive_nowait())
        except (trio.EndOfChannel, trio.WouldBlock):
            break
    terminal = ending(events)
    assert isinstance(terminal, Aborted)
    assert (terminal.outcome, terminal.phase) == (Outcome.ABORTED, "tools")
    assert_no_leak(fake)


# -- the CLI failed, or never started ------------------------------------------------------------


async def test_a_cli_that_dies_is_cli_exited(autojump_clock: trio.testing.MockClock) -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.text("working")
        await cli.exit(3, stderr=["fatal: out of cheese"])

    terminal = await run(FakeCLI(script))
    assert isinstance(terminal, Error)
    assert (terminal.code, terminal.outcome) == ("cli_exited", Outcome.CLI_EXITED)


async def test_a_cli_that_never_answers_initialize_is_cli_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    terminal = await run(FakeCLI(unanswered={"initialize"}))
    assert trio.current_time() == CONFIG.connect_timeout
    assert isinstance(terminal, Error)
    assert (terminal.code, terminal.phase, terminal.outcome) == (
        "cli_timeout",
        "init",
        Outcome.CLI_TIMEOUT,
    )


async def test_a_missing_cli_is_not_started(autojump_clock: trio.testing.MockClock) -> None:
    params = ExecuteParams(prompt="hello")
    async with open_session(
        params,
        cli_path="/nonexistent/claude",
        env={"IS_SANDBOX": "1", "ANTHROPIC_API_KEY": "sk-ant-test"},
        config=CONFIG,
    ) as session:
        events = await collect(session)
    [terminal] = events
    assert isinstance(terminal, Error)
    assert (terminal.code, terminal.outcome) == ("cli_not_found", Outcome.NOT_STARTED)


async def test_a_cwd_that_does_not_exist_is_not_started(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    params = ExecuteParams(prompt="hello", cwd=str(tmp_path / "missing"))
    async with open_session(params, cli_path="/nonexistent/claude", config=CONFIG) as session:
        events = await collect(session)
    [terminal] = events
    assert isinstance(terminal, Error)
    assert (terminal.code, terminal.outcome) == ("config", Outcome.NOT_STARTED)


async def test_options_the_cli_refuses_are_not_started(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As root, bypassPermissions without IS_SANDBOX=1: refused before any CLI is started.
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.delenv("IS_SANDBOX", raising=False)
    params = ExecuteParams(prompt="hello", permission_mode="bypassPermissions")
    async with open_session(params, cli_path="/nonexistent/claude", config=CONFIG) as session:
        events = await collect(session)
    [terminal] = events
    assert isinstance(terminal, Error)
    assert (terminal.code, terminal.phase, terminal.outcome) == (
        "config",
        "init",
        Outcome.NOT_STARTED,
    )


class _BrokenTransport:
    """A transport whose start fails with something no CLI failure looks like (a bug)."""

    def __init__(self, options: ClaudeAgentOptions) -> None:
        del options

    async def connect(self) -> None:
        await trio.lowlevel.checkpoint()
        raise RuntimeError("a bug in the transport")

    async def close(self) -> None:
        await trio.lowlevel.checkpoint()

    async def end_input(self) -> None:
        await trio.lowlevel.checkpoint()

    async def write(self, data: str) -> None:
        await trio.lowlevel.checkpoint()

    def read_messages(self) -> Any:
        raise AssertionError("never read: it never connected")

    def is_ready(self) -> bool:
        return False


async def test_a_bug_is_internal(autojump_clock: trio.testing.MockClock) -> None:
    params = ExecuteParams(prompt="hello")
    async with open_session(
        params,
        transport_factory=_BrokenTransport,  # type: ignore[arg-type]
        config=CONFIG,
    ) as session:
        events = await collect(session)
    [terminal] = events
    assert isinstance(terminal, Error)
    assert (terminal.code, terminal.outcome) == ("internal", Outcome.INTERNAL)
    assert "a bug in the transport" in terminal.message


# -- a program dispatching on it -----------------------------------------------------------------


async def test_a_match_over_the_outcome_dispatches_every_end(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ends: dict[str, Result | Aborted | Error] = {
        "completed": await run(FakeCLI()),
        "max turns": await run(FakeCLI(result_with(subtype="error_max_turns"))),
        "run timeout": await run(
            FakeCLI(long_tool), params=ExecuteParams(prompt="x", run_timeout=1.0)
        ),
        "no answer to initialize": await run(FakeCLI(unanswered={"initialize"})),
    }
    assert {name: what_to_do(end.outcome) for name, end in ends.items() if end.outcome} == {
        "completed": "use the answer",
        "max turns": "raise the limit",
        "run timeout": "give it more time",
        "no answer to initialize": "report a failure",  # cli_timeout
    }
    # Every outcome has an answer (the match is exhaustive; mypy checks it too).
    assert {what_to_do(outcome) for outcome in Outcome} >= {"use the answer"}
    # A StrEnum: its value is its wire name.
    assert [o.value for o in Outcome] == [str(o) for o in Outcome]
