"""Custom tools over the fake CLI: the call's way from the CLI to a trio function in the session
and back, and its races with the deadline, an abort, the end of the session and the CLI
abandoning it, at exact virtual times."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from session_kit import CONFIG, assert_no_leak, check_stream, collect, fake_session

from claude_trio import Aborted, Error, ExecuteParams, Result
from claude_trio.actors.extensions.tool_runner import (
    MAX_CALLS,
    STOPPING,
    ToolRunner,
    run_tool_runner,
)
from claude_trio.protocol.extensions.custom_tools import CustomTool, custom_tool
from claude_trio.protocol.session.events import AdapterReady
from claude_trio.testing import FakeCLI, FakeTurn, SDKControlError

NUMBER = {"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]}


def ancestors(task: trio.lowlevel.Task) -> list[trio.lowlevel.Task]:
    """``task``'s parent tasks, nearest first."""
    chain = []
    nursery = task.parent_nursery
    while nursery is not None:
        chain.append(nursery.parent_task)
        nursery = nursery.parent_task.parent_nursery
    return chain


def tool_answers(fake: FakeCLI) -> list[Any]:
    """The results of ``tools/call`` the SDK wrote to the (fake) CLI, in order."""
    answers = []
    for frame in fake.transports[0].control_responses:
        rpc = (frame["response"].get("response") or {}).get("mcp_response") or {}
        result = rpc.get("result")
        if isinstance(result, dict) and "content" in result:
            answers.append(result)
    return answers


def text(result: dict[str, Any]) -> str:
    [block] = result["content"]
    return str(block["text"])


async def test_a_call_runs_the_function_in_the_session_and_its_value_is_the_result(
    autojump_clock: trio.testing.MockClock,
) -> None:
    test_task = trio.lowlevel.current_task()
    seen: list[Any] = []

    @custom_tool(input_schema=NUMBER)
    async def double(args: dict[str, Any]) -> str:
        """Double a number."""
        seen.append((args, test_task in ancestors(trio.lowlevel.current_task())))
        await trio.sleep(2.5)
        return str(args["n"] * 2)

    @custom_tool(description="The facts about a number, as JSON", input_schema=NUMBER)
    async def facts(args: dict[str, Any]) -> Any:
        return {"n": args["n"], "even": args["n"] % 2 == 0, "name": "zwölf"}

    results: list[Any] = []

    async def script(cli: FakeTurn) -> None:
        results.append(await cli.call_tool("trio", "double", {"n": 21}))
        results.append(trio.current_time())
        results.append(await cli.call_tool("trio", "facts", {"n": 12}))
        await cli.text("42")

    fake = FakeCLI(script)
    async with fake_session(fake, custom_tools=[double, facts]) as session:
        events = await collect(session)
    check_stream(events)
    assert seen == [({"n": 21}, True)]  # a child of this test's task: inside open_session
    doubled, finished_at, facts_result = results
    assert doubled == {"content": [{"type": "text", "text": "42"}], "isError": False}
    assert finished_at == 2.5
    assert text(facts_result) == '{"n": 12, "even": true, "name": "zwölf"}'
    ready = events[0]
    assert isinstance(ready, AdapterReady)
    assert ready.custom_tools == ("mcp__trio__double", "mcp__trio__facts")
    [transport] = fake.transports
    server = transport.options.mcp_servers["trio"]  # type: ignore[index]
    assert server["type"] == "sdk"
    assert server["alwaysLoad"] is True  # not deferred behind ToolSearch
    assert isinstance(events[-1], Result)
    assert events[-1].final
    assert_no_leak(fake)


async def test_arguments_that_do_not_match_the_schema_never_reach_the_function(
    autojump_clock: trio.testing.MockClock,
) -> None:
    calls: list[Any] = []

    @custom_tool(input_schema=NUMBER)
    async def double(args: dict[str, Any]) -> str:
        """Double a number."""
        calls.append(args)
        return "never"

    results: list[Any] = []

    async def script(cli: FakeTurn) -> None:
        results.append(await cli.call_tool("trio", "double", {"n": "twelve"}))

    async with fake_session(FakeCLI(script), custom_tools=[double]) as session:
        await collect(session)
    [result] = results
    assert result["isError"] is True
    assert "'twelve' is not of type 'number'" in text(result)
    assert calls == []


