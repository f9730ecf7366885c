"""Builders of REAL stream-JSON frames as the bundled CLI (2.1.x) writes them, parsed by the SDK.

Each ``*_frame`` function returns the dict the CLI prints on one stdout line; the matching
function without the suffix runs it through ``claude_agent_sdk``'s own ``parse_message`` so the
tests get exactly the objects the SDK yields. Shapes are copied from the SDK's parser and types
(``message_parser.py``, ``types.py``) and from the CLI's own frame builders (``sdk-facts.md``).
"""

from __future__ import annotations

import itertools
from typing import Any

import claude_agent_sdk as sdk
from claude_agent_sdk._internal.message_parser import parse_message

SESSION_ID = "6d1c1b3e-2f0a-4b55-9d8e-0c6f1a2b3c4d"
MODEL = "claude-sonnet-4-5-20250929"

_counter = itertools.count(1)


def new_uuid() -> str:
    return f"00000000-0000-4000-8000-{next(_counter):012d}"


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
    return {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": cache_creation,
        "cache_read_input_tokens": cache_read,
        "output_tokens": output_tokens,
        "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
        "service_tier": "standard",
        "cache_creation": {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": 0},
    }


# --- system ---------------------------------------------------------------------------------


def init_frame(*, session_id: str = SESSION_ID, model: str = MODEL) -> dict[str, Any]:
    return {
        "type": "system",
        "subtype": "init",
        "cwd": "/tmp/work",
        "session_id": session_id,
        "tools": ["Task", "Bash", "Read", "Edit", "Write", "TodoWrite", "Skill"],
        "mcp_servers": [],
        "model": model,
        "permissionMode": "default",
        "slash_commands": ["compact", "context", "cost"],
        "apiKeySource": "ANTHROPIC_API_KEY",
        "claude_code_version": "2.1.332",
        "output_style": "default",
        "agents": ["general-purpose"],
        "skills": [],
        "plugins": [],
        "uuid": new_uuid(),
    }


def init(**kwargs: Any) -> sdk.Message:
    return parse(init_frame(**kwargs))


def compact_boundary(*, trigger: str = "auto", pre_tokens: int = 155_000) -> sdk.Message:
    return parse(
        {
            "type": "system",
            "subtype": "compact_boundary",
            "session_id": SESSION_ID,
            "uuid": new_uuid(),
            "compact_metadata": {"trigger": trigger, "pre_tokens": pre_tokens},
        }
    )


def api_retry(
    *, attempt: int = 1, max_retries: int = 10, delay_ms: int = 527, status: int | None = 529
) -> sdk.Message:
    return parse(
        {
            "type": "system",
            "subtype": "api_retry",
            "attempt": attempt,
            "max_retries": max_retries,
            "retry_delay_ms": delay_ms,
            "error_status": status,
            "error": "overloaded_error",
            "session_id": SESSION_ID,
            "uuid": new_uuid(),
        }
    )


def system_other(subtype: str, **fields: Any) -> sdk.Message:
    return parse(
        {"type": "system", "subtype": subtype, "session_id": SESSION_ID, "uuid": new_uuid()}
        | fields
    )


def tool_use_summary_frame(
    summary: str, preceding_tool_use_ids: list[str], *, uuid: str | None = None
) -> dict[str, Any]:
    """The CLI's top-level frame (the SDK parser drops it; see ``tool_use_summary``)."""
    return {
        "type": "tool_use_summary",
        "summary": summary,
        "preceding_tool_use_ids": preceding_tool_use_ids,
        "uuid": uuid or new_uuid(),
        "session_id": SESSION_ID,
    }


def tool_use_summary(
    summary: str, preceding_tool_use_ids: list[str], **extra: Any
) -> sdk.SystemMessage:
    """What the actor makes of the frame: a SystemMessage with the frame as ``data``."""
    frame = tool_use_summary_frame(summary, preceding_tool_use_ids) | extra
    assert parse_message(frame) is None  # the fact that makes the rewrite necessary
    return sdk.SystemMessage(subtype="tool_use_summary", data=frame)


# --- stream events ------------------------------------------------------------------------


def stream_frame(event: dict[str, Any], *, parent_tool_use_id: str | None = None) -> dict[str, Any]:
    return {
        "type": "stream_event",
        "event": event,
        "session_id": SESSION_ID,
        "parent_tool_use_id": parent_tool_use_id,
        "uuid": new_uuid(),
    }


def message_start(message_id: str, *, parent_tool_use_id: str | None = None) -> sdk.Message:
    return parse(
        stream_frame(
            {
                "type": "message_start",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": MODEL,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": api_usage(output_tokens=1),
                },
            },
            parent_tool_use_id=parent_tool_use_id,
        )
    )


def content_block_start(index: int, block_type: str = "text") -> sdk.Message:
    block: dict[str, Any] = {"type": block_type}
    block |= {"text": ""} if block_type == "text" else {"thinking": "", "signature": ""}
    return parse(
        stream_frame({"type": "content_block_start", "index": index, "content_block": block})
    )


def text_delta(text: str, index: int = 0, *, parent_tool_use_id: str | None = None) -> sdk.Message:
    return parse(
        stream_frame(
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "text_delta", "text": text},
            },
            parent_tool_use_id=parent_tool_use_id,
        )
    )


def thinking_delta(text: str, index: int = 0) -> sdk.Message:
    return parse(
        stream_frame(
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "thinking_delta", "thinking": text},
            }
        )
    )


def signature_delta(index: int = 0) -> sdk.Message:
    return parse(
        stream_frame(
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "signature_delta", "signature": "EqQBCkYIBxgCKkB"},
            }
        )
    )


