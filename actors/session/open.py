"""``open_session``: the one place that opens the nursery and wires the actors.

::

    async with open_session(params, on_user_input=handler) as session:
        async for event in session.events:
            ...
        receipt = await session.push("also check the tests")   # Accepted | Rejected
        await session.answer(request_id, answer)                # without a handler
        await session.abort()
        session.usage                                           # Usage, as every host's handle
        session.usage_by_turn                                   # SessionUsage: turns, execution

Nothing started here outlives the ``async with``: on success, error, abort or cancellation of
the caller's scope, the CLI is stopped (interrupted, then killed with what it started if it does
not settle; see ``actors/session/driver.py``) and every task has ended. An exception raised by the
caller's own code in the block comes out as itself, never wrapped in an ``ExceptionGroup``
(``actors/session/boundary.py``).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import importlib.metadata
import os
import time
import uuid as uuid_module
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, Literal, cast

import attrs
import trio
from claude_agent_sdk import ClaudeSDKClient, SessionStore
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import TracerProvider

from claude_trio.actors.extensions.broker import (
    MAX_PENDING_REQUESTS,
    AnswerAccepted,
    AnswerRejected,
    UserInputBroker,
    UserInputHandler,
)
from claude_trio.actors.extensions.hooks import SessionHooks
from claude_trio.actors.extensions.scope import probe_sandbox
from claude_trio.actors.extensions.skills_folder import open_skills_folder
from claude_trio.actors.extensions.tool_runner import CallbackRunner, ToolRunner, run_tool_runner
from claude_trio.actors.session.boundary import raise_unwrapped
from claude_trio.actors.session.controls import LiveControls
from claude_trio.actors.session.core import (
    STDERR_TAIL,
    STOPPED,
    DriverConfig,
    Emitter,
    SessionCore,
    stop_gate,
)
from claude_trio.actors.session.credentials import credentials_refusal
from claude_trio.actors.session.driver import (
    missing_cwd,
    root_refusal,
    run_sdk_driver,
    subprocess_transport,
)
from claude_trio.actors.session.event_stream import EventStream
from claude_trio.actors.session.input_channel import (
    MAX_PENDING_PUSHES,
    CLIWriter,
    Outgoing,
    OutgoingMessage,
    run_input_channel,
)
from claude_trio.actors.session.metrics import (
    SessionMeter,
    close_telemetry,
    observer_of,
    session_telemetry,
    watch_stop,
)
from claude_trio.actors.session.open_checks import (
    check_extensions,
    check_options,
    check_session_store_with_pool,
)
from claude_trio.actors.session.pool import CLIPool, run_leased_driver
from claude_trio.actors.session.recorder import recording
from claude_trio.actors.session.store_resume import open_store_resume
from claude_trio.actors.session.tap import TapTransport
from claude_trio.actors.session.tracing import SessionTracer, check_tracing_options
from claude_trio.actors.session.transcripts import resumed_cost
from claude_trio.protocol.config.images import ImageInput, check_images
from claude_trio.protocol.config.options import build_options, with_changes
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.config.permissions import PermissionMode, check_permission_mode
from claude_trio.protocol.config.ready import (
    adapter_ready,
    config_warnings,
    scope_refusal,
    scope_warning,
)
from claude_trio.protocol.config.versions import version_warnings
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.extensions.approvals import ASKING_MODES
from claude_trio.protocol.extensions.controls import (
    ContextUsage,
    McpServerStatus,
    check_message_uuid,
    context_usage_from,
    mcp_status_from,
    model_for_switch,
)
from claude_trio.protocol.extensions.custom_tools import CustomTool
from claude_trio.protocol.extensions.hooks import Hook
from claude_trio.protocol.extensions.options import with_extensions
from claude_trio.protocol.extensions.user_input import ControlReply
from claude_trio.protocol.session.events import ControlApplied, Error, WarningEvent
from claude_trio.protocol.session.lifecycle import Accepted, ExecutionLifecycle, Rejected
from claude_trio.protocol.session.mapper import Mapper
from claude_trio.protocol.session.outcomes import Outcome
from claude_trio.protocol.session.stop import StopMachine
from claude_trio.protocol.session.transport import TransportFactory
from claude_trio.protocol.session.usage import Usage

CLOSED_EARLY = "the session was closed before the execution ended"
DEFAULT_CONFIG = DriverConfig()
"""The deadlines of a session opened without ``config`` (frozen: one for all of them)."""



@attrs.frozen(kw_only=True)
class SessionUsage:
    """Usage so far: each turn's (interrupted turns included), this execution's total, and the
    session's total."""

    turns: tuple[Usage, ...]
    execution: Usage
    session: Usage


