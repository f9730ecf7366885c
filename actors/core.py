"""The session core: the state one session's actors share, and how its execution ends.

One object per session, built once by ``open_session`` in an order that needs no patching
afterwards (stream and mapper, then the broker, then this core). Everything runs on one trio
thread, so mutations are atomic between checkpoints. Who does what:

* :meth:`SessionCore.deliver` maps each CLI frame (called from the SDK's reader task through the
  tap: the hot path) and decides, with :class:`~claude_trio.protocol.lifecycle.ExecutionLifecycle`,
  whether the execution ended with it.
* :meth:`SessionCore.abort` and the driver's teardown stop the CLI through
  :meth:`SessionCore.stop_cli`: one interrupt that also cancels what the CLI has queued, then a
  bounded wait until the CLI reports it has nothing running (``session_state_changed: idle``).
  Whatever does not settle in time is killed by the driver (``actors/process.py``).
* :meth:`SessionCore.finish` is the one place an execution ends: it queues the terminal event,
  closes the event stream and the input channel, and wakes the driver.

Bounds, all from :class:`DriverConfig` (ARCHITECTURE.md, "Stopping", lists them with the
measured times): ``abort()`` returns within ``interrupt_timeout + abort_grace``; after it returns
the CLI starts no new tool; the CLI is reaped ``exit_grace`` (idle) or at once (not settled)
after the execution ended, plus the kill.
"""

from __future__ import annotations

import collections
import contextlib
import math
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, TypeVar

import attrs
import trio
from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, Transport
from claude_agent_sdk.types import HookCallback

from claude_trio.protocol.checks import seconds
from claude_trio.protocol.controls import control_refusal
from claude_trio.protocol.errors import ControlFailedError, ControlRefusedError
from claude_trio.protocol.events import (
    Aborted,
    Error,
    Event,
    Result,
    TextDelta,
    ThinkingDelta,
    WarningEvent,
)
from claude_trio.protocol.failures import describe_failure, stderr_suffix
from claude_trio.protocol.frames import is_host_only, session_state
from claude_trio.protocol.lifecycle import EndCause, ExecutionLifecycle
from claude_trio.protocol.mapper import Mapper

from .broker import UserInputBroker
from .event_stream import EventStream
from .input_channel import Outgoing
from .process import kill_now, kill_tools
from .sdk_private import parse_message, send_control_request
from .tool_runner import CallbackRunner

STDERR_TAIL = 20
T = TypeVar("T")

INTERRUPT = {"subtype": "interrupt", "cancel_queued": True}
STOPPED = "the session is stopping: no tool may start"
# While a stopped CLI settles, anything it still started is killed at this interval (a tool the
# stop gate allowed just before the stop can still be on its way to exec).
TOOL_SWEEP_SECONDS = 0.02
"""The stop request: abort the running turn AND cancel every message the CLI has queued (a
plain interrupt leaves them queued, and the CLI runs them as new turns right after)."""




def stop_gate(lifecycle: ExecutionLifecycle) -> HookCallback:
    """The ``PreToolUse`` hook the CLI asks before every tool call: once the execution is
    stopping (aborted, ended, closed) every call is denied, so no tool starts after a stop
    whatever the interrupt races with. Before that it has no opinion (``{}``)."""

    async def gate(hook_input: Any, tool_use_id: str | None, context: Any) -> Any:
        await trio.lowlevel.checkpoint()
        if lifecycle.may_write_user_messages:
            return {}
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": STOPPED,
            }
        }

    return gate


@attrs.frozen(kw_only=True)
class DriverConfig:
    """Our deadlines (seconds), all far below the SDK's 60 s defaults.

    ``connect_timeout``: spawn + ``initialize``. ``control_timeout``: other control requests.
    ``interrupt_timeout``: how long the CLI has to confirm an interrupt before it is killed.
    ``abort_grace``: after a confirmed interrupt, how long the CLI has to finish the interrupted
    turn (its result carries the turn's usage) and report it is idle, before it is killed.
    ``exit_grace``: how long an idle CLI has to exit after its input ended, before it is killed.
    ``close_grace``: the bound on the whole teardown (it covers the three above and the kill).
    ``stall_timeout``: while a turn is open and the CLI has written nothing for this long, it is
    asked a cheap control request (``mcp_status``); a CLI that does not answer within
    ``control_timeout`` is wedged (stopped, hung): the execution ends with a ``cli_timeout``
    error and the CLI is killed. A CLI busy in a long tool answers, and goes on.
    """

    connect_timeout: float = attrs.field(default=20.0, validator=seconds)
    control_timeout: float = attrs.field(default=5.0, validator=seconds)
    interrupt_timeout: float = attrs.field(default=2.0, validator=seconds)
    abort_grace: float = attrs.field(default=3.0, validator=seconds)
    exit_grace: float = attrs.field(default=2.0, validator=seconds)
    close_grace: float = attrs.field(default=15.0, validator=seconds)
    stall_timeout: float = attrs.field(default=30.0, validator=seconds)


