"""Public behaviour over the scripted fake CLI: the TypeScript library's adapter face
(``ClaudeCodeAdapter``), the context-window fields of a result, images pushed mid-execution,
and the transcript of an execution with several turns.

Everything runs under ``autojump_clock``.
"""

from __future__ import annotations

import base64

import pytest
import trio
import trio.testing
from session_kit import CONFIG, assert_no_leak, check_stream, collect, fake_session

from claude_trio import (
    Aborted,
    Accepted,
    AdapterReady,
    Event,
    ExecuteParams,
    ImageInput,
    Result,
    TextDelta,
    Transcript,
)
from claude_trio.errors import LocalProtocolError
from claude_trio.events import UserMessage
from claude_trio.session import ClaudeCodeAdapter
from claude_trio.testing import FakeCLI, FakeTurn

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16


# -- ClaudeCodeAdapter -----------------------------------------------------------------------


async def test_the_adapter_streams_an_execution_and_delivers_push_message(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def first(cli: FakeTurn) -> None:
        await cli.text("reading", chunk=3, delay=0.1)

    async def second(cli: FakeTurn) -> None:
        await cli.text(f"you said: {cli.prompt}")

    fake = FakeCLI([first, second])
    adapter = ClaudeCodeAdapter(transport_factory=fake, config=CONFIG)
    assert adapter.push_message("nobody is listening") is False  # no execution yet
    pushed: list[bool] = []
    events: list[Event] = []
    async with adapter.execute(ExecuteParams(prompt="look around")) as stream:
        async for event in stream:
            events.append(event)
            if isinstance(event, TextDelta) and not pushed:
                pushed.append(adapter.push_message("and the tests"))
    check_stream(events)
    assert pushed == [True]
    assert isinstance(events[0], AdapterReady)
    results = [e for e in events if isinstance(e, Result)]
    assert [(r.turn, r.final) for r in results] == [(1, False), (2, True)]
    assert results[-1].text == "you said: and the tests"
    assert [m["message"]["content"] for m in fake.transport.user_messages] == [
        "look around",
        "and the tests",
    ]
    # Between executions the adapter takes no pushes; abort is a no-op.
    assert adapter.push_message("after the end") is False
    await adapter.abort()
    assert adapter.architecture_capabilities().mid_turn_push is True
    assert_no_leak(fake)


async def test_the_adapter_runs_one_execution_at_a_time_and_aborts_the_running_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def slow(cli: FakeTurn) -> None:
        await cli.text("a very long answer", chunk=1, delay=1.0)

    fake = FakeCLI(slow)
    adapter = ClaudeCodeAdapter(transport_factory=fake, config=CONFIG)
    events: list[Event] = []
    async with adapter.execute(ExecuteParams(prompt="go")) as stream:
        with pytest.raises(LocalProtocolError, match="already running an execution"):
            async with adapter.execute(ExecuteParams(prompt="again")):
                pass  # pragma: no cover
        async for event in stream:
            events.append(event)
            if isinstance(event, TextDelta):
                await adapter.abort()
    check_stream(events)
    assert isinstance(events[-1], Aborted)
    assert len(fake.transport.user_messages) == 1
    # The adapter is free again: the next execution runs.
    async with adapter.execute(ExecuteParams(prompt="next")) as stream:
        async for event in stream:
            events.append(event)
    assert isinstance(events[-1], Result)
    assert events[-1].final
    assert_no_leak(fake)


# -- the context window ----------------------------------------------------------------------


async def test_a_result_says_how_much_of_the_context_window_the_last_model_call_used(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.begin_message(usage={"input_tokens": 1_000, "output_tokens": 10})
        await cli.tool_use("Read", {"file_path": "a"}, id="t-1")
        await cli.tool_result("t-1", "contents")
        # The last call reads the whole conversation, most of it from the cache.
        await cli.begin_message(
            usage={
                "input_tokens": 2_000,
                "cache_read_input_tokens": 40_000,
                "cache_creation_input_tokens": 8_000,
                "output_tokens": 20,
            }
        )
        await cli.text("done")

    fake = FakeCLI(script, model="claude-sonnet-4-6")
    async with fake_session(fake) as session:
        events = await collect(session)
    check_stream(events)
    result = events[-1]
    assert isinstance(result, Result)
    assert result.context_tokens == 50_000  # the last call's input, cache reads and writes in
    assert result.context_window == 200_000  # the CLI's modelUsage figure
    assert result.context_share == 0.25
    assert result.usage.input_tokens == 51_000  # the turn's usage counts both calls


# -- images pushed mid-execution --------------------------------------------------------------


async def test_a_push_with_images_reaches_the_cli_as_image_blocks_before_its_text(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def first(cli: FakeTurn) -> None:
        await cli.text("waiting", chunk=2, delay=0.1)

    async def second(cli: FakeTurn) -> None:
        await cli.text("a picture")

    fake = FakeCLI([first, second])
    image = ImageInput.from_bytes(PNG)
    outcomes: list[Accepted | object] = []
    async with fake_session(fake, prompt="look") as session:

        async def on_event(event: Event) -> None:
            if isinstance(event, TextDelta) and not outcomes:
                outcomes.append(await session.push("what is in this picture?", images=[image]))

        events = await collect(session, on_event)
    check_stream(events)
    assert isinstance(outcomes[0], Accepted)
    _, pushed = fake.transport.user_messages
    assert pushed["message"]["content"] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": base64.b64encode(PNG).decode()}},
        {"type": "text", "text": "what is in this picture?"},
    ]  # fmt: skip
    [echo] = [e for e in events if isinstance(e, UserMessage)]
    assert echo.uuid == pushed["uuid"]


# -- a transcript with several results ------------------------------------------------------------


async def test_the_transcript_of_several_turns_keeps_every_result_and_push(
    autojump_clock: trio.testing.MockClock,
) -> None:
    def answering(text: str, cost: float):  # type: ignore[no-untyped-def]
        async def turn(cli: FakeTurn) -> None:
            await cli.begin_message(usage={"input_tokens": 100, "output_tokens": 10})
            await cli.text(text, chunk=4, delay=0.1)
            await cli.result(cost_usd=cost)

        return turn

    fake = FakeCLI([answering("first", 0.25), answering("second", 0.5), answering("third", 1.0)])
    pushes: list[Accepted | object] = []
    async with fake_session(fake, prompt="one") as session:

        async def on_event(event: Event) -> None:
            # One push per turn, while the turn's text streams: each becomes the next turn.
            if isinstance(event, TextDelta) and len(pushes) < event.turn and event.turn < 3:
                pushes.append(await session.push(f"push {event.turn}"))

        events = await collect(session, on_event)
    check_stream(events)
    transcript = Transcript.of(events)
    assert [(r.turn, r.final, r.text) for r in transcript.results] == [
        (1, False, "first"),
        (2, False, "second"),
        (3, True, "third"),
    ]
    assert transcript.terminal is transcript.results[-1]
    assert transcript.text == "third"  # the final result's text
    assert [m.uuid for m in transcript.user_messages] == [
        p.uuid for p in pushes if isinstance(p, Accepted)
    ]
    assert len(transcript.user_messages) == 2
    assert transcript.usage == transcript.results[-1].execution_usage
    assert transcript.usage is not None
    assert transcript.usage.cost_usd == 1.75  # the three turns' costs, summed
    assert transcript.usage.input_tokens == 300
    assert [len(m.content) for m in transcript.messages] == [1, 1, 1]
