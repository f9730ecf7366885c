"""The real bundled ``claude`` CLI (2.1.332) against the model double, through a bare SDK client.

These pin what the rest of claude-trio builds on. Observed with this CLI and the hermetic env:

* The only requests are ``POST /v1/messages?beta=true`` with ``stream: true`` on keep-alive
  connections (user-agent ``claude-cli/2.1.332 (external, sdk-py, agent-sdk/0.2.189)``,
  ``x-api-key``, ``anthropic-version: 2023-06-01``, ``anthropic-beta`` with claude-code-20250219,
  ``x-claude-code-session-id``). No count_tokens, no title/haiku request.
* The first user message carries ``<system-reminder>`` text blocks (environment, date, skills)
  before the prompt; tool_result text has one appended. ``ModelRequest.last_user_text`` and
  ``tool_result_text`` strip them.
* ``CLAUDE_CODE_EMIT_TOOL_USE_SUMMARIES=true`` adds a side request per tool batch (same model,
  no tools, ``thinking: disabled``, system prompt "Write a short summary label ..."), sent while
  the follow-up turn request runs. Its label comes back as a raw ``tool_use_summary`` frame just
  before the result. Its cost is in ``total_cost_usd`` but its usage is not in the result's usage.
* An SSE ``error`` event mid-stream makes the CLI ask again with ``stream: false``.
* A 400 "prompt is too long" on a one-exchange conversation is not compacted: the result has
  ``terminal_reason="prompt_too_long"``, ``api_error_status=400``.
* An HTTP error gives a synthetic ``AssistantMessage`` (``model="<synthetic>"``, ``error`` set)
  and a ``ResultMessage`` with ``subtype="success"`` yet ``is_error=True``,
  ``terminal_reason="api_error"``. With retries on, each retry is a raw frame
  ``{"type":"system","subtype":"api_retry","attempt":1,"max_retries":1,"retry_delay_ms":529,
  "error_status":529,"error":"overloaded",...}``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    Message,
    ResultMessage,
    TextBlock,
    UserMessage,
)
from claude_agent_sdk.types import StreamEvent, ToolResultBlock

from claude_trio.actors.session.sdk_private import SubprocessCLITransport, parse_message
from claude_trio.testing.mcp_elicit_server import (
    SERVER_NAME,
    TOOL_NAME,
    mcp_elicit_server_config,
)
from claude_trio.testing.model_double import (
    HttpError,
    ModelDouble,
    Reply,
    ReplyText,
    ReplyThinking,
    ReplyToolUse,
    ReplyUsage,
    turns,
)

pytestmark = pytest.mark.e2e

MODEL = "claude-sonnet-4-5"


def options(env: dict[str, str], tmp_path: Path) -> ClaudeAgentOptions:
    workdir = tmp_path / "work"
    workdir.mkdir(exist_ok=True)
    return ClaudeAgentOptions(
        env=env,
        cwd=workdir,
        model=MODEL,
        include_partial_messages=True,
        permission_mode="bypassPermissions",
        extra_args={"replay-user-messages": None},
    )


class UserMessageStream:
    """One user message with our own ``uuid``, as the async iterable ``client.query`` takes."""

    def __init__(self, text: str, message_uuid: str) -> None:
        self._pending = [
            {
                "type": "user",
                "message": {"role": "user", "content": text},
                "parent_tool_use_id": None,
                "session_id": "default",
                "uuid": message_uuid,
            }
        ]

    def __aiter__(self) -> UserMessageStream:
        return self

    async def __anext__(self) -> dict[str, Any]:
        await trio.lowlevel.checkpoint()
        if not self._pending:
            raise StopAsyncIteration
        return self._pending.pop()


async def one_turn(opts: ClaudeAgentOptions, text: str, message_uuid: str) -> list[Message]:
    with trio.fail_after(60):
        async with ClaudeSDKClient(opts) as client:
            await client.query(UserMessageStream(text, message_uuid))
            return [message async for message in client.receive_response()]
    raise AssertionError("unreachable: fail_after raises on timeout")


@pytest.fixture
def raw_frames(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every frame the CLI writes, before the SDK's parser drops the ones it does not model."""
    frames: list[dict[str, Any]] = []
    read_messages = SubprocessCLITransport.read_messages

    class Tap:
        def __init__(self, inner: AsyncIterator[dict[str, Any]]) -> None:
            self._inner = inner

        def __aiter__(self) -> Tap:
            return self

        async def __anext__(self) -> dict[str, Any]:
            frame = await anext(self._inner)
            frames.append(frame)
            return frame

    def tapped(self: SubprocessCLITransport) -> AsyncIterator[dict[str, Any]]:
        return Tap(read_messages(self))

    monkeypatch.setattr(SubprocessCLITransport, "read_messages", tapped)
    return frames


