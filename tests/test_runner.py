"""The ``claude-trio`` runner: exit codes, every event to the renderer, Ctrl-C, dispatch.

The session is a fake here (a context manager yielding an object with ``events`` and
``abort()``, like :class:`~claude_trio.actors.session.open.Session`); the real CLI is driven by
``tests/e2e/test_commands.py``.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import signal
import sys
import types
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from rich.console import Console

from claude_trio import cli
from claude_trio.cli import runner
from claude_trio.cli.render import JsonLinesRenderer, Renderer
from claude_trio.protocol.errors import CLIError, InvalidParamsError
from claude_trio.protocol.session.events import (
    Aborted,
    Error,
    Event,
    Question,
    Result,
    TextDelta,
    UserInputRequest,
)
from claude_trio.protocol.session.usage import Usage


def result(*, is_error: bool = False, final: bool = True) -> Result:
    return Result(
        subtype="error_during_execution" if is_error else "success",
        is_error=is_error,
        session_id="s-1",
        usage=Usage(input_tokens=10, output_tokens=5, cost_usd=0.001),
        execution_usage=Usage(input_tokens=10, output_tokens=5, cost_usd=0.001),
        session_usage=Usage(input_tokens=10, output_tokens=5, cost_usd=0.001),
        final=final,
    )


TEXT = TextDelta(text="hello")
ABORTED = Aborted(reason="aborted")
FATAL = Error(message="the CLI died", code="cli_exited")
NOT_FATAL = Error(message="interrupt failed", code="transport", fatal=False)


class RecordingSink:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.closed = False

    def feed(self, event: Event) -> None:
        self.events.append(event)

    def close(self) -> None:
        self.closed = True


@attrs.define(eq=False)
class FakeSession:
    """Events come from a channel the test fills; ``abort()`` ends them with ``Aborted``."""

    send: trio.MemorySendChannel[Event]
    events: trio.MemoryReceiveChannel[Event]
    confirm_abort: bool = True
    aborts: int = 0

    @classmethod
    def with_events(cls, events: Sequence[Event], *, end: bool = True) -> FakeSession:
        send, receive = trio.open_memory_channel[Event](math.inf)
        for event in events:
            send.send_nowait(event)
        if end:
            send.close()
        return cls(send=send, events=receive)

    async def abort(self) -> None:
        self.aborts += 1
        if not self.confirm_abort:
            await trio.sleep_forever()  # a CLI that never confirms: only a cancel ends this
        await self.send.send(ABORTED)
        self.send.close()


@attrs.define(eq=False)
class FakeOpener:
    session: FakeSession
    hang_while_connecting: bool = False
    error: Exception | None = None
    log: list[str] = attrs.field(factory=list)

    @asynccontextmanager
    async def __call__(self) -> AsyncIterator[FakeSession]:
        self.log.append("opening")
        try:
            if self.error is not None:
                raise self.error
            if self.hang_while_connecting:
                await trio.sleep_forever()
            await trio.lowlevel.checkpoint()
            yield self.session
        finally:
            self.log.append("closed")


# -- exit codes --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("terminal", "code"),
    [
        (result(), 0),
        (result(is_error=True), 1),
        (ABORTED, 1),
        (FATAL, 1),
        (None, 1),
    ],
)
def test_exit_code_follows_the_final_terminal_event(terminal: Event | None, code: int) -> None:
    assert runner.exit_code(terminal) == code


@pytest.mark.parametrize(
    ("events", "code"),
    [
        ([TEXT, result()], 0),
        ([TEXT, result(is_error=True)], 1),
        ([TEXT, ABORTED], 1),
        ([TEXT, FATAL], 1),
        # A non-fatal error is reported but does not decide: the turn still succeeded.
        ([NOT_FATAL, TEXT, result()], 0),
        # An execution of two turns (a background agent's follow-up): the last one decides.
        ([result(is_error=True, final=False), TEXT, result()], 0),
        ([result(final=False), TEXT, result(is_error=True)], 1),
        # The stream ended without any terminal event: never report success.
        ([TEXT], 1),
        ([], 1),
    ],
)
async def test_run_session_feeds_every_event_and_returns_the_exit_code(
    events: list[Event], code: int
) -> None:
    opener = FakeOpener(FakeSession.with_events(events))
    sink = RecordingSink()
    assert await runner.run_session(opener, sink) == code
    assert sink.events == events
    assert opener.log == ["opening", "closed"]


async def test_a_claude_trio_error_surfaces_as_itself_not_in_a_group() -> None:
    opener = FakeOpener(FakeSession.with_events([]), error=CLIError("no claude binary"))
    with pytest.raises(CLIError, match="no claude binary"):
        await runner.run_session(opener, RecordingSink())
    assert opener.log == ["opening", "closed"]


async def test_the_spinner_starts_before_the_session_opens() -> None:
    waits: list[tuple[str, int]] = []

    class SpyRenderer(Renderer):
        def wait(self, message: str = "waiting for Claude…") -> None:
            waits.append((message, len(opener.log)))

    renderer = SpyRenderer(Console(file=io.StringIO()))
    opener = FakeOpener(FakeSession.with_events([result()]))
    assert await runner.run_session(opener, renderer) == 0
    assert waits[0] == ("starting claude…", 0)  # before the session started opening


class ClosedOutputSink(RecordingSink):
    """Feeding fails after ``fed`` events the way a closed pipe makes it fail."""

    def __init__(self, fed: int, error: BaseException) -> None:
        super().__init__()
        self.fed = fed
        self.error = error

    def feed(self, event: Event) -> None:
        if len(self.events) == self.fed:
            raise self.error
        super().feed(event)


@pytest.mark.parametrize(
    "error",
    [BrokenPipeError(32, "Broken pipe"), SystemExit(1)],
    ids=["json-lines", "rich-console"],
)
async def test_a_closed_output_aborts_the_execution(error: BaseException) -> None:
    session = FakeSession.with_events([TEXT, TEXT, TEXT], end=False)
    opener = FakeOpener(session)
    sink = ClosedOutputSink(1, error)
    closed: list[bool] = []
    code = await runner.run_session(opener, sink, on_output_closed=lambda: closed.append(True))
    assert code == 1
    assert closed == [True]
    assert session.aborts == 1
    assert sink.events == [TEXT]
    assert opener.log == ["opening", "closed"]


# -- Ctrl-C ------------------------------------------------------------------------------------


async def _run_and_interrupt(opener: FakeOpener, sink: RecordingSink, times: int) -> int | None:
    codes: list[int] = []

    async def run() -> None:
        codes.append(await runner.run_session(opener, sink))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        for _ in range(times):
            await trio.testing.wait_all_tasks_blocked()
            signal.raise_signal(signal.SIGINT)
    return codes[0] if codes else None


async def test_ctrl_c_aborts_the_execution_and_returns_130() -> None:
    session = FakeSession.with_events([TEXT], end=False)
    opener = FakeOpener(session)
    sink = RecordingSink()
    with trio.fail_after(5):
        code = await _run_and_interrupt(opener, sink, times=1)
    assert code == 130
    assert session.aborts == 1
    # The abort is shown like any other terminal event, then the session is closed.
    assert sink.events == [TEXT, ABORTED]
    assert opener.log == ["opening", "closed"]


async def test_a_second_ctrl_c_cancels_an_abort_that_does_not_finish() -> None:
    session = FakeSession.with_events([TEXT], end=False)
    session.confirm_abort = False
    opener = FakeOpener(session)
    sink = RecordingSink()
    with trio.fail_after(5):
        code = await _run_and_interrupt(opener, sink, times=2)
    assert code == 130
    assert session.aborts == 1
    assert sink.events == [TEXT]
    assert opener.log == ["opening", "closed"]


async def test_ctrl_c_while_connecting_cancels_the_connection() -> None:
    opener = FakeOpener(FakeSession.with_events([]), hang_while_connecting=True)
    with trio.fail_after(5):
        code = await _run_and_interrupt(opener, RecordingSink(), times=1)
    assert code == 130
    assert opener.log == ["opening", "closed"]


# -- user input during `run` -------------------------------------------------------------------


def _args(*argv: str) -> argparse.Namespace:
    return cli.parse_args(argv)


def test_no_handler_without_a_terminal_or_with_json() -> None:
    sink = RecordingSink()
    assert runner.user_input_handler(_args("run", "hi"), sink, stdin_is_tty=False) is None
    assert runner.user_input_handler(_args("run", "hi", "--json"), sink, stdin_is_tty=True) is None


@pytest.mark.parametrize("mode", ["default", "acceptEdits"])
async def test_without_a_terminal_an_asking_mode_denies_each_approval_saying_why(mode: str) -> None:
    sink = RecordingSink()
    for argv, tty in (([], False), (["--json"], True)):
        args = _args("run", "hi", "--permission-mode", mode, *argv)
        handler = runner.user_input_handler(args, sink, stdin_is_tty=tty)
        assert handler is runner.answer_unattended
    approval = UserInputRequest(request_id="approve-1", source="tool_permission", tool_name="Bash")
    denial = await runner.answer_unattended(approval)
    assert denial == {"decision": "deny", "message": runner.UNATTENDED_DENIAL}
    assert "No one could answer" in runner.UNATTENDED_DENIAL
    question = UserInputRequest(request_id="ask-1", source="model-tool")
    assert await runner.answer_unattended(question) == {}  # "the user did not answer"
    form = UserInputRequest(request_id="e-1", source="mcp-elicitation")
    assert await runner.answer_unattended(form) == {"action": "cancel"}


@pytest.mark.parametrize("mode", ["bypassPermissions", "dontAsk", "plan"])
def test_modes_that_never_ask_need_no_handler_without_a_terminal(mode: str) -> None:
    args = _args("run", "hi", "--permission-mode", mode)
    assert runner.user_input_handler(args, RecordingSink(), stdin_is_tty=False) is None


async def test_on_a_terminal_questions_are_asked_on_the_renderers_console(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    prompts: list[str] = []

    async def read_line(prompt: str) -> str | None:
        await trio.lowlevel.checkpoint()
        prompts.append(prompt)
        return "2"

    monkeypatch.setattr(runner, "read_stdin_line", read_line)
    shown = io.StringIO()
    renderer = Renderer(Console(file=shown, width=100))
    handler = runner.user_input_handler(_args("run", "hi"), renderer, stdin_is_tty=True)
    assert handler is not None
    request = UserInputRequest(
        request_id="ask-1",
        source="model-tool",
        questions=(Question(question="Which color?", options=("red", "blue")),),
    )
    assert await handler(request) == {"Which color?": "blue"}
    assert "Which color?" in shown.getvalue()
    assert "2. blue" in shown.getvalue()
    assert prompts == ["Choose a number, or type an answer: "]


# -- dispatch ----------------------------------------------------------------------------------


@attrs.define(eq=False)
class OpenSessionSpy:
    events: list[Event]
    calls: list[tuple[Any, dict[str, Any]]] = attrs.field(factory=list)

    def __call__(self, params: Any, **kwargs: Any) -> Any:
        self.calls.append((params, kwargs))
        return FakeOpener(FakeSession.with_events(self.events))()


def test_run_opens_a_session_with_the_built_params(monkeypatch: pytest.MonkeyPatch) -> None:
    spy = OpenSessionSpy([TEXT, result()])
    monkeypatch.setattr(runner, "open_session", spy)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # not a terminal
    sink = RecordingSink()
    code = runner.run_command(_args("run", "hi there", "--max-turns", "3"), sink)
    assert code == 0
    [(params, kwargs)] = spy.calls
    assert params.prompt == "hi there"
    assert params.max_turns == 3
    assert kwargs == {"on_user_input": None}
    assert sink.events == [TEXT, result()]


def test_run_record_opens_the_session_with_record_to(monkeypatch: pytest.MonkeyPatch) -> None:
    spy = OpenSessionSpy([TEXT, result()])
    monkeypatch.setattr(runner, "open_session", spy)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert runner.run_command(_args("run", "hi", "--record", "/tmp/c.jsonl"), RecordingSink()) == 0
    [(params, kwargs)] = spy.calls
    assert params.prompt == "hi"
    assert kwargs == {"on_user_input": None, "record_to": "/tmp/c.jsonl"}


@pytest.mark.parametrize("record", [[], ["--record", "/tmp/o.jsonl"]])
def test_run_offline_points_the_session_at_the_offline_model(
    record: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    served: list[str] = []

    @asynccontextmanager
    async def fake_offline_model() -> AsyncIterator[Any]:
        served.append("start")
        yield types.SimpleNamespace(env={"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"})
        served.append("stop")

    spy = OpenSessionSpy([TEXT, result()])
    monkeypatch.setattr(runner, "open_offline_model", fake_offline_model)
    monkeypatch.setattr(runner, "open_session", spy)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    sink = RecordingSink()
    assert runner.run_command(_args("run", "hi", "--offline", *record), sink) == 0
    [(params, kwargs)] = spy.calls
    assert params.prompt == "hi"
    assert kwargs == {
        "on_user_input": None,
        "env": {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"},
        "record_to": record[1] if record else None,
    }
    assert served == ["start", "stop"]  # served for as long as the session ran
    assert sink.events == [TEXT, result()]


def test_demo_record_opens_the_demo_session_with_record_to(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[dict[str, Any]] = []

    def opener(**kwargs: Any) -> Any:
        calls.append(kwargs)
        return FakeOpener(FakeSession.with_events([result()]))()

    monkeypatch.setattr(runner, "open_demo_session", opener)
    assert runner.run_command(_args("demo", "--record", "/tmp/d.jsonl"), RecordingSink()) == 0
    assert calls == [{"record_to": "/tmp/d.jsonl"}]


def test_demo_opens_the_demo_session(monkeypatch: pytest.MonkeyPatch) -> None:
    opener = FakeOpener(FakeSession.with_events([result(is_error=True)]))
    monkeypatch.setattr(runner, "open_demo_session", opener)
    assert runner.run_command(_args("demo"), RecordingSink()) == 1
    assert opener.log == ["opening", "closed"]


def test_an_unknown_command_is_refused() -> None:
    with pytest.raises(InvalidParamsError, match="'run', 'record' or 'demo'"):
        runner.run_command(argparse.Namespace(command="fly", json=False), RecordingSink())


def test_main_maps_the_session_outcome_to_its_exit_code(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    monkeypatch.setattr(runner, "open_session", OpenSessionSpy([TEXT, result(is_error=True)]))
    assert cli.main(["run", "hi", "--json"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["kind"] for line in lines] == ["text_delta", "result"]


def test_json_renderer_is_a_sink_the_runner_accepts(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(runner, "open_demo_session", FakeOpener(FakeSession.with_events([TEXT])))
    assert runner.run_command(_args("demo", "--json"), JsonLinesRenderer(out)) == 1
    assert out.getvalue().count("\n") == 1
