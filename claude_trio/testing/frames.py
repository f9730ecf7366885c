"""The stream-JSON frames of the ``claude`` CLI, as plain dicts.

Each function returns one frame (or one piece of a frame) as the CLI prints it on one stdout
line, or as it crosses the control protocol. They are pure: no clock, no random ids, no I/O.
Every frame the CLI stamps takes its ``session_id`` and ``uuid`` as arguments. A field the CLI
writes only sometimes is left out when passed ``None``; a field it always writes is written even
when ``None``. So a test decides every byte.

The fake CLI (:mod:`claude_trio.testing.fake_cli`) writes its frames with these functions. In
your own tests, feed them to the SDK's ``parse_message``, or to anything that reads CLI output::

    from claude_agent_sdk._internal.message_parser import parse_message
    from claude_trio.testing import frames

    message = parse_message(
        frames.stream_event(
            frames.content_block_delta_event(0, frames.text_delta("Hel")),
            session_id="s-1",
            uuid="u-1",
        )
    )

Naming: a function named after a frame's ``type`` or ``system`` subtype builds that whole frame
(``stream_event``, ``assistant``, ``result``, ``rate_limit_event``, ``task_started``,
``control_request``, ...). The API stream events a ``stream_event`` frame carries are
``message_start_event`` to ``message_stop_event``; ``*_block`` and ``*_delta`` build content
blocks and deltas; the other ``*_request`` and ``*_response`` functions build the payloads of
control requests and of their answers.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from claude_trio.testing.control_frames import (
    CLAUDE_CODE_VERSION,
    can_use_tool_request,
    context_usage_response,
    control_cancel_request,
    control_request,
    control_response,
    elicitation_request,
    hook_callback_request,
    initialize_control_response,
    initialize_response,
    interrupt_response,
    mcp_cancelled,
    mcp_initialize,
    mcp_initialized,
    mcp_message_request,
    mcp_status_response,
    mcp_tool_call,
)

__all__ = [
    "CLAUDE_CODE_VERSION",
    "api_retry",
    "api_usage",
    "assistant",
    "can_use_tool_request",
    "compact_boundary",
    "content_block_delta_event",
    "content_block_start_event",
    "content_block_stop_event",
    "context_usage_response",
    "control_cancel_request",
    "control_request",
    "control_response",
    "conversation_reset",
    "elicitation_request",
    "hook_callback_request",
    "initialize_control_response",
    "initialize_response",
    "input_json_delta",
    "interrupt_response",
    "mcp_cancelled",
    "mcp_initialize",
    "mcp_initialized",
    "mcp_message_request",
    "mcp_status_response",
    "mcp_tool_call",
    "message_delta_event",
    "message_start_event",
    "message_stop_event",
    "model_usage",
    "rate_limit_event",
    "result",
    "signature_delta",
    "stream_event",
    "system",
    "system_init",
    "task_notification",
    "task_progress",
    "task_started",
    "task_updated",
    "text_block",
    "text_delta",
    "thinking_block",
    "thinking_delta",
    "timestamp_at",
    "tool_result",
    "tool_use_block",
    "tool_use_summary",
    "user_echo",
    "user_input",
    "user_interrupted",
    "with_ids",
]


_EPOCH = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def timestamp_at(seconds: float) -> str:
    """The CLI's ``timestamp`` field (ISO 8601, milliseconds, ``Z``) for ``seconds`` after
    2026-01-01T00:00:00Z; pass ``trio.current_time()`` for stamps that follow a ``MockClock``."""
    stamp = _EPOCH + datetime.timedelta(seconds=seconds)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def with_ids(body: Mapping[str, Any], *, session_id: str, uuid: str) -> dict[str, Any]:
    """Any frame: a copy of ``body`` with ``session_id`` and ``uuid`` added unless present."""
    frame = dict(body)
    frame.setdefault("session_id", session_id)
    frame.setdefault("uuid", uuid)
    return frame


def api_usage(
    *,
    input_tokens: int = 10,
    output_tokens: int = 5,
    cache_read_input_tokens: int = 0,
    cache_creation_input_tokens: int = 0,
) -> dict[str, Any]:
    """The Messages API ``usage`` object in full, as the real CLI forwards it."""
    return {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": cache_creation_input_tokens,
        "cache_read_input_tokens": cache_read_input_tokens,
        "output_tokens": output_tokens,
        "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
        "service_tier": "standard",
        "cache_creation": {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": 0},
    }


# -- system frames --------------------------------------------------------------------------------


def system_init(
    *,
    cwd: str,
    model: str,
    tools: Sequence[str],
    slash_commands: Sequence[str],
    agents: Sequence[str],
    permission_mode: str = "default",
    api_key_source: str = "ANTHROPIC_API_KEY",
    claude_code_version: str = CLAUDE_CODE_VERSION,
    output_style: str = "default",
    fast_mode_state: str | None = None,
    user_message_uuids: Sequence[str] | None = None,
    session_id: str,
    uuid: str,
) -> dict[str, Any]:
    """``system``/``init``: the first frame of every turn."""
    frame: dict[str, Any] = {
        "type": "system",
        "subtype": "init",
        "cwd": cwd,
        "session_id": session_id,
        "tools": list(tools),
        "mcp_servers": [],
        "model": model,
        "permissionMode": permission_mode,
        "slash_commands": list(slash_commands),
        "apiKeySource": api_key_source,
        "claude_code_version": claude_code_version,
        "output_style": output_style,
        "agents": list(agents),
        "skills": [],
        "plugins": [],
    }
    if fast_mode_state is not None:
        frame["fast_mode_state"] = fast_mode_state
    if user_message_uuids is not None:
        frame["user_message_uuids"] = list(user_message_uuids)
    frame["uuid"] = uuid
    return frame


def system(
    subtype: str, fields: Mapping[str, Any] | None = None, *, session_id: str, uuid: str
) -> dict[str, Any]:
    """Any ``system`` frame; ``fields`` may carry their own ``session_id`` and ``uuid``."""
    body = {"type": "system", "subtype": subtype, **(fields or {})}
    return with_ids(body, session_id=session_id, uuid=uuid)


def task_started(
    task_id: str,
    *,
    description: str,
    tool_use_id: str | None = None,
    subagent_type: str | None = None,
    is_backgrounded: bool | None = None,
    task_type: str = "local_agent",
    session_id: str,
    uuid: str,
) -> dict[str, Any]:
    """``system``/``task_started``: a subagent or background task began."""
    frame: dict[str, Any] = {
        "type": "system",
        "subtype": "task_started",
        "task_id": task_id,
        "tool_use_id": tool_use_id,
        "description": description,
    }
    if subagent_type is not None:
        frame["subagent_type"] = subagent_type
    if is_backgrounded is not None:
        frame["is_backgrounded"] = is_backgrounded
    return frame | {"task_type": task_type, "session_id": session_id, "uuid": uuid}


def task_progress(
    task_id: str,
    *,
    description: str,
    usage: Mapping[str, int],
    tool_use_id: str | None = None,
    last_tool_name: str | None = None,
    session_id: str,
    uuid: str,
) -> dict[str, Any]:
    """``system``/``task_progress``; ``usage`` holds ``total_tokens``, ``tool_uses``,
    ``duration_ms``."""
    return {
        "type": "system",
        "subtype": "task_progress",
        "task_id": task_id,
        "tool_use_id": tool_use_id,
        "description": description,
        "usage": dict(usage),
        "last_tool_name": last_tool_name,
        "session_id": session_id,
        "uuid": uuid,
    }


def task_notification(
    task_id: str,
    *,
    status: str,
    output_file: str,
    summary: str,
    tool_use_id: str | None = None,
    usage: Mapping[str, int] | None = None,
    session_id: str,
    uuid: str,
) -> dict[str, Any]:
    """``system``/``task_notification``: a task ended (``completed``, ``failed``, ...)."""
    frame: dict[str, Any] = {
        "type": "system",
        "subtype": "task_notification",
        "task_id": task_id,
        "tool_use_id": tool_use_id,
        "status": status,
        "output_file": output_file,
        "summary": summary,
    }
    if usage is not None:
        frame["usage"] = dict(usage)
    return frame | {"session_id": session_id, "uuid": uuid}


def task_updated(
    task_id: str, patch: Mapping[str, Any], *, session_id: str, uuid: str
) -> dict[str, Any]:
    """``system``/``task_updated``: a patch of a task's state (``status``, ``end_time``, ...)."""
    return {
        "type": "system",
        "subtype": "task_updated",
        "task_id": task_id,
        "patch": dict(patch),
        "session_id": session_id,
        "uuid": uuid,
    }


