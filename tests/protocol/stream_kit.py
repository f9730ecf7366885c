"""Hand-built event streams for the pure stream tests (transcripts, the contract)."""

from __future__ import annotations

from typing import Any

import attrs

from claude_trio.protocol.session.events import (
    AssistantMessage,
    Event,
    NormalizedMessage,
    Result,
    TextContent,
    ToolResult,
    ToolUse,
)
from claude_trio.protocol.session.usage import Usage


def numbered(*events: Event, turn: int = 1) -> list[Event]:
    """``events`` stamped with seq 1, 2, ... and ``turn`` (unless an event has its own)."""
    return [attrs.evolve(e, seq=i, turn=e.turn or turn) for i, e in enumerate(events, start=1)]


def usage(tokens: int, cost: float = 0.0) -> Usage:
    return Usage(input_tokens=tokens, output_tokens=tokens, cost_usd=cost)


def result(final: bool = True, text: str | None = "done", **kwargs: Any) -> Result:
    kwargs.setdefault("usage", usage(10, 0.01))
    kwargs.setdefault("execution_usage", kwargs["usage"])
    kwargs.setdefault("session_usage", kwargs["execution_usage"])
    return Result(
        subtype="success", is_error=False, session_id="s-1", final=final, text=text, **kwargs
    )


def said(text: str, message_id: str = "m-1", **attribution: Any) -> AssistantMessage:
    return AssistantMessage(
        message=NormalizedMessage(
            role="assistant", content=(TextContent(text=text),), message_id=message_id
        ),
        **attribution,
    )


def call(tool_use_id: str, name: str = "Read", **attribution: Any) -> ToolUse:
    return ToolUse(tool_use_id=tool_use_id, name=name, input={"file_path": "a"}, **attribution)


def answer(tool_use_id: str, content: Any = "ok", **attribution: Any) -> ToolResult:
    return ToolResult(tool_use_id=tool_use_id, content=content, **attribution)


def sub(task_id: str) -> dict[str, Any]:
    """The attribution of an event to subagent ``task_id``."""
    return {"is_subagent": True, "subagent_task_id": task_id}
