"""The SDK driver: the only owner of the ``ClaudeSDKClient``.

It connects and disconnects in one task (the SDK requires it) and watches the SDK's message
stream for its end. Every decision is a pure function: what a frame means is
:class:`~claude_trio.protocol.mapper.Mapper`, when the execution ends is
:class:`~claude_trio.protocol.lifecycle.ExecutionLifecycle`.

Hot path: CLI stdout -> the SDK's reader task -> the tap (:mod:`.tap`) calls
:meth:`SessionCore.deliver` for each message frame, right there -> ``EventStream`` -> consumer.
The SDK would otherwise queue every frame in its own stream for one more task (this one) to pick
up: a task switch per frame, which measured as much CPU as the mapping itself. Control frames
still go to the SDK's router; only its reader's end (or failure) reaches this task's loop. A
consumer that falls behind makes ``deliver`` ask for ``wait_writable``, which holds the SDK's
reader, so backpressure reaches the CLI's stdout and no buffer grows.

Deadlines are ours, not the SDK's 60 s: connecting (spawn + ``initialize``) has
``connect_timeout``; an interrupt has ``control_timeout``; teardown is shielded and bounded by
``close_grace``.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs
import trio
from anyio.streams.memory import MemoryObjectReceiveStream
from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    CLIConnectionError,
    CLIJSONDecodeError,
    CLINotFoundError,
    ProcessError,
    Transport,
)
from claude_agent_sdk._internal.message_parser import parse_message
from claude_agent_sdk._internal.transport.subprocess_cli import SubprocessCLITransport
from claude_agent_sdk.types import _configure_can_use_tool

from claude_trio.protocol.errors import LocalProtocolError
from claude_trio.protocol.events import Aborted, Error, ErrorCode, Event, Result, WarningEvent
from claude_trio.protocol.lifecycle import ExecutionLifecycle
from claude_trio.protocol.mapper import Mapper
from claude_trio.protocol.options import check_root_bypass
from claude_trio.protocol.usage import Usage

from .broker import UserInputBroker
from .event_stream import EventStream
from .input_channel import MessageStream, OutgoingMessage

if TYPE_CHECKING:
    from .pool import Lease

STDERR_TAIL = 20


@attrs.frozen(kw_only=True)
class DriverConfig:
    """Our deadlines (seconds), all far below the SDK's 60 s defaults."""

    connect_timeout: float = 20.0
    control_timeout: float = 5.0
    abort_grace: float = 3.0
    # The SDK's own close() takes up to ~15 s for a CLI that ignores SIGTERM (5 s grace after
    # stdin EOF, SIGTERM, 5 s, SIGKILL, 5 s): our bound must not cut it short before the SIGKILL.
    close_grace: float = 20.0


TransportFactory = Callable[[ClaudeAgentOptions], Transport]


