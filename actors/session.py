"""``open_session``: the one place that opens the nursery and wires the actors.

::

    async with open_session(params, on_user_input=handler) as session:
        async for event in session.events:
            ...
        receipt = await session.push("also check the tests")   # Accepted | Rejected
        await session.answer(request_id, answer)                # without a handler
        await session.abort()
        session.usage()

Nothing started here outlives the ``async with``: on success, error, abort or cancellation of
the caller's scope, the CLI is disconnected (shielded, bounded) and every task has ended.
"""

from __future__ import annotations

import time
import uuid as uuid_module
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, Literal

import attrs
import trio
from claude_agent_sdk import ClaudeAgentOptions, Transport

from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.events import Error
from claude_trio.protocol.lifecycle import Accepted, ExecutionLifecycle, Rejected
from claude_trio.protocol.mapper import Mapper
from claude_trio.protocol.options import build_options, with_changes
from claude_trio.protocol.params import ExecuteParams
from claude_trio.protocol.usage import Usage

from .broker import (
    AnswerAccepted,
    AnswerRejected,
    UserInputBroker,
    UserInputHandler,
    run_user_input_broker,
)
from .driver import (
    DriverConfig,
    SessionCore,
    root_refusal,
    run_leased_driver,
    run_sdk_driver,
    stderr_collector,
    subprocess_transport,
)
from .event_stream import EventStream
from .input_channel import MAX_PENDING_PUSHES, OutgoingMessage, run_input_channel
from .pool import CLIPool
from .tap import TapTransport

TransportFactory = Callable[[ClaudeAgentOptions], Transport]


@attrs.frozen(kw_only=True)
class SessionUsage:
    """Usage so far: each turn's, this execution's total, and the session's total."""

    turns: tuple[Usage, ...]
    execution: Usage
    session: Usage