def compact_boundary(
    *, trigger: str, pre_tokens: int, session_id: str, uuid: str
) -> dict[str, Any]:
    """``system``/``compact_boundary``: the conversation was compacted."""
    return {
        "type": "system",
        "subtype": "compact_boundary",
        "compact_metadata": {"trigger": trigger, "pre_tokens": pre_tokens},
        "session_id": session_id,
        "uuid": uuid,
    }


def api_retry(
    *,
    attempt: int,
    max_retries: int,
    retry_delay_ms: int,
    error_status: int | None,
    error: str,
    session_id: str,
    uuid: str,
) -> dict[str, Any]:
    """``system``/``api_retry``: the CLI will retry a failed API call."""
    return {
        "type": "system",
        "subtype": "api_retry",
        "attempt": attempt,
        "max_retries": max_retries,
        "retry_delay_ms": retry_delay_ms,
        "error_status": error_status,
        "error": error,
        "session_id": session_id,
        "uuid": uuid,
    }


# -- stream events --------------------------------------------------------------------------------


def stream_event(
    event: Mapping[str, Any],
    *,
    parent_tool_use_id: str | None = None,
    session_id: str,
    uuid: str,
) -> dict[str, Any]:
    """A ``stream_event`` frame carrying one Messages API stream ``event``."""
    return {
        "type": "stream_event",
        "event": dict(event),
        "parent_tool_use_id": parent_tool_use_id,
        "session_id": session_id,
        "uuid": uuid,
    }