async def test_an_exception_is_an_error_result_with_its_message_and_an_error_event(
    autojump_clock: trio.testing.MockClock,
) -> None:
    @custom_tool(input_schema=NUMBER)
    async def lookup(args: dict[str, Any]) -> str:
        """Find a customer."""
        await trio.sleep(1)
        raise LookupError(f"no customer {args['n']}")

    @custom_tool()
    async def opaque(args: dict[str, Any]) -> Any:
        """Returns something JSON cannot hold."""
        return object()

    results: list[Any] = []

    async def script(cli: FakeTurn) -> None:
        results.append(await cli.call_tool("trio", "lookup", {"n": 7}))
        results.append(await cli.call_tool("trio", "opaque", {}))
        await cli.text("sorry")

    async with fake_session(FakeCLI(script), custom_tools=[lookup, opaque]) as session:
        events = await collect(session)
    check_stream(events)
    failed, odd = results
    assert failed == {
        "content": [{"type": "text", "text": "LookupError: no customer 7"}],
        "isError": True,
    }
    assert odd["isError"] is True
    assert text(odd).startswith("the tool returned a object, which is neither a string nor")
    [error] = [e for e in events if isinstance(e, Error)]
    assert error.code == "callback"
    assert not error.fatal
    assert error.message == "the custom tool 'lookup' raised: LookupError: no customer 7"
    assert isinstance(events[-1], Result)
    assert events[-1].final  # the session went on


@pytest.mark.parametrize(
    ("tool_timeout", "session_timeout", "expected"), [(5.0, 60.0, 5.0), (None, 7.0, 7.0)]
)
async def test_a_call_times_out_at_the_tools_or_the_sessions_timeout_exactly(
    autojump_clock: trio.testing.MockClock,
    tool_timeout: float | None,
    session_timeout: float,
    expected: float,
) -> None:
    cancelled_at: list[float] = []
    side_effects: list[str] = []

    async def forever(args: dict[str, Any]) -> str:
        try:
            await trio.sleep(3600)
        except trio.Cancelled:
            cancelled_at.append(trio.current_time())
            raise
        side_effects.append("finished")
        return "late"

    tool = CustomTool(
        name="slow", description="Takes its time", function=forever, timeout=tool_timeout
    )
    results: list[Any] = []

    async def script(cli: FakeTurn) -> None:
        await cli.sleep(1)
        results.append(await cli.call_tool("trio", "slow", {}))
        results.append(trio.current_time())

    params = ExecuteParams(prompt="hi", tool_timeout=session_timeout)
    async with fake_session(FakeCLI(script), params=params, custom_tools=[tool]) as session:
        events = await collect(session)
    check_stream(events)
    assert cancelled_at == [1 + expected]
    result, answered_at = results
    assert answered_at == 1 + expected
    assert result["isError"] is True
    assert text(result) == f"the tool 'slow' did not finish within {expected:g} s and was cancelled"
    assert side_effects == []
    assert events[-1].kind == "result"


@pytest.mark.parametrize("order", ["tool-first", "abort-first"])
async def test_abort_against_a_tool_that_is_finishing(
    autojump_clock: trio.testing.MockClock, order: str
) -> None:
    """Both in one instant. The tool returned before the abort: its result reaches the CLI,
    then the turn is interrupted. The abort came first: the tool is cancelled there and its
    side effect never happens."""
    started = trio.Event()
    proceed = trio.Event()
    outcome: list[Any] = []

    async def transfer(args: dict[str, Any]) -> str:
        started.set()
        try:
            await proceed.wait()
        except trio.Cancelled:
            outcome.append(("cancelled", trio.current_time()))
            raise
        outcome.append(("moved", trio.current_time()))
        return "moved the money"

    tool = CustomTool(name="transfer", description="Moves money", function=transfer)
    results: list[Any] = []

    async def script(cli: FakeTurn) -> None:
        await cli.sleep(3)
        results.append(await cli.call_tool("trio", "transfer", {}))
        await cli.sleep(3600)

    fake = FakeCLI(script)
    async with fake_session(fake, custom_tools=[tool]) as session:

        async def abort() -> None:
            await started.wait()
            if order == "tool-first":
                proceed.set()  # the tool can return now, without another checkpoint
                await session.abort()
            else:
                await session.abort()
                proceed.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(abort)
            events = await collect(session)
    check_stream(events)
    assert isinstance(events[-1], Aborted)
    # Either way the interrupt ended the turn, and the fake CLI abandoned the call.
    assert results == []
    answers = tool_answers(fake)
    if order == "abort-first":
        assert outcome == [("cancelled", 3.0)]
        assert answers == [
            {
                "content": [{"type": "text", "text": "the execution was aborted: the tool call "
                             "was cancelled"}],
                "isError": True,
            }
        ]
    else:
        assert outcome == [("moved", 3.0)]
        assert answers == [
            {"content": [{"type": "text", "text": "moved the money"}], "isError": False}
        ]
    assert fake.transports[0].interrupts == 1
    assert_no_leak(fake)