@attrs.define(eq=False)
class Emitter:
    """Stamps synthesized events with the mapper and queues them (never blocks, see
    ``EventStream``); after the end of the execution it drops them (the stream is closed)."""

    mapper: Mapper
    stream: EventStream

    def emit(self, event: Event) -> Event:
        """Stamp and queue one event; returns the stamped event (what the stream shows)."""
        if self.stream.closed:
            return event
        stamped = self.mapper.stamp(event)
        self.stream.send_nowait([stamped])
        return stamped

    def emit_many(self, events: list[Event]) -> None:
        if events and not self.stream.closed:
            self.stream.send_nowait(events)


def _is_delta(event: Event) -> bool:
    return isinstance(event, TextDelta | ThinkingDelta)


@attrs.define(eq=False)
class SessionCore:
    """The state one session's actors share. See the module docstring."""

    options: ClaudeAgentOptions
    config: DriverConfig
    mapper: Mapper
    lifecycle: ExecutionLifecycle
    stream: EventStream
    emitter: Emitter
    outbox: trio.MemorySendChannel[Outgoing]
    broker: UserInputBroker | None
    cli_path: str | None
    # The CLI's own transport (inside the tap): the stop kills its tools through it.
    transport: Transport
    # ExecuteParams.run_timeout / idle_timeout (None: no limit), from started_at.
    run_timeout: float | None = None
    idle_timeout: float | None = None
    started_at: float = attrs.field(factory=trio.current_time)
    stderr_tail: collections.deque[str] = attrs.field(
        factory=lambda: collections.deque(maxlen=STDERR_TAIL)
    )
    done: trio.Event = attrs.field(factory=trio.Event)
    read_scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    prompt_uuid: str | None = None
    # The connected CLI (set by the driver once connected; None before and after).
    client: ClaudeSDKClient | None = None
    # What the CLI last said about itself (session_state_changed), and a wake-up for waiters.
    cli_state: str | None = None
    cli_exited: bool = False
    last_output_at: float = 0.0
    _state_changed: trio.Event = attrs.field(factory=trio.Event)
    # The stop (interrupt + settle): started once, shared by abort() and the teardown.
    _stop_done: trio.Event | None = None
    _must_kill: bool = False
    # The session's custom tools' and hooks' runner (None without any): cancelled when the
    # execution stops.
    callbacks: CallbackRunner | None = None

    # -- emitting ------------------------------------------------------------------------------

    def emit(self, event: Event) -> Event:
        return self.emitter.emit(event)

    @property
    def finished(self) -> bool:
        return self.done.is_set()

    def finish(self, cause: EndCause, terminal: list[Event] | Callable[[], list[Event]]) -> None:
        """End the execution: queue the last events, close the stream, wake waiters.

        Idempotent; every path that ends an execution comes through here. ``terminal`` holds
        (or, called, builds) the one terminal event; it is built after pending questions were
        resolved and lost pushes reported, so it is the last event and has the highest seq.
        """
        if self.done.is_set():
            return
        if self.broker is not None:
            self.broker.close("cancelled")
        if self.callbacks is not None:
            self.callbacks.close()
        lost = self.lifecycle.finish(cause)
        self.report_lost_pushes(lost, "the execution ended first")
        events = terminal() if callable(terminal) else terminal
        self.emitter.emit_many(events)
        self.outbox.close()
        self.stream.close()
        self.read_scope.cancel()
        self.done.set()
        self._poke()

    def report_write_failure(self, what: str, exc: BaseException) -> None:
        """The input channel could not write to the CLI (it is gone or wedged)."""
        message = f"could not write {what} to the CLI: {exc}"
        self.emit(Error(message=message, code="transport", fatal=False))

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

    # -- mapping (the hot path) ----------------------------------------------------------------

    def deliver(self, frame: dict[str, Any]) -> bool:
        """Map one CLI frame and queue its events (the tap calls this from the SDK's reader
        task). Returns True when the consumer is behind: the caller then waits
        (``wait_writable``), which is the backpressure that reaches the CLI's stdout.
        """
        self.last_output_at = trio.current_time()
        state = session_state(frame)
        if state is not None:
            self._set_cli_state(state)
            if is_host_only(frame):
                return False
        if self.done.is_set():
            return False  # nothing after the terminal event belongs to this execution
        out: list[Event] = []
        ended = self.process(frame, out)
        if ended is not None:
            self.finish(ended, out)
            return False
        if self._stop_done is not None and self.cli_state is None:
            self._poke()  # a stop waiting on a CLI that never reports its state (_wait_idle)
        if out:
            if self.lifecycle.aborting and self.stream.full:
                # Backpressure is off while the CLI is being interrupted (its answer arrives on
                # this reader); what it still streams meanwhile is not kept past capacity.
                out = [event for event in out if not _is_delta(event)]
            self.stream.send_nowait(out)
        return self.stream.over_capacity

    async def wait_writable(self) -> None:
        await self.stream.wait_writable()

    def output_ended(self) -> None:
        """The CLI closed its stdout (the tap saw the end): nothing of it is left to stop."""
        self.cli_exited = True
        self._poke()

    @property
    def exit_expected(self) -> bool:
        """After the end of the execution the session stops the CLI: its exit is expected."""
        return self.done.is_set()

    def process(self, frame: dict[str, Any], out: list[Event]) -> EndCause | None:
        """Map one SDK frame into ``out``. Returns how the execution ended with it, if it did."""
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
            return None
        if message is None:
            return None
        events = self.mapper.feed(message)
        for uuid in self.mapper.pop_consumed_uuids():
            self.lifecycle.consumed(uuid)
        ended: EndCause | None = None
        for i, event in enumerate(events):
            if isinstance(event, Result):
                if self.lifecycle.result_arrived(
                    event.user_message_uuids, tasks_in_flight=bool(self.mapper.tasks_in_flight)
                ):
                    events[i] = attrs.evolve(event, final=True)
                    ended = "completed"
            elif isinstance(event, Aborted) and self.lifecycle.aborting:
                ended = "aborted"
        out.extend(events)
        return ended

    # -- live controls -------------------------------------------------------------------------

    def control_refusal(self) -> str | None:
        """Why a live control cannot be sent now (``protocol/controls.py``, rule 2)."""
        return control_refusal(
            ended=self.done.is_set(),
            aborting=self.lifecycle.aborting,
            cli_running=self.client is not None and not self.cli_exited,
            end_reason=self.lifecycle.end_reason,
        )

    async def control(
        self, name: str, request: Callable[[ClaudeSDKClient], Awaitable[T]]
    ) -> T:
        """Send one live control through the connected client, bounded by
        ``control_timeout`` (``protocol/controls.py``, rules 2 and 3)."""
        await trio.lowlevel.checkpoint()
        refusal = self.control_refusal()
        client = self.client
        if refusal is not None or client is None:
            raise ControlRefusedError(f"{name}: {refusal or 'the CLI is not running'}")
        timeout = self.config.control_timeout
        with trio.move_on_after(timeout):  # noqa: ASYNC912 - awaits inside
            try:
                return await request(client)
            except Exception as exc:
                raise ControlFailedError(f"{name}: the CLI refused it: {exc}") from exc
        raise ControlFailedError(
            f"{name}: the CLI did not answer within {timeout:g} s (DriverConfig.control_timeout)"
        )

    # -- the CLI's own state -------------------------------------------------------------------

    def _set_cli_state(self, state: str) -> None:
        self.cli_state = state
        self._poke()

    def _poke(self) -> None:
        self._state_changed.set()
        self._state_changed = trio.Event()

    def connect_failed(self, exc: BaseException) -> None:
        """Starting the CLI failed (missing binary, no answer to ``initialize``, ...)."""
        error = describe_failure(exc, cli_path=self.cli_path, stderr_tail=self.stderr_tail)
        lost = self.lifecycle.cli_died(error.message)
        self.report_lost_pushes(lost, "the CLI did not start")
        self.finish("cli_died", lambda: self.mapper.stream_ended(error))

    async def watch_timeouts(self) -> None:
        """End the execution at ``run_timeout`` after it started, or after ``idle_timeout``
        without any frame from the CLI (every frame resets it): the stop of ``abort()``, and
        one ``aborted`` event whose reason says which limit it was. Runs beside the read loop
        until cancelled."""
        run_timeout, idle_timeout = self.run_timeout, self.idle_timeout
        never = math.inf
        run_deadline = self.started_at + run_timeout if run_timeout is not None else never
        while True:
            idle_deadline = (
                self.last_output_at + idle_timeout if idle_timeout is not None else never
            )
            deadline = min(run_deadline, idle_deadline)
            if deadline == never:
                await trio.sleep_forever()
            await trio.sleep_until(deadline)
            if self.done.is_set():
                return
            now = trio.current_time()
            if now >= run_deadline:
                assert run_timeout is not None
                reason = f"run_timeout: the execution ran for {run_timeout:g} s"
            elif idle_timeout is not None and now >= self.last_output_at + idle_timeout:
                reason = f"idle_timeout: no event from the CLI for {idle_timeout:g} s"
            else:
                continue  # the CLI spoke meanwhile: a new idle deadline
            await self.abort(reason, decided=True)
            return

    async def watch_liveness(self, client: ClaudeSDKClient) -> None:
        """Probe a CLI that went silent while a turn is open; end the execution if it is
        wedged (see ``DriverConfig.stall_timeout``). Runs beside the read loop until cancelled.
        """
        config = self.config
        while True:
            quiet_since = self.last_output_at
            await trio.sleep_until(quiet_since + config.stall_timeout)
            if self.done.is_set() or self.cli_exited:
                return
            if self.last_output_at != quiet_since or not self.mapper.turn_open:
                continue
            if await self._answers(client):
                # Alive and silent (a long tool): wait for another stall_timeout of silence.
                self.last_output_at = max(self.last_output_at, trio.current_time())
                continue
            silent = trio.current_time() - quiet_since
            self._must_kill = True
            kill_now(self.transport)
            error = Error(
                message=f"the CLI stopped responding: no output for {silent:g} s while turn "
                f"{self.mapper.turn} was running, and no answer to a liveness check within "
                f"{config.control_timeout:g} s; it was killed",
                code="cli_timeout",
            )
            lost = self.lifecycle.cli_died(error.message)
            self.report_lost_pushes(lost, "the CLI stopped responding")
            self.finish("cli_died", partial(self.mapper.stream_ended, error))
            return

    async def _answers(self, client: ClaudeSDKClient) -> bool:
        """Whether the CLI answers a cheap control request within ``control_timeout``."""
        await trio.lowlevel.checkpoint()
        with trio.move_on_after(self.config.control_timeout):  # noqa: ASYNC912 - awaits inside
            # A refusal or a broken pipe is an answer: the CLI is alive enough to say so.
            with contextlib.suppress(Exception):
                await send_control_request(client, {"subtype": "mcp_status"})
            return True
        return False

    def cli_gone(self, exc: BaseException | None) -> None:
        """The SDK's stream ended (the CLI exited, or reading failed): end the execution."""
        self.cli_exited = True
        self._set_cli_state("exited")
        if self.done.is_set():
            return
        error = (
            describe_failure(exc, cli_path=self.cli_path, stderr_tail=self.stderr_tail)
            if exc is not None
            else None
        )
        if error is None and not self.lifecycle.aborting:
            error = Error(
                message="the CLI closed its output before the execution ended"
                + stderr_suffix(self.stderr_tail),
                code="cli_exited",
            )
        why = error.message if error is not None else "the CLI exited"
        lost = self.lifecycle.cli_died(why)
        self.report_lost_pushes(lost, "the CLI exited")
        # With an abort under way this gives the one ``aborted`` (the error, if any, first).
        self.finish("cli_died", lambda: self.mapper.stream_ended(error))

    def abort_events_factory(self, reason: str) -> Callable[[], list[Event]]:
        """Builds the one terminal ``aborted`` event: for the open turn, or between turns."""

        def build() -> list[Event]:
            self.mapper.abort_requested()
            return self.mapper.turn_aborted(reason)

        return build

    # -- stopping --------------------------------------------------------------------------

    async def abort(self, reason: str = "aborted", *, decided: bool = False) -> None:
        """Abort the execution (``Session.abort``): reject later pushes, cancel pending
        questions, stop the CLI (:meth:`stop_cli`), then exactly one ``aborted`` event.
        ``decided``: ``reason`` is the ``aborted`` event's reason even when the CLI confirms
        with one of its own (a timeout says which). Idempotent: a second caller waits for the
        first one's end."""
        if self.done.is_set() or self.lifecycle.aborting:
            await self.done.wait()
            return
        lost = self.lifecycle.abort()
        why = "the execution was aborted" + (f" ({reason})" if reason != "aborted" else "")
        self.report_lost_pushes(lost, why)
        if self.broker is not None:
            self.broker.close("cancelled")
        if self.callbacks is not None:
            self.callbacks.close(f"{why}: the tool call was cancelled")
        self.mapper.abort_requested(reason if decided else None)
        await self.stop_cli()
        if not self.done.is_set():
            self.finish("aborted", self.abort_events_factory(reason))
        await trio.lowlevel.checkpoint()

    @property
    def settled(self) -> bool:
        """The CLI has nothing running: its execution completed, or it reported ``idle``
        after the stop, or it exited."""
        return self.cli_exited or self.lifecycle.end_cause == "completed" or (
            self._stop_done is not None and self._stop_done.is_set() and not self._must_kill
        )

    @property
    def must_kill(self) -> bool:
        """The CLI did not confirm the interrupt or did not settle in time: kill it now."""
        return self._must_kill

    async def stop_cli(self) -> None:
        """Interrupt the CLI unless it has nothing running; wait (bounded) until it settles.

        Shielded and idempotent: ``abort()`` and the driver's teardown share one stop; a second
        caller waits for the first. Bounded by ``interrupt_timeout + abort_grace``; a CLI that
        does not confirm the interrupt or does not settle in time is marked to be killed.
        """
        if self._stop_done is not None:
            await self._stop_done.wait()
            return
        self._stop_done = trio.Event()
        try:
            with trio.CancelScope(shield=True):
                await self._stop()
        finally:
            self._stop_done.set()

    async def _stop(self) -> None:
        await trio.lowlevel.checkpoint()
        client = self.client
        if client is None or self.cli_exited or self.lifecycle.end_cause == "completed":
            return
        # The CLI's answer arrives on the reader that backpressure may be holding (the
        # consumer may be the very task calling abort() from inside its own loop).
        self.stream.release()
        # The stop gate denies every new tool from now on; the ones running die now.
        kill_tools(self.transport)
        answer = await self._interrupt(client)
        if self._exited():  # (a method: the attribute changes across the await)
            return
        if isinstance(answer, Exception):
            self._kill(f"the CLI refused the interrupt ({answer}); killing it", "transport")
            return
        if answer is None:
            self._kill(
                "the CLI did not confirm the interrupt within "
                f"{self.config.interrupt_timeout:g} s; killing it",
                "cli_timeout",
            )
            return
        response = answer
        if response.get("still_queued"):
            # A CLI that ignores cancel_queued would run these as new turns: never let it.
            self._kill(None, None)
            return
        # Confirmed. Tools die as soon as they show up, not whenever the CLI's own teardown of
        # them gets there (a Bash call: 0.2 to 0.7 s).
        with trio.move_on_after(self.config.abort_grace):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._sweep_tools)
                await self._wait_idle()
                nursery.cancel_scope.cancel()
            return
        self._kill(
            f"the CLI did not finish the interrupted turn within {self.config.abort_grace:g} s;"
            " killing it",
            "cli_timeout",
        )

    def _kill(self, why: str | None, code: Any) -> None:
        """Kill the CLI and what it started now (the transport allowing); say why, if asked."""
        self._must_kill = True
        if why is not None:
            self._note(why, code)
        kill_now(self.transport)

    def _exited(self) -> bool:
        return self.cli_exited

    async def _interrupt(self, client: ClaudeSDKClient) -> dict[str, Any] | Exception | None:
        """Send the stop request; its answer, the failure, or None when no answer came within
        ``interrupt_timeout`` or the CLI exited first."""
        answers: list[dict[str, Any] | Exception] = []
        with trio.move_on_after(self.config.interrupt_timeout):
            async with trio.open_nursery() as nursery:

                async def ask() -> None:
                    await trio.lowlevel.checkpoint()
                    try:
                        answers.append(await send_control_request(client, dict(INTERRUPT)))
                    except Exception as exc:  # the CLI is gone, or refused
                        answers.append(exc)
                    nursery.cancel_scope.cancel()

                async def exited() -> None:
                    # A CLI that exits cleanly never answers, and the SDK only fails pending
                    # requests when reading fails: its exit is an answer too.
                    await trio.lowlevel.checkpoint()
                    while not self.cli_exited:
                        await self._state_changed.wait()
                    nursery.cancel_scope.cancel()

                nursery.start_soon(ask)
                nursery.start_soon(exited)
        return answers[0] if answers else None

    async def _sweep_tools(self) -> None:
        while True:
            kill_tools(self.transport)
            await trio.sleep(TOOL_SWEEP_SECONDS)

    async def _wait_idle(self) -> None:
        """Until the CLI reports ``idle`` (or exits). A CLI that never reports its state is
        taken as settled once no turn is open."""
        while not self.cli_exited:
            if self.cli_state == "idle":
                break
            if self.cli_state is None and not self.mapper.turn_open:
                break
            await self._state_changed.wait()
        await trio.lowlevel.checkpoint()

    def _note(self, message: str, code: Any) -> None:
        if not self.done.is_set():
            self.emit(Error(message=message, code=code, fatal=False))
