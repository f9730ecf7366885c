"""The stream helpers over real sessions on the scripted CLI (and over fleets and the wire)."""

from __future__ import annotations

import io
from typing import Any

import pytest
import trio
import trio.testing
from rich.console import Console

from claude_trio import (
    Event,
    ExecuteParams,
    Result,
    TextDelta,
    ToolResult,
    ToolUse,
    UserInputRequest,
    collect,
    console_observer,
    filter_events,
    observe,
    open_fleet,
    open_subagent_split,
    open_tee,
    wait_for,
)
from claude_trio.cli.render import Renderer
from claude_trio.errors import SlowSubscriberError, StreamEndedError
from claude_trio.events import AssistantMessage, SubagentCompleted, SubagentStarted
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.fanout.wire import EventFrame, decode_frame, encode_frame
from claude_trio.protocol.session.contract import contract_violations
from claude_trio.protocol.session.events import TextContent
from claude_trio.testing import FakeCLI, FakeTurn

ASK = {
    "questions": [
        {"question": "Which?", "header": "Pick", "options": [{"label": "A"}], "multiSelect": False}
    ]
}
TODOS = {"todos": [{"content": "read", "status": "in_progress", "activeForm": "Reading"}]}


async def working(cli: FakeTurn) -> None:
    """Plans, reads, delegates to a subagent (which has a subagent of its own), asks, answers."""
    await cli.thinking("let me see", delay=0.5)
    await cli.tool_use("TodoWrite", TODOS, id="toolu_todo")
    await cli.tool_result("toolu_todo", "ok")
    read = await cli.tool_use("Read", {"file_path": "a.py"}, id="toolu_read")
    await cli.sleep(1.0)
    await cli.tool_result(read, "print('hi')")
    agent = await cli.tool_use("Agent", {"description": "survey"}, id="toolu_agent")
    await cli.task_started("task-1", tool_use_id=agent, description="survey")
    await cli.text("looking around", parent_tool_use_id=agent)
    await cli.tool_use("Bash", {"command": "ls"}, id="toolu_ls", parent_tool_use_id=agent)
    await cli.tool_result("toolu_ls", "a.py", parent_tool_use_id=agent)
    await cli.task_notification("task-1", summary="one file", tool_use_id=agent)
    await cli.tool_result(agent, "one file")
    await cli.ask_permission("AskUserQuestion", ASK)
    await cli.text("All done: one file.", chunk=4, delay=0.25)
    await cli.result("All done: one file.")


async def pick_a(request: UserInputRequest) -> Any:
    await trio.sleep(2.0)
    return {"Which?": "A"}


async def test_collect_sorts_a_real_session_into_a_transcript(
    scripted_session: Any, autojump_clock: trio.testing.MockClock
) -> None:
    async with scripted_session(working, "survey this", on_user_input=pick_a) as session:
        transcript = await collect(session.events)
        usage = session.usage_by_turn
    assert transcript.text == "All done: one file."
    assert isinstance(transcript.terminal, Result)
    assert transcript.terminal.final
    assert transcript.usage == usage.execution
    assert [(c.name, c.output) for c in transcript.tool_calls] == [
        ("Read", "print('hi')"),
        ("Agent", "one file"),
    ]
    [run] = transcript.subagents
    assert (run.task_id, run.description, run.status) == ("task-1", "survey", "completed")
    assert run.transcript.text == "looking around"
    assert [(c.name, c.output) for c in run.transcript.tool_calls] == [("Bash", "a.py")]
    assert [t.content for t in transcript.todos] == ["read"]
    [question] = transcript.questions
    assert (question.outcome, question.answer) == ("answered", {"Which?": "A"})
    assert [m.role for m in transcript.messages] == ["assistant"] * len(transcript.messages)
    assert contract_violations(transcript.events) == []
    # The scripted delays, exactly: 2 x 0.5 thinking (and its signature), 1.0 reading,
    # 2.0 answering, 5 x 0.25 text.
    assert trio.current_time() == pytest.approx(5.25)


async def test_collect_stops_at_the_final_event_of_a_stream_that_goes_on() -> None:
    send, receive = trio.open_memory_channel[Event](10)
    final = Result(
        subtype="success",
        is_error=False,
        session_id="s",
        usage=_zero(),
        execution_usage=_zero(),
        session_usage=_zero(),
        text="bye",
        final=True,
        seq=2,
    )
    after = TextDelta(text="not this execution", seq=3)
    for event in (TextDelta(text="b", seq=1), final, after):
        send.send_nowait(event)
    transcript = await collect(receive)
    assert transcript.text == "bye"
    assert receive.receive_nowait() is after  # left in the stream


def _zero() -> Any:
    from claude_trio import Usage

    return Usage()