class Session:
    """The handle a caller holds inside ``open_session``. See the module docstring."""

    def __init__(self, core: SessionCore, params: ExecuteParams) -> None:
        self._core = core
        self._params = params
        self._controls = LiveControls(core)

    @property
    def events(self) -> EventStream:
        """The unified events of the execution; the loop ends after its final terminal event."""
        return self._core.stream

    @property
    def ended(self) -> bool:
        """The execution's terminal event is queued (it may not have been read yet)."""
        return self._core.finished

    async def wait_ended(self) -> None:
        await self._core.done.wait()

    def push_nowait(
        self, text: str, *, images: Sequence[ImageInput] = ()
    ) -> Accepted | Rejected:
        """Offer a user message (and ``images``) to the running execution; the outcome is
        decided at once.

        ``Accepted``: it will be delivered to the model in this execution (folded into the
        running turn, or as the next turn). ``Rejected(reason)``: it will not (the execution
        ended, was aborted, the CLI died, streaming input is off, too many pushes waiting).
        Bad input (an empty text, something that is not an image) raises ``InvalidParamsError``.
        """
        if not isinstance(text, str) or not text.strip():
            raise InvalidParamsError("text", text, "a non-empty string")
        pictures = check_images(images)
        core = self._core
        if not self._params.streaming_input:
            return Rejected(reason="streaming input is off for this execution")
        lifecycle = core.lifecycle
        if len(lifecycle.pending) >= MAX_PENDING_PUSHES and lifecycle.end_reason is None:
            return Rejected(
                reason=f"{MAX_PENDING_PUSHES} pushes are already waiting to be delivered"
            )
        uuid = str(uuid_module.uuid4())
        outcome = lifecycle.push(uuid)
        if isinstance(outcome, Accepted):
            core.emitter.emit_many(
                core.mapper.push_accepted(
                    text=text, uuid=uuid, timestamp=time.time(), images=len(pictures)
                )
            )
            core.outbox.send_nowait(OutgoingMessage(uuid=uuid, text=text, images=pictures))
        return outcome

    async def push(self, text: str, *, images: Sequence[ImageInput] = ()) -> Accepted | Rejected:
        """``push_nowait`` as a trio checkpoint (decided atomically, never blocks)."""
        await trio.lowlevel.checkpoint_if_cancelled()
        outcome = self.push_nowait(text, images=images)
        await trio.lowlevel.cancel_shielded_checkpoint()
        return outcome

    async def answer(self, request_id: str, answer: Any) -> AnswerAccepted | AnswerRejected:
        """Answer a ``user_input_request`` (for callers without an ``on_user_input`` handler)."""
        await trio.lowlevel.checkpoint()
        broker = self._core.broker
        if broker is None:
            return AnswerRejected(
                request_id=request_id,
                reason="this session does not intercept user input (pass on_user_input)",
            )
        return broker.answer(request_id, answer)

    async def abort(self) -> None:
        """Abort the execution: stop the CLI, then exactly one ``aborted`` terminal event.

        The CLI is interrupted at once, whatever it is doing (before its first turn started, in
        a tool, while a question waits, while the consumer is behind), and the messages it has
        queued are cancelled with it. Once this returns the CLI starts no new tool: it either
        confirmed the interrupt and finished the interrupted turn (whose usage the ``aborted``
        event carries), or it is being killed with everything it started. Returns within
        ``interrupt_timeout + abort_grace`` (``DriverConfig``) and is not cut short by the
        caller's cancellation. Idempotent; after the end of the execution it does nothing.
        """
        await self._core.stopper.abort()

    @property
    def usage(self) -> Usage:
        """Every turn of the session so far, interrupted turns included (the same type and
        meaning as a :class:`SessionHandle`'s ``usage``)."""
        return self._core.mapper.ledger.session

    @property
    def usage_by_turn(self) -> SessionUsage:
        """The same figures broken down: per turn (interrupted turns included), for this
        execution, and for the session."""
        ledger = self._core.mapper.ledger
        return SessionUsage(turns=ledger.turns, execution=ledger.execution, session=ledger.session)

    # -- live controls (protocol/extensions/controls.py) -------------------------------------------

    @property
    def prompt_uuid(self) -> str | None:
        """The uuid of the execution's prompt as a user message (for :meth:`rewind_files`)."""
        return self._core.prompt_uuid

    async def set_model(self, model: str | None) -> None:
        """Switch the model for the next API calls of this session (an alias of
        ``protocol/config/models.py`` or a full id; ``None``: the CLI's default). Once the CLI
        confirmed it, a ``control_applied`` event says so.

        Raises ``InvalidParamsError`` for an unknown alias, ``ControlRefusedError`` when the
        execution has ended or is being aborted, ``ControlFailedError`` when the CLI refuses or
        does not answer within ``DriverConfig.control_timeout``.
        """
        resolved = model_for_switch(model, custom_server=self._params.custom_server)
        await self._controls.control("set_model", lambda client: client.set_model(resolved))
        self._core.emit(ControlApplied(control="set_model", value=resolved))

    async def set_permission_mode(self, mode: PermissionMode) -> None:
        """Switch the CLI's permission mode (``protocol/config/permissions.py``) for the next tool
        calls; a ``control_applied`` event follows the CLI's confirmation. Raises as
        :meth:`set_model` does, and ``InvalidParamsError`` for a mode that asks before tool
        calls (``default``, ``acceptEdits``) on a session opened without ``on_user_input``:
        no one could answer, and the CLI would deny every call without a word."""
        checked = check_permission_mode("mode", mode)
        if checked in ASKING_MODES and self._core.broker is None:
            raise InvalidParamsError(
                "mode",
                checked,
                f"{checked!r} asks before tool calls: open the session with on_user_input= "
                "to answer them, or choose 'dontAsk' or 'bypassPermissions'",
            )
        await self._controls.control(
            "set_permission_mode", lambda client: client.set_permission_mode(checked)
        )
        self._core.emit(ControlApplied(control="set_permission_mode", value=checked))

    async def context_usage(self) -> ContextUsage:
        """How much of the context window the conversation uses now (the CLI's ``/context``).
        Raises ``ControlRefusedError`` / ``ControlFailedError`` as :meth:`set_model` does."""
        answer = await self._controls.control(
            "context_usage", lambda client: client.get_context_usage()
        )
        return context_usage_from(cast(Mapping[str, Any], answer))

    async def mcp_status(self) -> tuple[McpServerStatus, ...]:
        """The MCP servers of the session as the CLI sees them (connected, failed, ...).
        Raises ``ControlRefusedError`` / ``ControlFailedError`` as :meth:`set_model` does."""
        answer = await self._controls.control("mcp_status", lambda client: client.get_mcp_status())
        return mcp_status_from(cast(Mapping[str, Any], answer))

    async def rewind_files(self, user_message_uuid: str) -> None:
        """Restore the files the CLI's tools changed to how they were before the user message
        ``user_message_uuid`` (:attr:`prompt_uuid`, a push's ``Accepted.uuid``). Needs
        ``ExecuteParams(file_checkpointing=True)``; a ``control_applied`` event follows.
        Raises as :meth:`set_model` does."""
        uuid = check_message_uuid(user_message_uuid)
        if not self._params.file_checkpointing:
            raise InvalidParamsError(
                "rewind_files",
                uuid,
                "a session started with ExecuteParams(file_checkpointing=True): without it "
                "the CLI keeps no copies of the files",
            )
        await self._controls.control("rewind_files", lambda client: client.rewind_files(uuid))
        self._core.emit(ControlApplied(control="rewind_files", value=uuid))


