"""A scripted fake ``claude`` CLI behind the SDK's ``Transport`` interface.

Why: the real SDK (``ClaudeSDKClient``, its ``Query`` control protocol and ``parse_message``) must
parse every frame in our actor tests, and the races we care about (push vs. end of turn, abort vs.
result, a question vs. a cancel) must run the same way every time under
``trio.testing.MockClock(autojump_threshold=0)``. So the fake speaks the CLI's stream-JSON on the
wire: the SDK writes JSON lines to it and reads JSON lines from it, exactly as it does with
``SubprocessCLITransport``. Every scripted delay is a ``trio.sleep`` on the run's clock.

Model of one fake process (``FakeTransport``):

* ``write()`` is the CLI's stdin. Each line is parsed and recorded at once (``written``), then
  handed to the process: ``initialize`` and other control requests are answered, ``interrupt``
  aborts the running turn, ``control_response`` frames wake a pending ``ask_permission``/``elicit``/
  ``hook_callback``, and user messages are queued.
* The turn loop takes one queued user message at a time and runs the *responder* (the test's
  script) with a :class:`FakeTurn` handle. Messages that arrive while a turn runs stay queued; a
  ``tool_result`` (the point where the real CLI goes back to the model) FOLDS every queued message
  into the running turn (echo + listed in this turn's ``user_message_uuids``). Messages still
  queued at the result become the next turn (QUEUED). This is what the real CLI does
  (``sdk-facts.md``, "Streaming input and pushes").
* ``read_messages()`` is the CLI's stdout, read through the SDK's own line framer and line parser
  (``_LineFramer`` / ``_parse_stdout_line``) with the same buffer guard as the real transport, so
  oversize, malformed, blank, noise and CRLF lines behave exactly as with the real process:

  - a line longer than ``options.max_buffer_size`` (default 1 MiB) raises ``CLIJSONDecodeError``
    "JSON message exceeded maximum buffer size of N bytes" (also for a partial line that grew past
    the cap before its newline arrived);
  - a COMPLETE line that starts with ``{`` but is not JSON raises ``CLIJSONDecodeError`` (the SDK
    treats it as corruption, never drops it);
  - a complete line that does not start with ``{`` (``[SandboxDebug] ...``) and blank lines are
    skipped; the ``\\r`` of CRLF is stripped;
  - a PARTIAL line still pending when stdout closes is dropped silently (debug log only) if it
    does not parse, and yielded if it does;
  - when stdout closes and the exit code is not 0, reading raises
    ``ProcessError("Command failed with exit code N", exit_code=N, stderr="Check stderr output for
    details")`` - the real transport's exact error; the stderr lines go to ``options.stderr``.

The process runs as a trio *system* task started by ``connect()`` (the SDK's own tasks are system
tasks too, so no nursery of the test is needed); ``close()`` cancels it and bounds its wait.
"""

from __future__ import annotations

import collections
import datetime
import json
import traceback
import uuid as uuid_module
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Iterable,
    Mapping,
    Sequence,
)
from typing import Any, NoReturn, TypeAlias

import attrs
import trio
from claude_agent_sdk import ClaudeAgentOptions
from claude_agent_sdk._errors import CLIConnectionError, CLIJSONDecodeError, ProcessError
from claude_agent_sdk._internal.transport import Transport
from claude_agent_sdk._internal.transport.subprocess_cli import (
    _DEFAULT_MAX_BUFFER_SIZE,
    _LineFramer,
    _parse_stdout_line,
)

from claude_trio.protocol.errors import ClaudeTrioError, InvalidParamsError, LocalProtocolError

__all__ = [
    "CLAUDE_CODE_VERSION",
    "DEFAULT_MODEL",
    "FakeCLI",
    "FakeTransport",
    "FakeTurn",
    "PendingRequest",
    "RequestCancelledError",
    "Responder",
    "SDKControlError",
    "ScriptError",
    "UserInput",
    "prompt_stream",
    "user_message",
]

#: The CLI version the fake impersonates (the one bundled with claude-agent-sdk 0.2.189).
CLAUDE_CODE_VERSION = "2.1.332"
DEFAULT_MODEL = "claude-sonnet-4-5"
#: Usage of one scripted API call when the script does not give one.
DEFAULT_MESSAGE_USAGE: Mapping[str, int] = {
    "input_tokens": 10,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 0,
    "output_tokens": 5,
}
DEFAULT_MESSAGE_COST_USD = 0.001
#: How long ``close()`` waits for the fake process to finish after cancelling it. Cancellation
#: is immediate under trio; the bound only exists because the SDK calls ``close()`` shielded.
CLOSE_GRACE_SECONDS = 5.0
#: Exit code the fake reports when ``close()`` kills a busy process (anyio reports -SIGTERM).
SIGTERM_EXIT_CODE = -15

_EPOCH = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)

Responder: TypeAlias = Callable[["FakeTurn"], Awaitable[None]]
BackgroundJob: TypeAlias = Callable[[], Awaitable[None]]

_TOOLS = [
    "Task", "AskUserQuestion", "Bash", "Edit", "Glob", "Grep", "Read",
    "TaskCreate", "TaskGet", "TaskList", "TaskUpdate", "WebFetch", "WebSearch", "Write",
]  # fmt: skip


