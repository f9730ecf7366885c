"""One fake ``claude`` process behind the SDK's ``Transport`` interface.

:class:`FakeTransport` is what ``FakeCLI.transport_for(options)`` returns: pass it to
``ClaudeSDKClient(options, transport=...)``. It runs the process as a trio system task from
``connect()`` to ``close()``, feeds what the SDK writes to the control protocol and the turn
runner, and records everything for the test's asserts.
"""

from __future__ import annotations

import json
import traceback
import uuid as uuid_module
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import trio
from claude_agent_sdk import ClaudeAgentOptions, CLIConnectionError, Transport

from claude_trio.actors.session.sdk_private import (
    DEFAULT_MAX_BUFFER_SIZE as _DEFAULT_MAX_BUFFER_SIZE,
)
from claude_trio.protocol.errors import LocalProtocolError
from claude_trio.testing.fake_cli._control import ControlProtocol
from claude_trio.testing.fake_cli._input import UserInput
from claude_trio.testing.fake_cli._runner import TurnRunner
from claude_trio.testing.fake_cli._stdout import StdoutPipe, StdoutReader

if TYPE_CHECKING:
    from claude_trio.testing.fake_cli._cli import FakeCLI

DEFAULT_MODEL = "claude-sonnet-4-5"
#: How long ``close()`` gives the process to exit on the end of its input before it kills it:
#: the SDK's own ``SubprocessCLITransport.close()`` waits that long before SIGTERM.
CLOSE_GRACE_SECONDS = 5.0
#: Exit code the fake reports when ``close()`` kills a busy process (anyio reports -SIGTERM).
SIGTERM_EXIT_CODE = -15
#: Exit code of :meth:`FakeTransport.kill_now` (SIGKILL).
SIGKILL_EXIT_CODE = -9


