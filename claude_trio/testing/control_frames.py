"""The control protocol's frames of the ``claude`` CLI, as plain dicts: control requests and
their answers, and the MCP messages they carry (see :mod:`claude_trio.testing.frames`, which
exports every name here too, and whose rules they follow).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "CLAUDE_CODE_VERSION",
    "can_use_tool_request",
    "context_usage_response",
    "control_cancel_request",
    "control_request",
    "control_response",
    "elicitation_request",
    "hook_callback_request",
    "initialize_control_response",
    "initialize_response",
    "interrupt_response",
    "mcp_cancelled",
    "mcp_initialize",
    "mcp_initialized",
    "mcp_message_request",
    "mcp_status_response",
    "mcp_tool_call",
]

#: The CLI version these frames describe (the one bundled with claude-agent-sdk 0.2.189).
CLAUDE_CODE_VERSION = "2.1.332"


# -- the control protocol -------------------------------------------------------------------------


def control_request(request_id: str, request: Mapping[str, Any]) -> dict[str, Any]:
    """A control request; ``request`` is its payload, e.g. :func:`can_use_tool_request`."""
    return {"type": "control_request", "request_id": request_id, "request": dict(request)}


def control_cancel_request(request_id: str) -> dict[str, Any]:
    """The CLI withdraws a control request it sent (on abort)."""
    return {"type": "control_cancel_request", "request_id": request_id}


def control_response(request_id: str, response: Mapping[str, Any]) -> dict[str, Any]:
    """A successful answer to a control request; ``response`` is the answer's payload."""
    return {
        "type": "control_response",
        "response": {"subtype": "success", "request_id": request_id, "response": dict(response)},
    }


def initialize_control_response(request_id: str, response: Mapping[str, Any]) -> dict[str, Any]:
    """The answer to ``initialize`` (``response`` from :func:`initialize_response`), which also
    lists the permission and dialog requests the CLI has pending (none)."""
    frame = control_response(request_id, response)
    frame["response"] |= {"pending_permission_requests": [], "pending_user_dialog_requests": []}
    return frame


def initialize_response(
    *,
    model: str,
    pid: int,
    permission_mode: str = "default",
    claude_code_version: str = CLAUDE_CODE_VERSION,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The payload of the answer to ``initialize``: commands, agents, models, account, ...;
    ``extra`` adds or replaces top-level fields."""
    return {
        "commands": [
            {"name": "compact", "description": "Clear conversation history but keep a "
             "summary in context", "argumentHint": "<optional custom summarization "
             "instructions>"},
            {"name": "review", "description": "Review a pull request", "argumentHint": ""},
        ],
        "agents": [
            {"name": "general-purpose", "description": "General-purpose agent"},
            {"name": "Explore", "description": "Fast read-only search agent",
             "model": "inherit"},
        ],
        "output_style": "default",
        "available_output_styles": ["default", "Explanatory", "Learning"],
        "models": [
            {"value": "default", "resolvedModel": model, "displayName": "Default "
             "(recommended)", "description": "Use the default model",
             "supportsEffort": True, "supportsAdaptiveThinking": True},
        ],
        "account": {"tokenSource": "none", "apiKeySource": "ANTHROPIC_API_KEY",
                    "apiProvider": "firstParty"},
        "pid": pid,
        "claude_code_version": claude_code_version,
        "current_permission_mode": permission_mode,
        "hook_on_failure_supported": True,
        "fast_mode_state": "off",
        "session_state": "idle",
        "capabilities": [],
        **(extra or {}),
    }  # fmt: skip


def interrupt_response(
    still_queued: Sequence[str | None], cancelled: Sequence[str | None] | None = None
) -> dict[str, Any]:
    """The payload of the answer to ``interrupt``: the uuids of user messages still queued
    (they run as turns of their own afterwards) and, for an interrupt with ``cancel_queued``,
    the ones it cancelled with the running turn."""
    payload: dict[str, Any] = {"still_queued": list(still_queued)}
    if cancelled is not None:
        payload["cancelled"] = list(cancelled)
    return payload




def mcp_status_response() -> dict[str, Any]:
    """The payload of the answer to ``mcp_status`` (no MCP servers)."""
    return {"mcpServers": []}


def context_usage_response(
    *, total_tokens: int = 10_557, max_tokens: int = 200_000, model: str = "claude-sonnet-4-5"
) -> dict[str, Any]:
    """The payload of the answer to ``get_context_usage`` (the fields the CLI 2.1.332 sends
    that claude-trio reads; the CLI adds a ``gridRows`` picture and more)."""
    return {
        "categories": [
            {"id": "system_tools", "name": "System tools", "tokens": total_tokens, "kind": "used"},
            {
                "id": "free_space",
                "name": "Free space",
                "tokens": max_tokens - total_tokens,
                "kind": "free",
            },
        ],
        "totalTokens": total_tokens,
        "maxTokens": max_tokens,
        "rawMaxTokens": max_tokens,
        "percentage": round(100 * total_tokens / max_tokens),
        "model": model,
    }


def can_use_tool_request(
    tool_name: str,
    tool_input: Mapping[str, Any],
    *,
    tool_use_id: str,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The payload of a ``can_use_tool`` control request (a permission prompt)."""
    return {
        "subtype": "can_use_tool",
        "tool_name": tool_name,
        "input": dict(tool_input),
        "permission_suggestions": [],
        "tool_use_id": tool_use_id,
        **(extra or {}),
    }


def elicitation_request(
    server: str, message: str, schema: Mapping[str, Any], *, mode: str = "form"
) -> dict[str, Any]:
    """The payload of an MCP ``elicitation`` control request."""
    return {
        "subtype": "elicitation",
        "mcp_server_name": server,
        "message": message,
        "mode": mode,
        "requested_schema": dict(schema),
    }


def hook_callback_request(
    callback_id: str, hook_input: Mapping[str, Any], *, tool_use_id: str | None = None
) -> dict[str, Any]:
    """The payload of a ``hook_callback`` control request."""
    return {
        "subtype": "hook_callback",
        "callback_id": callback_id,
        "input": dict(hook_input),
        "tool_use_id": tool_use_id,
    }


def mcp_message_request(server: str, message: Mapping[str, Any]) -> dict[str, Any]:
    """The payload of an ``mcp_message`` control request: one JSON-RPC message for the
    in-process (SDK) MCP server ``server``."""
    return {"subtype": "mcp_message", "server_name": server, "message": dict(message)}


def mcp_initialize(request_id: int) -> dict[str, Any]:
    """The JSON-RPC ``initialize`` request the CLI 2.1.332 sends an SDK MCP server first."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "claude-code", "version": CLAUDE_CODE_VERSION},
        },
    }


def mcp_initialized() -> dict[str, Any]:
    """The JSON-RPC notification that ends the MCP handshake."""
    return {"jsonrpc": "2.0", "method": "notifications/initialized"}


def mcp_tool_call(
    request_id: int, tool: str, arguments: Mapping[str, Any], *, tool_use_id: str
) -> dict[str, Any]:
    """The JSON-RPC ``tools/call`` request for ``tool`` (its name on the server, without the
    ``mcp__<server>__`` prefix), as the CLI sends it."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {
            "name": tool,
            "arguments": dict(arguments),
            "_meta": {"claudecode/toolUseId": tool_use_id, "progressToken": request_id},
        },
    }


def mcp_cancelled(request_id: int, reason: str = "AbortError: remote-cancel") -> dict[str, Any]:
    """The JSON-RPC notification the CLI sends when it abandons a request (an interrupt)."""
    return {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": request_id, "reason": reason},
    }