class ScriptError(ClaudeTrioError):
    """A responder or background job of a ``FakeCLI`` raised. The fake process exited with 1."""


class SDKControlError(ClaudeTrioError):
    """The SDK answered a control request of the fake CLI with ``subtype: "error"``."""


class RequestCancelledError(ClaudeTrioError):
    """The fake CLI withdrew its own control request (``control_cancel_request``)."""


@attrs.frozen(kw_only=True)
class UserInput:
    """One user message the SDK wrote to the fake CLI's stdin."""

    uuid: str | None
    content: str | list[Any]
    raw: Mapping[str, Any]

    @property
    def text(self) -> str:
        """The message text (text blocks joined when the content is a list)."""
        if isinstance(self.content, str):
            return self.content
        return "".join(b.get("text", "") for b in self.content if isinstance(b, dict))


@attrs.frozen(kw_only=True)
class _Wake:
    """A follow-up turn with no user message (a background task finished)."""

    responder: Responder


def user_message(
    text: str, *, uuid: str | None = None, session_id: str = "default"
) -> dict[str, Any]:
    """Build the user-message dict the actors send (with our own ``uuid`` for matching)."""
    return {
        "type": "user",
        "message": {"role": "user", "content": text},
        "uuid": uuid if uuid is not None else str(uuid_module.uuid4()),
        "parent_tool_use_id": None,
        "session_id": session_id,
    }


class _MessageStream:
    """An async iterable over fixed dicts, for ``ClaudeSDKClient.query(prompt=...)``."""

    def __init__(self, messages: Sequence[dict[str, Any]]) -> None:
        self._messages = list(messages)

    def __aiter__(self) -> _MessageStream:
        return self

    async def __anext__(self) -> dict[str, Any]:
        await trio.lowlevel.checkpoint()
        if not self._messages:
            raise StopAsyncIteration
        return self._messages.pop(0)


def prompt_stream(*messages: dict[str, Any]) -> _MessageStream:
    """Wrap message dicts so ``client.query(prompt_stream(user_message("hi", uuid=u)))`` works."""
    return _MessageStream(messages)


def _add_usage(total: dict[str, int], usage: Mapping[str, int]) -> None:
    for key in DEFAULT_MESSAGE_USAGE:
        total[key] = total.get(key, 0) + int(usage.get(key, 0))


class FakeCLI:
    """A scripted fake CLI: configuration shared by every process it starts, and the factory.

    ``responder`` scripts each turn: an async function given a :class:`FakeTurn`, or a sequence
    of them (turn *n* uses the *n*-th; a turn beyond the end is a :class:`ScriptError`). The
    default answers every turn with the text ``"ok"``.

    Use ``fake.transport_for(options)`` (or ``fake(options)``, so the object itself is a
    ``transport_factory``) to get a new fake process for ``ClaudeSDKClient(options,
    transport=...)``. The SDK applies no CLI flags to a custom transport, so the fake reads what
    it needs from the options: ``model``, ``permission_mode``, ``cwd``, ``max_buffer_size``,
    ``stderr`` and ``extra_args["replay-user-messages"]`` (echo of user messages; override with
    ``replay_user_messages``).

    Fault switches: ``unanswered`` lists control-request subtypes the fake never answers (e.g.
    ``{"initialize"}`` or ``{"interrupt"}``); ``line_ending="\\r\\n"`` writes every frame with CRLF.
    """

    def __init__(
        self,
        responder: Responder | Sequence[Responder] | None = None,
        *,
        session_id: str | None = None,
        model: str | None = None,
        unanswered: Collection[str] = (),
        replay_user_messages: bool | None = None,
        line_ending: str = "\n",
        extra_initialize_response: Mapping[str, Any] | None = None,
    ) -> None:
        if line_ending not in ("\n", "\r\n"):
            raise InvalidParamsError("line_ending", line_ending, 'use "\\n" or "\\r\\n"')
        self.responder = responder
        self.session_id = session_id
        self.model = model
        self.unanswered = frozenset(unanswered)
        self.replay_user_messages = replay_user_messages
        self.line_ending = line_ending
        self.extra_initialize_response = dict(extra_initialize_response or {})
        #: Every process this fake started, oldest first.
        self.transports: list[FakeTransport] = []

    def transport_for(self, options: ClaudeAgentOptions | None = None) -> FakeTransport:
        """A new fake process that will be driven with ``options`` (recorded as given)."""
        transport = FakeTransport(self, options or ClaudeAgentOptions(), len(self.transports) + 1)
        self.transports.append(transport)
        return transport

    __call__ = transport_for

    @property
    def transport(self) -> FakeTransport:
        """The most recent process (most tests use exactly one)."""
        if not self.transports:
            raise LocalProtocolError("FakeCLI has no transport yet: call fake.transport_for()")
        return self.transports[-1]

    @property
    def script_errors(self) -> list[BaseException]:
        """Exceptions raised by scripts in any process (each made its process exit with 1)."""
        return [e for t in self.transports for e in t.script_errors]

    def responder_for_turn(self, number: int) -> Responder:
        responder = self.responder
        if responder is None:
            return _say_ok
        if isinstance(responder, Sequence):
            if number > len(responder):
                raise ScriptError(
                    f"turn {number} started but the FakeCLI script has only "
                    f"{len(responder)} responder(s)"
                )
            return responder[number - 1]
        return responder


