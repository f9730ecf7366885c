"""The tool runner: a session's custom tools, run as trio code in the session's nursery.

The SDK serves the tools to the CLI as an in-process MCP server: the CLI's ``tools/call``
arrives as an ``mcp_message`` control request, and the SDK calls the tool's handler from a task
of its own (a detached task of the SDK's MCP bridge, outside every nursery of ours). That handler
(:meth:`ToolRunner.call`) does not run the tool: it hands the call over a bounded channel to
:func:`run_tool_runner`, which runs in the session's nursery and starts each call in a child
task of its own, under the call's deadline, and waits on the call's one-shot reply. So the
tool's code is a child of the session: it is cancelled when the execution is aborted or ends,
and it can never outlive ``open_session``.

Every call gets exactly one reply, which the SDK sends to the CLI as the tool's result:

* what the function returned (``custom_tools.tool_output``),
* an error result with the exception's type and message when it raised (and a non-fatal
  ``error`` event with ``code="callback"``, so the application sees its own failure),
* an error result saying the tool timed out after its ``timeout`` (the tool's own, else
  ``ExecuteParams.tool_timeout``); the function is cancelled (it sees ``trio.Cancelled``),
* an error result saying the session is stopping, when the execution was aborted or ended
  before the call finished (the function is cancelled) or before it was made.

When the CLI abandons a call (an interrupt sends MCP ``notifications/cancelled``, which
cancels the SDK's handler task), the call is cancelled too, and its reply goes nowhere.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import attrs
import trio
from claude_agent_sdk import SdkMcpTool, create_sdk_mcp_server

from claude_trio.protocol.custom_tools import (
    SERVER_NAME,
    CustomTool,
    failure_text,
    mcp_result,
    timeout_text,
    tool_output,
)
from claude_trio.protocol.events import Error, Event

MAX_CALLS = 64
"""Calls in flight at once. The model makes a few at a time; more is a runaway, and the extra
ones are answered with an error at once. Also the inbox's size, so handing a call over never
waits."""

STOPPING = "the session is stopping: the tool call was cancelled"

Outcome = tuple[str, bool]  # (text, is_error)


@attrs.define(eq=False)
class _Call:
    """One call in flight. ``reply`` is the one-shot channel back to the SDK's handler."""

    tool: CustomTool
    arguments: dict[str, Any]
    reply: trio.MemorySendChannel[Outcome]
    scope: trio.CancelScope | None = None
    # Why it was cancelled before it finished: the session stopped (a reason), or the CLI
    # abandoned it ("withdrawn"); None while it may still run.
    stopped: str | None = None