@attrs.define(eq=False)
class SessionCore:
    """The state the session's actors share (one trio thread: mutations are atomic between
    checkpoints). Only the driver task connects and disconnects ``client`` (the SDK wants both
    in one task); ``Session.abort`` calls its ``interrupt()``, which the SDK allows from any task.
    """

    options: ClaudeAgentOptions
    config: DriverConfig
    mapper: Mapper
    lifecycle: ExecutionLifecycle
    stream: EventStream
    input_send: trio.MemorySendChannel[OutgoingMessage]
    broker: UserInputBroker | None = None
    client: ClaudeSDKClient | None = None
    aborting: bool = False
    execution_ended: bool = False
    done: trio.Event = attrs.field(factory=trio.Event)
    read_scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    stderr_tail: collections.deque[str] = attrs.field(
        factory=lambda: collections.deque(maxlen=STDERR_TAIL)
    )
    turn_usage: list[Usage] = attrs.field(factory=list)
    cli_path: str | None = None
    prompt_uuid: str | None = None

    # -- emitting ------------------------------------------------------------------------------

    def emit(self, event: Event) -> Event:
        """Stamp and queue one synthesized event (never blocks; see EventStream).

        Returns the stamped event, so a caller that hands it on (the broker, to the user-input
        handler) hands on what the stream shows, not an unstamped copy (turn 0, seq 0).
        """
        if self.stream.closed:
            return event
        stamped = self.mapper.stamp(event)
        self.stream.send_nowait([stamped])
        return stamped

    def emit_many(self, events: list[Event]) -> None:
        if events and not self.stream.closed:
            self.stream.send_nowait(events)

    def finish(self, events: list[Event]) -> None:
        """End the execution: queue the last events, close the stream, wake waiters.

        Idempotent. Every path that ends an execution comes through here, after making sure
        ``events`` holds (or an earlier batch held) exactly one terminal event.
        """
        if self.execution_ended:
            return
        self.execution_ended = True
        if self.broker is not None:
            self.broker.close("cancelled")
        self.emit_many(events)
        self.input_send.close()
        self.stream.close()
        self.read_scope.cancel()
        self.done.set()

    def abort_events(self, reason: str) -> list[Event]:
        """The one terminal ``aborted`` event: for the open turn, or between turns."""
        self.mapper.abort_requested()
        return self.mapper.turn_aborted(reason)

    def report_write_failure(self, message: OutgoingMessage, exc: BaseException) -> None:
        """The input channel could not write a user message (the CLI is gone or wedged)."""
        self.emit(
            Error(
                message=f"could not write a user message to the CLI: {exc}",
                code="transport",
                fatal=False,
            )
        )

    def report_lost_pushes(self, lost: list[str], why: str) -> None:
        for uuid in lost:
            if uuid == self.prompt_uuid:
                continue  # the execution's own prompt, not a push: its fate is the terminal event
            self.emit(
                WarningEvent(
                    message=f"push {uuid} was accepted but never reached the model: {why}",
                    code="push_undelivered",
                )
            )

    # -- mapping (the hot path) -------------------------------------------------------------

    def deliver(self, frame: dict[str, Any]) -> bool:
        """Map one CLI frame and queue its events (the tap calls this from the SDK's reader
        task). Returns True when the consumer is behind: the caller then waits
        (``wait_writable``), which is the backpressure that reaches the CLI's stdout.
        """
        if self.execution_ended:
            return False  # nothing after the terminal event belongs to this execution
        out: list[Event] = []
        if self.process(frame, out):
            self.finish(out)
            return False
        if out:
            self.stream.send_nowait(out)
        return self.stream.over_capacity

    async def wait_writable(self) -> None:
        await self.stream.wait_writable()

    def process(self, frame: dict[str, Any], out: list[Event]) -> bool:
        """Map one SDK frame into ``out``. Returns True when the execution ended with it."""
        try:
            message = parse_message(frame)
        except Exception as exc:
            # A frame the SDK could not parse is surfaced, never dropped in silence.
            out.append(
                self.mapper.stamp(
                    Error(
                        message=f"the CLI sent a frame the SDK could not parse: {exc}",
                        code="transport",
                        fatal=False,
                        detail=repr(frame)[:500],
                    )
                )
            )
            return False
        if message is None:
            return False
        events = self.mapper.feed(message)
        for uuid in self.mapper.pop_consumed_uuids():
            self.lifecycle.consumed(uuid)
        ended = False
        for i, event in enumerate(events):
            if isinstance(event, Result):
                self.turn_usage.append(event.usage)
                if self.lifecycle.result_arrived(
                    event.user_message_uuids, tasks_in_flight=bool(self.mapper.tasks_in_flight)
                ):
                    events[i] = attrs.evolve(event, final=True)
                    ended = True
            elif isinstance(event, Aborted) and self.aborting:
                ended = True
        out.extend(events)
        return ended

    def cli_gone(self, exc: BaseException | None) -> list[Event]:
        """The SDK's stream ended (EOF or an error): the terminal events to finish with."""
        error = self.describe_failure(exc) if exc is not None else None
        if error is None and not self.aborting:
            error = Error(
                message="the CLI closed its output before the execution ended"
                + self._stderr_suffix(),
                code="cli_exited",
            )
        lost = self.lifecycle.cli_died(error.message if error else "the CLI exited")
        self.report_lost_pushes(lost, "the CLI exited")
        if self.aborting:
            return self.abort_events("aborted")
        assert error is not None
        return self.mapper.stream_ended(error)

    def _stderr_suffix(self) -> str:
        if not self.stderr_tail:
            return ""
        return "; last stderr lines:\n" + "\n".join(self.stderr_tail)

    def describe_failure(self, exc: BaseException) -> Error:
        """Turn an SDK/transport exception into the error event that names the cause."""
        code: ErrorCode
        status = None
        if isinstance(exc, CLINotFoundError):
            code = "cli_not_found"
            message = (
                f"{exc}. The claude CLI ships inside the claude-agent-sdk wheel "
                f"(claude_agent_sdk/_bundled/claude): reinstall claude-agent-sdk, or pass "
                f"cli_path= / put `claude` on PATH. Tried: {self.cli_path or 'the bundled CLI'}"
            )
        elif isinstance(exc, ProcessError):
            code = "cli_exited"
            message = f"the CLI exited with code {exc.exit_code}" + self._stderr_suffix()
        elif isinstance(exc, CLIJSONDecodeError):
            code = "transport"
            cause = exc.original_error
            if "maximum buffer size" in str(exc):
                message = (
                    f"the CLI wrote a line over the SDK's buffer cap: {exc.line}. Raise "
                    "ClaudeAgentOptions.max_buffer_size (open_session(max_buffer_size=...))"
                )
            else:
                message = f"the CLI wrote a malformed line ({cause}): {exc.line[:200]!r}"
        elif isinstance(exc, TimeoutError):
            code = "cli_timeout"
            message = str(exc) or "the CLI did not answer in time"
        elif isinstance(exc, CLIConnectionError) and "Failed to start" in str(exc):
            code = "cli_not_found"
            path = self.cli_path or "the bundled CLI"
            message = (
                f"could not start the claude CLI at {path}: {exc}. Check that the file is an "
                f"executable claude binary (chmod +x {path}), or drop cli_path= to use the one "
                "bundled with claude-agent-sdk"
            )
        elif isinstance(exc, CLIConnectionError):
            code = "cli_exited"
            message = f"lost the connection to the CLI: {exc}" + self._stderr_suffix()
        else:
            code = "internal"
            message = f"{type(exc).__name__}: {exc}"
        return Error(message=message, code=code, status=status)