async def test_filter_events_by_kind_class_and_predicate_leaves_the_source_open(
    scripted_session: Any, autojump_clock: trio.testing.MockClock
) -> None:
    async with scripted_session(working, on_user_input=pick_a) as session:
        with filter_events(session.events, ToolUse, where=lambda u: u.name != "Agent") as uses:
            first = await uses.receive()
            second = await uses.receive()
        assert (first.name, second.name) == ("Read", "Bash")
        # Closing the view left the session's stream open: read on from where it stopped.
        results = [e async for e in filter_events(session.events, "tool_result", "result")]
    assert [type(e) for e in results] == [ToolResult, ToolResult, Result]
    assert [e.tool_use_id for e in results[:2]] == ["toolu_ls", "toolu_agent"]


async def test_filter_events_refuses_unknown_kinds_by_name() -> None:
    _send, receive = trio.open_memory_channel[Event](1)
    with pytest.raises(InvalidParamsError, match=r"invalid kind='tool_call': one of aborted, "):
        filter_events(receive, "tool_call")
    with pytest.raises(InvalidParamsError, match="an event kind name"):
        filter_events(receive, dict)  # type: ignore[call-overload]
    with pytest.raises(InvalidParamsError, match="at least one kind, or where="):
        filter_events(receive)
    with pytest.raises(InvalidParamsError, match="a stream of events"):
        filter_events([TextDelta(text="x")], "text_delta")  # type: ignore[arg-type]
    view = filter_events(receive, TextDelta)
    view.close()
    with pytest.raises(trio.ClosedResourceError):
        await view.receive()


async def test_wait_for_returns_the_event_and_leaves_the_rest(
    scripted_session: Any, autojump_clock: trio.testing.MockClock
) -> None:
    async with scripted_session(working, on_user_input="manual") as session:
        request = await wait_for(session.events, UserInputRequest)
        assert trio.current_time() == pytest.approx(2.0)
        await session.answer(request.request_id, {"Which?": "A"})
        started = await wait_for(session.events, "text_delta", where=lambda e: not e.is_subagent)
        assert isinstance(started, TextDelta)
        rest = [e async for e in session.events]
    assert isinstance(rest[-1], Result)
    assert "".join(e.text for e in rest if isinstance(e, TextDelta)) == "All done: one file."[4:]


async def test_wait_for_names_what_it_waited_for_when_the_stream_ends(
    scripted_session: Any, autojump_clock: trio.testing.MockClock
) -> None:
    async with scripted_session(None) as session:
        with pytest.raises(StreamEndedError) as caught:
            await wait_for(session.events, SubagentStarted, "aborted")
    message = str(caught.value)
    assert message.startswith("the stream ended without a subagent_started or aborted event")
    assert message.endswith("(its last event was result at seq 5)")


def rendered(events: list[Event]) -> str:
    out = io.StringIO()
    renderer = Renderer(Console(file=out, width=100), show_thinking=True)
    for event in events:
        renderer.feed(event)
    renderer.close()
    return out.getvalue()


async def test_observe_shows_each_event_to_observers_before_the_reader(
    scripted_session: Any, autojump_clock: trio.testing.MockClock
) -> None:
    out = io.StringIO()
    seen: list[Event] = []
    got: list[Event] = []
    async with scripted_session(working, on_user_input=pick_a) as session:
        show = console_observer(Console(file=out, width=100))
        observed = observe(session.events, show, seen.append)
        async for event in observed:
            assert seen[-1] is event  # the observers saw it first
            got.append(event)
    assert seen == got
    # The console observer is the renderer of `claude-trio run`, line for line.
    assert out.getvalue() == rendered(got)
    assert "All done: one file." in out.getvalue()
    assert "  ↳ subagent [local_agent]: survey" in out.getvalue().splitlines()


async def test_an_observer_that_raises_stops_the_reader_with_its_error() -> None:
    send, receive = trio.open_memory_channel[Event](1)
    send.send_nowait(TextDelta(text="x", seq=1))

    def broken(event: Event) -> None:
        raise ValueError(f"cannot show {event.kind}")

    with pytest.raises(ValueError, match="cannot show text_delta"):
        await observe(receive, broken).receive()
    with pytest.raises(InvalidParamsError, match="a function taking an event"):
        observe(receive, "print")  # type: ignore[arg-type]


