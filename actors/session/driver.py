"""The SDK driver: the only owner of the ``ClaudeSDKClient``, from connect to the CLI's end.

It connects and disconnects in one task (the SDK requires it) and watches the SDK's message
stream for its end. What a frame means is decided by the session core (:mod:`.core`), when the
execution ends by ``ExecutionLifecycle``.

Hot path: CLI stdout -> the SDK's reader task -> the tap (:mod:`.tap`) calls
:meth:`~.core.SessionCore.deliver` for each message frame, right there -> ``EventStream`` ->
consumer. The SDK would otherwise queue every frame in its own stream for one more task (this
one) to pick up: a task switch per frame, which measured as much CPU as the mapping itself.
Control frames still go to the SDK's router; only its reader's end (or failure) reaches this
task's loop. A consumer that falls behind makes ``deliver`` ask for ``wait_writable``, which
holds the SDK's reader, so backpressure reaches the CLI's stdout and no buffer grows.

Teardown never sits out the SDK's own close, which waits 5 s after the end of input before it
even sends SIGTERM: the stopper (:mod:`.stopper`) stops the CLI first (one interrupt that also
cancels queued messages, its tools frozen then killed, a bounded wait until it is idle); a CLI
that settled gets ``exit_grace`` to exit on the end of its input; anything else, or anything
still alive after that, is killed with everything it started (:mod:`.process`). Only then does
the SDK disconnect (it finds nothing left to wait for). A warm CLI of a pool has its own
teardown (:func:`shut_down`), run by its pool slot.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import anyio
import trio
from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, CLIConnectionError, Transport

from claude_trio.actors.session.core import DriverConfig, SessionCore
from claude_trio.actors.session.input_channel import MessageStream
from claude_trio.actors.session.process import CLIProcessTransport, kill_now
from claude_trio.actors.session.sdk_private import (
    client_options,
    message_receive,
    route_permission_prompts,
)
from claude_trio.actors.session.stopper import start_stopper
from claude_trio.actors.session.tap import TapTransport
from claude_trio.actors.session.watchdogs import watch_liveness, watch_timeouts
from claude_trio.protocol.config.options import check_root_bypass
from claude_trio.protocol.config.ready import cwd_refusal

__all__ = [
    "DriverConfig",
    "connect_client",
    "drain_client",
    "missing_cwd",
    "root_refusal",
    "run_sdk_driver",
    "shut_down",
    "subprocess_transport",
]


async def run_sdk_driver(
    core: SessionCore,
    transport: TapTransport,
    *,
    task_status: trio.TaskStatus[ClaudeSDKClient | None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Connect, read until the execution ends, stop the CLI and disconnect.

    Channels: writes to ``core.stream`` (closed through the execution's end).
    Cancellation: ``core.read_scope`` stops the read loop (the end of the execution). The
    stopper's task (:func:`~.stopper.start_stopper`, started here once connected) runs shielded
    and ends only once the CLI is gone, within ``close_grace`` of the teardown; the disconnect
    in ``finally`` is shielded and bounded too, so no CLI process outlives this task even when
    the caller's scope is cancelled.
    Error handling: every failure (missing CLI, timeout, crash, malformed frame) becomes an
    ``error`` event; nothing is raised to the session except our own bugs.
    ``task_status.started(client)`` once connected; ``started(None)`` when connecting failed
    (the failure is already in the stream).
    """
    client = ClaudeSDKClient(client_options(core.options), transport=transport)
    try:
        try:
            await connect_client(client, core.config.connect_timeout)
        except Exception as exc:
            core.connect_failed(exc)
            task_status.started(None)
            await trio.lowlevel.checkpoint()
            return
        async with trio.open_nursery() as nursery:
            start_stopper(nursery, core.stopper, client)
            task_status.started(client)
            try:
                await drain_client(core, client)
            finally:
                core.stopper.teardown()
    finally:
        with trio.move_on_after(core.config.close_grace, shield=True):
            kill_now(transport.inner)  # whatever is left: a no-op once the CLI exited
            await client.disconnect()
            await transport.close()