async def _drain(core: SessionCore, receive: MemoryObjectReceiveStream[dict[str, Any]]) -> None:
    """Wait for the end of the SDK's message stream.

    With the tap delivering message frames itself (the hot path), only the SDK reader's end
    (``"end"``) or failure (``"error"``, with the exception it caught) arrives here; any other
    frame (a transport without a sink) is delivered the same way the tap would.
    """
    async for frame in receive:
        if core.execution_ended:
            return
        frame_type = frame.get("type")
        if frame_type == "end" or frame_type == "error":
            exc = frame.get("exception") if frame_type == "error" else None
            if frame_type == "error" and not isinstance(exc, BaseException):
                exc = CLIConnectionError(str(frame.get("error", "unknown error")))
            core.finish(core.cli_gone(exc))
            return
        if core.deliver(frame):
            await core.stream.wait_writable()
    if not core.execution_ended:
        core.finish(core.cli_gone(None))


def stderr_collector(core: SessionCore, user_callback: Callable[[str], None] | None) -> Any:
    def on_stderr(line: str) -> None:
        core.stderr_tail.append(line.rstrip())
        if user_callback is not None:
            user_callback(line)

    return on_stderr


async def run_sdk_driver(
    core: SessionCore,
    transport: Transport,
    *,
    task_status: trio.TaskStatus[ClaudeSDKClient | None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Connect, drain, disconnect.

    Channels: writes to ``core.stream`` (closes it through ``core.finish``).
    Cancellation: ``core.read_scope`` stops the read loop (abort, end of execution); the
    disconnect in ``finally`` is shielded and bounded by ``close_grace``, so no CLI process
    outlives this task even when the caller's scope is cancelled.
    Error handling: every failure (missing CLI, timeout, crash, malformed frame) becomes an
    ``error`` event; nothing is raised to the session except our own bugs.
    ``task_status.started(client)`` once connected; ``started(None)`` when connecting failed
    (the failure is already in the stream).
    """
    client = ClaudeSDKClient(core.options, transport=transport)
    try:
        try:
            await connect_client(client, core.config.connect_timeout)
        except Exception as exc:
            core.finish(core.cli_gone(exc))
            task_status.started(None)
            await trio.lowlevel.checkpoint()
            return
        core.client = client
        task_status.started(client)
        await drain_client(core, client)
    finally:
        core.client = None
        await close_client(client, transport, core.config.close_grace)  # noqa: ASYNC102 - shielded, bounded inside


async def close_client(client: ClaudeSDKClient, transport: Transport, grace: float) -> None:
    """Disconnect, shielded and bounded. Then close the transport ourselves too (idempotent):
    a cancellation that lands inside ``connect()`` before the SDK created its query object
    leaves a spawned process that ``disconnect()`` alone does not know about.
    """
    with trio.move_on_after(grace, shield=True):
        await client.disconnect()
        await transport.close()


async def run_leased_driver(
    core: SessionCore,
    lease: Lease,
    *,
    task_status: trio.TaskStatus[ClaudeSDKClient | None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The driver for a warm CLI from a pool: already connected, disconnected by its pool slot
    (the SDK wants connect and disconnect in one task). Drains, then releases the lease.

    Channels, cancellation and error handling as :func:`run_sdk_driver`.
    """
    core.client = lease.client
    try:
        task_status.started(lease.client)
        await drain_client(core, lease.client)
    finally:
        core.client = None
        lease.release()


async def connect_client(client: ClaudeSDKClient, connect_timeout: float) -> None:
    """``client.connect()`` (spawn + ``initialize``) under our deadline, not the SDK's 60 s."""
    try:
        with trio.fail_after(connect_timeout):
            await client.connect()
    except trio.TooSlowError:
        raise TimeoutError(
            f"the CLI did not answer initialize within {connect_timeout:g} s"
        ) from None


async def drain_client(core: SessionCore, client: ClaudeSDKClient) -> None:
    """Run the read loop on a connected client until the execution ends (or the read scope is
    cancelled). Reads the SDK's own message stream directly, draining with ``receive_nowait``:
    ``receive_messages()`` would cost an async-generator step per message (see module doc).
    """
    query = client._query
    if query is None:
        raise LocalProtocolError("drain_client() needs a connected ClaudeSDKClient")
    with core.read_scope:
        await _drain(core, query._message_receive)


def subprocess_transport(options: ClaudeAgentOptions) -> Transport:
    """The bundled (or ``options.cli_path``) CLI as a subprocess, the SDK's own transport.

    The SDK only routes permission prompts over stdio when the options went through
    ``_configure_can_use_tool``; for a transport we build, that is our job (sdk-facts.md). Its
    prompt stream is never read (every message is written with ``query()``): an empty one.
    """
    return SubprocessCLITransport(prompt=MessageStream(), options=_configure_can_use_tool(options))


def root_refusal(options: ClaudeAgentOptions) -> str | None:
    """Why the real CLI would refuse to start with ``options`` in this process, if it would."""
    is_root = hasattr(os, "geteuid") and os.geteuid() == 0
    return check_root_bypass(options, is_root=is_root, env=dict(os.environ))