@functools.cache
def _sdk_version() -> str | None:
    """The installed SDK's version, read once per process: reading a distribution's metadata
    parses its METADATA file, which cost more CPU than the rest of a short session's start."""
    try:
        return importlib.metadata.version("claude-agent-sdk")
    except importlib.metadata.PackageNotFoundError:
        return None


def _reply_sender(outbox: trio.MemorySendChannel[Outgoing]) -> Callable[[ControlReply], None]:
    def send(reply: ControlReply) -> None:
        # After the end of the execution the CLI is being stopped: nobody is left to read it.
        with contextlib.suppress(trio.ClosedResourceError):
            outbox.send_nowait(reply)

    return send


def _stderr_collector(
    tail: collections.deque[str], user_callback: Callable[[str], None] | None
) -> Callable[[str], None]:
    def on_stderr(line: str) -> None:
        tail.append(line.rstrip())
        if user_callback is not None:
            user_callback(line)

    return on_stderr


@asynccontextmanager
async def open_session(
    params: ExecuteParams,
    *,
    on_user_input: UserInputHandler | Literal["manual"] | None = None,
    transport_factory: TransportFactory | None = None,
    env: Mapping[str, str] | None = None,
    cli_path: str | None = None,
    stderr: Callable[[str], None] | None = None,
    max_buffer_size: int | None = None,
    config: DriverConfig | None = None,
    pool: CLIPool | None = None,
    passthrough: bool = False,
    custom_tools: Sequence[CustomTool] = (),
    record_to: str | os.PathLike[str] | None = None,
    hooks: Sequence[Hook] = (),
    session_store: SessionStore | None = None,
    tracer_provider: TracerProvider | None = None,
    trace_content: bool | None = None,
    meter_provider: MeterProvider | None = None,
    before_prompt: Callable[[], Awaitable[object]] | None = None,
) -> AsyncIterator[Session]:
    """Start a CLI session running ``params.prompt``; yield its :class:`Session`.

    ``on_user_input``: an async handler answering ``user_input_request`` events, or
    ``"manual"`` to answer with ``session.answer()``, or ``None`` to not intercept
    (AskUserQuestion is then not offered to the model, elicitations are cancelled).
    ``transport_factory``: build the transport from the final options (tests pass a scripted
    CLI); by default the bundled ``claude`` runs as a subprocess.
    ``env``: extra environment for the CLI (over ``custom_env``).
    ``pool``: take a warm CLI from this :class:`~.pool.CLIPool` when one is ready (the pool's
    ``env`` and ``transport_factory`` then apply); otherwise start cold as usual.
    ``passthrough``: also emit ``passthrough`` events for the CLI's frames that have no
    unified meaning (status chatter, unknown frame types); off by default.
    ``custom_tools``: Python tools the model can call (``@custom_tool``), run as trio code in
    this session (``actors/extensions/tool_runner.py``); not with a ``pool``.
    ``hooks``: async functions the CLI calls at its hook events (``@hook``, ``Hook``), run as
    trio code in this session (``actors/extensions/hooks.py``); each call is a ``hook_invoked``
    event. Not with a ``pool``.

    ``params.inline_skills`` are written to a private folder for the session's CLI, which is
    removed when the block is left, whatever way (``actors/extensions/skills_folder.py``).

    ``record_to``: write a cassette of the CLI's traffic to this file
    (``actors/session/recorder.py``; replay it with ``claude_trio.testing.replay``); secrets are
    scrubbed. Not with ``pool``.

    A real CLI with no credential to reach a model (no ``ANTHROPIC_API_KEY`` or other key or
    token variable in this process's environment or ``env``, no ``claude login``, no
    ``apiKeyHelper``: ``protocol/config/credentials.py``) is not started: the execution ends
    at once with one ``error`` event (``code="config"``) saying what to set.

    ``session_store``: the SDK's ``SessionStore`` (e.g. ``RedisSessionStore``): the CLI's
    transcript is mirrored to it, and a resume loads it from there when this machine's config
    folder does not have it (so a conversation can continue on another machine). Not with
    ``pool``.

    ``tracer_provider``: the OpenTelemetry spans' (default: the global one, a no-op without an
    SDK); ``trace_content``: record prompts and outputs in them (default: the conventions' env
    switch). See ``actors/session/tracing.py``. ``meter_provider``: the metrics' (default: the
    global one, a no-op without an SDK); see ``actors/session/metrics.py``.

    ``before_prompt``: awaited once the CLI is up (after ``adapter_ready``), before the prompt
    is written to it: a fleet's governor holds the turn there, so the CLI starts while the
    model request waits (a CLI's start-up is not a request to the API).
    """
    check_tracing_options(tracer_provider, trace_content, meter_provider)
    check_options(
        params,
        on_user_input,
        transport_factory,
        env,
        cli_path,
        stderr,
        max_buffer_size,
        config,
        pool,
        passthrough,
        record_to,
    )
    check_session_store_with_pool(session_store, pool)
    tools, checked_hooks = check_extensions(params, custom_tools, pool, hooks)
    store_config = config or DEFAULT_CONFIG
    tracer, meter, env = session_telemetry(
        params, env, tracer_provider=tracer_provider, meter_provider=meter_provider,
        trace_content=trace_content, handler=callable(on_user_input), pooled=pool is not None,
    )  # fmt: skip
    try:
        async with open_store_resume(
            session_store, params, env, load_timeout=store_config.store_load_timeout
        ) as env, open_skills_folder(
            params.inline_skills
        ) as skills_folder, _open_session(
            params,
            on_user_input=on_user_input,
            transport_factory=transport_factory,
            env=env,
            cli_path=cli_path,
            stderr=stderr,
            max_buffer_size=max_buffer_size,
            config=config,
            pool=pool,
            passthrough=passthrough,
            tools=tools,
            skills_folder=skills_folder,
            record_to=record_to,
            hooks=checked_hooks,
            session_store=session_store,
            tracer=tracer,
            meter=meter,
            before_prompt=before_prompt,
        ) as session:
            yield session
    finally:
        close_telemetry(tracer, meter)


