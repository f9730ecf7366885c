"""Failures through ``open_session`` over the real bundled CLI: API errors, retries, max_turns,
a CLI that refuses to start, a missing CLI. Each ends with exactly one terminal event, no hang,
and no ``claude`` child left (``run_session`` checks that)."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest
import trio
from helpers import (
    assert_no_child_processes,
    dump,
    kinds,
    of_type,
    params,
    run_session,
    sonnet_cost,
)

from claude_trio.actors.session.sdk_private import SubprocessCLITransport
from claude_trio.protocol.session.events import (
    AssistantMessage,
    Error,
    Result,
    Retry,
    TextContent,
    TextDelta,
    ToolUse,
    WarningEvent,
)
from claude_trio.protocol.session.outcomes import Outcome
from claude_trio.testing.hermetic import hermetic_env
from claude_trio.testing.model_double import (
    HttpError,
    ModelDouble,
    Reply,
    ReplyUsage,
    StreamError,
    turns,
)

pytestmark = pytest.mark.e2e


# ---------------------------------------------------------------------------------------------
# API errors


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (401, "authentication_failed"),
        (429, "rate_limit"),
        (500, "server_error"),
        (529, "server_error"),
    ],
)
async def test_api_error_ends_the_execution_with_an_error_result_carrying_the_status(
    model_double: ModelDouble,
    hermetic: dict[str, str],
    tmp_path: Path,
    status: int,
    error: str,
) -> None:
    """The CLI's synthetic assistant message with ``error`` set, a non-fatal ``error`` event
    carrying the status (mapper rule R18), then a ``result`` with ``is_error=True`` and
    ``api_error_status``; with retries off, no ``retry``."""
    model_double.responder = turns(HttpError(status=status, message=f"double says {status}"))

    events = await run_session(params(tmp_path, "fail please"), hermetic)

    assert kinds(events) == [
        "adapter_ready",
        "turn_started",
        "assistant_message",
        "error",
        "result",
    ], dump(events)
    [message] = of_type(events, AssistantMessage)
    assert message.message.error == error
    assert message.message.model == "<synthetic>"
    [text] = message.message.content
    assert isinstance(text, TextContent)
    assert f"double says {status}" in text.text
    [result] = of_type(events, Result)
    assert (result.is_error, result.api_error_status, result.terminal_reason, result.final) == (
        True,
        status,
        "api_error",
        True,
    )
    assert result.text is not None
    assert str(status) in result.text
    assert result.usage.context_size == 0
    assert result.usage.cost_usd == 0
    assert of_type(events, Retry) == []
    [api_error] = of_type(events, Error)
    assert (api_error.code, api_error.status, api_error.fatal) == ("api_error", status, False)
    assert len(model_double.message_requests) == 1  # CLAUDE_CODE_MAX_RETRIES=0


async def test_mid_stream_sse_error_is_recovered_by_a_non_streaming_request(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    recovered = ReplyUsage(input_tokens=20, output_tokens=8)
    model_double.responder = turns(
        StreamError(reply=Reply.text("this stream breaks"), after_events=3),
        Reply.text("recovered", usage=recovered),
    )

    events = await run_session(params(tmp_path, "stream please"), hermetic)

    first, second = model_double.message_requests
    assert (first.stream, second.stream) == (True, False)
    assert second.last_user_text == "stream please"
    [result] = of_type(events, Result)
    assert (result.is_error, result.subtype, result.text, result.final) == (
        False,
        "success",
        "recovered",
        True,
    )
    assert result.api_error_status is None
    assert [m.message.content for m in of_type(events, AssistantMessage)][-1] == (
        TextContent(text="recovered"),
    )
    # The turn's usage counts the broken stream's ``message_start`` (input 10, output 1) too.
    assert (result.usage.input_tokens, result.usage.output_tokens) == (
        10 + recovered.input_tokens,
        1 + recovered.output_tokens,
    )
    assert of_type(events, Error) == [], dump(events)
    # The broken stream's deltas were emitted (message msg_double_0001) and no assistant_message
    # ever completes that id; a stream_restarted warning (mapper rule R17) names the void id
    # before the recovered message, which has its own id.
    assert {d.message_id for d in of_type(events, TextDelta)} == {"msg_double_0001"}
    [warning] = of_type(events, WarningEvent)
    assert warning.code == "stream_restarted"
    assert "msg_double_0001" in warning.message
    assert kinds(events).index("warning") < kinds(events).index("assistant_message")
    assert [m.message.message_id for m in of_type(events, AssistantMessage)] == ["msg_double_0002"]


async def test_529_then_success_with_one_retry_reports_a_retry_event_then_the_result(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    usage = ReplyUsage(input_tokens=30, output_tokens=6)
    model_double.responder = turns(HttpError(status=529), Reply.text("second try", usage=usage))
    env = {**hermetic, "CLAUDE_CODE_MAX_RETRIES": "1"}  # the retry backs off ~0.5 s for real

    events = await run_session(params(tmp_path, "retry please"), env)

    assert kinds(events) == [
        "adapter_ready",
        "turn_started",
        "retry",
        "assistant_message",
        "result",
    ], dump(events)
    [retry] = of_type(events, Retry)
    assert (retry.error_status, retry.attempt, retry.max_retries, retry.turn) == (529, 1, 1, 1)
    assert retry.delay_ms is not None
    assert retry.delay_ms > 0
    [result] = of_type(events, Result)
    assert (result.is_error, result.text, result.api_error_status, result.final) == (
        False,
        "second try",
        None,
        True,
    )
    assert result.usage.cost_usd == pytest.approx(sonnet_cost(usage), rel=1e-9)
    assert len(model_double.message_requests) == 2


async def test_max_turns_reached_ends_with_an_error_max_turns_result(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    model_double.responder = turns(
        Reply.tool_use("Bash", {"command": "echo hi", "description": "hi"}, id="toolu_1"),
    )

    events = await run_session(params(tmp_path, "loop", max_turns=1), hermetic)

    [tool_use] = of_type(events, ToolUse)
    assert tool_use.tool_use_id == "toolu_1"
    [result] = of_type(events, Result)
    assert (result.subtype, result.terminal_reason, result.final) == (
        "error_max_turns",
        "max_turns",
        True,
    )
    assert result.is_error
    assert result.outcome is Outcome.MAX_TURNS
    assert len(model_double.message_requests) == 1  # the second model call was never made


# ---------------------------------------------------------------------------------------------
# A CLI that cannot start


@pytest.mark.parametrize("machine_is_sandbox", [None, "yes"])
async def test_root_bypass_without_is_sandbox_1_is_one_config_error_and_no_cli(
    model_double: ModelDouble,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    machine_is_sandbox: str | None,
) -> None:
    """The CLI only accepts ``IS_SANDBOX=1``; ``yes`` (this machine's value) counts as unset."""
    if machine_is_sandbox is None:
        monkeypatch.delenv("IS_SANDBOX", raising=False)
    else:
        monkeypatch.setenv("IS_SANDBOX", machine_is_sandbox)
    monkeypatch.setattr(os, "geteuid", lambda: 0)  # as root, wherever the tests run
    started: list[Any] = []

    async def connect(self: SubprocessCLITransport) -> None:
        await trio.lowlevel.checkpoint()
        started.append(self)

    monkeypatch.setattr(SubprocessCLITransport, "connect", connect)
    env = hermetic_env(model_double.base_url, tmp_path, sandbox=False)

    events = await run_session(params(tmp_path, "hello"), env)

    [error] = events
    assert isinstance(error, Error)
    assert (error.code, error.fatal) == ("config", True)
    assert "IS_SANDBOX=1" in error.message
    assert "bypassPermissions" in error.message
    assert started == []
    assert model_double.requests == []


async def test_missing_cli_binary_is_one_cli_not_found_error_naming_the_path(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    events = await run_session(params(tmp_path, "hello"), hermetic, cli_path="/nonexistent/claude")

    [error] = events
    assert isinstance(error, Error), dump(events)
    assert (error.code, error.fatal) == ("cli_not_found", True)
    assert "/nonexistent/claude" in error.message
    assert "reinstall claude-agent-sdk" in error.message
    assert "cli_path" in error.message
    assert (error.phase, error.errno, error.path) == ("init", errno.ENOENT, "/nonexistent/claude")
    assert model_double.requests == []
    assert_no_child_processes()