def content_block_stop(index: int) -> sdk.Message:
    return parse(stream_frame({"type": "content_block_stop", "index": index}))


def message_delta(stop_reason: str = "end_turn") -> sdk.Message:
    return parse(
        stream_frame(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": 42},
            }
        )
    )


def message_stop() -> sdk.Message:
    return parse(stream_frame({"type": "message_stop"}))


# --- assistant / user -----------------------------------------------------------------------


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def thinking_block(thinking: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": thinking, "signature": "EqQBCkYIBxgCKkB"}


def tool_use_block(tool_use_id: str, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_use_id, "name": name, "input": tool_input}


def assistant_frame(
    message_id: str,
    block: dict[str, Any],
    *,
    parent_tool_use_id: str | None = None,
    stop_reason: str | None = None,
    error: str | None = None,
) -> dict[str, Any]:
    """One block of an API message, as the CLI prints it (one frame per content block)."""
    frame: dict[str, Any] = {
        "type": "assistant",
        "message": {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": [block],
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": api_usage(),
            "context_management": None,
        },
        "parent_tool_use_id": parent_tool_use_id,
        "session_id": SESSION_ID,
        "uuid": new_uuid(),
    }
    if error is not None:
        frame["error"] = error
    return frame


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
    block: dict[str, Any] = {"tool_use_id": tool_use_id, "type": "tool_result", "content": content}
    if is_error is not None:
        block["is_error"] = is_error
    frame: dict[str, Any] = {
        "type": "user",
        "message": {"role": "user", "content": [block]},
        "parent_tool_use_id": parent_tool_use_id,
        "session_id": SESSION_ID,
        "uuid": new_uuid(),
        "timestamp": "2026-06-10T12:00:00.000Z",
    }
    if tool_use_result is not None:
        frame["tool_use_result"] = tool_use_result
    return frame


def tool_result(tool_use_id: str, content: Any, **kwargs: Any) -> sdk.Message:
    return parse(tool_result_frame(tool_use_id, content, **kwargs))


def user_echo(text: str, uuid: str, *, as_blocks: bool = False) -> sdk.Message:
    """The CLI's replay of a user message we sent (``--replay-user-messages``)."""
    content: Any = [text_block(text)] if as_blocks else text
    return parse(
        {
            "type": "user",
            "message": {"role": "user", "content": content},
            "parent_tool_use_id": None,
            "session_id": SESSION_ID,
            "uuid": uuid,
            "isReplay": True,
        }
    )


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
    frame: dict[str, Any] = {
        "type": "result",
        "subtype": subtype,
        "is_error": is_error,
        "duration_ms": 1234,
        "duration_api_ms": 1100,
        "num_turns": num_turns,
        "session_id": SESSION_ID,
        "stop_reason": stop_reason,
        "usage": api_usage() if usage is None else usage,
        "modelUsage": {},
        "permission_denials": [],
        "uuid": new_uuid(),
        "terminal_reason": terminal_reason,
    }
    if text is not None:
        frame["result"] = text
    if total_cost_usd is not None:
        frame["total_cost_usd"] = total_cost_usd
    if user_message_uuids is not None:
        frame["user_message_uuids"] = user_message_uuids
        frame["user_message_uuid"] = user_message_uuids[-1] if user_message_uuids else None
    if api_error_status is not None:
        frame["api_error_status"] = api_error_status
    if errors is not None:
        frame["errors"] = errors
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
        {
            "type": "system",
            "subtype": "task_started",
            "task_id": task_id,
            "tool_use_id": tool_use_id,
            "description": description,
            "subagent_type": "general-purpose",
            "is_backgrounded": True,
            "task_type": "local_agent",
            "session_id": SESSION_ID,
            "uuid": new_uuid(),
        }
    )


def task_progress(task_id: str, tool_use_id: str, last_tool_name: str = "Read") -> sdk.Message:
    return parse(
        {
            "type": "system",
            "subtype": "task_progress",
            "task_id": task_id,
            "tool_use_id": tool_use_id,
            "description": "Reading files",
            "usage": {"total_tokens": 1200, "tool_uses": 2, "duration_ms": 900},
            "last_tool_name": last_tool_name,
            "session_id": SESSION_ID,
            "uuid": new_uuid(),
        }
    )


def task_notification(task_id: str, tool_use_id: str, status: str = "completed") -> sdk.Message:
    return parse(
        {
            "type": "system",
            "subtype": "task_notification",
            "task_id": task_id,
            "tool_use_id": tool_use_id,
            "status": status,
            "output_file": f"/tmp/tasks/{task_id}.output",
            "summary": "Found 3 modules",
            "usage": {"total_tokens": 5000, "tool_uses": 7, "duration_ms": 4000},
            "session_id": SESSION_ID,
            "uuid": new_uuid(),
        }
    )


def task_updated(task_id: str, status: str) -> sdk.Message:
    return parse(
        {
            "type": "system",
            "subtype": "task_updated",
            "task_id": task_id,
            "patch": {"status": status, "end_time": 1760000000000},
            "session_id": SESSION_ID,
            "uuid": new_uuid(),
        }
    )


# --- other ----------------------------------------------------------------------------------


def rate_limit(status: str) -> sdk.Message:
    return parse(
        {
            "type": "rate_limit_event",
            "rate_limit_info": {
                "status": status,
                "resetsAt": 1760000000,
                "rateLimitType": "five_hour",
                "utilization": 0.91,
            },
            "uuid": new_uuid(),
            "session_id": SESSION_ID,
        }
    )


def conversation_reset() -> sdk.Message:
    return parse(
        {
            "type": "conversation_reset",
            "new_conversation_id": new_uuid(),
            "uuid": new_uuid(),
            "session_id": SESSION_ID,
        }
    )