async def _say_ok(turn: FakeTurn) -> None:
    await turn.text("ok")


class PendingRequest:
    """A control request the fake CLI sent to the SDK (``can_use_tool``, ``elicitation``, ...)."""

    def __init__(self, process: FakeTransport, request_id: str, request: dict[str, Any]) -> None:
        self._process = process
        self.request_id = request_id
        self.request = request
        self.response: dict[str, Any] | None = None
        self.cancelled = False
        self._done = trio.Event()

    @property
    def answered(self) -> bool:
        return self.response is not None

    def _resolve(self, response: dict[str, Any]) -> None:
        self.response = response
        self._done.set()

    async def reply(self) -> dict[str, Any]:
        """Wait for the SDK's answer; return its ``response`` payload.

        Raises :class:`SDKControlError` if the SDK answered ``error``, and
        :class:`RequestCancelledError` if the request was withdrawn first.
        """
        await self._done.wait()
        if self.response is None:
            raise RequestCancelledError(f"control request {self.request_id} was cancelled")
        if self.response.get("subtype") == "error":
            raise SDKControlError(str(self.response.get("error")))
        payload = self.response.get("response", {})
        return payload if isinstance(payload, dict) else {}

    async def cancel(self) -> None:
        """Withdraw the request: send ``control_cancel_request`` (as the CLI does on abort)."""
        await trio.lowlevel.checkpoint()
        if self.cancelled or self.answered:
            return
        self.cancelled = True
        self._process._outgoing.pop(self.request_id, None)
        self._done.set()
        await self._process._emit({"type": "control_cancel_request", "request_id": self.request_id})