async def test_leaving_the_block_cancels_a_running_tool_before_open_session_returns(
    autojump_clock: trio.testing.MockClock,
) -> None:
    started = trio.Event()
    outcome: list[Any] = []

    async def forever(args: dict[str, Any]) -> str:
        started.set()
        try:
            await trio.sleep(3600)
        except trio.Cancelled:
            outcome.append(("cancelled", trio.current_time()))
            raise
        outcome.append("finished")
        return "late"

    tool = CustomTool(name="forever", description="Never ends", function=forever)

    async def script(cli: FakeTurn) -> None:
        await cli.sleep(2)
        await cli.call_tool("trio", "forever", {})

    fake = FakeCLI(script)
    async with fake_session(fake, custom_tools=[tool]) as session:
        await started.wait()
        await trio.sleep(1)
    left_at = trio.current_time()
    assert outcome == [("cancelled", 3.0)]
    assert left_at == 3.0  # the fake settles at once after its interrupt
    assert session.ended
    assert_no_leak(fake)


async def test_the_cli_abandoning_a_call_cancels_the_tool_and_the_session_goes_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    outcome: list[Any] = []

    async def forever(args: dict[str, Any]) -> str:
        try:
            await trio.sleep(3600)
        except trio.Cancelled:
            outcome.append(("cancelled", trio.current_time()))
            raise
        return "late"

    tool = CustomTool(name="forever", description="Never ends", function=forever)
    errors: list[str] = []

    async def script(cli: FakeTurn) -> None:
        call = await cli.send_tool_call("trio", "forever", {})
        await cli.sleep(4)
        await call.cancel()  # MCP notifications/cancelled, as the CLI sends on an interrupt
        try:
            await call.reply()
        except Exception as exc:
            errors.append(type(exc).__name__)
        await cli.sleep(1)
        await cli.text("moving on")

    async with fake_session(FakeCLI(script), custom_tools=[tool]) as session:
        events = await collect(session)
    check_stream(events)
    assert outcome == [("cancelled", 4.0)]
    assert errors == ["RequestCancelledError"]
    assert isinstance(events[-1], Result)
    assert events[-1].final


async def test_a_tool_sees_calls_in_parallel_and_a_runaway_is_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    running: list[int] = []
    gate = trio.Event()

    async def wait(args: dict[str, Any]) -> str:
        running.append(args["i"])
        await gate.wait()
        return f"done {args['i']}"

    tool = CustomTool(
        name="wait",
        description="Waits",
        function=wait,
        input_schema={"type": "object", "properties": {"i": {"type": "integer"}}},
    )
    results: dict[int, Any] = {}

    async def script(cli: FakeTurn) -> None:
        calls = [await cli.send_tool_call("trio", "wait", {"i": i}) for i in range(MAX_CALLS + 1)]
        await cli.sleep(1)
        gate.set()
        for i, call in enumerate(calls):
            results[i] = await call.reply()

    async with fake_session(FakeCLI(script), custom_tools=[tool]) as session:
        await collect(session)
    assert sorted(running) == list(range(MAX_CALLS))
    assert [text(results[i]) for i in range(MAX_CALLS)] == [f"done {i}" for i in range(MAX_CALLS)]
    assert results[MAX_CALLS]["isError"] is True
    assert text(results[MAX_CALLS]) == (
        f"{MAX_CALLS} calls of custom tools are already running; try again later"
    )


async def test_a_call_that_arrives_after_the_stop_never_runs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ran: list[Any] = []

    async def tool_function(args: dict[str, Any]) -> str:
        ran.append(args)
        return "ran"

    tool = CustomTool(name="t", description="d", function=tool_function)
    runner = ToolRunner([tool], timeout=10.0, emit=lambda event: None)
    async with trio.open_nursery() as nursery:
        await nursery.start(run_tool_runner, runner)
        assert await runner.call(tool, {"x": 1}) == {
            "content": [{"type": "text", "text": "ran"}],
            "is_error": False,
        }
        runner.close("the execution was aborted: the tool call was cancelled")
    # The runner ended with its inbox closed; a late call is answered at once, never run.
    late = await runner.call(tool, {"x": 2})
    assert late == {"content": [{"type": "text", "text": STOPPING}], "is_error": True}
    assert ran == [{"x": 1}]
    assert runner.running == 0