async def test_text_turn_streams_deltas_echoes_the_push_and_reports_the_doubles_usage(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    usage = ReplyUsage(
        input_tokens=100,
        output_tokens=20,
        cache_read_input_tokens=50,
        cache_creation_input_tokens=30,
    )
    model_double.responder = turns(
        Reply(
            blocks=(ReplyThinking(thinking="pondering"), ReplyText(text="Hello from the double")),
            usage=usage,
            chunk_size=8,
        )
    )
    push_uuid = str(uuid.uuid4())
    messages = await one_turn(options(hermetic, tmp_path), "say hello", push_uuid)

    deltas = [m.event["delta"] for m in messages if isinstance(m, StreamEvent)
              and m.event["type"] == "content_block_delta"]  # fmt: skip
    text = [d["text"] for d in deltas if d["type"] == "text_delta"]
    assert text == ["Hello fr", "om the d", "ouble"]
    assert "".join(d["thinking"] for d in deltas if d["type"] == "thinking_delta") == "pondering"

    echoes = [m for m in messages if isinstance(m, UserMessage) and m.uuid == push_uuid]
    assert len(echoes) == 1
    assert echoes[0].content == "say hello"

    result = messages[-1]
    assert isinstance(result, ResultMessage)
    assert not result.is_error
    assert result.user_message_uuids == [push_uuid]
    assert result.usage is not None
    assert {k: result.usage[k] for k in usage.as_json()} == usage.as_json()
    # Sonnet 4.5 prices per MTok: $3 in, $15 out, $0.30 cache read, $3.75 cache write.
    assert result.total_cost_usd == pytest.approx((100 * 3 + 20 * 15 + 50 * 0.3 + 30 * 3.75) / 1e6)

    [request] = model_double.message_requests
    assert request.last_user_text == "say hello"
    assert request.stream
    assert request.model == MODEL
    assert request.header("x-api-key") == hermetic["ANTHROPIC_API_KEY"]


async def test_bash_round_trip_reaches_the_double_and_emits_a_raw_tool_use_summary(
    model_double: ModelDouble,
    hermetic: dict[str, str],
    tmp_path: Path,
    raw_frames: list[dict[str, Any]],
) -> None:
    model_double.responder = turns(
        Reply(blocks=(ReplyToolUse(id="toolu_bash_1", name="Bash", input={"command": "echo hi"}),)),
        lambda request: Reply.text(f"the tool said {request.tool_result_text('toolu_bash_1')}"),
    )
    env = {**hermetic, "CLAUDE_CODE_EMIT_TOOL_USE_SUMMARIES": "true"}
    messages = await one_turn(options(env, tmp_path), "run echo", str(uuid.uuid4()))

    tool_results = [
        block
        for m in messages
        if isinstance(m, UserMessage) and isinstance(m.content, list)
        for block in m.content
        if isinstance(block, ToolResultBlock)
    ]
    assert [(b.tool_use_id, b.content, b.is_error) for b in tool_results] == [
        ("toolu_bash_1", "hi", False)
    ]
    follow_up = [r for r in model_double.message_requests if "toolu_bash_1" in r.tool_results]
    assert [r.tool_result_text("toolu_bash_1") for r in follow_up if not r.is_tool_use_summary] == [
        "hi"
    ]
    assert model_double.summary_requests  # the side request for the label
    final = [m for m in messages if isinstance(m, AssistantMessage)][-1]
    assert final.content == [TextBlock(text="the tool said hi")]
    result = messages[-1]
    assert isinstance(result, ResultMessage)
    assert result.num_turns == 2

    # The shape the event mapper reads (the SDK's parser drops this frame type).
    [summary] = [f for f in raw_frames if f.get("type") == "tool_use_summary"]
    assert set(summary) == {"type", "summary", "preceding_tool_use_ids", "uuid", "session_id"}
    assert summary["summary"] == "Ran tools"
    assert summary["preceding_tool_use_ids"] == ["toolu_bash_1"]
    assert summary["session_id"] == result.session_id
    assert parse_message(summary) is None
    frame_types = [f.get("type") for f in raw_frames]
    assert frame_types.index("tool_use_summary") < frame_types.index("result")


async def test_http_500_ends_the_turn_with_an_error_result_without_retrying(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    model_double.responder = turns(HttpError(status=500, message="boom"))
    push_uuid = str(uuid.uuid4())
    messages = await one_turn(options(hermetic, tmp_path), "fail please", push_uuid)

    [assistant] = [m for m in messages if isinstance(m, AssistantMessage)]
    assert assistant.error == "server_error"
    assert assistant.model == "<synthetic>"
    result = messages[-1]
    assert isinstance(result, ResultMessage)
    assert result.is_error
    assert result.api_error_status == 500
    assert result.terminal_reason == "api_error"
    assert result.user_message_uuids == [push_uuid]
    assert result.result is not None
    assert "500 boom" in result.result
    assert len(model_double.message_requests) == 1  # CLAUDE_CODE_MAX_RETRIES=0


async def test_mcp_elicit_server_runs_under_the_cli_and_reports_the_hosts_answer(
    model_double: ModelDouble,
    hermetic: dict[str, str],
    tmp_path: Path,
    raw_frames: list[dict[str, Any]],
) -> None:
    """The bare SDK rejects the CLI's ``elicitation`` request, so the server is told ``cancel``.

    This pins the server end of the elicitation tests: a host that answers at the transport level
    will see its answer in the same tool_result instead.
    """
    model_double.responder = turns(
        Reply.tool_use(TOOL_NAME, {"question": "favourite colour?"}, id="toolu_ask_1"),
        lambda request: Reply.text(f"user: {request.tool_result_text('toolu_ask_1')}"),
    )
    opts = options(hermetic, tmp_path)
    opts.mcp_servers = {SERVER_NAME: mcp_elicit_server_config()}  # type: ignore[dict-item]
    await one_turn(opts, "ask me", str(uuid.uuid4()))

    # MCP tools are deferred: listed in init, absent from the request's tools[] (ToolSearch).
    [init] = [f for f in raw_frames if f.get("subtype") == "init"]
    assert TOOL_NAME in init["tools"]
    assert {"name": SERVER_NAME, "status": "connected", "source": "dynamic"} in init["mcp_servers"]
    [elicitation] = [
        f["request"]
        for f in raw_frames
        if f.get("type") == "control_request" and f["request"].get("subtype") == "elicitation"
    ]
    assert elicitation["mcp_server_name"] == SERVER_NAME
    assert elicitation["message"] == "favourite colour?"
    assert elicitation["requested_schema"]["properties"]["answer"]["type"] == "string"
    assert model_double.message_requests[-1].tool_result_text("toolu_ask_1") == "cancel"
