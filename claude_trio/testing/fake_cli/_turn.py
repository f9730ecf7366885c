"""The handle a script writes one fake turn with, and the turn's lifecycle.

A turn starts with ``system``/``init`` and the echo of its user message, runs the responder,
and ends with a ``result`` frame: the one the responder wrote, or a default one when it returns
without. An ``interrupt`` from the SDK cancels the responder and ends the turn as the CLI does
(withdrawn requests, an interruption message, an ``error_during_execution`` result).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import NoReturn, TypeAlias

import attrs
import trio

from claude_trio.protocol.errors import LocalProtocolError
from claude_trio.testing import frames
from claude_trio.testing.fake_cli._turn_content import (
    DEFAULT_MESSAGE_USAGE,
    ContentMixin,
    add_usage,
)
from claude_trio.testing.fake_cli._turn_mcp import McpMixin
from claude_trio.testing.fake_cli._turn_requests import RequestsMixin
from claude_trio.testing.fake_cli._turn_system import SystemFramesMixin

Responder: TypeAlias = Callable[["FakeTurn"], Awaitable[None]]
BackgroundJob: TypeAlias = Callable[[], Awaitable[None]]


@attrs.frozen(kw_only=True)
class Wake:
    """A follow-up turn with no user message (a background task finished)."""

    responder: Responder


_TOOLS = [
    "Task", "AskUserQuestion", "Bash", "Edit", "Glob", "Grep", "Read",
    "TaskCreate", "TaskGet", "TaskList", "TaskUpdate", "WebFetch", "WebSearch", "Write",
]  # fmt: skip


class FakeTurn(ContentMixin, RequestsMixin, McpMixin, SystemFramesMixin):
    """What a responder scripts one turn with. Every method emits real CLI frames.

    Content: :meth:`text`, :meth:`thinking`, :meth:`tool_use`, :meth:`tool_result` (the fold
    point for pushes), :meth:`begin_message`/:meth:`end_message` (API-call boundaries, opened and
    closed automatically when not called). User input: :meth:`ask_permission`, :meth:`elicit`,
    :meth:`hook_callback` (and ``send_*`` variants returning a :class:`PendingRequest`). In-process
    MCP tools: :meth:`call_tool`, :meth:`send_tool_call` (a :class:`ToolCall`), :meth:`mcp_message`.
    System
    frames: :meth:`task_started`, :meth:`task_progress`, :meth:`task_notification`,
    :meth:`task_updated`, :meth:`compact_boundary`, :meth:`api_retry`, :meth:`rate_limit`,
    :meth:`tool_use_summary`, :meth:`system`, :meth:`frame`, :meth:`raw`. End: :meth:`result`,
    :meth:`api_error`, :meth:`exit`. Time: :meth:`sleep`. Later work: :meth:`background`,
    :meth:`wake`.
    """

    # -- lifecycle ------------------------------------------------------------------------------

    async def _run(self, responder: Responder) -> None:
        if self.process.cli.init_delay:
            await trio.sleep(self.process.cli.init_delay)  # an interrupt meanwhile latches
        await self._emit_init()
        for message in self.messages:
            await self._echo(message)
        with trio.CancelScope() as scope:
            self._scope = scope
            if self.interrupted:
                scope.cancel()  # interrupted while init / echoes were still being written
            await trio.lowlevel.checkpoint()
            try:
                await responder(self)
                if not self.finished:
                    await self.result()
            except Exception as exc:
                self.process._script_failed(exc)  # cancels the process, this task included
        if self.interrupted and not self.finished:
            await self._emit_interrupted()

    def _interrupt(self) -> None:
        self.interrupted = True
        if self._scope is not None:
            self._scope.cancel()

    async def _emit_interrupted(self) -> None:
        if self.process.cli.interrupt_delay:
            await trio.sleep(self.process.cli.interrupt_delay)
        for request in self._requests:
            await request.cancel()
        if self._message_id is not None:
            # The aborted API call still counts, but the CLI streams no message_stop for it.
            add_usage(self._usage, self._message_usage)
            self._message_id = None
        aborted_tools = bool(self._open_tools)
        await self._emit(frames.user_interrupted(for_tool_use=aborted_tools, **self._ids()))
        await self.result(
            subtype="error_during_execution",
            terminal_reason="aborted_tools" if aborted_tools else "aborted_streaming",
            stop_reason=None,
        )

    async def _emit_init(self) -> None:
        options = self.process.options
        await self._emit(
            frames.system_init(
                cwd=str(options.cwd) if options.cwd else "/fake/cwd",
                model=self.process.model,
                tools=_TOOLS,
                slash_commands=["compact", "review"],
                agents=["general-purpose", "Explore"],
                permission_mode=options.permission_mode or "default",
                fast_mode_state="off",
                user_message_uuids=self.user_message_uuids,
                **self._ids(),
            )
        )

    # -- the end of a turn -----------------------------------------------------------------------

    async def result(
        self,
        text: str | None = None,
        *,
        subtype: str = "success",
        is_error: bool | None = None,
        terminal_reason: str | None = None,
        errors: Sequence[str] | None = None,
        api_error_status: int | None = None,
        usage: Mapping[str, int] | None = None,
        cost_usd: float | None = None,
        stop_reason: str | None = "end_turn",
    ) -> None:
        """The turn's ``result`` frame. Defaults: ``result`` = the turn's texts joined, usage and
        cost = the sum over its API calls, ``total_cost_usd``/``modelUsage`` cumulative for the
        process, ``is_error`` = subtype != success, ``terminal_reason`` from the subtype."""
        if self.finished:
            raise LocalProtocolError(f"turn {self.number} already has its result")
        if self._message_id is not None:
            await self.end_message(stop_reason="end_turn")
        if usage is not None:
            turn_usage = dict(usage)
        else:
            turn_usage = {key: self._usage.get(key, 0) for key in DEFAULT_MESSAGE_USAGE}
        turn_cost = cost_usd if cost_usd is not None else self._cost
        process = self.process
        process.total_cost_usd += turn_cost
        model = process.model_usage.setdefault(process.model, frames.model_usage())
        model["inputTokens"] += turn_usage.get("input_tokens", 0)
        model["outputTokens"] += turn_usage.get("output_tokens", 0)
        model["cacheReadInputTokens"] += turn_usage.get("cache_read_input_tokens", 0)
        model["cacheCreationInputTokens"] += turn_usage.get("cache_creation_input_tokens", 0)
        model["costUSD"] += turn_cost
        is_error = subtype != "success" if is_error is None else is_error
        reason = terminal_reason or {
            "success": "api_error" if api_error_status is not None else "completed",
            "error_max_turns": "max_turns",
            "error_during_execution": "aborted_streaming",
        }.get(subtype, "completed")
        if subtype != "success" and errors is None:
            errors = [f"fake CLI: {subtype}"]
        duration_ms = round((trio.current_time() - self._started_at) * 1000)
        frame = frames.result(
            subtype=subtype,
            is_error=is_error,
            duration_ms=duration_ms,
            duration_api_ms=duration_ms,
            num_turns=max(1, self._api_calls),
            text=text if text is not None else "".join(self._texts),
            stop_reason=stop_reason,
            total_cost_usd=process.total_cost_usd,
            usage=turn_usage,
            model_usage=json.loads(json.dumps(process.model_usage)),  # a snapshot
            terminal_reason=reason,
            user_message_uuids=self.user_message_uuids,
            user_message_uuid=self.user_message_uuids[0] if self.user_message_uuids else None,
            errors=errors,
            api_error_status=api_error_status,
            **self._ids(),
        )
        await self._emit(frame)
        process.results.append(frame)
        process._last_result_is_error = is_error
        self.finished = True

    async def api_error(self, status: int, message: str, *, error: str = "server_error") -> None:
        """An API failure as the CLI reports it: the synthetic assistant error message, then a
        ``success`` result with ``is_error`` and ``api_error_status`` (``terminal_reason``
        ``api_error``)."""
        text = f"API Error: {status} {message}"
        await self._emit(
            frames.assistant(
                [frames.text_block(text)],
                message_id=self.process._next_id(),
                model="<synthetic>",
                usage={k: 0 for k in DEFAULT_MESSAGE_USAGE},
                stop_reason="stop_sequence",
                stop_sequence="",
                error=error,
                **self._ids(),
            )
        )
        await self.result(
            text, is_error=True, api_error_status=status, usage={}, cost_usd=0.0,
            stop_reason="stop_sequence",
        )  # fmt: skip

    async def exit(self, code: int = 1, *, stderr: Iterable[str] = ()) -> NoReturn:
        """The process exits now (stdout closes; the SDK's read raises ``ProcessError`` when
        ``code`` is not 0; ``stderr`` lines go to ``options.stderr``). Does not return."""
        self.process._terminate(code, stderr)
        await trio.sleep_forever()

    # -- work after the result --------------------------------------------------------------------

    def background(self, job: BackgroundJob) -> None:
        """Run ``job`` concurrently in the fake process, past this turn's result (a background
        subagent). It can emit task frames and call :meth:`wake` for a follow-up turn."""
        self.process._runner.spawn_background(job)

    def wake(self, responder: Responder) -> None:
        """Queue a follow-up turn with no user message (after queued pushes), scripted by
        ``responder``: what the CLI does when a background task completes."""
        self.process._runner.enqueue(Wake(responder=responder))