async def test_a_call_waiting_when_the_runner_is_cancelled_is_answered_stopping(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ran: list[Any] = []

    async def tool_function(args: dict[str, Any]) -> str:
        ran.append(args)
        return "ran"

    tool = CustomTool(name="t", description="d", function=tool_function)
    runner = ToolRunner([tool], timeout=10.0, emit=lambda event: None)
    answers: list[Any] = []

    async def caller() -> None:
        answers.append(await runner.call(tool, {}))

    # The SDK's handler runs outside the runner's nursery: here, a sibling of it.
    async with trio.open_nursery() as outer:
        with trio.CancelScope() as runner_scope:
            async with trio.open_nursery() as inner:
                await inner.start(run_tool_runner, runner)
                runner_scope.cancel()  # before the runner task could pick the call up
                outer.start_soon(caller)
                await trio.testing.wait_all_tasks_blocked()
    assert answers == [{"content": [{"type": "text", "text": STOPPING}], "is_error": True}]
    assert ran == []
    assert runner.running == 0


async def test_custom_tools_need_a_free_server_name_and_no_pool(
    autojump_clock: trio.testing.MockClock,
) -> None:
    from claude_trio import InvalidParamsError

    tool = CustomTool(name="t", description="d", function=_noop)
    sdk_server = {"type": "sdk", "name": "trio", "instance": object()}
    params = ExecuteParams(prompt="hi", mcp_servers={"trio": sdk_server})
    with pytest.raises(InvalidParamsError, match=r"mcp_servers\['trio'\].*custom_tools"):
        async with fake_session(FakeCLI(), params=params, custom_tools=[tool]):
            pass
    with pytest.raises(InvalidParamsError, match=r"custom_tools\[0\].*CustomTool"):
        async with fake_session(FakeCLI(), custom_tools=[_noop]):
            pass
    with pytest.raises(InvalidParamsError, match="unique names"):
        async with fake_session(FakeCLI(), custom_tools=[tool, tool]):
            pass
    from claude_trio import open_cli_pool

    template = ExecuteParams(prompt="-")
    async with open_cli_pool(template, size=1, transport_factory=FakeCLI()) as pool:
        with pytest.raises(InvalidParamsError, match="None with custom_tools or inline_skills"):
            async with fake_session(FakeCLI(), custom_tools=[tool], pool=pool, config=CONFIG):
                pass


async def _noop(args: dict[str, Any]) -> str:
    await trio.lowlevel.checkpoint()
    return ""


async def test_the_tool_server_refuses_an_unknown_tool_without_running_anything(
    autojump_clock: trio.testing.MockClock,
) -> None:
    results: list[Any] = []

    async def script(cli: FakeTurn) -> None:
        results.append(await cli.call_tool("trio", "nope", {}))
        try:
            await cli.call_tool("other", "x", {})
        except SDKControlError as exc:
            results.append(str(exc))

    tool = CustomTool(name="t", description="d", function=_noop)
    async with fake_session(FakeCLI(script), custom_tools=[tool]) as session:
        await collect(session)
    unknown, other_server = results
    assert unknown["isError"] is True
    assert text(unknown) == "Tool 'nope' not found"
    assert "Server 'other' not found" in other_server


async def test_a_fleet_gives_its_sessions_the_custom_tools(
    autojump_clock: trio.testing.MockClock,
) -> None:
    from claude_trio import InvalidParamsError, open_cli_pool, open_fleet

    calls: list[Any] = []

    async def record(args: dict[str, Any]) -> str:
        calls.append(args)
        return f"recorded {args}"

    tool = CustomTool(name="record", description="Records", function=record)
    other = CustomTool(name="other", description="Other", function=record)
    results: list[Any] = []

    async def script(cli: FakeTurn) -> None:
        results.append(text(await cli.call_tool("trio", cli.prompt, {"by": cli.prompt})))

    fake = FakeCLI(script)
    async with open_fleet(transport_factory=fake, config=CONFIG, custom_tools=[tool]) as fleet:
        first = await fleet.start(ExecuteParams(prompt="record"))
        second = await fleet.start(ExecuteParams(prompt="other"), custom_tools=[other])
        await first.wait_ended()
        await second.wait_ended()
        with pytest.raises(InvalidParamsError, match=r"custom_tools\[0\]"):
            await fleet.start(ExecuteParams(prompt="x"), custom_tools=[record])
    assert sorted(results) == ["recorded {'by': 'other'}", "recorded {'by': 'record'}"]
    template = ExecuteParams(prompt="-")
    async with open_cli_pool(template, size=1, user_input=True, transport_factory=fake) as pool:
        with pytest.raises(InvalidParamsError, match="None with custom_tools"):
            async with open_fleet(pool=pool, custom_tools=[tool]):
                pass  # pragma: no cover
        async with open_fleet(pool=pool, max_live=2) as fleet:
            with pytest.raises(InvalidParamsError, match="None with custom_tools"):
                await fleet.start(template, custom_tools=[tool])
