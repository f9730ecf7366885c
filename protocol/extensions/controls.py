"""Live controls of a running session: the checked arguments and the typed answers (pure).

``Session.set_model``, ``set_permission_mode``, ``context_usage``, ``mcp_status`` and
``rewind_files`` (``actors/session/open.py``) send the CLI one control request each through
``ClaudeSDKClient``. Rules:

1. Arguments are checked before anything is sent: a model by :func:`model_for_switch` (the
   aliases of ``models.py``; any id with a custom server, as for ``ExecuteParams.model``), a
   permission mode by ``permissions.check_permission_mode``, a user message uuid as a
   non-empty string.
2. A control is refused (``ControlRefusedError``, saying why: :func:`control_refusal`) once the
   execution has ended or is being aborted, or the CLI is gone: a stopped session's CLI is on
   its way out, and nothing it is told then has an effect.
3. A control the CLI does not answer within ``DriverConfig.control_timeout``, or answers with
   an error, raises ``ControlFailedError`` (the CLI's own message quoted).
4. A control that changes the session (``set_model``, ``set_permission_mode``,
   ``rewind_files``) is reported in the stream as one ``control_applied`` event, once the CLI
   confirmed it.
5. Answers are read leniently (:func:`context_usage_from`, :func:`mcp_status_from`): a field
   the CLI leaves out is ``None`` / empty, and the whole answer is kept as ``data``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import attrs

from claude_trio.protocol.checks import finite_float, is_int
from claude_trio.protocol.config.models import resolve_model
from claude_trio.protocol.errors import InvalidParamsError

__all__ = [
    "ContextUsage",
    "McpServerStatus",
    "context_usage_from",
    "control_refusal",
    "mcp_status_from",
    "model_for_switch",
]


def model_for_switch(model: object, *, custom_server: bool) -> str | None:
    """The model id the CLI gets for ``set_model(model)`` (``None``: the CLI's default)."""
    if model is None:
        return None
    if not isinstance(model, str) or not model.strip() or "\0" in model:
        raise InvalidParamsError("model", model, "a model alias or id, or None for the default")
    return model if custom_server else resolve_model(model)


def check_message_uuid(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 256:
        raise InvalidParamsError(
            "user_message_uuid",
            value,
            "the uuid of a user message of this session (session.prompt_uuid, a push's "
            "Accepted.uuid, or a user_message event's uuid)",
        )
    return value


def control_refusal(
    *, ended: bool, aborting: bool, cli_running: bool, end_reason: str | None = None
) -> str | None:
    """Why a control cannot be sent now (rule 2), or ``None`` when it can."""
    if ended:
        why = f": {end_reason}" if end_reason and end_reason != "the execution has ended" else ""
        return f"the execution has ended{why}; its CLI takes no more controls"
    if aborting:
        return "the execution is being aborted; its CLI takes no more controls"
    if not cli_running:
        return "the CLI is not running"
    return None


def _int(value: Any) -> int | None:
    return value if is_int(value) else None


@attrs.frozen(kw_only=True)
class ContextUsage:
    """How much of the context window the conversation uses (the CLI's ``/context``)."""

    total_tokens: int | None
    max_tokens: int | None
    percentage: float | None
    model: str | None
    categories: tuple[tuple[str, int], ...] = ()
    """``(category, tokens)``: system prompt, tools, messages, free space, ..."""
    data: Mapping[str, Any] = attrs.field(factory=dict, repr=False)


def context_usage_from(answer: Mapping[str, Any]) -> ContextUsage:
    percentage = answer.get("percentage")
    categories = []
    for item in answer.get("categories") or ():
        if isinstance(item, Mapping) and isinstance(item.get("name"), str):
            tokens = _int(item.get("tokens"))
            if tokens is not None:
                categories.append((str(item["name"]), tokens))
    model = answer.get("model")
    return ContextUsage(
        total_tokens=_int(answer.get("totalTokens")),
        max_tokens=_int(answer.get("maxTokens")),
        percentage=finite_float(percentage),
        model=model if isinstance(model, str) else None,
        categories=tuple(categories),
        data=MappingProxyType(dict(answer)),
    )


@attrs.frozen(kw_only=True)
class McpServerStatus:
    """One MCP server as the CLI sees it: ``status`` is ``connected``, ``pending``,
    ``failed``, ``needs-auth`` or ``disabled``."""

    name: str
    status: str
    error: str | None = None
    tools: tuple[str, ...] = ()
    data: Mapping[str, Any] = attrs.field(factory=dict, repr=False)


def mcp_status_from(answer: Mapping[str, Any]) -> tuple[McpServerStatus, ...]:
    servers = []
    for item in answer.get("mcpServers") or ():
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            continue
        tools = []
        for tool in item.get("tools") or ():
            name = tool.get("name") if isinstance(tool, Mapping) else tool
            if isinstance(name, str):
                tools.append(name)
        error = item.get("error")
        servers.append(
            McpServerStatus(
                name=str(item["name"]),
                status=str(item.get("status") or "unknown"),
                error=error if isinstance(error, str) else None,
                tools=tuple(tools),
                data=MappingProxyType(dict(item)),
            )
        )
    return tuple(servers)