class ToolRunner:
    """The state shared by the SDK's handler tasks and the runner task (one trio thread).

    Channels: owns the inbox (both ends; ``close`` closes the sending side, the runner task
    the receiving side). Each call owns a one-shot reply channel: the runner closes its send
    side when the call ends (a reply sent or not), the handler its receive side.
    Cancellation: :meth:`close` (abort, the end of the execution) cancels every running call
    and answers every later one at once; the runner task then ends when its calls have.
    Error handling: whatever a tool raises (``Exception``) becomes its error result; nothing
    reaches the session. ``BaseException`` other than ``Cancelled`` (``KeyboardInterrupt``)
    is not caught.
    """

    def __init__(
        self,
        tools: Sequence[CustomTool],
        *,
        timeout: float,
        emit: Callable[[Event], Any],
    ) -> None:
        self._tools = tuple(tools)
        self._timeout = timeout
        self._emit = emit
        self._calls: set[_Call] = set()
        self._inbox_send, self._inbox_recv = trio.open_memory_channel[_Call](MAX_CALLS)
        self._closed: str | None = None

    @property
    def tools(self) -> tuple[CustomTool, ...]:
        return self._tools

    @property
    def running(self) -> int:
        """Calls handed over and not yet answered."""
        return len(self._calls)

    def server_config(self) -> Mapping[str, Any]:
        """The SDK's config of the in-process MCP server whose handlers come here."""
        return create_sdk_mcp_server(
            SERVER_NAME,
            tools=[
                SdkMcpTool(
                    name=tool.name,
                    description=tool.description,
                    input_schema=dict(tool.input_schema),
                    handler=partial(self.call, tool),
                )
                for tool in self._tools
            ],
        )

    # -- the SDK's side ------------------------------------------------------------------------

    async def call(self, tool: CustomTool, arguments: dict[str, Any]) -> dict[str, Any]:
        """The handler the SDK calls (in its own task) for a ``tools/call``: hand the call to
        the runner and wait for its one reply."""
        await trio.lowlevel.checkpoint()
        if self._closed is not None:
            return mcp_result(STOPPING, True)
        if len(self._calls) >= MAX_CALLS:
            return mcp_result(
                f"{MAX_CALLS} calls of custom tools are already running; try again later", True
            )
        reply_send, reply_recv = trio.open_memory_channel[Outcome](1)
        call = _Call(tool=tool, arguments=dict(arguments), reply=reply_send)
        self._calls.add(call)
        with reply_recv:
            try:
                # Never full: at most MAX_CALLS calls exist.
                self._inbox_send.send_nowait(call)
                text, is_error = await reply_recv.receive()
            except (trio.EndOfChannel, trio.ClosedResourceError, trio.BrokenResourceError):
                self._end(call)
                return mcp_result(STOPPING, True)
            except trio.Cancelled:
                # The CLI abandoned the call (MCP notifications/cancelled), or the SDK is
                # closing: the tool stops too, and nobody waits for its reply any more.
                self._cancel(call, "withdrawn")
                raise
        return mcp_result(text, is_error)

    # -- the session's side --------------------------------------------------------------------

    def close(self, reason: str = STOPPING) -> None:
        """Cancel every call and refuse new ones (the execution was aborted or ended).
        Idempotent."""
        if self._closed is not None:
            return
        self._closed = reason
        for call in list(self._calls):
            self._cancel(call, reason)
        self._inbox_send.close()

    # -- internals -----------------------------------------------------------------------------

    def _cancel(self, call: _Call, reason: str) -> None:
        if call.stopped is None:
            call.stopped = reason
        if call.scope is not None:
            call.scope.cancel()

    def _end(self, call: _Call) -> None:
        self._calls.discard(call)
        call.reply.close()

    async def _serve(self, call: _Call) -> None:
        """Run one call under its deadline and send its one reply."""
        tool = call.tool
        timeout = tool.timeout if tool.timeout is not None else self._timeout
        outcome: Outcome = (STOPPING, True)
        try:
            with trio.CancelScope(deadline=trio.current_time() + timeout) as scope:
                call.scope = scope
                if call.stopped is not None:
                    scope.cancel()  # stopped while it waited in the inbox: never runs
                await trio.lowlevel.checkpoint()
                try:
                    outcome = tool_output(await tool.function(call.arguments))
                except Exception as exc:
                    outcome = (failure_text(exc), True)
                    self._emit(
                        Error(
                            message=f"the custom tool {tool.name!r} raised: {outcome[0]}",
                            code="callback",
                            fatal=False,
                        )
                    )
            if scope.cancelled_caught:
                if call.stopped is None:
                    outcome = (timeout_text(tool, timeout), True)
                else:
                    outcome = (call.stopped, True)
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                call.reply.send_nowait(outcome)
        finally:
            self._end(call)


async def run_tool_runner(
    runner: ToolRunner, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """The runner's task: runs each call in a child task until the inbox closes and every
    call has ended.

    Channels: receives from the runner's inbox (closed by ``runner.close()``).
    Cancellation: call ``runner.close()`` first so that every call gets its reply; cancelling
    this task cancels the running tools, and every call still waiting is answered "stopping"
    (its reply channel closes).
    Error handling: a tool's failure is its call's result (see :class:`ToolRunner`).
    """
    try:
        async with trio.open_nursery() as nursery:
            task_status.started()
            with runner._inbox_recv:
                async for call in runner._inbox_recv:
                    nursery.start_soon(runner._serve, call, name=f"custom tool {call.tool.name}")
    finally:
        # Calls handed over but never started (this task was cancelled): their handlers get
        # the end of their reply channel, which reads as "stopping".
        for call in list(runner._calls):
            runner._end(call)
