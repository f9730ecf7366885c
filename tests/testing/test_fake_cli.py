"""The scripted fake CLI, driven by the REAL ClaudeSDKClient (the SDK parses every frame)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import aclosing, asynccontextmanager
from typing import Any, cast

import pytest
import trio
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    CLIConnectionError,
    CLIJSONDecodeError,
    HookMatcher,
    Message,
    PermissionResultAllow,
    ProcessError,
    RateLimitEvent,
    ResultMessage,
    StreamEvent,
    SystemMessage,
    TaskNotificationMessage,
    TaskStartedMessage,
    TaskUpdatedMessage,
    TextBlock,
    ThinkingBlock,
    ToolPermissionContext,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)

from claude_trio.testing import (
    FakeCLI,
    FakeTurn,
    RequestCancelledError,
    ScriptError,
    SDKControlError,
    prompt_stream,
    user_message,
)
from claude_trio.testing.fake_cli import CLOSE_GRACE_SECONDS, SIGKILL_EXIT_CODE, SIGTERM_EXIT_CODE


def make_options(**kwargs: Any) -> ClaudeAgentOptions:
    kwargs.setdefault("include_partial_messages", True)
    kwargs.setdefault("extra_args", {"replay-user-messages": None})
    return ClaudeAgentOptions(**kwargs)


@asynccontextmanager
async def connected(
    fake: FakeCLI, options: ClaudeAgentOptions | None = None
) -> AsyncIterator[ClaudeSDKClient]:
    options = options or make_options()
    client = ClaudeSDKClient(options, transport=fake.transport_for(options))
    await client.connect()
    try:
        yield client
    finally:
        with trio.move_on_after(10, shield=True):
            await client.disconnect()


async def push(client: ClaudeSDKClient, text: str, uuid: str) -> None:
    await client.query(prompt_stream(user_message(text, uuid=uuid)))


async def collect(client: ClaudeSDKClient, results: int) -> list[tuple[float, Message]]:
    """(virtual time, message) until ``results`` ResultMessages have arrived."""
    seen: list[tuple[float, Message]] = []
    stream = cast(AsyncGenerator[Message, None], client.receive_messages())
    async with aclosing(stream) as messages:
        async for message in messages:
            seen.append((trio.current_time(), message))
            if isinstance(message, ResultMessage):
                results -= 1
                if results == 0:
                    break
    return seen


async def drain_into(client: ClaudeSDKClient, seen: list[Message]) -> None:
    async for message in client.receive_messages():
        seen.append(message)


def of_type(seen: Sequence[tuple[float, Message]], kind: type[Any]) -> list[Any]:
    return [m for _, m in seen if isinstance(m, kind)]


# -- a normal turn ------------------------------------------------------------------------------


async def test_normal_turn_frames_parse_into_typed_messages(autojump_clock: Any) -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.thinking("let me think", chunk=4)
        await cli.text("Hello there", chunk=5)

    fake = FakeCLI(script)
    async with connected(fake) as client:
        info = await client.get_server_info()
        await push(client, "hi", "u-1")
        seen = await collect(client, 1)

    assert info is not None
    assert info["claude_code_version"] == "2.1.332"
    kinds = [type(m).__name__ for _, m in seen]
    assert kinds[:2] == ["SystemMessage", "UserMessage"]  # init, then the echo
    init = seen[0][1]
    assert isinstance(init, SystemMessage)
    assert init.subtype == "init"
    echo = seen[1][1]
    assert isinstance(echo, UserMessage)
    assert (echo.uuid, echo.content) == ("u-1", "hi")

    events = [m.event for m in of_type(seen, StreamEvent)]
    assert [e["type"] for e in events] == [
        "message_start",
        "content_block_start",
        *["content_block_delta"] * 4,  # 3 thinking chunks + the signature
        "content_block_stop",
        "content_block_start",
        *["content_block_delta"] * 3,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    deltas = [e["delta"] for e in events if e["type"] == "content_block_delta"]
    assert "".join(d.get("thinking", "") for d in deltas) == "let me think"
    assert {"type": "signature_delta", "signature": "fake-signature"} in deltas
    assert "".join(d.get("text", "") for d in deltas) == "Hello there"

    assistants = of_type(seen, AssistantMessage)
    assert [type(a.content[0]) for a in assistants] == [ThinkingBlock, TextBlock]
    assert len({a.message_id for a in assistants}) == 1  # one API call, one message id
    assert assistants[1].content == [TextBlock(text="Hello there")]
    assert assistants[0].usage["output_tokens"] == 1  # the message_start snapshot

    (result,) = of_type(seen, ResultMessage)
    assert result.subtype == "success"
    assert result.is_error is False
    assert result.result == "Hello there"
    assert result.user_message_uuids == ["u-1"]
    assert result.usage is not None
    assert result.usage["input_tokens"] == 10
    assert result.usage["output_tokens"] == 5
    assert result.total_cost_usd == pytest.approx(0.001)
    assert result.model_usage is not None
    assert result.model_usage["claude-sonnet-4-5"]["outputTokens"] == 5
    assert result.num_turns == 1
    assert result.session_id == fake.transport.session_id
    assert result.terminal_reason == "completed"

    transport = fake.transport
    assert transport.initialize_request is not None
    assert [u["uuid"] for u in transport.user_messages] == ["u-1"]
    assert transport.closed
    assert not transport.process_alive


async def test_scripted_tool_delay_is_exact_virtual_time(autojump_clock: Any) -> None:
    async def script(cli: FakeTurn) -> None:
        tool = await cli.tool_use("Bash", {"command": "make"})
        await cli.sleep(2.5)
        await cli.tool_result(tool, "built", tool_use_result={"stdout": "built"})
        await cli.text("done")

    fake = FakeCLI(script)
    async with connected(fake) as client:
        start = trio.current_time()
        await push(client, "build", "u-1")
        seen = await collect(client, 1)

    (tool_use_at,) = [t for t, m in seen if isinstance(m, AssistantMessage)][:1]
    results = [(t, m) for t, m in seen if isinstance(m, UserMessage) and m.tool_use_result]
    ((result_at, tool_result),) = results
    assert tool_use_at == start
    assert result_at == start + 2.5
    assert isinstance(tool_result.content[0], ToolResultBlock)
    assert tool_result.content[0].content == "built"
    assert tool_result.tool_use_result == {"stdout": "built"}
    tool_use = of_type(seen, AssistantMessage)[0].content[0]
    assert isinstance(tool_use, ToolUseBlock)
    assert tool_use.input == {"command": "make"}
    (result,) = of_type(seen, ResultMessage)
    assert result.num_turns == 2  # two API calls
    assert result.duration_ms == 2500
    # The tool_use API call ended before the tool ran (stop_reason tool_use).
    stops = [
        (t, m.event["delta"]["stop_reason"])
        for t, m in seen
        if isinstance(m, StreamEvent) and m.event["type"] == "message_delta"
    ]
    assert stops == [(start, "tool_use"), (start + 2.5, "end_turn")]


async def test_echo_follows_replay_user_messages_option(autojump_clock: Any) -> None:
    fake = FakeCLI()
    async with connected(fake, ClaudeAgentOptions()) as client:
        await push(client, "hi", "u-1")
        seen = await collect(client, 1)
    assert of_type(seen, UserMessage) == []
    assert of_type(seen, StreamEvent) != []  # include_partial_messages is not applied by the fake
    (result,) = of_type(seen, ResultMessage)
    assert result.user_message_uuids == ["u-1"]
    assert result.result == "ok"


# -- pushes: fold vs. queue ---------------------------------------------------------------------


async def test_push_during_a_long_tool_is_folded_into_the_turn(autojump_clock: Any) -> None:
    prompts: list[list[str]] = []

    async def script(cli: FakeTurn) -> None:
        tool = await cli.tool_use("Bash", {"command": "sleep 5"})
        await cli.sleep(5)
        await cli.tool_result(tool, "slept")
        prompts.append([m.text for m in cli.messages])
        await cli.text("both seen")

    fake = FakeCLI(script)
    async with connected(fake) as client:
        await push(client, "first", "u-1")
        await trio.sleep(1)  # the tool runs from t=0 to t=5
        await push(client, "second", "u-2")
        seen = await collect(client, 1)

    assert prompts == [["first", "second"]]
    echoes = [m.uuid for m in of_type(seen, UserMessage) if m.uuid in ("u-1", "u-2")]
    assert echoes == ["u-1", "u-2"]
    (result,) = of_type(seen, ResultMessage)
    assert result.user_message_uuids == ["u-1", "u-2"]
    assert fake.transport.results[-1]["user_message_uuid"] == "u-1"


async def test_push_while_text_streams_is_queued_as_the_next_turn(autojump_clock: Any) -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.text(f"reply to {cli.prompt}", chunk=2, delay=0.5)

    fake = FakeCLI(script)
    async with connected(fake) as client:
        await push(client, "first", "u-1")
        async with trio.open_nursery() as nursery:

            async def late_push() -> None:
                await trio.sleep(1)
                await push(client, "second", "u-2")

            nursery.start_soon(late_push)
            seen = await collect(client, 2)

    results = of_type(seen, ResultMessage)
    assert [r.user_message_uuids for r in results] == [["u-1"], ["u-2"]]
    assert [r.result for r in results] == ["reply to first", "reply to second"]
    # The queued push is echoed when consumed: after the first result.
    first_result = next(i for i, (_, m) in enumerate(seen) if isinstance(m, ResultMessage))
    echo_u2 = next(i for i, (_, m) in enumerate(seen) if getattr(m, "uuid", None) == "u-2")
    assert echo_u2 > first_result
    # init at the start of every turn; cost cumulative across turns.
    assert [m.subtype for m in of_type(seen, SystemMessage)].count("init") == 2
    assert results[1].total_cost_usd == pytest.approx(2 * results[0].total_cost_usd)


async def test_background_subagent_reports_after_the_first_result(autojump_clock: Any) -> None:
    async def script(cli: FakeTurn) -> None:
        agent = await cli.tool_use("Task", {"prompt": "dig", "run_in_background": True})
        await cli.task_started("task-1", description="dig", tool_use_id=agent)
        await cli.tool_result(agent, "started in background")
        await cli.text("working on it")
        await cli.result()

        async def subagent() -> None:
            await cli.sleep(3)
            await cli.text("found it", parent_tool_use_id=agent)
            await cli.task_notification("task-1", summary="found", tool_use_id=agent)
            cli.wake(follow_up)

        cli.background(subagent)

    async def follow_up(cli: FakeTurn) -> None:
        await cli.text("the agent found it")

    fake = FakeCLI(script)
    async with connected(fake) as client:
        start = trio.current_time()
        await push(client, "dig", "u-1")
        seen = await collect(client, 2)

    results = of_type(seen, ResultMessage)
    assert [r.result for r in results] == ["working on it", "the agent found it"]
    assert [r.user_message_uuids for r in results] == [["u-1"], []]
    assert results[1].total_cost_usd > results[0].total_cost_usd
    (started,) = of_type(seen, TaskStartedMessage)
    assert (started.task_id, started.task_type) == ("task-1", "local_agent")
    ((note_at, note),) = [(t, m) for t, m in seen if isinstance(m, TaskNotificationMessage)]
    assert (note.status, note.summary) == ("completed", "found")
    assert note_at == start + 3
    sub = [m for m in of_type(seen, AssistantMessage) if m.parent_tool_use_id]
    assert [m.content for m in sub] == [[TextBlock(text="found it")]]
    # A subagent's stream events are never forwarded.
    assert all(m.parent_tool_use_id is None for m in of_type(seen, StreamEvent))


# -- interrupt ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("during_tool", "reason"), [(False, "aborted_streaming"), (True, "aborted_tools")]
)
async def test_interrupt_aborts_the_turn(
    autojump_clock: Any, during_tool: bool, reason: str
) -> None:
    async def script(cli: FakeTurn) -> None:
        if cli.number == 2:
            await cli.text("still usable")
            return
        if during_tool:
            await cli.tool_use("Bash", {"command": "sleep 100"})
        await cli.text("x" * 100, chunk=1, delay=1)

    fake = FakeCLI(script)
    async with connected(fake) as client:
        await push(client, "go", "u-1")
        async with trio.open_nursery() as nursery:

            async def interrupt_later() -> None:
                await trio.sleep(2.5)
                await client.interrupt()

            nursery.start_soon(interrupt_later)
            seen = await collect(client, 1)
        await push(client, "again", "u-2")
        after = await collect(client, 1)

    (result,) = of_type(seen, ResultMessage)
    assert result.subtype == "error_during_execution"
    assert result.is_error is True
    assert result.terminal_reason == reason
    assert result.user_message_uuids == ["u-1"]
    assert seen[-1][0] == 2.5
    texts = "".join(
        m.event["delta"].get("text", "")
        for m in of_type(seen, StreamEvent)
        if m.event["type"] == "content_block_delta"
    )
    assert texts == "xx"  # deltas at t=1 and t=2, then the abort
    assert fake.transport.interrupts == 1
    (after_result,) = of_type(after, ResultMessage)
    assert (after_result.result, after_result.user_message_uuids) == ("still usable", ["u-2"])


async def test_interrupt_that_is_never_answered_times_out_in_the_sdk(
    autojump_clock: Any,
) -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.sleep(1000)

    fake = FakeCLI(script, unanswered={"interrupt"})
    async with connected(fake) as client:
        await push(client, "go", "u-1")
        start = trio.current_time()
        with pytest.raises(Exception, match="Control request timeout: interrupt"):
            await client.interrupt()
        assert trio.current_time() == start + 60


# -- user input: can_use_tool, elicitation, hooks, cancel ----------------------------------------


async def test_can_use_tool_reaches_the_callback_and_its_answer_is_recorded(
    autojump_clock: Any,
) -> None:
    calls: list[tuple[str, dict[str, Any], str | None]] = []
    answers: list[dict[str, Any]] = []

    async def can_use_tool(
        name: str, tool_input: dict[str, Any], ctx: ToolPermissionContext
    ) -> PermissionResultAllow:
        calls.append((name, tool_input, ctx.tool_use_id))
        await trio.sleep(4)  # the user thinks
        return PermissionResultAllow(updated_input={**tool_input, "answers": {"Color?": "Red"}})

    question = {
        "questions": [{"question": "Color?", "header": "c", "options": [], "multiSelect": False}]
    }

    async def script(cli: FakeTurn) -> None:
        tool = await cli.tool_use("AskUserQuestion", question)
        answers.append(await cli.ask_permission("AskUserQuestion", question, tool_use_id=tool))
        await cli.tool_result(tool, "User answered: Red")
        await cli.text("Red it is")

    fake = FakeCLI(script)
    options = make_options(can_use_tool=can_use_tool)
    async with connected(fake, options) as client:
        start = trio.current_time()
        await push(client, "ask me", "u-1")
        seen = await collect(client, 1)

    assert calls == [("AskUserQuestion", question, calls[0][2])]
    assert calls[0][2] is not None
    assert calls[0][2].startswith("toolu_")
    assert answers == [
        {"behavior": "allow", "updatedInput": {**question, "answers": {"Color?": "Red"}}}
    ]
    (reply,) = fake.transport.control_responses
    assert reply["response"]["response"]["updatedInput"]["answers"] == {"Color?": "Red"}
    assert of_type(seen, ResultMessage)[0].result == "Red it is"
    assert seen[-1][0] == start + 4


async def test_ask_permission_without_a_callback_is_an_sdk_error(autojump_clock: Any) -> None:
    errors: list[str] = []

    async def script(cli: FakeTurn) -> None:
        try:
            await cli.ask_permission("Bash", {"command": "rm"})
        except SDKControlError as exc:
            errors.append(str(exc))
        await cli.text("denied")

    fake = FakeCLI(script)
    async with connected(fake) as client:
        await push(client, "go", "u-1")
        await collect(client, 1)
    assert errors == ["canUseTool callback is not provided"]


async def test_cli_cancels_a_pending_permission_request(autojump_clock: Any) -> None:
    callback_cancelled = trio.Event()
    outcomes: list[str] = []

    async def can_use_tool(
        name: str, tool_input: dict[str, Any], ctx: ToolPermissionContext
    ) -> PermissionResultAllow:
        try:
            await trio.sleep_forever()
        finally:
            callback_cancelled.set()

    async def script(cli: FakeTurn) -> None:
        request = await cli.send_permission_request("Bash", {"command": "ls"})
        await cli.sleep(2)
        await request.cancel()
        try:
            await request.reply()
        except RequestCancelledError:
            outcomes.append("withdrawn")
        await cli.text("moved on")

    fake = FakeCLI(script)
    async with connected(fake, make_options(can_use_tool=can_use_tool)) as client:
        await push(client, "go", "u-1")
        seen = await collect(client, 1)
        await callback_cancelled.wait()

    assert outcomes == ["withdrawn"]
    assert fake.transport.control_responses == []  # the SDK writes no answer to a cancelled one
    assert any(f.get("type") == "control_cancel_request" for f in fake.transport.emitted_frames())
    assert of_type(seen, ResultMessage)[0].result == "moved on"


async def test_interrupt_withdraws_a_pending_permission_request(autojump_clock: Any) -> None:
    async def can_use_tool(
        name: str, tool_input: dict[str, Any], ctx: ToolPermissionContext
    ) -> PermissionResultAllow:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def script(cli: FakeTurn) -> None:
        tool = await cli.tool_use("Bash", {"command": "ls"})
        await cli.ask_permission("Bash", {"command": "ls"}, tool_use_id=tool)

    fake = FakeCLI(script)
    async with connected(fake, make_options(can_use_tool=can_use_tool)) as client:
        await push(client, "go", "u-1")
        async with trio.open_nursery() as nursery:

            async def interrupt_later() -> None:
                await trio.sleep(1)
                await client.interrupt()

            nursery.start_soon(interrupt_later)
            seen = await collect(client, 1)

    (result,) = of_type(seen, ResultMessage)
    assert result.terminal_reason == "aborted_tools"
    cancels = [f for f in fake.transport.emitted_frames() if f["type"] == "control_cancel_request"]
    assert len(cancels) == 1


async def test_elicitation_is_rejected_by_the_bare_sdk(autojump_clock: Any) -> None:
    errors: list[str] = []

    async def script(cli: FakeTurn) -> None:
        try:
            await cli.elicit("srv", "Your name?", {"type": "object", "properties": {}})
        except SDKControlError as exc:
            errors.append(str(exc))
        await cli.text("no answer")

    fake = FakeCLI(script)
    async with connected(fake) as client:
        await push(client, "go", "u-1")
        await collect(client, 1)
    assert errors == ["Unsupported control request subtype: elicitation"]
    (request,) = [f for f in fake.transport.emitted_frames() if f["type"] == "control_request"]
    assert request["request"]["mcp_server_name"] == "srv"


async def test_hook_callback_round_trip(autojump_clock: Any) -> None:
    hook_inputs: list[Any] = []
    outputs: list[dict[str, Any]] = []

    async def pre_tool_use(hook_input: Any, tool_use_id: str | None, ctx: Any) -> Any:
        await trio.lowlevel.checkpoint()
        hook_inputs.append((hook_input, tool_use_id))
        return {"continue_": True, "systemMessage": "checked"}

    async def script(cli: FakeTurn) -> None:
        (callback_id,) = cli.process.hook_callback_ids["PreToolUse"]
        outputs.append(
            await cli.hook_callback(callback_id, {"tool_name": "Bash"}, tool_use_id="toolu_1")
        )

    matcher = HookMatcher(matcher="Bash", hooks=[pre_tool_use])
    options = make_options(hooks={"PreToolUse": [matcher]})
    fake = FakeCLI(script)
    async with connected(fake, options) as client:
        await push(client, "go", "u-1")
        await collect(client, 1)
    assert hook_inputs == [({"tool_name": "Bash"}, "toolu_1")]
    assert outputs == [{"continue": True, "systemMessage": "checked"}]


# -- the other frames ---------------------------------------------------------------------------


async def test_system_frames_and_passthrough_frames(autojump_clock: Any) -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.api_retry(1, error_status=529, error="overloaded")
        await cli.rate_limit("allowed", rateLimitType="five_hour")
        await cli.compact_boundary(trigger="auto", pre_tokens=1234)
        await cli.task_updated("task-9", {"status": "killed"})
        await cli.tool_use_summary("Listed files", ["toolu_1"])
        await cli.text("done")

    fake = FakeCLI(script)
    async with connected(fake) as client:
        await push(client, "go", "u-1")
        seen = await collect(client, 1)

    systems = {m.subtype: m for m in of_type(seen, SystemMessage)}
    assert systems["api_retry"].data["error_status"] == 529
    assert systems["compact_boundary"].data["compact_metadata"] == {
        "trigger": "auto",
        "pre_tokens": 1234,
    }
    (updated,) = of_type(seen, TaskUpdatedMessage)
    assert updated.status == "killed"
    (limit,) = of_type(seen, RateLimitEvent)
    assert limit.rate_limit_info.rate_limit_type == "five_hour"
    # The SDK's parser drops tool_use_summary; the fake still wrote it.
    (summary,) = [f for f in fake.transport.emitted_frames() if f["type"] == "tool_use_summary"]
    assert summary["preceding_tool_use_ids"] == ["toolu_1"]


async def test_api_error_and_max_turns_results(autojump_clock: Any) -> None:
    async def first(cli: FakeTurn) -> None:
        await cli.api_error(529, "Overloaded")

    async def second(cli: FakeTurn) -> None:
        await cli.text("partial")
        await cli.result(subtype="error_max_turns")

    fake = FakeCLI([first, second])
    async with connected(fake) as client:
        await push(client, "a", "u-1")
        seen = await collect(client, 1)
        await push(client, "b", "u-2")
        seen2 = await collect(client, 1)

    (error_message,) = of_type(seen, AssistantMessage)
    assert error_message.error == "server_error"
    (api_result,) = of_type(seen, ResultMessage)
    assert (api_result.subtype, api_result.is_error) == ("success", True)
    assert (api_result.api_error_status, api_result.terminal_reason) == (529, "api_error")
    (max_turns,) = of_type(seen2, ResultMessage)
    assert (max_turns.subtype, max_turns.terminal_reason) == ("error_max_turns", "max_turns")
    assert max_turns.is_error is True


# -- faults ---------------------------------------------------------------------------------------


async def test_exit_mid_turn_raises_process_error_with_stderr(autojump_clock: Any) -> None:
    stderr: list[str] = []

    async def script(cli: FakeTurn) -> None:
        await cli.text("about to die")
        await cli.exit(2, stderr=["panic: out of memory", "at main.js:1"])

    fake = FakeCLI(script)
    async with connected(fake, make_options(stderr=stderr.append)) as client:
        await push(client, "go", "u-1")
        seen: list[Message] = []
        with pytest.raises(ProcessError) as info:
            await drain_into(client, seen)
        with pytest.raises(CLIConnectionError, match=r"terminated process \(exit code: 2\)"):
            await push(client, "after death", "u-2")

    assert info.value.exit_code == 2
    assert "Command failed with exit code 2" in str(info.value)
    assert stderr == ["panic: out of memory", "at main.js:1"]
    assert [type(m) for m in seen][-1] is AssistantMessage
    assert not fake.transport.process_alive
    assert fake.transport.exit_code == 2


async def test_kill_from_the_test_side(autojump_clock: Any) -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.sleep(100)

    fake = FakeCLI(script)
    async with connected(fake) as client:
        await push(client, "go", "u-1")
        await trio.sleep(1)
        fake.transport.kill()
        with pytest.raises(ProcessError) as info:
            await collect(client, 1)
    assert info.value.exit_code == -9


async def test_never_answered_initialize_fails_connect_after_the_sdk_timeout(
    autojump_clock: Any,
) -> None:
    fake = FakeCLI(unanswered={"initialize"})
    options = make_options()
    client = ClaudeSDKClient(options, transport=fake.transport_for(options))
    with pytest.raises(Exception, match="Control request timeout: initialize"):
        await client.connect()
    assert trio.current_time() == 60
    assert fake.transport.initialize_request is not None
    assert fake.transport.closed  # connect() disconnects on failure
    assert not fake.transport.process_alive


async def test_oversize_line_raises_the_real_transport_error(autojump_clock: Any) -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.text("x" * 20_000)

    fake = FakeCLI(script)
    async with connected(fake, make_options(max_buffer_size=10_000)) as client:
        await push(client, "go", "u-1")
        with pytest.raises(CLIJSONDecodeError) as info:
            await collect(client, 1)
    assert "JSON message exceeded maximum buffer size of 10000 bytes" in str(info.value)
    assert "exceeds limit 10000" in str(info.value.original_error)


async def test_malformed_complete_line_is_an_error(autojump_clock: Any) -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.raw('{"type": "assistant", "message": {oops\n')

    fake = FakeCLI(script)
    async with connected(fake) as client:
        await push(client, "go", "u-1")
        with pytest.raises(CLIJSONDecodeError, match="Failed to decode JSON"):
            await collect(client, 1)


async def test_malformed_partial_tail_at_exit_is_dropped(autojump_clock: Any) -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.result("fine")
        await cli.raw('{"type": "result", "trunc')
        await cli.exit(0)

    fake = FakeCLI(script)
    async with connected(fake) as client:
        await push(client, "go", "u-1")
        messages = [m async for m in client.receive_messages()]  # ends, no error
    assert [type(m).__name__ for m in messages][-1] == "ResultMessage"
    assert isinstance(messages[-1], ResultMessage)
    assert messages[-1].result == "fine"


async def test_noise_blank_lines_and_crlf_are_skipped(autojump_clock: Any) -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.raw("[SandboxDebug] hello\r\n")
        await cli.raw("\r\n\n   \n")
        await cli.text("still here", chunk=3)

    fake = FakeCLI(script, line_ending="\r\n")
    async with connected(fake) as client:
        await push(client, "go", "u-1")
        seen = await collect(client, 1)
    assert of_type(seen, AssistantMessage)[0].content == [TextBlock(text="still here")]
    assert of_type(seen, ResultMessage)[0].result == "still here"
    assert "[SandboxDebug] hello" in fake.transport.emitted


async def test_end_input_is_recorded_and_the_cli_exits_after_its_work(
    autojump_clock: Any,
) -> None:
    fake = FakeCLI()
    options = make_options()
    client = ClaudeSDKClient(options, transport=fake.transport_for(options))
    # A prompt iterable: the SDK ends stdin after the run's result.
    await client.connect(prompt_stream(user_message("hi", uuid="u-1")))
    try:
        seen = await collect(client, 1)
        await fake.transport._done.wait()
    finally:
        with trio.move_on_after(10, shield=True):
            await client.disconnect()
    assert of_type(seen, ResultMessage)[0].user_message_uuids == ["u-1"]
    assert fake.transport.input_ended
    assert fake.transport.exit_code == 0
    assert fake.transport.closed


async def test_close_gives_a_busy_process_the_sdk_s_grace_then_sigterms_it(
    autojump_clock: Any,
) -> None:
    # As SubprocessCLITransport.close(): end of stdin, 5 s for the process to finish, SIGTERM.
    # (claude-trio's sessions never rely on it: they stop the CLI first.)
    effects: list[float] = []

    async def script(cli: FakeTurn) -> None:
        await cli.sleep(3)
        effects.append(trio.current_time())  # the agent goes on working meanwhile
        await cli.sleep(1000)

    fake = FakeCLI(script)
    async with connected(fake) as client:
        await push(client, "go", "u-1")
        await trio.sleep(1)
    assert trio.current_time() == 1 + CLOSE_GRACE_SECONDS
    assert effects == [3]
    assert fake.transport.closed
    assert fake.transport.exit_code == SIGTERM_EXIT_CODE


async def test_kill_now_stops_the_process_at_once(autojump_clock: Any) -> None:
    effects: list[float] = []

    async def script(cli: FakeTurn) -> None:
        await cli.sleep(3)
        effects.append(trio.current_time())

    fake = FakeCLI(script)
    async with connected(fake) as client:
        await push(client, "go", "u-1")
        await trio.sleep(1)
        fake.transport.kill_now()
        fake.transport.kill_now()  # a no-op once it is gone
    assert trio.current_time() == 1
    assert effects == []
    assert fake.transport.exit_code == SIGKILL_EXIT_CODE


async def test_script_errors_crash_the_fake_process(autojump_clock: Any) -> None:
    async def broken(cli: FakeTurn) -> None:
        await trio.lowlevel.checkpoint()
        raise KeyError("bug in the script")

    fake = FakeCLI([broken])
    stderr: list[str] = []
    async with connected(fake, make_options(stderr=stderr.append)) as client:
        await push(client, "go", "u-1")
        with pytest.raises(ProcessError):
            await collect(client, 1)
    assert [type(e) for e in fake.script_errors] == [KeyError]
    assert stderr[0] == "fake CLI script failed: KeyError('bug in the script')"


async def test_running_out_of_responders_is_a_script_error(autojump_clock: Any) -> None:
    fake = FakeCLI([])
    async with connected(fake) as client:
        await push(client, "go", "u-1")
        with pytest.raises(ProcessError):
            await collect(client, 1)
    (error,) = fake.script_errors
    assert isinstance(error, ScriptError)
    assert "only 0 responder(s)" in str(error)


def test_transport_factory_records_options_per_process() -> None:
    fake = FakeCLI(model="claude-opus-4-1")
    make: Callable[[ClaudeAgentOptions], Any] = fake
    first = make(ClaudeAgentOptions(model="x"))
    second = make(ClaudeAgentOptions(permission_mode="acceptEdits"))
    assert fake.transports == [first, second]
    assert fake.transport is second
    assert second.options.permission_mode == "acceptEdits"
    assert first.model == "claude-opus-4-1"
    assert first.session_id != second.session_id
    assert not first.process_alive