@asynccontextmanager
async def _open_session(
    params: ExecuteParams,
    *,
    on_user_input: UserInputHandler | Literal["manual"] | None,
    transport_factory: TransportFactory | None,
    env: Mapping[str, str] | None,
    cli_path: str | None,
    stderr: Callable[[str], None] | None,
    max_buffer_size: int | None,
    config: DriverConfig | None,
    pool: CLIPool | None,
    passthrough: bool,
    tools: tuple[CustomTool, ...],
    skills_folder: str | None,
    record_to: str | os.PathLike[str] | None,
    hooks: tuple[Hook, ...] = (),
    session_store: SessionStore | None = None,
    tracer: SessionTracer | None = None,
    meter: SessionMeter | None = None,
    before_prompt: Callable[[], Awaitable[object]] | None = None,
) -> AsyncIterator[Session]:
    """``open_session`` once its arguments are checked and the skills folder exists."""
    config = config or DEFAULT_CONFIG
    # Built in dependency order, so nothing needs patching afterwards.
    lifecycle = ExecutionLifecycle()
    stop = StopMachine(lifecycle)
    mapper = Mapper(
        passthrough=passthrough,
        output_schema=params.output_schema,
        stop=stop,
        hook_events=params.include_hook_events,
    )
    mapper.start_execution()
    stream = EventStream(observer=observer_of(tracer, meter))
    emitter = Emitter(mapper=mapper, stream=stream)
    outbox, inbox = trio.open_memory_channel[Outgoing](
        # Never full: at most MAX_PENDING_PUSHES accepted pushes + the prompt wait to be
        # written, and at most one reply per open user-input request.
        MAX_PENDING_PUSHES + 1 + MAX_PENDING_REQUESTS
    )
    broker = None
    if on_user_input is not None:
        broker = UserInputBroker(
            emit=emitter.emit,
            send_reply=_reply_sender(outbox),
            handler=None if on_user_input == "manual" else on_user_input,
            timeout=params.user_input_timeout,
        )
    runner: CallbackRunner | None = None
    tool_runner: ToolRunner | None = None
    if tools:
        runner = tool_runner = ToolRunner(tools, timeout=params.tool_timeout, emit=emitter.emit)
    session_hooks: SessionHooks | None = None
    if hooks:
        runner = runner or CallbackRunner()
        session_hooks = SessionHooks(
            hooks,
            runner=runner,
            timeout=params.hook_timeout,
            emit=emitter.emit,
            # The stop gate's own rule: a PreToolUse hook never allows a tool after a stop.
            stopping=lambda: not lifecycle.may_write_user_messages,
            stopped_reason=STOPPED,
        )
    stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL)
    collector = _stderr_collector(stderr_tail, stderr)
    lease = None
    if pool is not None:
        lease = pool.lease_nowait(params, user_input=on_user_input is not None)
        # Cold or warm, a pooled session's CLI is started the pool's way.
        transport_factory = transport_factory or pool.transport_factory
        env = env if env is not None else pool.env
    if lease is not None:
        options = lease.options
        inner = lease.tap.inner
    else:
        options = build_options(
            params,
            can_use_tool=broker.can_use_tool if broker is not None else None,
            extra_env=env,
            pre_tool_use=stop_gate(lifecycle),
            environ=os.environ,
            stderr=collector,
        )
        # Usually all None: then no copy of the options is made.
        options = with_changes(
            options,
            cli_path=cli_path,
            max_buffer_size=max_buffer_size,
            session_store=session_store,
            session_store_flush=config.store_flush if session_store is not None else None,
        )
        options = with_extensions(
            options,
            tools=tools,
            tool_server=tool_runner.server_config() if tool_runner is not None else None,
            skills=params.inline_skills,
            skills_folder=skills_folder,
            hooks=session_hooks.matchers() if session_hooks is not None else None,
        )
        factory = transport_factory or subprocess_transport
        if record_to is not None:
            bundled = transport_factory is None and cli_path is None
            factory = recording(factory, record_to, env=env, bundled_cli=bundled)
        inner = factory(options)
    core = SessionCore(
        options=options,
        config=config,
        mapper=mapper,
        lifecycle=lifecycle,
        stop=stop,
        stream=stream,
        emitter=emitter,
        outbox=outbox,
        broker=broker,
        cli_path=cli_path,
        transport=inner,
        run_timeout=params.run_timeout,
        idle_timeout=params.idle_timeout,
        stderr_tail=stderr_tail,
        prompt_uuid=str(uuid_module.uuid4()),
        callbacks=runner,
    )
    watch_stop(core.stopper, tracer, meter)
    driver: Any
    if lease is not None:
        lease.attach(core=core, broker=broker, stderr=collector)
        tap = lease.tap
        driver = partial(run_leased_driver, core, lease)
    else:
        tap = TapTransport(
            inner,
            on_elicitation=broker.on_elicitation if broker is not None else None,
            on_cancel=broker.on_cancel if broker is not None else None,
            sink=core,
        )
        driver = partial(run_sdk_driver, core, tap)
    refusal = None
    scope_problem = None
    if transport_factory is None and params.scoped:
        # A warm pool refused a hard scope without the sandbox when it was opened; for its
        # CLIs the look-up only decides the warning and what adapter_ready says.
        scope_problem = probe_sandbox({**os.environ, **options.env})
    if transport_factory is None and lease is None:
        refusal = missing_cwd(options) or root_refusal(options)
        if refusal is None and scope_problem and params.scope_enforcement == "hard":
            refusal = scope_refusal(scope_problem)
        if refusal is None:
            refusal = credentials_refusal(options)  # else: "Not logged in" as the model's text

    if options.resume and refusal is None:
        carried = await resumed_cost(options.env, options.resume)
        if carried is not None:
            mapper.ledger.carry_over(carried)

    session = Session(core, params)
    caller: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            try:
                if refusal is not None:
                    error = Error(message=refusal, code="config")
                    core.finish("failed", lambda: mapper.stream_ended(error))
                    inbox.close()
                else:
                    await _start(
                        nursery,
                        core,
                        broker,
                        driver,
                        tap,
                        inbox,
                        params,
                        runner,
                        tool_runner,
                        session_hooks.hooks if session_hooks is not None else (),
                        scope_problem=scope_problem,
                        before_prompt=before_prompt,
                    )
                yield session
            except BaseException as exc:
                caller = exc
                raise
            finally:
                if not core.finished:
                    # Leaving mid-execution (break, an exception, a deadline): the driver's
                    # teardown stops the CLI before the nursery lets us out.
                    core.finish(
                        "closed", core.abort_events_factory(CLOSED_EARLY, Outcome.CLOSED)
                    )
    except BaseExceptionGroup as group:
        raise_unwrapped(group, caller)
    finally:
        if tracer is not None:
            tracer.close()