class Session:
    """The handle a caller holds inside ``open_session``. See the module docstring."""

    def __init__(self, core: SessionCore, params: ExecuteParams) -> None:
        self._core = core
        self._params = params

    @property
    def events(self) -> EventStream:
        """The unified events of the execution; the loop ends after its final terminal event."""
        return self._core.stream

    @property
    def ended(self) -> bool:
        return self._core.execution_ended

    async def wait_ended(self) -> None:
        await self._core.done.wait()

    def push_nowait(self, text: str) -> Accepted | Rejected:
        """Offer a user message to the running execution; the outcome is decided at once.

        ``Accepted``: it will be delivered to the model in this execution (folded into the
        running turn, or as the next turn). ``Rejected(reason)``: it will not (the execution
        ended, was aborted, the CLI died, streaming input is off, too many pushes waiting).
        """
        if not isinstance(text, str) or not text.strip():
            raise InvalidParamsError("text", text, "a non-empty string")
        core = self._core
        if not self._params.streaming_input:
            return Rejected(reason="streaming input is off for this execution")
        if len(core.lifecycle.pending) >= MAX_PENDING_PUSHES and not core.lifecycle.ended:
            return Rejected(
                reason=f"{MAX_PENDING_PUSHES} pushes are already waiting to be delivered"
            )
        uuid = str(uuid_module.uuid4())
        outcome = core.lifecycle.push(uuid)
        if isinstance(outcome, Accepted):
            core.emit_many(core.mapper.push_accepted(text=text, uuid=uuid, timestamp=time.time()))
            core.input_send.send_nowait(OutgoingMessage(uuid=uuid, text=text))
        return outcome

    async def push(self, text: str) -> Accepted | Rejected:
        """``push_nowait`` as a trio checkpoint (decided atomically, never blocks)."""
        await trio.lowlevel.checkpoint_if_cancelled()
        outcome = self.push_nowait(text)
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
        """Abort the execution: interrupt the CLI, then exactly one ``aborted`` terminal event.

        Idempotent; returns once the terminal event is queued. The CLI's own confirmation (its
        ``error_during_execution`` result, with the interrupted turn's usage) becomes the
        ``aborted`` event when it comes within ``abort_grace``; otherwise one is synthesized.
        """
        core = self._core
        if core.execution_ended or core.aborting:
            await core.done.wait()
            return
        core.aborting = True
        lost = core.lifecycle.abort()
        core.report_lost_pushes(lost, "the execution was aborted")
        if core.broker is not None:
            core.broker.close("cancelled")
        core.emit_many(core.mapper.abort_requested())
        client = core.client
        if client is not None and core.mapper.turn_open:
            confirmed = False
            with trio.move_on_after(core.config.control_timeout):
                await trio.lowlevel.checkpoint()
                try:
                    await client.interrupt()
                    confirmed = True
                except Exception as exc:  # the CLI is gone or refused: synthesize below
                    core.emit(
                        Error(message=f"interrupt failed: {exc}", code="transport", fatal=False)
                    )
            if not confirmed and not core.execution_ended:
                core.emit(
                    Error(
                        message="the CLI did not confirm the interrupt within "
                        f"{core.config.control_timeout:g} s; ending the turn without it",
                        code="cli_timeout",
                        fatal=False,
                    )
                )
            if confirmed:
                # The CLI answered; its interrupted turn's result (with usage) should follow.
                with trio.move_on_after(core.config.abort_grace):
                    await core.done.wait()
        if not core.execution_ended:
            core.finish(core.abort_events("aborted"))
        await trio.lowlevel.checkpoint()

    def usage(self) -> SessionUsage:
        ledger = self._core.mapper.ledger
        return SessionUsage(
            turns=tuple(self._core.turn_usage),
            execution=ledger.execution,
            session=ledger.session,
        )


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
) -> AsyncIterator[Session]:
    """Start a CLI session running ``params.prompt``; yield its :class:`Session`.

    ``on_user_input``: an async handler answering ``user_input_request`` events, or
    ``"manual"`` to answer with ``session.answer()``, or ``None`` to not intercept (the seed's
    rule: AskUserQuestion is then not offered to the model, elicitations are cancelled).
    ``transport_factory``: build the transport from the final options (tests pass a scripted
    CLI); by default the bundled ``claude`` runs as a subprocess.
    ``env``: extra environment for the CLI (over ``custom_env``).
    ``pool``: take a warm CLI from this :class:`~.pool.CLIPool` when one is ready (the pool's
    ``env`` and ``transport_factory`` then apply); otherwise start cold as usual.
    """
    if not isinstance(params, ExecuteParams):
        raise InvalidParamsError("params", params, "an ExecuteParams")
    config = config or DriverConfig()
    mapper = Mapper()
    mapper.start_execution()
    input_send, input_recv = trio.open_memory_channel[OutgoingMessage](MAX_PENDING_PUSHES + 1)
    core_box: list[SessionCore] = []

    broker = None
    if on_user_input is not None:
        broker = UserInputBroker(
            emit=lambda event: core_box[0].emit(event),
            handler=None if on_user_input == "manual" else on_user_input,
            timeout=params.user_input_timeout,
        )
    lease = None
    if pool is not None:
        lease = pool.lease_nowait(params, user_input=on_user_input is not None)
        # Cold or warm, a pooled session's CLI is started the pool's way.
        transport_factory = transport_factory or pool.transport_factory
        env = env if env is not None else pool.env
    if lease is not None:
        options = lease.options
    else:
        options = build_options(
            params,
            can_use_tool=broker.can_use_tool if broker is not None else None,
            extra_env=env,
        )
        options = with_changes(options, cli_path=cli_path, max_buffer_size=max_buffer_size)
    core = SessionCore(
        options=options,
        config=config,
        mapper=mapper,
        lifecycle=ExecutionLifecycle(),
        stream=EventStream(),
        input_send=input_send,
        broker=broker,
        cli_path=cli_path,
    )
    core_box.append(core)
    collector = stderr_collector(core, stderr)
    driver: Any
    if lease is not None:
        lease.attach(core=core, broker=broker, stderr=collector)
        driver = partial(run_leased_driver, core, lease)
    else:
        core.options = with_changes(options, stderr=collector)
        inner = (transport_factory or subprocess_transport)(core.options)
        tap = TapTransport(
            inner,
            on_elicitation=broker.on_elicitation if broker is not None else None,
            on_cancel=broker.on_cancel if broker is not None else None,
            sink=core,
        )
        if broker is not None:
            broker._send_control_response = tap.send_control_response
        driver = partial(run_sdk_driver, core, tap)

    session = Session(core, params)
    async with trio.open_nursery() as nursery:
        try:
            refusal = None
            if transport_factory is None and lease is None:
                refusal = root_refusal(core.options)
            if refusal is not None:
                core.finish(mapper.stream_ended(Error(message=refusal, code="config")))
                input_recv.close()
            else:
                if broker is not None:
                    await nursery.start(run_user_input_broker, broker)
                client = await nursery.start(driver)
                if client is None:
                    input_recv.close()
                else:
                    first = core.prompt_uuid = str(uuid_module.uuid4())
                    core.lifecycle.push(first)
                    input_send.send_nowait(OutgoingMessage(uuid=first, text=params.prompt))
                    await nursery.start(
                        partial(
                            run_input_channel,
                            client.query,
                            input_recv,
                            on_write_failed=core.report_write_failure,
                        )
                    )
            yield session
        finally:
            if not core.execution_ended:
                core.finish(
                    core.abort_events("the session was closed before the execution ended")
                )
            if broker is not None:
                broker.close("cancelled")
