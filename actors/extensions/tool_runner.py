"""The callback runner: a session's user callbacks (custom tools, hooks), run as trio code in
the session's nursery.

:class:`CallbackRunner` runs any :class:`Job` (a callback, its deadline, and how each way it
ends becomes its one reply); :class:`ToolRunner` is the custom tools' side of it, and
``actors/extensions/hooks.py`` the hooks'. What follows is told for custom tools; hooks are the same
with a ``hook_callback`` control request in place of the MCP call.

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

``MAX_CALLS`` bounds the calls in flight of custom tools and hooks together.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import Any

import attrs
import trio
from claude_agent_sdk import SdkMcpTool, create_sdk_mcp_server

from claude_trio.protocol.extensions.custom_tools import (
    SERVER_NAME,
    CustomTool,
    failure_text,
    mcp_result,
    timeout_text,
    tool_output,
)
from claude_trio.protocol.session.events import Error, Event

MAX_CALLS = 64
"""Calls in flight at once. The model makes a few at a time; more is a runaway, and the extra
ones are answered with an error at once. Also the inbox's size, so handing a call over never
waits."""

STOPPING = "the session is stopping: the tool call was cancelled"

@attrs.define(eq=False)
class Job:
    """One user callback to run in the session: what to call, its deadline, and how each way
    it can end becomes its one reply (to the SDK's task that waits for it)."""

    name: str
    """The child task's name (``custom tool <name>``, ``hook <name>``)."""
    function: Callable[[], Awaitable[Any]]
    timeout: float
    returned: Callable[[Any], Any]
    """What the function returned -> the reply."""
    raised: Callable[[Exception], Any]
    """What it raised -> the reply (and the ``error`` event, if any)."""
    timed_out: Callable[[], Any]
    stopped: Callable[[str], Any]
    """The session stopped (a reason) before it finished -> the reply."""
    busy: Callable[[], Any]
    """:data:`MAX_CALLS` callbacks were already running -> the reply."""


@attrs.define(eq=False)
class _Call:
    """One call in flight. ``reply`` is the one-shot channel back to the SDK's task."""

    job: Job
    reply: trio.MemorySendChannel[Any]
    scope: trio.CancelScope | None = None
    # Why it was cancelled before it finished: the session stopped (a reason), or the CLI
    # abandoned it ("withdrawn"); None while it may still run.
    stopped: str | None = None


class CallbackRunner:
    """Runs the session's user callbacks (custom tools' calls, hooks) as children of the
    session's nursery; the state shared by the SDK's tasks and the runner task (one trio
    thread).

    Channels: owns the inbox (both ends; ``close`` closes the sending side, the runner task
    the receiving side). Each call owns a one-shot reply channel: the runner closes its send
    side when the call ends (a reply sent or not), the SDK's task its receive side.
    Cancellation: :meth:`close` (abort, the end of the execution) cancels every running call
    and answers every later one at once; the runner task then ends when its calls have.
    Error handling: whatever a callback raises (``Exception``) becomes its reply through
    ``Job.raised``; nothing reaches the session. ``BaseException`` other than ``Cancelled``
    (``KeyboardInterrupt``) is not caught.
    """

    def __init__(self) -> None:
        self._calls: set[_Call] = set()
        self._inbox_send, self._inbox_recv = trio.open_memory_channel[_Call](MAX_CALLS)
        self._closed: str | None = None

    @property
    def running(self) -> int:
        """Calls handed over and not yet answered."""
        return len(self._calls)

    @property
    def closed(self) -> bool:
        return self._closed is not None

    # -- the SDK's side ------------------------------------------------------------------------

    async def run(self, job: Job) -> Any:
        """Hand ``job`` to the runner (from the SDK's task) and wait for its one reply."""
        await trio.lowlevel.checkpoint()
        if self._closed is not None:
            return job.stopped(STOPPING)
        if len(self._calls) >= MAX_CALLS:
            return job.busy()
        reply_send, reply_recv = trio.open_memory_channel[Any](1)
        call = _Call(job=job, reply=reply_send)
        self._calls.add(call)
        with reply_recv:
            try:
                # Never full: at most MAX_CALLS calls exist.
                self._inbox_send.send_nowait(call)
                return await reply_recv.receive()
            except (trio.EndOfChannel, trio.ClosedResourceError, trio.BrokenResourceError):
                self._end(call)
                return job.stopped(STOPPING)
            except trio.Cancelled:
                # The CLI abandoned the call (MCP notifications/cancelled, a control cancel),
                # or the SDK is closing: the callback stops too, and nobody waits for its reply.
                self._cancel(call, "withdrawn")
                raise

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
        job = call.job
        reply: Any = None
        replied = False
        try:
            with trio.CancelScope(deadline=trio.current_time() + job.timeout) as scope:
                call.scope = scope
                if call.stopped is not None:
                    scope.cancel()  # stopped while it waited in the inbox: never runs
                await trio.lowlevel.checkpoint()
                try:
                    value = await job.function()
                except Exception as exc:
                    reply, replied = job.raised(exc), True
                else:
                    reply, replied = job.returned(value), True
            if scope.cancelled_caught or not replied:
                reply = job.timed_out() if call.stopped is None else job.stopped(call.stopped)
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                call.reply.send_nowait(reply)
        finally:
            self._end(call)


class ToolRunner(CallbackRunner):
    """The session's custom tools, served to the CLI as an in-process MCP server whose
    handlers run each call through the :class:`CallbackRunner`."""

    def __init__(
        self,
        tools: Sequence[CustomTool],
        *,
        timeout: float,
        emit: Callable[[Event], Any],
    ) -> None:
        super().__init__()
        self._tools = tuple(tools)
        self._timeout = timeout
        self._emit = emit

    @property
    def tools(self) -> tuple[CustomTool, ...]:
        return self._tools

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

    async def call(self, tool: CustomTool, arguments: dict[str, Any]) -> dict[str, Any]:
        """The handler the SDK calls (in its own task) for a ``tools/call``: hand the call to
        the runner and wait for its one reply."""
        timeout = tool.timeout if tool.timeout is not None else self._timeout
        args = dict(arguments)

        def raised(exc: Exception) -> dict[str, Any]:
            text = failure_text(exc)
            self._emit(
                Error(
                    message=f"the custom tool {tool.name!r} raised: {text}",
                    code="callback",
                    fatal=False,
                )
            )
            return mcp_result(text, True)

        result: dict[str, Any] = await self.run(
            Job(
                name=f"custom tool {tool.name}",
                function=partial(tool.function, args),
                timeout=timeout,
                returned=lambda value: mcp_result(*tool_output(value)),
                raised=raised,
                timed_out=lambda: mcp_result(timeout_text(tool, timeout), True),
                stopped=lambda reason: mcp_result(reason, True),
                busy=lambda: mcp_result(
                    f"{MAX_CALLS} calls of custom tools are already running; try again later",
                    True,
                ),
            )
        )
        return result


async def run_tool_runner(
    runner: CallbackRunner, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
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
                    nursery.start_soon(runner._serve, call, name=call.job.name)
    finally:
        # Calls handed over but never started (this task was cancelled): their handlers get
        # the end of their reply channel, which reads as "stopping".
        for call in list(runner._calls):
            runner._end(call)
