"""The system and other side frames a fake turn can write: subagent tasks, compaction, API
retries, rate limits, tool-use summaries, and any other ``system`` subtype."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._turn_core import TurnCore


class SystemFramesMixin(TurnCore):
    """The system-frame methods of :class:`~claude_trio.testing.fake_cli.FakeTurn`."""

    async def system(self, subtype: str, **fields: Any) -> None:
        await self.frame({"type": "system", "subtype": subtype, **fields})

    async def task_started(
        self,
        task_id: str,
        *,
        description: str,
        tool_use_id: str | None = None,
        task_type: str = "local_agent",
    ) -> None:
        await self.system(
            "task_started",
            task_id=task_id,
            tool_use_id=tool_use_id,
            description=description,
            task_type=task_type,
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
        await self.system(
            "task_progress",
            task_id=task_id,
            tool_use_id=tool_use_id,
            description=description,
            usage=dict(usage or {"total_tokens": 0, "tool_uses": 0, "duration_ms": 0}),
            last_tool_name=last_tool_name,
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
        fields: dict[str, Any] = {}
        if usage is not None:
            fields["usage"] = dict(usage)
        await self.system(
            "task_notification",
            task_id=task_id,
            tool_use_id=tool_use_id,
            status=status,
            output_file=output_file,
            summary=summary,
            **fields,
        )

    async def task_updated(self, task_id: str, patch: Mapping[str, Any]) -> None:
        await self.system("task_updated", task_id=task_id, patch=dict(patch))

    async def compact_boundary(self, *, trigger: str = "auto", pre_tokens: int = 0) -> None:
        await self.system(
            "compact_boundary", compact_metadata={"trigger": trigger, "pre_tokens": pre_tokens}
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
        await self.system(
            "api_retry",
            attempt=attempt,
            max_retries=max_retries,
            retry_delay_ms=retry_delay_ms,
            error_status=error_status,
            error=error,
        )

    async def rate_limit(self, status: str = "allowed", **info: Any) -> None:
        await self.frame(
            {"type": "rate_limit_event", "rate_limit_info": {"status": status, **info}}
        )

    async def tool_use_summary(self, summary: str, preceding_tool_use_ids: Sequence[str]) -> None:
        """The top-level ``tool_use_summary`` frame (the SDK's parser drops it)."""
        await self.frame(
            {
                "type": "tool_use_summary",
                "summary": summary,
                "preceding_tool_use_ids": list(preceding_tool_use_ids),
            }
        )
