"""The system and other side frames a fake turn can write: subagent tasks, compaction, API
retries, rate limits, tool-use summaries, and any other ``system`` subtype."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from claude_trio.testing import frames
from claude_trio.testing.fake_cli._turn_core import TurnCore


class SystemFramesMixin(TurnCore):
    """The system-frame methods of :class:`~claude_trio.testing.fake_cli.FakeTurn`."""

    async def system(self, subtype: str, **fields: Any) -> None:
        """Any ``system`` frame; ``fields`` may override ``session_id`` and ``uuid``."""
        await self._emit(frames.system(subtype, fields, **self._ids()))

    async def task_started(
        self,
        task_id: str,
        *,
        description: str,
        tool_use_id: str | None = None,
        task_type: str = "local_agent",
    ) -> None:
        await self._emit(
            frames.task_started(
                task_id,
                description=description,
                tool_use_id=tool_use_id,
                task_type=task_type,
                **self._ids(),
            )
        )

    async def task_progress(
        self,
        task_id: str,
        *,
        description: str,
        tool_use_id: str | None = None,
        last_tool_name: str | None = None,
        usage: Mapping[str, int] | None = None,
    ) -> None:
        await self._emit(
            frames.task_progress(
                task_id,
                description=description,
                usage=usage or {"total_tokens": 0, "tool_uses": 0, "duration_ms": 0},
                tool_use_id=tool_use_id,
                last_tool_name=last_tool_name,
                **self._ids(),
            )
        )

    async def task_notification(
        self,
        task_id: str,
        *,
        status: str = "completed",
        summary: str = "",
        output_file: str = "",
        tool_use_id: str | None = None,
        usage: Mapping[str, int] | None = None,
    ) -> None:
        await self._emit(
            frames.task_notification(
                task_id,
                status=status,
                output_file=output_file,
                summary=summary,
                tool_use_id=tool_use_id,
                usage=usage,
                **self._ids(),
            )
        )

    async def task_updated(self, task_id: str, patch: Mapping[str, Any]) -> None:
        await self._emit(frames.task_updated(task_id, patch, **self._ids()))

    async def compact_boundary(self, *, trigger: str = "auto", pre_tokens: int = 0) -> None:
        await self._emit(
            frames.compact_boundary(trigger=trigger, pre_tokens=pre_tokens, **self._ids())
        )

    async def api_retry(
        self,
        attempt: int,
        *,
        max_retries: int = 10,
        retry_delay_ms: int = 500,
        error_status: int | None = None,
        error: str = "unknown",
    ) -> None:
        await self._emit(
            frames.api_retry(
                attempt=attempt,
                max_retries=max_retries,
                retry_delay_ms=retry_delay_ms,
                error_status=error_status,
                error=error,
                **self._ids(),
            )
        )

    async def rate_limit(self, status: str = "allowed", **info: Any) -> None:
        await self._emit(frames.rate_limit_event(status, info, **self._ids()))

    async def tool_use_summary(self, summary: str, preceding_tool_use_ids: Sequence[str]) -> None:
        """The top-level ``tool_use_summary`` frame (the SDK's parser drops it)."""
        await self._emit(frames.tool_use_summary(summary, preceding_tool_use_ids, **self._ids()))