async def _start(
    nursery: trio.Nursery,
    core: SessionCore,
    broker: UserInputBroker | None,
    driver: Any,
    tap: TapTransport,
    inbox: trio.MemoryReceiveChannel[Outgoing],
    params: ExecuteParams,
    runner: CallbackRunner | None = None,
    tool_runner: ToolRunner | None = None,
    hooks: Sequence[Hook] = (),
    *,
    scope_problem: str | None = None,
    before_prompt: Callable[[], Awaitable[object]] | None = None,
) -> None:
    """Start the actors: broker (its task starts with the first request), tool runner, driver
    (connects), then the input channel with the prompt.
    Once the CLI is connected and before anything is written to it, the execution reports its
    configuration: warnings about it, then ``adapter_ready``."""
    if broker is not None:
        broker.serve_in(nursery)  # its task starts with the first request
    if runner is not None:
        await nursery.start(run_tool_runner, runner)
    client: ClaudeSDKClient | None = await nursery.start(driver)
    if client is None:
        inbox.close()  # the CLI did not start; the error is in the stream
        return
    info = await client.get_server_info() or {}
    reported = info.get("claude_code_version")
    cli_version = reported if isinstance(reported, str) else None
    sdk_version = _sdk_version()
    for message in version_warnings(sdk_version, cli_version):
        core.emit(WarningEvent(message=message, code="untested_version"))
    for message in config_warnings(params):
        core.emit(WarningEvent(message=message, code="config_changed"))
    if scope_problem is not None:
        core.emit(WarningEvent(message=scope_warning(scope_problem), code="scope_unconfined"))
    core.emit(
        adapter_ready(
            params,
            core.options,
            sdk_version=sdk_version,
            cli_version=cli_version,
            custom_tools=(
                [tool.full_name for tool in tool_runner.tools] if tool_runner is not None else ()
            ),
            hooks=[hook.label for hook in hooks],
            bash_sandboxed=params.scoped and scope_problem is None,
        )
    )
    if before_prompt is not None:
        await before_prompt()
    lifecycle = core.lifecycle
    assert core.prompt_uuid is not None
    lifecycle.push(core.prompt_uuid)
    lifecycle.started()
    core.outbox.send_nowait(
        OutgoingMessage(uuid=core.prompt_uuid, text=params.prompt, images=params.images)
    )
    nursery.start_soon(
        partial(
            run_input_channel,
            CLIWriter(query=client.query, write_line=tap.write),
            inbox,
            may_write=lambda: lifecycle.may_write_user_messages,
            on_write_failed=core.report_write_failure,
        )
    )