async def shut_down(
    client: ClaudeSDKClient, transport: TapTransport, *, settled: bool, exit_grace: float
) -> None:
    """Make the CLI exit and disconnect (callers shield and bound it).

    ``settled``: the CLI has nothing running, so it may exit on the end of its input (within
    ``exit_grace``). Otherwise, or when it does not exit in time, it is killed with everything
    it started. Then the SDK disconnects (its own close finds nothing left to wait for), and
    the transport is closed too: a cancellation that lands inside ``connect()`` before the SDK
    created its query object leaves a spawned process that ``disconnect()`` does not know.
    """
    if settled:
        with trio.move_on_after(exit_grace):
            await transport.end_input()
            await _wait_for_exit(client)
    kill_now(transport.inner)
    await client.disconnect()
    await transport.close()


async def _wait_for_exit(client: ClaudeSDKClient) -> None:
    """Until the CLI closed its output (the SDK's stream ends): it exited."""
    await trio.lowlevel.checkpoint()
    try:
        receive = message_receive(client)
    except Exception:  # not connected: nothing to wait for
        return
    with contextlib.suppress(anyio.ClosedResourceError):
        async for frame in receive:
            if frame.get("type") in ("end", "error"):
                return


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
    cancelled). Reads the SDK's own message stream directly, with ``receive_nowait`` where it
    can: ``receive_messages()`` would cost an async-generator step per message.
    """
    receive = message_receive(client)
    core.last_output_at = trio.current_time()
    with core.read_scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch_liveness, core, client)
            if core.run_timeout is not None or core.idle_timeout is not None:
                # Without either limit it would only sleep: no task for it.
                nursery.start_soon(watch_timeouts, core)
            await _read_loop(core, receive)
            nursery.cancel_scope.cancel()


async def _read_loop(core: SessionCore, receive: Any) -> None:
    """The SDK's stream until its end: only the reader's end or failure arrives here."""
    async for frame in receive:
        if core.finished:
            return
        frame_type = frame.get("type")
        if frame_type == "end" or frame_type == "error":
            exc = frame.get("exception") if frame_type == "error" else None
            if frame_type == "error" and not isinstance(exc, BaseException):
                exc = CLIConnectionError(str(frame.get("error", "unknown error")))
            core.cli_gone(exc)
            return
        # A transport without a sink (none of ours) delivers frames through the stream.
        if core.deliver(frame):
            await core.stream.wait_writable()
    core.cli_gone(None)


def subprocess_transport(options: ClaudeAgentOptions) -> Transport:
    """The bundled (or ``options.cli_path``) CLI as a subprocess, the SDK's own transport with
    a kill that reaches the CLI's tools (:class:`~.process.CLIProcessTransport`).

    With a ``can_use_tool``, permission prompts must be routed over stdio, which the SDK does
    only for a transport it builds itself (:mod:`.sdk_private`). Its prompt stream is never
    read (every message is written with ``query()``): an empty one.
    """
    return CLIProcessTransport(prompt=MessageStream(), options=route_permission_prompts(options))


def missing_cwd(options: ClaudeAgentOptions) -> str | None:
    """Why the CLI could not start in ``options.cwd`` (``None`` when it can, or none is set)."""
    if options.cwd is None:
        return None
    cwd = os.fspath(options.cwd)
    if os.path.isdir(cwd):
        return None
    problem = "is not a directory" if os.path.exists(cwd) else "does not exist"
    return cwd_refusal(cwd, problem)


def root_refusal(options: ClaudeAgentOptions) -> str | None:
    """Why the real CLI would refuse to start with ``options`` in this process, if it would."""
    is_root = hasattr(os, "geteuid") and os.geteuid() == 0
    return check_root_bypass(options, is_root=is_root, env=os.environ)