async def test_the_console_observer_shows_a_fleet_subscription_and_gateway_frames_alike(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def say(cli: FakeTurn) -> None:
        await cli.text("Hello from the fleet", chunk=5, delay=0.5)

    async with open_fleet(transport_factory=FakeCLI(say)) as fleet:
        fs = await fleet.start(ExecuteParams(prompt="hi"))
        subscription = fs.subscribe_nowait(None, max_queue=100)
        assert not isinstance(subscription, type(None))
        from_fleet = io.StringIO()
        with subscription:
            events = [
                e
                async for e in observe(
                    subscription, console_observer(Console(file=from_fleet, width=100))
                )
            ]
    # What a gateway client decodes from the frames of the same events.
    decoded: list[Event] = []
    for event in events:
        frame = decode_frame(encode_frame(EventFrame(session=fs.id, event=event)))
        assert isinstance(frame, EventFrame)
        decoded.append(frame.event)
    from_wire = io.StringIO()
    show = console_observer(Console(file=from_wire, width=100))
    for event in decoded:
        show(event)
    show.close()
    assert from_fleet.getvalue() == from_wire.getvalue() == rendered(events)
    assert "Hello from the fleet" in from_fleet.getvalue().splitlines()


async def test_tee_gives_every_consumer_every_event_without_slowing_the_session(
    scripted_session: Any, autojump_clock: trio.testing.MockClock
) -> None:
    copies: list[list[Event]] = [[], []]

    async def consume(source: Any, into: list[Event], pause: float) -> None:
        with source:
            async for event in source:
                into.append(event)
                await trio.sleep(pause)

    async with (
        scripted_session(working, on_user_input=pick_a) as session,
        open_tee(session.events, 2) as (fast, slow),
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(consume, fast, copies[0], 0)
        nursery.start_soon(consume, slow, copies[1], 0.01)
        await session.wait_ended()
        ended_at = trio.current_time()
    assert ended_at == pytest.approx(5.25)  # the session's own pace, not the slow reader's
    assert [e.seq for e in copies[0]] == [e.seq for e in copies[1]]
    assert copies[0] == copies[1]
    assert contract_violations(copies[0]) == []
    assert all(e.raw is None for e in copies[0])


async def test_tee_drops_a_consumer_that_falls_too_far_behind_and_the_others_go_on(
    scripted_session: Any, autojump_clock: trio.testing.MockClock
) -> None:
    async def chatty(cli: FakeTurn) -> None:
        await cli.text("x" * 40, chunk=1)
        await cli.tool_use("Read", {"file_path": "a"}, id="t-1")
        await cli.tool_result("t-1", "ok")
        await cli.text("y" * 40, chunk=1)
        await cli.tool_use("Read", {"file_path": "b"}, id="t-2")
        await cli.tool_result("t-2", "ok")

    async with (
        scripted_session(chatty) as session,
        open_tee(session.events, 2, max_queue=3) as (reader, idle),
    ):
        with reader:
            got = [e async for e in reader]
        assert idle.dropped_reason is not None
        assert idle.dropped_reason.startswith("slow consumer: 3 events queued")
        with pytest.raises(SlowSubscriberError, match="slow consumer"):
            idle.receive_nowait()
    text = "".join(e.text for e in got if isinstance(e, TextDelta))
    assert text == "x" * 40 + "y" * 40
    assert isinstance(got[-1], Result)


async def test_tee_hands_a_failure_of_its_source_to_every_consumer_after_what_came_before() -> None:
    async with open_tee(Failing(), 2) as outputs:
        for output in outputs:
            assert (await output.receive()).seq == 1
            with pytest.raises(trio.BrokenResourceError) as caught:
                await output.receive()
            assert isinstance(caught.value.__cause__, OSError)


async def test_tee_copies_end_with_the_block_and_refuse_bad_sizes() -> None:
    _send, receive = trio.open_memory_channel[Event](1)
    async with open_tee(receive, 1) as (only,):
        pass
    with pytest.raises(trio.EndOfChannel):
        only.receive_nowait()
    for bad in ({"consumers": 0}, {"consumers": 1, "max_queue": 0}, {"consumers": True}):
        with pytest.raises(InvalidParamsError):
            async with open_tee(receive, **bad):
                pass


async def test_split_gives_each_subagent_its_own_channel_nested_ones_too(
    scripted_session: Any, autojump_clock: trio.testing.MockClock
) -> None:
    async def nested(cli: FakeTurn) -> None:
        outer = await cli.tool_use("Agent", {"description": "outer"}, id="toolu_outer")
        await cli.task_started("task-outer", tool_use_id=outer, description="outer")
        await cli.text("outer thinks", parent_tool_use_id=outer)
        inner = await cli.tool_use(
            "Agent", {"description": "inner"}, id="toolu_inner", parent_tool_use_id=outer
        )
        await cli.frame(
            {
                "type": "system",
                "subtype": "task_started",
                "task_id": "task-inner",
                "tool_use_id": inner,
                "description": "inner",
                "task_type": "local_agent",
                "parent_tool_use_id": outer,
            }
        )
        await cli.text("inner works", parent_tool_use_id=inner)
        await cli.frame(
            {
                "type": "system",
                "subtype": "task_notification",
                "task_id": "task-inner",
                "tool_use_id": inner,
                "status": "completed",
                "output_file": "",
                "summary": "inner done",
                "parent_tool_use_id": outer,
            }
        )
        await cli.tool_result(inner, "inner done", parent_tool_use_id=outer)
        await cli.task_notification("task-outer", tool_use_id=outer)
        await cli.tool_result(outer, "outer done")
        await cli.text("main answers")

    by_agent: dict[str | None, list[Event]] = {}
    parents: dict[str | None, str | None] = {}

    async def drain(key: str | None, channel: Any) -> None:
        with channel:
            by_agent[key] = [e async for e in channel]

    async with (
        scripted_session(nested) as session,
        open_subagent_split(session.events) as split,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(drain, "main", split.main)
        with split.subagents:
            async for stream in split.subagents:
                parents[stream.task_id] = stream.parent_task_id
                nursery.start_soon(drain, stream.task_id, stream.events)
    assert parents == {"task-outer": None, "task-inner": "task-outer"}
    main = by_agent["main"]
    assert all(not e.is_subagent for e in main)
    assert isinstance(main[-1], Result)
    subagent_events = ["subagent_started", "subagent_completed"]
    assert [e.kind for e in main if "subagent" in e.kind] == subagent_events
    # The inner subagent's start and end are events of the outer agent, which started it.
    outer_kinds = [e.kind for e in by_agent["task-outer"]]
    assert [k for k in outer_kinds if "subagent" in k] == subagent_events
    inner = by_agent["task-inner"]
    assert [e.subagent_task_id for e in inner] == ["task-inner"] * len(inner)
    [said] = [e for e in inner if isinstance(e, AssistantMessage)]
    assert said.message.content[0] == TextContent(text="inner works")
    total = len(main) + len(by_agent["task-outer"]) + len(inner)
    assert total == main[-1].seq  # every event went somewhere, exactly once


async def test_split_drops_what_a_closed_channel_would_have_got(
    scripted_session: Any, autojump_clock: trio.testing.MockClock
) -> None:
    async with (
        scripted_session(working, on_user_input=pick_a) as session,
        open_subagent_split(session.events) as split,
    ):
        split.main.close()  # only the subagents are followed
        stream = await split.subagents.receive()
        with stream.events:
            events = [e async for e in stream.events]
        assert stream.completed is not None
        assert stream.completed.summary == "one file"
        with pytest.raises(trio.EndOfChannel):
            await split.subagents.receive()
    assert [e.kind for e in events if not isinstance(e, AssistantMessage)] == [
        "tool_use",
        "tool_result",
    ]
    assert all(e.subagent_task_id == "task-1" for e in events)


class Failing:
    """A stream that yields one event, then fails."""

    def __init__(self) -> None:
        self.sent = False

    def __aiter__(self) -> Failing:
        return self

    async def __anext__(self) -> Event:
        await trio.lowlevel.checkpoint()
        if not self.sent:
            self.sent = True
            return TextDelta(text="before", seq=1)
        raise OSError("the wire broke")


async def read_split_of(events: Any) -> None:
    async with open_subagent_split(events) as split:
        with split.main:
            async for _ in split.main:
                pass


async def test_split_raises_an_error_of_its_source_out_of_the_block() -> None:
    with pytest.raises(OSError, match="the wire broke"):
        await read_split_of(Failing())


async def test_split_routes_late_and_unattributed_subagent_events_somewhere_visible() -> None:
    send, receive = trio.open_memory_channel[Event](10)
    sub = {"is_subagent": True, "subagent_task_id": "t-1"}
    stream: list[Event] = [
        TextDelta(text="early", is_subagent=True, seq=1),  # before its task was known
        SubagentStarted(task_id="t-1", tool_use_id="u-1", description="x", seq=2),
        TextDelta(text="inside", seq=3, **sub),
        SubagentCompleted(task_id="t-1", tool_use_id="u-1", status="completed", seq=4),
        TextDelta(text="late", seq=5, **sub),  # after it completed: to its parent
    ]
    for event in stream:
        send.send_nowait(event)
    send.close()
    got: dict[str | None, list[int]] = {}

    async def drain(key: str | None, channel: Any) -> None:
        with channel:
            got[key] = [e.seq async for e in channel]

    async with open_subagent_split(receive) as split, trio.open_nursery() as nursery:
        nursery.start_soon(drain, "main", split.main)
        async for announced in split.subagents:
            nursery.start_soon(drain, announced.task_id, announced.events)
    assert got == {"main": [2, 4, 5], None: [1], "t-1": [3]}


@pytest.mark.parametrize("opener", ["tee", "split"])
async def test_the_callers_exception_leaves_the_block_as_itself(opener: str) -> None:
    _send, receive = trio.open_memory_channel[Event](1)
    block = open_tee(receive, 1) if opener == "tee" else open_subagent_split(receive)
    with pytest.raises(KeyError, match="mine"):
        async with block:
            raise KeyError("mine")
