"""Builders of REAL stream-JSON frames as the bundled CLI (2.1.x) writes them, parsed by the SDK.

Each ``*_frame`` function returns the dict the CLI prints on one stdout line; the matching
function without the suffix runs it through ``claude_agent_sdk``'s own ``parse_message`` so the
tests get exactly the objects the SDK yields. The shapes come from
:mod:`claude_trio.testing.frames` (the fake CLI writes the same ones); this module adds fixed
values (session id, model, usage, signature, timestamp) and fresh uuids.
"""

from __future__ import annotations

import itertools
from typing import Any

import claude_agent_sdk as sdk

from claude_trio.actors.session.sdk_private import parse_message
from claude_trio.testing import frames

SESSION_ID = "6d1c1b3e-2f0a-4b55-9d8e-0c6f1a2b3c4d"
MODEL = "claude-sonnet-4-5-20250929"
SIGNATURE = "EqQBCkYIBxgCKkB"
TIMESTAMP = "2026-06-10T12:00:00.000Z"

_counter = itertools.count(1)


def new_uuid() -> str:
    return f"00000000-0000-4000-8000-{next(_counter):012d}"


def _ids() -> dict[str, str]:
    return {"session_id": SESSION_ID, "uuid": new_uuid()}


def parse(frame: dict[str, Any]) -> sdk.Message:
    message = parse_message(frame)
    assert message is not None, f"the SDK dropped the frame {frame!r}"
    return message


def api_usage(
    input_tokens: int = 10,
    output_tokens: int = 5,
    cache_read: int = 0,
    cache_creation: int = 0,
) -> dict[str, Any]:
    return frames.api_usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read_input_tokens=cache_read,
        cache_creation_input_tokens=cache_creation,
    )


# --- system ---------------------------------------------------------------------------------


def init_frame(*, session_id: str = SESSION_ID, model: str = MODEL) -> dict[str, Any]:
    return frames.system_init(
        cwd="/tmp/work",
        model=model,
        tools=["Task", "Bash", "Read", "Edit", "Write", "TodoWrite", "Skill"],
        slash_commands=["compact", "context", "cost"],
        agents=["general-purpose"],
        session_id=session_id,
        uuid=new_uuid(),
    )


def init(**kwargs: Any) -> sdk.Message:
    return parse(init_frame(**kwargs))


def compact_boundary(*, trigger: str = "auto", pre_tokens: int = 155_000) -> sdk.Message:
    return parse(frames.compact_boundary(trigger=trigger, pre_tokens=pre_tokens, **_ids()))


def api_retry(
    *, attempt: int = 1, max_retries: int = 10, delay_ms: int = 527, status: int | None = 529
) -> sdk.Message:
    return parse(
        frames.api_retry(
            attempt=attempt,
            max_retries=max_retries,
            retry_delay_ms=delay_ms,
            error_status=status,
            error="overloaded_error",
            **_ids(),
        )
    )


def system_other(subtype: str, **fields: Any) -> sdk.Message:
    return parse(frames.system(subtype, fields, **_ids()))


def tool_use_summary_frame(
    summary: str, preceding_tool_use_ids: list[str], *, uuid: str | None = None
) -> dict[str, Any]:
    """The CLI's top-level frame (the SDK parser drops it; see ``tool_use_summary``)."""
    return frames.tool_use_summary(
        summary, preceding_tool_use_ids, session_id=SESSION_ID, uuid=uuid or new_uuid()
    )


def tool_use_summary(
    summary: str, preceding_tool_use_ids: list[str], **extra: Any
) -> sdk.SystemMessage:
    """What the actor makes of the frame: a SystemMessage with the frame as ``data``."""
    frame = tool_use_summary_frame(summary, preceding_tool_use_ids) | extra
    assert parse_message(frame) is None  # the fact that makes the rewrite necessary
    return sdk.SystemMessage(subtype="tool_use_summary", data=frame)


# --- stream events ------------------------------------------------------------------------


def stream_frame(event: dict[str, Any], *, parent_tool_use_id: str | None = None) -> dict[str, Any]:
    return frames.stream_event(event, parent_tool_use_id=parent_tool_use_id, **_ids())


def message_start(message_id: str, *, parent_tool_use_id: str | None = None) -> sdk.Message:
    event = frames.message_start_event(
        message_id=message_id, model=MODEL, usage=api_usage(output_tokens=1)
    )
    return parse(stream_frame(event, parent_tool_use_id=parent_tool_use_id))


def content_block_start(index: int, block_type: str = "text") -> sdk.Message:
    block = frames.text_block("") if block_type == "text" else frames.thinking_block("", "")
    block["type"] = block_type
    return parse(stream_frame(frames.content_block_start_event(index, block)))


def text_delta(text: str, index: int = 0, *, parent_tool_use_id: str | None = None) -> sdk.Message:
    event = frames.content_block_delta_event(index, frames.text_delta(text))
    return parse(stream_frame(event, parent_tool_use_id=parent_tool_use_id))


def thinking_delta(text: str, index: int = 0) -> sdk.Message:
    return parse(stream_frame(frames.content_block_delta_event(index, frames.thinking_delta(text))))


def signature_delta(index: int = 0) -> sdk.Message:
    delta = frames.signature_delta(SIGNATURE)
    return parse(stream_frame(frames.content_block_delta_event(index, delta)))


def content_block_stop(index: int) -> sdk.Message:
    return parse(stream_frame(frames.content_block_stop_event(index)))


def message_delta(stop_reason: str = "end_turn") -> sdk.Message:
    event = frames.message_delta_event(stop_reason=stop_reason, usage={"output_tokens": 42})
    return parse(stream_frame(event))