def message_start_event(*, message_id: str, model: str, usage: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "model": model,
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": dict(usage),
        },
    }


def content_block_start_event(index: int, block: Mapping[str, Any]) -> dict[str, Any]:
    """``block`` is the empty block: ``text_block("")``, ``tool_use_block(id, name, {})``..."""
    return {"type": "content_block_start", "index": index, "content_block": dict(block)}


def content_block_delta_event(index: int, delta: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": dict(delta)}


def content_block_stop_event(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def message_delta_event(*, stop_reason: str, usage: Mapping[str, Any]) -> dict[str, Any]:
    """The end of an API call: its ``stop_reason`` and its final ``usage``."""
    return {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": None},
        "usage": dict(usage),
    }


def message_stop_event() -> dict[str, Any]:
    return {"type": "message_stop"}


def text_delta(text: str) -> dict[str, Any]:
    return {"type": "text_delta", "text": text}


def thinking_delta(thinking: str) -> dict[str, Any]:
    return {"type": "thinking_delta", "thinking": thinking}


def signature_delta(signature: str) -> dict[str, Any]:
    return {"type": "signature_delta", "signature": signature}


def input_json_delta(partial_json: str) -> dict[str, Any]:
    return {"type": "input_json_delta", "partial_json": partial_json}


# -- content blocks, assistant and user frames ----------------------------------------------------


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def thinking_block(thinking: str, signature: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": thinking, "signature": signature}


def tool_use_block(tool_use_id: str, name: str, tool_input: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_use_id, "name": name, "input": dict(tool_input)}


def assistant(
    content: Sequence[Mapping[str, Any]],
    *,
    message_id: str,
    model: str,
    usage: Mapping[str, Any],
    stop_reason: str | None = None,
    stop_sequence: str | None = None,
    parent_tool_use_id: str | None = None,
    error: str | None = None,
    message_fields: Mapping[str, Any] | None = None,
    session_id: str,
    uuid: str,
) -> dict[str, Any]:
    """An ``assistant`` frame. The CLI prints one per content block of an API message, all with
    the same ``message_id``. ``message_fields`` are added to the API message (the real CLI adds
    ``context_management``); ``error`` marks the CLI's synthetic error message."""
    message: dict[str, Any] = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [dict(block) for block in content],
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
        "usage": dict(usage),
        **(message_fields or {}),
    }
    frame: dict[str, Any] = {
        "type": "assistant",
        "message": message,
        "parent_tool_use_id": parent_tool_use_id,
    }
    if error is not None:
        frame["error"] = error
    return frame | {"session_id": session_id, "uuid": uuid}


def tool_result(
    tool_use_id: str,
    content: Any,
    *,
    is_error: bool | None = None,
    tool_use_result: Any = None,
    parent_tool_use_id: str | None = None,
    timestamp: str,
    session_id: str,
    uuid: str,
) -> dict[str, Any]:
    """The ``user`` frame with a tool's result; ``tool_use_result`` is the tool's structured
    output, which the CLI adds beside the message."""
    block: dict[str, Any] = {"tool_use_id": tool_use_id, "type": "tool_result", "content": content}
    if is_error is not None:
        block["is_error"] = is_error
    frame: dict[str, Any] = {
        "type": "user",
        "message": {"role": "user", "content": [block]},
        "parent_tool_use_id": parent_tool_use_id,
        "timestamp": timestamp,
    }
    if tool_use_result is not None:
        frame["tool_use_result"] = tool_use_result
    return frame | {"session_id": session_id, "uuid": uuid}


def user_input(content: str | list[Any], *, uuid: str, session_id: str) -> dict[str, Any]:
    """A user message as the SDK writes it to the CLI's stdin."""
    return {
        "type": "user",
        "message": {"role": "user", "content": content},
        "uuid": uuid,
        "parent_tool_use_id": None,
        "session_id": session_id,
    }


def user_echo(
    content: str | list[Any], *, uuid: str, timestamp: str | None = None, session_id: str
) -> dict[str, Any]:
    """The CLI's replay of a user message it took in (``--replay-user-messages``); ``uuid`` is
    the message's own."""
    frame: dict[str, Any] = {
        "type": "user",
        "message": {"role": "user", "content": content},
        "parent_tool_use_id": None,
        "uuid": uuid,
    }
    if timestamp is not None:
        frame["timestamp"] = timestamp
    return frame | {"isReplay": True, "session_id": session_id}


def user_interrupted(*, for_tool_use: bool, session_id: str, uuid: str) -> dict[str, Any]:
    """The ``user`` frame the CLI writes when an interrupt stops a turn."""
    text = "[Request interrupted by user]" + (" for tool use" if for_tool_use else "")
    return {
        "type": "user",
        "message": {"role": "user", "content": [text_block(text)]},
        "parent_tool_use_id": None,
        "session_id": session_id,
        "uuid": uuid,
    }


# -- the end of a turn ----------------------------------------------------------------------------


def model_usage(
    *,
    input_tokens: int = 0,
    output_tokens: int = 0,
    cache_read_input_tokens: int = 0,
    cache_creation_input_tokens: int = 0,
    web_search_requests: int = 0,
    cost_usd: float = 0.0,
    context_window: int = 200000,
    max_output_tokens: int = 64000,
) -> dict[str, Any]:
    """One model's entry in a result's ``modelUsage`` (``{model: entry}``)."""
    return {
        "inputTokens": input_tokens,
        "outputTokens": output_tokens,
        "cacheReadInputTokens": cache_read_input_tokens,
        "cacheCreationInputTokens": cache_creation_input_tokens,
        "webSearchRequests": web_search_requests,
        "costUSD": cost_usd,
        "contextWindow": context_window,
        "maxOutputTokens": max_output_tokens,
    }


def result(
    *,
    subtype: str,
    is_error: bool,
    duration_ms: int,
    duration_api_ms: int,
    num_turns: int,
    text: str | None = None,
    stop_reason: str | None,
    total_cost_usd: float | None = None,
    usage: Mapping[str, Any],
    model_usage: Mapping[str, Any],
    terminal_reason: str | None,
    user_message_uuids: Sequence[str] | None = None,
    user_message_uuid: str | None = None,
    errors: Sequence[str] | None = None,
    api_error_status: int | None = None,
    session_id: str,
    uuid: str,
) -> dict[str, Any]:
    """The ``result`` frame that ends a turn; ``text`` is its ``result`` field and
    ``model_usage`` its ``modelUsage`` (cumulative per model)."""
    frame: dict[str, Any] = {
        "type": "result",
        "subtype": subtype,
        "is_error": is_error,
        "duration_ms": duration_ms,
        "duration_api_ms": duration_api_ms,
        "num_turns": num_turns,
    }
    if text is not None:
        frame["result"] = text
    frame |= {"stop_reason": stop_reason, "session_id": session_id}
    if total_cost_usd is not None:
        frame["total_cost_usd"] = total_cost_usd
    frame |= {
        "usage": dict(usage),
        "modelUsage": dict(model_usage),
        "permission_denials": [],
        "terminal_reason": terminal_reason,
    }
    optional = {
        "user_message_uuids": None if user_message_uuids is None else list(user_message_uuids),
        "user_message_uuid": user_message_uuid,
        "errors": None if errors is None else list(errors),
        "api_error_status": api_error_status,
    }
    frame |= {key: value for key, value in optional.items() if value is not None}
    frame["uuid"] = uuid
    return frame


# -- other frames ---------------------------------------------------------------------------------


def rate_limit_event(
    status: str, info: Mapping[str, Any] | None = None, *, session_id: str, uuid: str
) -> dict[str, Any]:
    """``rate_limit_event``; ``info`` holds the rest of ``rate_limit_info`` (``resetsAt``,
    ``rateLimitType``, ``utilization``, ...)."""
    return {
        "type": "rate_limit_event",
        "rate_limit_info": {"status": status, **(info or {})},
        "session_id": session_id,
        "uuid": uuid,
    }


def tool_use_summary(
    summary: str, preceding_tool_use_ids: Sequence[str], *, session_id: str, uuid: str
) -> dict[str, Any]:
    """The top-level ``tool_use_summary`` frame (the SDK's ``parse_message`` drops it)."""
    return {
        "type": "tool_use_summary",
        "summary": summary,
        "preceding_tool_use_ids": list(preceding_tool_use_ids),
        "session_id": session_id,
        "uuid": uuid,
    }


def conversation_reset(new_conversation_id: str, *, session_id: str, uuid: str) -> dict[str, Any]:
    return {
        "type": "conversation_reset",
        "new_conversation_id": new_conversation_id,
        "session_id": session_id,
        "uuid": uuid,
    }

def session_state_changed(state: str, *, session_id: str, uuid: str) -> dict[str, Any]:
    """The CLI reports its state (``running``, ``requires_action``, ``idle``) to the SDK host,
    which asks for it (``CLAUDE_CODE_SDK_READS_SESSION_STATE``); never meant for consumers."""
    return {
        "type": "system",
        "subtype": "session_state_changed",
        "state": state,
        "sdk_host_only": True,
        "uuid": uuid,
        "session_id": session_id,
    }
