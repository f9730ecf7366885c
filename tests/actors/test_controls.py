"""Live controls over the fake CLI: what is sent, the ``control_applied`` events, the refusals
once the execution stops, and the control timeout at its exact virtual time."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
import trio.testing
from session_kit import CONFIG, check_stream, collect, fake_session

from claude_trio import ExecuteParams, InvalidParamsError, Result
from claude_trio.errors import ControlFailedError, ControlRefusedError
from claude_trio.protocol.session.events import ControlApplied, Event, TurnStarted
from claude_trio.testing import FakeCLI, FakeTurn


def held_turn() -> tuple[trio.Event, Callable[[FakeTurn], Awaitable[None]]]:
    """A turn that answers "done" once the event it comes with is set."""
    proceed = trio.Event()

    async def script(cli: FakeTurn) -> None:
        await proceed.wait()
        await cli.text("done")

    return proceed, script


def request_of(frame: dict[str, Any]) -> dict[str, Any]:
    return dict(frame["request"])


def sent(fake: FakeCLI, subtype: str) -> list[dict[str, Any]]:
    return [
        f["request"]
        for f in fake.transports[0].control_requests
        if f["request"].get("subtype") == subtype
    ]


async def test_controls_reach_the_cli_and_the_stream_says_what_changed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    proceed = trio.Event()

    async def script(cli: FakeTurn) -> None:
        await cli.text("thinking about it")
        await proceed.wait()
        await cli.text("done")

    fake = FakeCLI(script)
    async with fake_session(fake) as session:
        events: list[Event] = []
        async for event in session.events:
            events.append(event)
            if isinstance(event, TurnStarted):
                await session.set_model("opus-4.6")
                await session.set_model(None)
                await session.set_permission_mode("plan")
                usage = await session.context_usage()
                servers = await session.mcp_status()
                proceed.set()
    check_stream(events)
    assert [r["model"] for r in sent(fake, "set_model")] == ["claude-opus-4-6", None]
    assert [r["mode"] for r in sent(fake, "set_permission_mode")] == ["plan"]
    assert (usage.total_tokens, usage.max_tokens, usage.percentage) == (10_557, 200_000, 5.0)
    assert usage.categories == (("System tools", 10_557), ("Free space", 189_443))
    assert servers == ()
    applied = [(e.control, e.value, e.turn) for e in events if isinstance(e, ControlApplied)]
    assert applied == [
        ("set_model", "claude-opus-4-6", 1),
        ("set_model", None, 1),
        ("set_permission_mode", "plan", 1),
    ]
    assert isinstance(events[-1], Result)


async def test_bad_arguments_are_refused_before_anything_is_sent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    proceed, script = held_turn()
    fake = FakeCLI(script)
    async with fake_session(fake) as session:
        with pytest.raises(InvalidParamsError, match="unknown model alias"):
            await session.set_model("gpt-4")
        with pytest.raises(InvalidParamsError, match="mode='yolo'"):
            await session.set_permission_mode("yolo")  # type: ignore[arg-type]
        with pytest.raises(InvalidParamsError, match=r"mode='default'.*on_user_input="):
            await session.set_permission_mode("default")  # no one to ask
        with pytest.raises(InvalidParamsError, match="file_checkpointing=True"):
            await session.rewind_files("u-1")
        with pytest.raises(InvalidParamsError, match="user_message_uuid"):
            await session.rewind_files("")
        proceed.set()
        await collect(session)
    assert sent(fake, "set_model") == sent(fake, "set_permission_mode") == []


async def test_a_control_the_cli_never_answers_fails_at_control_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    proceed, script = held_turn()
    fake = FakeCLI(script, unanswered={"set_model"})
    async with fake_session(fake) as session:
        started = trio.current_time()
        with pytest.raises(ControlFailedError, match=r"did not answer within 2 s"):
            await session.set_model("opus")
        assert trio.current_time() - started == CONFIG.control_timeout
        proceed.set()
        events = await collect(session)
    assert not [e for e in events if isinstance(e, ControlApplied)]
    assert isinstance(events[-1], Result)


@pytest.mark.parametrize("when", ["aborting", "ended"])
async def test_controls_are_refused_once_the_execution_stops(
    autojump_clock: trio.testing.MockClock, when: str
) -> None:
    async def script(cli: FakeTurn) -> None:
        await trio.sleep(10)
        await cli.text("done")

    # Unanswered, the interrupt keeps the abort going (until interrupt_timeout) while the
    # controls are asked.
    fake = FakeCLI(script, unanswered={"interrupt"} if when == "aborting" else ())
    refusals: list[str] = []
    async with fake_session(fake) as session, trio.open_nursery() as nursery:
        if when == "aborting":
            nursery.start_soon(session.abort)
            await trio.testing.wait_all_tasks_blocked()
        else:
            await collect(session)
        for control in (
            session.set_model("opus"),
            session.set_permission_mode("plan"),
            session.context_usage(),
            session.mcp_status(),
        ):
            with pytest.raises(ControlRefusedError) as info:
                await control
            refusals.append(str(info.value))
    reason = {
        "aborting": "the execution is being aborted",
        "ended": "the execution has ended",
    }[when]
    assert [r.split(":")[0] for r in refusals] == [
        "set_model",
        "set_permission_mode",
        "context_usage",
        "mcp_status",
    ]
    assert all(reason in r for r in refusals), refusals
    assert sent(fake, "set_model") == []


async def test_a_custom_server_takes_any_model_id(
    autojump_clock: trio.testing.MockClock,
) -> None:
    proceed, script = held_turn()
    fake = FakeCLI(script)
    params = ExecuteParams(prompt="hi", provider="ollama", model="qwen3")
    async with fake_session(fake, params=params) as session:
        await session.set_model("llama4")
        proceed.set()
        await collect(session)
    assert [r["model"] for r in sent(fake, "set_model")] == ["llama4"]


async def test_a_fleet_session_takes_controls_only_while_its_execution_runs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    from claude_trio import open_fleet

    proceed, script = held_turn()
    fake = FakeCLI(script)
    async with open_fleet(transport_factory=fake, config=CONFIG, max_live=1) as fleet:
        running = await fleet.start(ExecuteParams(prompt="one"))
        waiting = await fleet.start(ExecuteParams(prompt="two"))
        await trio.testing.wait_all_tasks_blocked()
        await running.set_model("haiku")
        await running.set_permission_mode("plan")
        with pytest.raises(ControlRefusedError, match="waiting for a slot"):
            await waiting.set_model("haiku")
        proceed.set()
        await running.wait_ended()
        with pytest.raises(ControlRefusedError, match="set_permission_mode: the execution has"):
            await running.set_permission_mode("plan")
        await waiting.wait_ended()
    models = [
        [r["model"] for r in map(request_of, t.control_requests) if r["subtype"] == "set_model"]
        for t in fake.transports
    ]
    assert models == [["haiku"], []]  # a CLI family alias goes as it is