def message_stop() -> sdk.Message:
    return parse(stream_frame(frames.message_stop_event()))


# --- assistant / user -----------------------------------------------------------------------


def text_block(text: str) -> dict[str, Any]:
    return frames.text_block(text)


def thinking_block(thinking: str) -> dict[str, Any]:
    return frames.thinking_block(thinking, SIGNATURE)


def tool_use_block(tool_use_id: str, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return frames.tool_use_block(tool_use_id, name, tool_input)


def assistant_frame(
    message_id: str,
    block: dict[str, Any],
    *,
    parent_tool_use_id: str | None = None,
    stop_reason: str | None = None,
    error: str | None = None,
) -> dict[str, Any]:
    """One block of an API message, as the CLI prints it (one frame per content block)."""
    return frames.assistant(
        [block],
        message_id=message_id,
        model=MODEL,
        usage=api_usage(),
        stop_reason=stop_reason,
        parent_tool_use_id=parent_tool_use_id,
        error=error,
        message_fields={"context_management": None},
        **_ids(),
    )


def assistant(message_id: str, block: dict[str, Any], **kwargs: Any) -> sdk.Message:
    return parse(assistant_frame(message_id, block, **kwargs))


def tool_result_frame(
    tool_use_id: str,
    content: Any,
    *,
    is_error: bool | None = None,
    tool_use_result: Any = None,
    parent_tool_use_id: str | None = None,
) -> dict[str, Any]:
    return frames.tool_result(
        tool_use_id,
        content,
        is_error=is_error,
        tool_use_result=tool_use_result,
        parent_tool_use_id=parent_tool_use_id,
        timestamp=TIMESTAMP,
        **_ids(),
    )


def tool_result(tool_use_id: str, content: Any, **kwargs: Any) -> sdk.Message:
    return parse(tool_result_frame(tool_use_id, content, **kwargs))


def user_echo(text: str, uuid: str, *, as_blocks: bool = False) -> sdk.Message:
    """The CLI's replay of a user message we sent (``--replay-user-messages``)."""
    content: Any = [text_block(text)] if as_blocks else text
    return parse(frames.user_echo(content, uuid=uuid, session_id=SESSION_ID))


# --- result ---------------------------------------------------------------------------------


def result_frame(
    *,
    subtype: str = "success",
    is_error: bool = False,
    total_cost_usd: float | None = 0.01,
    usage: dict[str, Any] | None = None,
    text: str | None = "done",
    user_message_uuids: list[str] | None = None,
    terminal_reason: str | None = "completed",
    stop_reason: str | None = "end_turn",
    api_error_status: int | None = None,
    errors: list[str] | None = None,
    num_turns: int = 1,
) -> dict[str, Any]:
    frame = frames.result(
        subtype=subtype,
        is_error=is_error,
        duration_ms=1234,
        duration_api_ms=1100,
        num_turns=num_turns,
        text=text,
        stop_reason=stop_reason,
        total_cost_usd=total_cost_usd,
        usage=api_usage() if usage is None else usage,
        model_usage={},
        terminal_reason=terminal_reason,
        user_message_uuids=user_message_uuids,
        user_message_uuid=user_message_uuids[-1] if user_message_uuids else None,
        errors=errors,
        api_error_status=api_error_status,
        **_ids(),
    )
    if user_message_uuids == []:
        # A result that took in no user message still names the field, as null.
        frame["user_message_uuid"] = None
    return frame


def result(**kwargs: Any) -> sdk.ResultMessage:
    message = parse(result_frame(**kwargs))
    assert isinstance(message, sdk.ResultMessage)
    return message


def interrupted_result(**kwargs: Any) -> sdk.ResultMessage:
    """What ``client.interrupt()`` makes the CLI print for the interrupted turn."""
    fields: dict[str, Any] = {
        "subtype": "error_during_execution",
        "is_error": True,
        "text": None,
        "terminal_reason": "aborted_streaming",
        "stop_reason": None,
    }
    return result(**(fields | kwargs))


# --- subagent tasks -----------------------------------------------------------------------


def task_started(
    task_id: str, tool_use_id: str, description: str = "Explore the repo"
) -> sdk.Message:
    return parse(
        frames.task_started(
            task_id,
            description=description,
            tool_use_id=tool_use_id,
            subagent_type="general-purpose",
            is_backgrounded=True,
            **_ids(),
        )
    )


def task_progress(task_id: str, tool_use_id: str, last_tool_name: str = "Read") -> sdk.Message:
    return parse(
        frames.task_progress(
            task_id,
            description="Reading files",
            usage={"total_tokens": 1200, "tool_uses": 2, "duration_ms": 900},
            tool_use_id=tool_use_id,
            last_tool_name=last_tool_name,
            **_ids(),
        )
    )


def task_notification(task_id: str, tool_use_id: str, status: str = "completed") -> sdk.Message:
    return parse(
        frames.task_notification(
            task_id,
            status=status,
            output_file=f"/tmp/tasks/{task_id}.output",
            summary="Found 3 modules",
            tool_use_id=tool_use_id,
            usage={"total_tokens": 5000, "tool_uses": 7, "duration_ms": 4000},
            **_ids(),
        )
    )


def task_updated(task_id: str, status: str) -> sdk.Message:
    patch = {"status": status, "end_time": 1760000000000}
    return parse(frames.task_updated(task_id, patch, **_ids()))


# --- other ----------------------------------------------------------------------------------


def rate_limit(status: str) -> sdk.Message:
    info = {"resetsAt": 1760000000, "rateLimitType": "five_hour", "utilization": 0.91}
    return parse(frames.rate_limit_event(status, info, **_ids()))


def conversation_reset() -> sdk.Message:
    return parse(frames.conversation_reset(new_uuid(), **_ids()))
