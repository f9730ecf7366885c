"""The session's OpenTelemetry spans (actors/session/tracing.py), over the fake CLI.

Every test passes its own SDK ``TracerProvider`` with an in-memory exporter to
``open_session(tracer_provider=...)``: the global provider is never set (OpenTelemetry lets a
process set it once), so the test of "no SDK configured" sees the API's default.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import trio
import trio.testing
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from session_kit import CONFIG, check_stream, collect, fake_session

from claude_trio import Accepted, ExecuteParams, ToolUse, UserInputRequest, open_fleet
from claude_trio.actors.session import tracing
from claude_trio.actors.session.tracing import CAPTURE_CONTENT_ENV, session_tracer
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.testing import FakeCLI, FakeTurn
from claude_trio.testing.fake_cli import DEFAULT_MODEL

SECRET = "sk-ant-api03-" + "a" * 40
ASKING = ExecuteParams(prompt="build it", permission_mode="default", model=DEFAULT_MODEL)


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    yield exporter
    exporter.shutdown()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider
    provider.shutdown()


@pytest.fixture(autouse=True)
def _no_capture_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)


def tree(spans: tuple[ReadableSpan, ...]) -> list[tuple[str, str | None]]:
    """(name, parent's name) of every span, in the order they started."""
    by_id = {span.context.span_id: span for span in spans}
    ordered = sorted(spans, key=lambda span: span.start_time or 0)
    return [
        (
            span.name,
            by_id[span.parent.span_id].name if span.parent is not None else None,
        )
        for span in ordered
    ]


def named(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return sorted(
        (span for span in spans if span.name == name), key=lambda span: span.start_time or 0
    )


def event_names(span: ReadableSpan) -> list[str]:
    return [event.name for event in span.events]


async def scripted(cli: FakeTurn) -> None:
    """Two model calls of the main agent, three tools (one a subagent's), one approval."""
    await cli.text("Let me build it", chunk=5)
    await cli.tool_use(
        "Bash", {"command": f"make KEY={SECRET}"}, id="toolu_bash", end_message=False
    )
    await cli.tool_use("Task", {"description": "explore", "prompt": "look"}, id="toolu_task")
    await cli.ask_permission("Bash", {"command": "make"}, tool_use_id="toolu_bash")
    await cli.sleep(1.0)
    await cli.tool_result("toolu_bash", "built")
    await cli.task_started("task-1", description="explore", tool_use_id="toolu_task")
    await cli.tool_use(
        "Grep", {"pattern": "TODO"}, id="toolu_grep", parent_tool_use_id="toolu_task"
    )
    await cli.tool_result("toolu_grep", "no match", is_error=True, parent_tool_use_id="toolu_task")
    await cli.text("nothing to do", parent_tool_use_id="toolu_task")
    await cli.task_notification("task-1", status="completed", tool_use_id="toolu_task")
    await cli.tool_result("toolu_task", "explored")
    await cli.text("All built")


async def run_scripted(provider: TracerProvider, **options: Any) -> list[Any]:
    async def approve(request: UserInputRequest) -> Any:
        await trio.sleep(2.0)
        return {"decision": "allow"}

    pushed: list[Any] = []
    async with fake_session(
        FakeCLI(scripted),
        params=ASKING,
        on_user_input=approve,
        tracer_provider=provider,
        **options,
    ) as session:

        async def on_event(event: object) -> None:
            if isinstance(event, ToolUse) and event.name == "Bash":
                pushed.append(await session.push("and run the tests"))

        events = await collect(session, on_event)
    check_stream(events)
    assert isinstance(pushed[0], Accepted)
    return events


async def test_a_scripted_session_is_one_span_tree(
    autojump_clock: trio.testing.MockClock,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    events = await run_scripted(provider)
    spans = exporter.get_finished_spans()
    chat = f"chat {DEFAULT_MODEL}"
    assert tree(spans) == [
        ("invoke_agent claude-code", None),
        (chat, "invoke_agent claude-code"),
        ("execute_tool Bash", "invoke_agent claude-code"),
        ("execute_tool Task", "invoke_agent claude-code"),
        ("invoke_agent local_agent", "execute_tool Task"),
        (chat, "invoke_agent local_agent"),
        ("execute_tool Grep", "invoke_agent local_agent"),
        (chat, "invoke_agent local_agent"),
        (chat, "invoke_agent claude-code"),
    ]
    (root,) = named(spans, "invoke_agent claude-code")
    result = events[-1]
    usage = result.execution_usage
    assert dict(root.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.agent.name": "claude-code",
        "gen_ai.request.model": DEFAULT_MODEL,
        "gen_ai.response.model": DEFAULT_MODEL,
        "gen_ai.conversation.id": result.session_id,
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": usage.cache_read_input_tokens,
        "gen_ai.usage.cache_creation.input_tokens": usage.cache_creation_input_tokens,
        "claude_trio.cost_usd": usage.cost_usd,
        "claude_trio.outcome": "completed",
    }
    assert usage.input_tokens == 20
    assert usage.output_tokens == 10
    assert usage.cost_usd == pytest.approx(0.002)
    assert root.status.status_code is StatusCode.UNSET
    assert event_names(root) == ["claude_trio.push.accepted", "claude_trio.push.delivered"]
    accepted, delivered = root.events
    assert accepted.attributes == delivered.attributes

    first_call, final_call = named(spans, chat)[0], named(spans, chat)[-1]
    assert first_call.attributes is not None
    assert first_call.attributes["gen_ai.operation.name"] == "chat"
    assert first_call.attributes["gen_ai.response.model"] == DEFAULT_MODEL
    assert first_call.attributes["gen_ai.usage.input_tokens"] == 10
    assert first_call.kind is trace.SpanKind.CLIENT
    assert final_call.attributes is not None
    assert (
        final_call.attributes["gen_ai.response.id"] != first_call.attributes["gen_ai.response.id"]
    )

    (bash,) = named(spans, "execute_tool Bash")
    assert dict(bash.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "Bash",
        "gen_ai.tool.call.id": "toolu_bash",
        "gen_ai.tool.type": "extension",
    }
    assert event_names(bash) == [
        "claude_trio.user_input.requested",
        "claude_trio.user_input.resolved",
    ]
    asked, answered = bash.events
    assert asked.attributes is not None
    assert answered.attributes is not None
    assert asked.attributes["claude_trio.request.source"] == "tool_permission"
    assert answered.attributes["claude_trio.request.outcome"] == "answered"
    assert answered.attributes["claude_trio.request.answered_by"] == "handler"
    assert answered.attributes["claude_trio.request.wait_seconds"] == 2.0  # the handler's sleep
    assert bash.status.status_code is StatusCode.UNSET

    (grep,) = named(spans, "execute_tool Grep")
    assert grep.status.status_code is StatusCode.ERROR
    assert (grep.attributes or {})["error.type"] == "tool_error"
    (subagent,) = named(spans, "invoke_agent local_agent")
    assert subagent.attributes is not None
    assert subagent.attributes["gen_ai.agent.id"] == "task-1"
    assert subagent.attributes["gen_ai.conversation.id"] == result.session_id
    assert subagent.attributes["claude_trio.subagent.status"] == "completed"
    # Nothing of the content without the opt-in.
    for span in spans:
        for key in span.attributes or {}:
            assert key not in {
                "gen_ai.input.messages",
                "gen_ai.output.messages",
                "gen_ai.tool.call.arguments",
                "gen_ai.tool.call.result",
                "gen_ai.agent.description",
            }, (span.name, key)


async def test_content_is_recorded_when_asked_for_with_secrets_masked(
    autojump_clock: trio.testing.MockClock,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    await run_scripted(provider, trace_content=True)
    spans = exporter.get_finished_spans()
    (root,) = named(spans, "invoke_agent claude-code")
    assert root.attributes is not None
    assert "build it" in str(root.attributes["gen_ai.input.messages"])
    assert "All built" in str(root.attributes["gen_ai.output.messages"])
    (bash,) = named(spans, "execute_tool Bash")
    arguments = str((bash.attributes or {})["gen_ai.tool.call.arguments"])
    assert "make KEY=" in arguments
    assert SECRET not in arguments
    assert (bash.attributes or {})["gen_ai.tool.call.result"] == '"built"'
    for span in spans:
        assert SECRET not in str(span.attributes), span.name


async def test_the_conventions_switch_turns_content_on(
    autojump_clock: trio.testing.MockClock,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    await run_scripted(provider)
    (root,) = named(exporter.get_finished_spans(), "invoke_agent claude-code")
    assert "gen_ai.input.messages" in (root.attributes or {})


async def test_an_abort_mid_tool_ends_the_spans_with_the_stop(
    autojump_clock: trio.testing.MockClock,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.tool_use("Bash", {"command": "sleep 100"}, id="toolu_slow")
        await cli.sleep(100.0)
        await cli.tool_result("toolu_slow", "slept")

    async with fake_session(FakeCLI(script), tracer_provider=provider) as session:

        async def on_event(event: object) -> None:
            if isinstance(event, ToolUse):
                await session.abort()

        events = await collect(session, on_event)
    check_stream(events)
    spans = exporter.get_finished_spans()
    assert [name for name, _ in tree(spans)] == [
        "invoke_agent claude-code",
        "chat",
        "execute_tool Bash",
    ]
    (root,) = named(spans, "invoke_agent claude-code")
    assert (root.attributes or {})["claude_trio.outcome"] == "aborted"
    assert root.status.status_code is StatusCode.UNSET
    (stop,) = root.events
    assert stop.name == "claude_trio.stop"
    assert stop.attributes is not None
    assert stop.attributes["claude_trio.stop.phase"] == "tools"
    assert stop.attributes["claude_trio.outcome"] == "aborted"
    assert stop.attributes["claude_trio.stop.seconds"] == 0.0  # the fake CLI stops at once
    (tool,) = named(spans, "execute_tool Bash")
    assert tool.end_time is not None
    assert root.end_time is not None
    assert tool.end_time <= root.end_time


async def test_a_stop_that_waits_for_the_cli_says_how_long_it_took(
    autojump_clock: trio.testing.MockClock,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.tool_use("Bash", {"command": "sleep 100"}, id="toolu_slow")
        await cli.sleep(100.0)
        await cli.tool_result("toolu_slow", "slept")

    # It confirms the interrupt and goes on: the stop waits out abort_grace, then kills it.
    wedged = FakeCLI(script, ignores_interrupts=True)
    async with fake_session(wedged, tracer_provider=provider) as session:

        async def on_event(event: object) -> None:
            if isinstance(event, ToolUse):
                await trio.sleep(0.5)
                await session.abort()

        events = await collect(session, on_event)
    check_stream(events)
    (root,) = named(exporter.get_finished_spans(), "invoke_agent claude-code")
    assert root.status.status_code is StatusCode.UNSET
    (stop,) = [event for event in root.events if event.name == "claude_trio.stop"]
    assert stop.attributes is not None
    assert stop.attributes["claude_trio.stop.seconds"] == CONFIG.abort_grace
    assert stop.attributes["claude_trio.outcome"] == "aborted"


async def test_leaving_the_block_early_ends_the_trace_as_closed(
    autojump_clock: trio.testing.MockClock,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.text("a long answer", chunk=1, delay=1.0)

    async with fake_session(FakeCLI(script), tracer_provider=provider) as session:
        async for event in session.events:
            if event.kind == "text_delta":
                break
    (root,) = named(exporter.get_finished_spans(), "invoke_agent claude-code")
    assert (root.attributes or {})["claude_trio.outcome"] == "closed"
    assert [span.end_time is not None for span in exporter.get_finished_spans()] == [True, True]


async def test_nothing_is_recorded_without_an_sdk(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This process never sets the global provider: it is the API's proxy, a no-op.
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    made: list[object] = []
    real_init = tracing.SessionTracer.__init__

    def spy(self: tracing.SessionTracer, *args: Any, **kwargs: Any) -> None:
        made.append(self)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(tracing.SessionTracer, "__init__", spy)

    async def script(cli: FakeTurn) -> None:
        tool = await cli.tool_use("Bash", {"command": "make"})
        await cli.tool_result(tool, "built")
        await cli.text("done")

    async with fake_session(FakeCLI(script)) as session:
        events = await collect(session)
    check_stream(events)
    assert made == []
    assert session_tracer(None, prompt="x", model=None) is None
    assert session_tracer(trace.NoOpTracerProvider(), prompt="x", model=None) is None


async def test_a_wrong_tracing_option_is_refused_by_name() -> None:
    with pytest.raises(InvalidParamsError, match="tracer_provider"):
        async with fake_session(FakeCLI(), tracer_provider="otlp"):  # type: ignore[arg-type]
            pass
    with pytest.raises(InvalidParamsError, match="trace_content"):
        async with fake_session(FakeCLI(), trace_content="yes"):  # type: ignore[arg-type]
            pass


async def test_a_fleet_traces_each_execution_with_its_provider(
    autojump_clock: trio.testing.MockClock,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.text(f"answer to {cli.prompt}")

    async with open_fleet(
        transport_factory=FakeCLI(script), config=CONFIG, tracer_provider=provider
    ) as fleet:
        fs = await fleet.start(ExecuteParams(prompt="one"))
        first = await fs.result()
        await fleet.continue_(fs.id, "two")
        second = await fs.result()
    roots = named(exporter.get_finished_spans(), "invoke_agent claude-code")
    assert [(root.attributes or {})["claude_trio.outcome"] for root in roots] == [
        "completed",
        "completed",
    ]
    conversation = [(root.attributes or {})["gen_ai.conversation.id"] for root in roots]
    ids = [transcript.results[-1].session_id for transcript in (first, second)]
    assert conversation == ids
    assert None not in ids  # the CLI's own ids (the fake CLI starts a new one per process)


async def test_an_answer_through_a_fleet_is_the_callers(
    autojump_clock: trio.testing.MockClock,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.tool_use("Bash", {"command": "make"}, id="toolu_make", end_message=False)
        await cli.ask_permission("Bash", {"command": "make"}, tool_use_id="toolu_make")
        await cli.tool_result("toolu_make", "built")
        await cli.text("done")

    async with open_fleet(
        transport_factory=FakeCLI(script), config=CONFIG, tracer_provider=provider
    ) as fleet:
        session = await fleet.start(ASKING)
        async with session.subscribe() as events:
            async for event in events:
                if isinstance(event, UserInputRequest):
                    await trio.sleep(4.0)
                    await session.answer(event.request_id, {"decision": "allow"})
        await session.result()
    (bash,) = named(exporter.get_finished_spans(), "execute_tool Bash")
    (resolved,) = [e for e in bash.events if e.name == "claude_trio.user_input.resolved"]
    assert resolved.attributes is not None
    assert resolved.attributes["claude_trio.request.answered_by"] == "caller"
    assert resolved.attributes["claude_trio.request.outcome"] == "answered"
    assert resolved.attributes["claude_trio.request.wait_seconds"] == 4.0


async def test_a_fleet_refuses_a_wrong_tracing_option_by_name() -> None:
    with pytest.raises(InvalidParamsError, match="tracer_provider"):
        async with open_fleet(transport_factory=FakeCLI(), tracer_provider=object()):
            pass


async def test_a_failure_of_the_traces_never_stops_the_session(
    autojump_clock: trio.testing.MockClock,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(self: tracing.SessionTracer, event: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(tracing.SessionTracer, "_on_tool_use", broken)

    async def script(cli: FakeTurn) -> None:
        tool = await cli.tool_use("Bash", {"command": "make"})
        await cli.tool_result(tool, "built")
        await cli.text("done")

    async with fake_session(FakeCLI(script), tracer_provider=provider) as session:
        events = await collect(session)
    check_stream(events)
    assert events[-1].kind == "result"
    assert "tracing the session failed at a tool_use event" in caplog.text
    spans = exporter.get_finished_spans()
    assert [span.name for span in spans] == ["invoke_agent claude-code"]