class FakeTransport(Transport):
    """One fake ``claude`` process. Made by :meth:`FakeCLI.transport_for`.

    Recording (read these in asserts): ``options``, ``written`` (every frame the SDK wrote, parsed),
    ``written_lines`` (raw), ``user_messages``, ``control_requests`` (SDK -> CLI, e.g. initialize,
    interrupt), ``control_responses`` (SDK -> CLI answers), ``initialize_request``, ``emitted``
    (every stdout line the fake produced), ``stderr_lines``, ``input_ended`` (and
    ``input_ended_at``), ``process_alive``,
    ``closed``, ``exit_code``, ``script_errors``, ``results`` (result frames emitted).
    """

    def __init__(self, cli: FakeCLI, options: ClaudeAgentOptions, index: int) -> None:
        self.cli = cli
        self.options = options
        self.index = index
        self.session_id = cli.session_id or str(uuid_module.UUID(int=0xFA4E_0000 + index))
        self.model = cli.model or options.model or DEFAULT_MODEL
        self.max_buffer_size = options.max_buffer_size or _DEFAULT_MAX_BUFFER_SIZE
        self.replay_user_messages = (
            cli.replay_user_messages
            if cli.replay_user_messages is not None
            else "replay-user-messages" in options.extra_args
        )
        # Recording.
        self.written: list[dict[str, Any]] = []
        self.written_lines: list[str] = []
        self.stderr_lines: list[str] = []
        self.results: list[dict[str, Any]] = []
        self.script_errors: list[BaseException] = []
        self.initialize_request: dict[str, Any] | None = None
        self.input_ended = False
        #: The (trio clock) time its input ended, once it did.
        self.input_ended_at: float | None = None
        self.connected = False
        self.closed = False
        self.exit_code: int | None = None
        self.total_cost_usd = 0.0
        self.model_usage: dict[str, dict[str, Any]] = {}
        # Process state.
        self._ids = 0
        self._rpc_ids = 0
        #: The SDK MCP servers this process did the MCP handshake with.
        self.mcp_ready: set[str] = set()
        self._last_result_is_error = False
        self._stdout = StdoutPipe()
        self._control = ControlProtocol(self)
        self._runner = TurnRunner(self)
        # stdin: unbounded on purpose: the SDK writes without waiting for the CLI to read, and a
        # bounded buffer could deadlock the SDK's writer against the fake's own replies.
        self._stdin_send, self._stdin_recv = trio.open_memory_channel[dict[str, Any] | None](
            float("inf")
        )
        self._scope = trio.CancelScope()
        self._done = trio.Event()

    # -- what tests read ------------------------------------------------------------------------

    @property
    def emitted(self) -> list[str]:
        """Every line the fake wrote to stdout, without its line ending."""
        return self._stdout.emitted

    @property
    def process_alive(self) -> bool:
        return self.connected and self.exit_code is None

    @property
    def user_messages(self) -> list[dict[str, Any]]:
        return [f for f in self.written if f.get("type") == "user"]

    @property
    def control_requests(self) -> list[dict[str, Any]]:
        return [f for f in self.written if f.get("type") == "control_request"]

    @property
    def control_responses(self) -> list[dict[str, Any]]:
        return [f for f in self.written if f.get("type") == "control_response"]

    @property
    def interrupts(self) -> int:
        return sum(1 for f in self.control_requests if f["request"].get("subtype") == "interrupt")

    @property
    def hook_callback_ids(self) -> dict[str, list[str]]:
        """``{hook event: [callback id, ...]}`` from the initialize request."""
        hooks = (self.initialize_request or {}).get("hooks") or {}
        return {
            event: [cid for matcher in matchers for cid in matcher.get("hookCallbackIds", [])]
            for event, matchers in hooks.items()
        }

    def emitted_frames(self) -> list[dict[str, Any]]:
        """The JSON frames among ``emitted`` (raw/noise lines left out)."""
        frames = []
        for line in self.emitted:
            try:
                frame = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(frame, dict):
                frames.append(frame)
        return frames

    # -- Transport ------------------------------------------------------------------------------

    async def connect(self) -> None:
        await trio.lowlevel.checkpoint()
        if self.connected:
            return
        self.connected = True
        trio.lowlevel.spawn_system_task(self._process_main, name=f"fake-claude-{self.index}")

    def is_ready(self) -> bool:
        return self.process_alive and not self.closed and not self.input_ended

    async def write(self, data: str) -> None:
        await trio.lowlevel.checkpoint()
        # Same checks and messages as SubprocessCLITransport.write.
        if not self.connected or self.closed or self.input_ended:
            raise CLIConnectionError("ProcessTransport is not ready for writing")
        if self.exit_code is not None:
            raise CLIConnectionError(
                f"Cannot write to terminated process (exit code: {self.exit_code})"
            )
        for line in data.splitlines():
            if not line.strip():
                continue
            self.written_lines.append(line)
            frame = json.loads(line)
            self.written.append(frame)
            self._stdin_send.send_nowait(frame)

    async def end_input(self) -> None:
        await trio.lowlevel.checkpoint()
        if not self.input_ended:
            self.input_ended = True
            self.input_ended_at = trio.current_time()
            self._stdin_send.send_nowait(None)

    def read_messages(self) -> AsyncIterator[dict[str, Any]]:
        if not self.connected:
            raise CLIConnectionError("Not connected")
        return StdoutReader(
            self._stdout.receive,
            max_buffer_size=self.max_buffer_size,
            exited=self._done,
            exit_code=lambda: self.exit_code,
        )

    async def close(self) -> None:
        """As the SDK's subprocess transport closes: end stdin, give the process
        ``CLOSE_GRACE_SECONDS`` to finish what it is doing and exit, then SIGTERM it."""
        await trio.lowlevel.checkpoint()
        self.closed = True
        if self.process_alive:
            await self.end_input()
            with trio.move_on_after(CLOSE_GRACE_SECONDS):
                await self._done.wait()
            self._terminate(SIGTERM_EXIT_CODE, ())
        if self.connected:
            with trio.move_on_after(CLOSE_GRACE_SECONDS):
                await self._done.wait()
        self._stdout.close_read()

    def kill_now(self) -> None:
        """SIGKILL the process (and, for a real CLI, what it started): it stops at once, in the
        middle of whatever it was doing. A no-op when it is not running."""
        if self.process_alive:
            self._terminate(SIGKILL_EXIT_CODE, ())

    def kill_tools(self) -> None:
        """Kill what the process started, not the process. The fake's tools are steps of its
        script, which stop with the turn (an interrupt) or the process: nothing to do."""

    # -- fault injection from the test side -----------------------------------------------------

    def kill(self, exit_code: int = -9, stderr: Iterable[str] = ()) -> None:
        """The process dies now (SIGKILL by default): stdout closes, reads raise ProcessError."""
        if not self.process_alive:
            raise LocalProtocolError(f"fake CLI process {self.index} is not running")
        self._terminate(exit_code, stderr)

    # -- the process ----------------------------------------------------------------------------

    def _next_rpc_id(self) -> int:
        """The next JSON-RPC id of the process's MCP client (shared by its servers)."""
        rpc_id = self._rpc_ids
        self._rpc_ids += 1
        return rpc_id

    def _next_id(self) -> str:
        self._ids += 1
        return str(uuid_module.UUID(int=(self.index << 64) + self._ids))

    async def _emit_line(self, text: str) -> None:
        await self._stdout.write_line(text)

    async def _emit(self, frame: Mapping[str, Any]) -> None:
        await self._stdout.write_frame(frame, line_ending=self.cli.line_ending)

    def _terminate(self, exit_code: int, stderr: Iterable[str]) -> None:
        if self.exit_code is not None:
            return
        self.exit_code = exit_code
        for line in stderr:
            self.stderr_lines.append(line)
            if self.options.stderr is not None:
                self.options.stderr(line)
        # Cancel before closing stdout, so a frame blocked in send is withdrawn (Cancelled), not
        # failed with ClosedResourceError.
        self._scope.cancel()
        self._stdout.close_write()

    def _script_failed(self, exc: BaseException) -> None:
        self.script_errors.append(exc)
        lines = traceback.format_exception(exc)
        self._terminate(1, [f"fake CLI script failed: {exc!r}", *"".join(lines).splitlines()])

    async def _process_main(self) -> None:
        await trio.lowlevel.checkpoint()
        try:
            with self._scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._stdin_loop)
                    nursery.start_soon(self._runner.run_turns, nursery)
        except Exception as exc:  # a bug in a script or in the fake: the process "crashes"
            self._script_failed(exc)
        finally:
            if self.exit_code is None:
                self._terminate(0, ())
            self._done.set()

    async def _stdin_loop(self) -> None:
        async for frame in self._stdin_recv:
            if frame is None:  # EOF on stdin
                self._runner.end_of_input()
                return
            match frame.get("type"):
                case "user":
                    message = frame.get("message") or {}
                    content = message.get("content", "")
                    message_uuid = frame.get("uuid")
                    self._runner.enqueue(UserInput(uuid=message_uuid, content=content, raw=frame))
                case "control_request":
                    await self._control.answer(frame)
                case "control_response":
                    self._control.resolve(frame)
                case _:
                    pass  # the real CLI ignores frames it does not know; they stay recorded