class FakeTransport(Transport):
    """One fake ``claude`` process. Made by :meth:`FakeCLI.transport_for`.

    Recording (read these in asserts): ``options``, ``written`` (every frame the SDK wrote, parsed),
    ``written_lines`` (raw), ``user_messages``, ``control_requests`` (SDK -> CLI, e.g. initialize,
    interrupt), ``control_responses`` (SDK -> CLI answers), ``initialize_request``, ``emitted``
    (every stdout line the fake produced), ``stderr_lines``, ``input_ended``, ``process_alive``,
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
        self.emitted: list[str] = []
        self.stderr_lines: list[str] = []
        self.results: list[dict[str, Any]] = []
        self.script_errors: list[BaseException] = []
        self.initialize_request: dict[str, Any] | None = None
        self.input_ended = False
        self.connected = False
        self.closed = False
        self.exit_code: int | None = None
        self.total_cost_usd = 0.0
        self.model_usage: dict[str, dict[str, Any]] = {}
        # Process state.
        self._ids = 0
        self._pending: collections.deque[UserInput | _Wake] = collections.deque()
        self._changed = trio.Event()
        self._current: FakeTurn | None = None
        self._turns = 0
        self._background = 0
        self._outgoing: dict[str, PendingRequest] = {}
        self._last_result_is_error = False
        self._stdin_eof = False
        # stdout: buffer 0, so a frame is "written" when the SDK's reader took it (a real pipe
        # would block the CLI the same way once full).
        self._stdout_send, self._stdout_recv = trio.open_memory_channel[str](0)
        # stdin: unbounded on purpose: the SDK writes without waiting for the CLI to read, and a
        # bounded buffer could deadlock the SDK's writer against the fake's own replies.
        self._stdin_send, self._stdin_recv = trio.open_memory_channel[dict[str, Any] | None](
            float("inf")
        )
        self._scope = trio.CancelScope()
        self._done = trio.Event()
        self._nursery: trio.Nursery | None = None

    # -- what tests read ------------------------------------------------------------------------

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
            self._stdin_send.send_nowait(None)

    def read_messages(self) -> AsyncIterator[dict[str, Any]]:
        if not self.connected:
            raise CLIConnectionError("Not connected")
        return _StdoutReader(self)

    async def close(self) -> None:
        await trio.lowlevel.checkpoint()
        self.closed = True
        if self.process_alive:
            busy = self._current is not None or self._background > 0
            self._terminate(SIGTERM_EXIT_CODE if busy else 0, ())
        if self.connected:
            with trio.move_on_after(CLOSE_GRACE_SECONDS):
                await self._done.wait()
        self._stdout_recv.close()

    # -- fault injection from the test side -----------------------------------------------------

    def kill(self, exit_code: int = -9, stderr: Iterable[str] = ()) -> None:
        """The process dies now (SIGKILL by default): stdout closes, reads raise ProcessError."""
        if not self.process_alive:
            raise LocalProtocolError(f"fake CLI process {self.index} is not running")
        self._terminate(exit_code, stderr)

    # -- the process ----------------------------------------------------------------------------

    def _next_id(self) -> str:
        self._ids += 1
        return str(uuid_module.UUID(int=(self.index << 64) + self._ids))

    def _ping(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def _emit_line(self, text: str) -> None:
        await self._stdout_send.send(text)
        self.emitted.append(text.rstrip("\r\n"))

    async def _emit(self, frame: Mapping[str, Any]) -> None:
        line = json.dumps(frame, ensure_ascii=False, separators=(",", ":"))
        await self._emit_line(line + self.cli.line_ending)

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
        self._stdout_send.close()

    def _script_failed(self, exc: BaseException) -> None:
        self.script_errors.append(exc)
        lines = traceback.format_exception(exc)
        self._terminate(1, [f"fake CLI script failed: {exc!r}", *"".join(lines).splitlines()])

    async def _process_main(self) -> None:
        await trio.lowlevel.checkpoint()
        try:
            with self._scope:
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    nursery.start_soon(self._stdin_loop)
                    nursery.start_soon(self._turn_loop)
        except Exception as exc:  # a bug in a script or in the fake: the process "crashes"
            self._script_failed(exc)
        finally:
            if self.exit_code is None:
                self._terminate(0, ())
            self._done.set()

    async def _stdin_loop(self) -> None:
        async for frame in self._stdin_recv:
            if frame is None:  # EOF on stdin
                self._stdin_eof = True
                self._ping()
                return
            match frame.get("type"):
                case "user":
                    message = frame.get("message") or {}
                    content = message.get("content", "")
                    message_uuid = frame.get("uuid")
                    self._pending.append(UserInput(uuid=message_uuid, content=content, raw=frame))
                    self._ping()
                case "control_request":
                    await self._on_control_request(frame)
                case "control_response":
                    response = frame.get("response") or {}
                    pending = self._outgoing.pop(str(response.get("request_id")), None)
                    if pending is not None:
                        pending._resolve(response)
                case _:
                    pass  # the real CLI ignores frames it does not know; they stay recorded

    async def _on_control_request(self, frame: dict[str, Any]) -> None:
        await trio.lowlevel.checkpoint()
        request = frame.get("request") or {}
        subtype = request.get("subtype")
        if subtype == "initialize":
            self.initialize_request = request
        if subtype in self.cli.unanswered:
            return
        payload: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        match subtype:
            case "initialize":
                payload = self._initialize_response()
                extra = {"pending_permission_requests": [], "pending_user_dialog_requests": []}
            case "interrupt":
                still_queued = [p.uuid for p in self._pending if isinstance(p, UserInput)]
                payload = {"still_queued": still_queued}
                turn = self._current
                if turn is not None and not turn.finished:
                    turn._interrupt()
            case "mcp_status":
                payload = {"mcpServers": []}
            case _:
                payload = {}
        response = {"subtype": "success", "request_id": frame.get("request_id")}
        await self._emit(
            {"type": "control_response", "response": {**response, "response": payload, **extra}}
        )

    def _initialize_response(self) -> dict[str, Any]:
        return {
            "commands": [
                {"name": "compact", "description": "Clear conversation history but keep a "
                 "summary in context", "argumentHint": "<optional custom summarization "
                 "instructions>"},
                {"name": "review", "description": "Review a pull request", "argumentHint": ""},
            ],
            "agents": [
                {"name": "general-purpose", "description": "General-purpose agent"},
                {"name": "Explore", "description": "Fast read-only search agent",
                 "model": "inherit"},
            ],
            "output_style": "default",
            "available_output_styles": ["default", "Explanatory", "Learning"],
            "models": [
                {"value": "default", "resolvedModel": self.model, "displayName": "Default "
                 "(recommended)", "description": "Use the default model",
                 "supportsEffort": True, "supportsAdaptiveThinking": True},
            ],
            "account": {"tokenSource": "none", "apiKeySource": "ANTHROPIC_API_KEY",
                        "apiProvider": "firstParty"},
            "pid": 40000 + self.index,
            "claude_code_version": CLAUDE_CODE_VERSION,
            "current_permission_mode": self.options.permission_mode or "default",
            "hook_on_failure_supported": True,
            "fast_mode_state": "off",
            "session_state": "idle",
            "capabilities": [],
            **self.cli.extra_initialize_response,
        }  # fmt: skip

    async def _turn_loop(self) -> None:
        while True:
            await trio.lowlevel.checkpoint()
            while not self._pending:
                if self._stdin_eof and self._background == 0:
                    # stdin EOF and nothing left to do: the CLI exits, with 1 after an error
                    # result (as the real one does, for shell scripts).
                    self._terminate(1 if self._last_result_is_error else 0, ())
                    return
                await self._changed.wait()
            item = self._pending.popleft()
            self._turns += 1
            match item:
                case UserInput():
                    try:
                        responder = self.cli.responder_for_turn(self._turns)
                    except ScriptError as exc:
                        self._script_failed(exc)
                        return
                    messages = [item]
                case _Wake(responder=responder):
                    messages = []
            turn = FakeTurn(self, self._turns, messages)
            self._current = turn
            try:
                await turn._run(responder)
            finally:
                self._current = None

    def _spawn_background(self, job: BackgroundJob) -> None:
        assert self._nursery is not None
        self._background += 1

        async def run() -> None:
            await trio.lowlevel.checkpoint()
            try:
                await job()
            except Exception as exc:
                self._script_failed(exc)
            finally:
                self._background -= 1
                self._ping()

        self._nursery.start_soon(run)

    def _now_iso(self) -> str:
        # A timestamp on the trio clock, so frames are reproducible under MockClock.
        stamp = _EPOCH + datetime.timedelta(seconds=trio.current_time())
        return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")



class _StdoutReader:
    """``SubprocessCLITransport._read_messages_impl``, step for step, over the fake's stdout.

    An async iterator class rather than an async generator (house rule: no public async
    generators; the SDK cancels its read task at any await, which a class survives trivially).
    Lines are parsed lazily, one per ``__anext__``, so an error on a line surfaces only after
    every earlier line was delivered, as with the real generator.
    """

    def __init__(self, process: FakeTransport) -> None:
        self._process = process
        self._framer = _LineFramer()
        # Complete lines to parse, or an int: the pending length to check after a chunk.
        self._todo: collections.deque[str | int] = collections.deque()
        self._finished = False

    def __aiter__(self) -> _StdoutReader:
        return self

    def _guard(self, length: int) -> None:
        limit = self._process.max_buffer_size
        if length > limit:
            raise CLIJSONDecodeError(
                f"JSON message exceeded maximum buffer size of {limit} bytes",
                ValueError(f"Buffer size {length} exceeds limit {limit}"),
            )

    async def __anext__(self) -> dict[str, Any]:
        await trio.lowlevel.checkpoint()
        while True:
            while self._todo:
                item = self._todo.popleft()
                if isinstance(item, int):
                    self._guard(item)
                    continue
                self._guard(len(item))
                data = _parse_stdout_line(item)
                if data is not None:
                    return data
            if self._finished:
                self._raise_for_exit_code()
                raise StopAsyncIteration
            await self._receive()

    async def _receive(self) -> None:
        await trio.lowlevel.checkpoint()
        try:
            chunk = await self._process._stdout_recv.receive()
        except trio.ClosedResourceError:  # the transport was closed under the reader
            self._finished = True
            return
        except trio.EndOfChannel:
            await self._end_of_stdout()
            return
        self._todo.extend(self._framer.push(chunk))
        self._todo.append(self._framer.pending_len)

    async def _end_of_stdout(self) -> None:
        self._finished = True
        # A residual tail: yielded if it parses, dropped if it was cut off mid-write.
        tail = self._framer.flush()
        try:
            data = _parse_stdout_line(tail)
        except CLIJSONDecodeError:
            data = None
        if data is not None:
            self._todo.append(json.dumps(data))
        await self._process._done.wait()

    def _raise_for_exit_code(self) -> None:
        code = self._process.exit_code
        if code:
            raise ProcessError(
                f"Command failed with exit code {code}",
                exit_code=code,
                stderr="Check stderr output for details",
            )


class FakeTurn:
    """What a responder scripts one turn with. Every method emits real CLI frames.

    Content: :meth:`text`, :meth:`thinking`, :meth:`tool_use`, :meth:`tool_result` (the fold
    point for pushes), :meth:`begin_message`/:meth:`end_message` (API-call boundaries, opened and
    closed automatically when not called). User input: :meth:`ask_permission`, :meth:`elicit`,
    :meth:`hook_callback` (and ``send_*`` variants returning a :class:`PendingRequest`). System
    frames: :meth:`task_started`, :meth:`task_progress`, :meth:`task_notification`,
    :meth:`task_updated`, :meth:`compact_boundary`, :meth:`api_retry`, :meth:`rate_limit`,
    :meth:`tool_use_summary`, :meth:`system`, :meth:`frame`, :meth:`raw`. End: :meth:`result`,
    :meth:`api_error`, :meth:`exit`. Time: :meth:`sleep`. Later work: :meth:`background`,
    :meth:`wake`.
    """

    def __init__(self, process: FakeTransport, number: int, messages: list[UserInput]) -> None:
        self.process = process
        self.number = number
        #: The user messages this turn consumed (the first, then any folded ones).
        self.messages = messages
        self.session_id = process.session_id
        self.finished = False
        self.interrupted = False
        self._scope: trio.CancelScope | None = None
        self._started_at = trio.current_time()
        self._message_id: str | None = None
        self._message_usage: dict[str, int] = {}
        self._block_index = 0
        self._api_calls = 0
        self._usage: dict[str, int] = {}
        self._cost = 0.0
        self._texts: list[str] = []
        self._open_tools: set[str] = set()
        self._requests: list[PendingRequest] = []

    @property
    def prompt(self) -> str:
        """The text of the message that started this turn ('' for a follow-up turn)."""
        return self.messages[0].text if self.messages else ""

    @property
    def user_message_uuids(self) -> list[str]:
        return [m.uuid for m in self.messages if m.uuid is not None]

    # -- lifecycle ------------------------------------------------------------------------------

    async def _run(self, responder: Responder) -> None:
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
        for request in self._requests:
            await request.cancel()
        if self._message_id is not None:
            # The aborted API call still counts, but the CLI streams no message_stop for it.
            _add_usage(self._usage, self._message_usage)
            self._message_id = None
        aborted_tools = bool(self._open_tools)
        await self.frame(
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [{"type": "text", "text": "[Request interrupted by user]"
                                 + (" for tool use" if aborted_tools else "")}],
                },
                "parent_tool_use_id": None,
            }
        )  # fmt: skip
        await self.result(
            subtype="error_during_execution",
            terminal_reason="aborted_tools" if aborted_tools else "aborted_streaming",
            stop_reason=None,
        )

    def _frame(self, body: Mapping[str, Any]) -> dict[str, Any]:
        frame = dict(body)
        frame.setdefault("session_id", self.session_id)
        frame.setdefault("uuid", self.process._next_id())
        return frame

    async def frame(self, body: Mapping[str, Any]) -> None:
        """Emit any frame (``session_id`` and ``uuid`` are filled in when missing)."""
        await self.process._emit(self._frame(body))

    async def raw(self, text: str) -> None:
        """Write raw text to stdout, no newline added (partial lines, noise, oversize lines)."""
        await self.process._emit_line(text)

    async def sleep(self, seconds: float) -> None:
        """Wait on the trio clock (jumps instantly under ``MockClock(autojump_threshold=0)``)."""
        await trio.sleep(seconds)

    async def _emit_init(self) -> None:
        options = self.process.options
        await self.frame(
            {
                "type": "system",
                "subtype": "init",
                "cwd": str(options.cwd) if options.cwd else "/fake/cwd",
                "session_id": self.session_id,
                "tools": list(_TOOLS),
                "mcp_servers": [],
                "model": self.process.model,
                "permissionMode": options.permission_mode or "default",
                "slash_commands": ["compact", "review"],
                "apiKeySource": "ANTHROPIC_API_KEY",
                "claude_code_version": CLAUDE_CODE_VERSION,
                "output_style": "default",
                "agents": ["general-purpose", "Explore"],
                "skills": [],
                "plugins": [],
                "fast_mode_state": "off",
                "user_message_uuids": self.user_message_uuids,
            }
        )

    async def _echo(self, message: UserInput) -> None:
        await trio.lowlevel.checkpoint()
        if not self.process.replay_user_messages:
            return
        await self.frame(
            {
                "type": "user",
                "message": {"role": "user", "content": message.content},
                "parent_tool_use_id": None,
                "uuid": message.uuid or self.process._next_id(),
                "timestamp": self.process._now_iso(),
                "isReplay": True,
            }
        )

    async def fold_pending(self) -> list[UserInput]:
        """Consume every queued user message into this turn (echo + listed in its result)."""
        await trio.lowlevel.checkpoint()
        folded = []
        pending = self.process._pending
        while pending and isinstance(pending[0], UserInput):
            message = pending.popleft()
            assert isinstance(message, UserInput)
            self.messages.append(message)
            folded.append(message)
            await self._echo(message)
        return folded

    # -- API calls and content blocks -----------------------------------------------------------

    async def begin_message(
        self,
        *,
        usage: Mapping[str, int] | None = None,
        cost_usd: float = DEFAULT_MESSAGE_COST_USD,
    ) -> None:
        """Start one API call (``message_start``); closes an open one first."""
        if self._message_id is not None:
            await self.end_message(stop_reason="tool_use" if self._open_tools else "end_turn")
        self._api_calls += 1
        self._message_id = f"msg_fake_{self.process._next_id()[-12:]}"
        self._message_usage = dict(DEFAULT_MESSAGE_USAGE)
        self._message_usage.update(usage or {})
        self._cost += cost_usd
        self._block_index = 0
        await self._stream(
            {
                "type": "message_start",
                "message": {
                    "model": self.process.model,
                    "id": self._message_id,
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": self._snapshot_usage(),
                },
            }
        )

    def _snapshot_usage(self) -> dict[str, int]:
        # message_start carries the input side and a token or so of output; the final usage
        # comes in message_delta (the SDK's per-block AssistantMessage keeps this snapshot).
        output = min(1, self._message_usage["output_tokens"])
        return {**self._message_usage, "output_tokens": output}

    async def end_message(self, *, stop_reason: str = "end_turn") -> None:
        """Finish the open API call (``message_delta`` with the final usage, ``message_stop``)."""
        await trio.lowlevel.checkpoint()
        if self._message_id is None:
            return
        _add_usage(self._usage, self._message_usage)
        await self._stream(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": dict(self._message_usage),
            }
        )
        await self._stream({"type": "message_stop"})
        self._message_id = None

    async def _stream(self, event: Mapping[str, Any], parent: str | None = None) -> None:
        await self.frame(
            {"type": "stream_event", "event": dict(event), "parent_tool_use_id": parent}
        )

    async def _ensure_message(self) -> None:
        await trio.lowlevel.checkpoint()
        if self._message_id is None:
            await self.begin_message()

    async def _assistant(self, block: Mapping[str, Any], parent: str | None) -> None:
        message_id = self._message_id or f"msg_fake_{self.process._next_id()[-12:]}"
        usage = self._snapshot_usage() if self._message_id else dict(DEFAULT_MESSAGE_USAGE)
        await self.frame(
            {
                "type": "assistant",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": self.process.model,
                    "content": [dict(block)],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": usage,
                },
                "parent_tool_use_id": parent,
            }
        )

    async def _block(
        self,
        start: Mapping[str, Any],
        deltas: Iterable[Mapping[str, Any]],
        final: Mapping[str, Any],
        *,
        delay: float,
        parent_tool_use_id: str | None,
    ) -> None:
        if parent_tool_use_id is not None:
            # A subagent's stream events are never forwarded; only its complete messages are.
            await self._assistant(final, parent_tool_use_id)
            return
        await self._ensure_message()
        index = self._block_index
        self._block_index += 1
        await self._stream({"type": "content_block_start", "index": index, "content_block": start})
        for delta in deltas:
            if delay:
                await trio.sleep(delay)
            await self._stream({"type": "content_block_delta", "index": index, "delta": delta})
        await self._stream({"type": "content_block_stop", "index": index})
        await self._assistant(final, None)

    @staticmethod
    def _chunks(text: str, chunk: int | None) -> list[str]:
        if chunk is not None and chunk < 1:
            raise InvalidParamsError("chunk", chunk, "use a positive number of characters")
        if not chunk or not text:
            return [text]
        return [text[i : i + chunk] for i in range(0, len(text), chunk)]

    async def text(
        self,
        text: str,
        *,
        chunk: int | None = None,
        delay: float = 0.0,
        parent_tool_use_id: str | None = None,
    ) -> None:
        """A text block: ``text_delta`` stream events of ``chunk`` characters, ``delay`` seconds
        before each, then one ``assistant`` frame with the whole block."""
        self._texts.append(text)
        await self._block(
            {"type": "text", "text": ""},
            [{"type": "text_delta", "text": c} for c in self._chunks(text, chunk)],
            {"type": "text", "text": text},
            delay=delay,
            parent_tool_use_id=parent_tool_use_id,
        )

    async def thinking(
        self,
        thinking: str,
        *,
        signature: str = "fake-signature",
        chunk: int | None = None,
        delay: float = 0.0,
        parent_tool_use_id: str | None = None,
    ) -> None:
        """A thinking block: ``thinking_delta`` events, one ``signature_delta``, the block."""
        deltas: list[Mapping[str, Any]] = [
            {"type": "thinking_delta", "thinking": c} for c in self._chunks(thinking, chunk)
        ]
        deltas.append({"type": "signature_delta", "signature": signature})
        await self._block(
            {"type": "thinking", "thinking": "", "signature": ""},
            deltas,
            {"type": "thinking", "thinking": thinking, "signature": signature},
            delay=delay,
            parent_tool_use_id=parent_tool_use_id,
        )

    async def tool_use(
        self,
        name: str,
        input: Mapping[str, Any],
        *,
        id: str | None = None,
        parent_tool_use_id: str | None = None,
        end_message: bool = True,
    ) -> str:
        """A tool_use block (``input_json_delta`` streamed); returns its id. The API call then
        ends with stop_reason ``tool_use`` (pass ``end_message=False`` for parallel tool uses)."""
        tool_use_id = id or f"toolu_fake_{self.process._next_id()[-12:]}"
        if parent_tool_use_id is None:
            self._open_tools.add(tool_use_id)
        await self._block(
            {"type": "tool_use", "id": tool_use_id, "name": name, "input": {}},
            [{"type": "input_json_delta", "partial_json": json.dumps(dict(input))}],
            {"type": "tool_use", "id": tool_use_id, "name": name, "input": dict(input)},
            delay=0.0,
            parent_tool_use_id=parent_tool_use_id,
        )
        if end_message and parent_tool_use_id is None:
            await self.end_message(stop_reason="tool_use")
        return tool_use_id

    async def tool_result(
        self,
        tool_use_id: str,
        content: str | list[Any],
        *,
        is_error: bool = False,
        tool_use_result: Any = None,
        parent_tool_use_id: str | None = None,
        fold: bool = True,
    ) -> None:
        """The tool's result as a ``user`` frame. Closes the open API call (stop_reason
        ``tool_use``) and, with ``fold=True``, folds queued pushes into this turn, as the real
        CLI does when it goes back to the model."""
        if parent_tool_use_id is None and self._message_id is not None:
            await self.end_message(stop_reason="tool_use")
        self._open_tools.discard(tool_use_id)
        frame: dict[str, Any] = {
            "type": "user",
            "message": {
                "role": "user",
                "content": [
                    {
                        "tool_use_id": tool_use_id,
                        "type": "tool_result",
                        "content": content,
                        "is_error": is_error,
                    }
                ],
            },
            "parent_tool_use_id": parent_tool_use_id,
            "timestamp": self.process._now_iso(),
        }
        if tool_use_result is not None:
            frame["tool_use_result"] = tool_use_result
        await self.frame(frame)
        if fold and parent_tool_use_id is None:
            await self.fold_pending()

    # -- control requests to the SDK -------------------------------------------------------------

    async def send_request(self, request: Mapping[str, Any]) -> PendingRequest:
        """Send any control request to the SDK; returns the pending request to await/cancel."""
        request_id = self.process._next_id()
        pending = PendingRequest(self.process, request_id, dict(request))
        self.process._outgoing[request_id] = pending
        self._requests.append(pending)
        await self.process._emit(
            {"type": "control_request", "request_id": request_id, "request": dict(request)}
        )
        return pending

    async def send_permission_request(
        self,
        tool_name: str,
        input: Mapping[str, Any],
        *,
        tool_use_id: str | None = None,
        **extra: Any,
    ) -> PendingRequest:
        return await self.send_request(
            {
                "subtype": "can_use_tool",
                "tool_name": tool_name,
                "input": dict(input),
                "permission_suggestions": [],
                "tool_use_id": tool_use_id or f"toolu_fake_{self.process._next_id()[-12:]}",
                **extra,
            }
        )

    async def ask_permission(
        self,
        tool_name: str,
        input: Mapping[str, Any],
        *,
        tool_use_id: str | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """A ``can_use_tool`` request; returns the SDK's answer, e.g. ``{"behavior": "allow",
        "updatedInput": {...}}``. Raises :class:`SDKControlError` if the SDK answered an error
        (e.g. no ``can_use_tool`` callback is set)."""
        pending = await self.send_permission_request(
            tool_name, input, tool_use_id=tool_use_id, **extra
        )
        return await pending.reply()

    async def send_elicitation(
        self, server: str, message: str, schema: Mapping[str, Any], *, mode: str = "form"
    ) -> PendingRequest:
        return await self.send_request(
            {
                "subtype": "elicitation",
                "mcp_server_name": server,
                "message": message,
                "mode": mode,
                "requested_schema": dict(schema),
            }
        )

    async def elicit(
        self, server: str, message: str, schema: Mapping[str, Any], *, mode: str = "form"
    ) -> dict[str, Any]:
        """An MCP ``elicitation`` request; returns ``{"action": ..., "content": ...}``. The bare
        SDK answers it with an error ("Unsupported control request subtype"), raised here as
        :class:`SDKControlError`; a transport-level answer is what makes it work."""
        pending = await self.send_elicitation(server, message, schema, mode=mode)
        return await pending.reply()

    async def hook_callback(
        self, callback_id: str, input: Mapping[str, Any], *, tool_use_id: str | None = None
    ) -> dict[str, Any]:
        """A ``hook_callback`` request for an id from ``process.hook_callback_ids``."""
        pending = await self.send_request(
            {
                "subtype": "hook_callback",
                "callback_id": callback_id,
                "input": dict(input),
                "tool_use_id": tool_use_id,
            }
        )
        return await pending.reply()

    # -- system and other frames -----------------------------------------------------------------

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
        model = process.model_usage.setdefault(
            process.model,
            {
                "inputTokens": 0,
                "outputTokens": 0,
                "cacheReadInputTokens": 0,
                "cacheCreationInputTokens": 0,
                "webSearchRequests": 0,
                "costUSD": 0.0,
                "contextWindow": 200000,
                "maxOutputTokens": 64000,
            },
        )
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
        now = trio.current_time()
        frame: dict[str, Any] = {
            "type": "result",
            "subtype": subtype,
            "is_error": is_error,
            "duration_ms": round((now - self._started_at) * 1000),
            "duration_api_ms": round((now - self._started_at) * 1000),
            "num_turns": max(1, self._api_calls),
            "result": text if text is not None else "".join(self._texts),
            "stop_reason": stop_reason,
            "session_id": self.session_id,
            "total_cost_usd": process.total_cost_usd,
            "usage": turn_usage,
            "modelUsage": json.loads(json.dumps(process.model_usage)),
            "permission_denials": [],
            "terminal_reason": reason,
            "user_message_uuids": self.user_message_uuids,
        }
        if self.user_message_uuids:
            frame["user_message_uuid"] = self.user_message_uuids[0]
        if subtype != "success":
            frame["errors"] = list(errors) if errors is not None else [f"fake CLI: {subtype}"]
        elif errors is not None:
            frame["errors"] = list(errors)
        if api_error_status is not None:
            frame["api_error_status"] = api_error_status
        frame = self._frame(frame)
        await process._emit(frame)
        process.results.append(frame)
        process._last_result_is_error = is_error
        self.finished = True

    async def api_error(self, status: int, message: str, *, error: str = "server_error") -> None:
        """An API failure as the CLI reports it: the synthetic assistant error message, then a
        ``success`` result with ``is_error`` and ``api_error_status`` (``terminal_reason``
        ``api_error``)."""
        text = f"API Error: {status} {message}"
        await self.frame(
            {
                "type": "assistant",
                "message": {
                    "id": self.process._next_id(),
                    "type": "message",
                    "role": "assistant",
                    "model": "<synthetic>",
                    "content": [{"type": "text", "text": text}],
                    "stop_reason": "stop_sequence",
                    "stop_sequence": "",
                    "usage": {k: 0 for k in DEFAULT_MESSAGE_USAGE},
                },
                "parent_tool_use_id": None,
                "error": error,
            }
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
        self.process._spawn_background(job)

    def wake(self, responder: Responder) -> None:
        """Queue a follow-up turn with no user message (after queued pushes), scripted by
        ``responder``: what the CLI does when a background task completes."""
        self.process._pending.append(_Wake(responder=responder))
        self.process._ping()
