"""The session core: one session's parts, and the mapping of the CLI's frames.

One object per session, built once by ``open_session`` in an order that needs no patching
afterwards: the stream and the mapper, then the broker, then this core, which builds the
execution's end (``actors/session/ending.py``) and its stopper (``actors/session/stopper.py``).
Everything runs on one trio thread, so mutations are atomic between checkpoints. The parts, and who
calls them:

* :meth:`SessionCore.deliver` maps each CLI frame (called from the SDK's reader task through the
  tap: the hot path) and decides, with
  :class:`~claude_trio.protocol.session.lifecycle.ExecutionLifecycle`, whether the execution ended
  with it; what the CLI says about itself (its state, the end of its output) goes on to the stopper.
  :meth:`SessionCore.cli_gone` and
  :meth:`SessionCore.connect_failed` (the driver's task) end the execution when the CLI does.
* :class:`~.ending.ExecutionEnd` is the one place an execution ends.
* :class:`~.stopper.Stopper` stops the CLI, as the pure
  :class:`~claude_trio.protocol.session.stop.StopMachine` decides: ``Session.abort()``, the run and
  idle deadlines (``actors/session/watchdogs.py``) and the driver's teardown all go through it.
* :class:`~.controls.LiveControls` sends the session's live controls (the caller's task).

Bounds, all from :class:`DriverConfig` (ARCHITECTURE.md, "Stopping", lists them with the
measured times): ``abort()`` returns within ``interrupt_timeout + abort_grace``; after it returns
the CLI starts no new tool; the CLI is reaped ``exit_grace`` (idle) or at once (not settled)
after the execution ended, plus the kill.

Channels: none of its own: the mapped events go to the event stream (the end closes it).
Cancellation: nothing here awaits but :meth:`SessionCore.wait_writable` (the hot path's
backpressure, cancelled with the SDK's reader).
Error handling: a frame the SDK cannot parse becomes a non-fatal ``error`` event; the CLI's
death becomes the execution's end (``cli_died``) with what its stderr said.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import trio
from claude_agent_sdk import ClaudeAgentOptions, Transport

from claude_trio.actors.extensions.broker import UserInputBroker
from claude_trio.actors.extensions.tool_runner import CallbackRunner
from claude_trio.actors.session.config import DriverConfig
from claude_trio.actors.session.ending import Emitter, ExecutionEnd
from claude_trio.actors.session.event_stream import EventStream
from claude_trio.actors.session.input_channel import Outgoing
from claude_trio.actors.session.sdk_private import parse_message
from claude_trio.actors.session.stopper import TOOL_SWEEP_SECONDS, Stopper, stop_gate
from claude_trio.protocol.session.events import (
    Aborted,
    Error,
    Event,
    Result,
    TextDelta,
    ThinkingDelta,
    copy_event,
)
from claude_trio.protocol.session.failures import describe_failure, stderr_suffix
from claude_trio.protocol.session.frames import is_host_only, session_state
from claude_trio.protocol.session.lifecycle import EndCause, ExecutionLifecycle
from claude_trio.protocol.session.mapper import Mapper
from claude_trio.protocol.session.outcomes import Outcome
from claude_trio.protocol.session.stop import INTERRUPT, STOPPED, StopMachine

__all__ = [
    "INTERRUPT",
    "STDERR_TAIL",
    "STOPPED",
    "TOOL_SWEEP_SECONDS",
    "DriverConfig",
    "Emitter",
    "SessionCore",
    "stop_gate",
]

STDERR_TAIL = 20


def _is_delta(event: Event) -> bool:
    return isinstance(event, TextDelta | ThinkingDelta)


class SessionCore:
    """One session's parts, and the mapping of its CLI's frames. See the module docstring."""

    def __init__(
        self,
        *,
        options: ClaudeAgentOptions,
        config: DriverConfig,
        mapper: Mapper,
        lifecycle: ExecutionLifecycle,
        stop: StopMachine,
        stream: EventStream,
        emitter: Emitter,
        outbox: trio.MemorySendChannel[Outgoing],
        broker: UserInputBroker | None,
        cli_path: str | None,
        transport: Transport,
        run_timeout: float | None = None,
        idle_timeout: float | None = None,
        stderr_tail: collections.deque[str] | None = None,
        prompt_uuid: str | None = None,
        callbacks: CallbackRunner | None = None,
    ) -> None:
        self.options = options
        self.config = config
        self.mapper = mapper
        self.lifecycle = lifecycle
        self.stream = stream
        self.cli_path = cli_path
        #: ExecuteParams.run_timeout / idle_timeout (None: no limit), from ``started_at``.
        self.run_timeout = run_timeout
        self.idle_timeout = idle_timeout
        self.started_at = trio.current_time()
        #: When the CLI last wrote a frame (the watchdogs read it).
        self.last_output_at = 0.0
        self.stderr_tail: collections.deque[str] = (
            stderr_tail if stderr_tail is not None else collections.deque(maxlen=STDERR_TAIL)
        )
        self.end = ExecutionEnd(
            mapper=mapper,
            lifecycle=lifecycle,
            stream=stream,
            emitter=emitter,
            outbox=outbox,
            broker=broker,
            callbacks=callbacks,
            prompt_uuid=prompt_uuid,
        )
        self.stopper = Stopper(
            machine=stop, end=self.end, stream=stream, transport=transport, config=config
        )
        self._stop = stop

    # -- the execution's end (actors/session/ending.py) --------------------------------------------

    @property
    def emitter(self) -> Emitter:
        return self.end.emitter

    @property
    def outbox(self) -> trio.MemorySendChannel[Outgoing]:
        return self.end.outbox

    @property
    def broker(self) -> UserInputBroker | None:
        return self.end.broker

    @property
    def prompt_uuid(self) -> str | None:
        return self.end.prompt_uuid

    @property
    def done(self) -> trio.Event:
        return self.end.done

    @property
    def read_scope(self) -> trio.CancelScope:
        return self.end.read_scope

    @property
    def finished(self) -> bool:
        return self.end.finished

    def emit(self, event: Event) -> Event:
        return self.end.emit(event)

    def finish(self, cause: EndCause, terminal: list[Event] | Callable[[], list[Event]]) -> None:
        self.end.finish(cause, terminal)

    def abort_events_factory(
        self, reason: str, outcome: Outcome = Outcome.ABORTED
    ) -> Callable[[], list[Event]]:
        return self.end.abort_events(reason, outcome)

    def report_write_failure(self, what: str, exc: BaseException) -> None:
        self.end.report_write_failure(what, exc)

    # -- mapping (the hot path) ----------------------------------------------------------------

    def deliver(self, frame: dict[str, Any]) -> bool:
        """Map one CLI frame and queue its events (the tap calls this from the SDK's reader
        task). Returns True when the consumer is behind: the caller then waits
        (``wait_writable``), which is the backpressure that reaches the CLI's stdout.
        """
        self.last_output_at = trio.current_time()
        stop = self._stop
        state = session_state(frame)
        if state is not None:
            self.stopper.cli_reported(state)
            if is_host_only(frame):
                return False
        end = self.end
        if end.done.is_set():
            return False  # nothing after the terminal event belongs to this execution
        out: list[Event] = []
        ended = self.process(frame, out)
        if ended is not None:
            end.finish(ended, out)
            return False
        if stop.released and stop.wants_output:  # (released: a plain attribute, cheap)
            self.stopper.output_seen(turn_open=self.mapper.turn_open)
        if out:
            if stop.released and self.stream.full:
                # Backpressure is off while the CLI is being stopped (its answer arrives on
                # this reader); what it still streams meanwhile is not kept past capacity.
                out = [event for event in out if not _is_delta(event)]
            self.stream.send_nowait(out)
        return self.stream.over_capacity and not stop.released

    async def wait_writable(self) -> None:
        if self._stop.released:
            await trio.lowlevel.checkpoint()
            return
        await self.stream.wait_writable()

    def output_ended(self) -> None:
        """The CLI closed its stdout (the tap saw the end): nothing of it is left to stop."""
        self.stopper.cli_exited()

    @property
    def exit_expected(self) -> bool:
        """After the end of the execution the session stops the CLI: its exit is expected."""
        return self.end.finished

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
                    events[i] = copy_event(event, final=True)
                    ended = "completed"
            elif isinstance(event, Aborted) and self.lifecycle.aborting:
                ended = "aborted"
        out.extend(events)
        return ended

    # -- the CLI's end -------------------------------------------------------------------------

    def connect_failed(self, exc: BaseException) -> None:
        """Starting the CLI failed (missing binary, no answer to ``initialize``, ...)."""
        error = describe_failure(exc, cli_path=self.cli_path, stderr_tail=self.stderr_tail)
        lost = self.lifecycle.cli_died(error.message)
        self.end.report_lost_pushes(lost, "the CLI did not start")
        self.end.finish("cli_died", lambda: self.mapper.stream_ended(error))

    def cli_gone(self, exc: BaseException | None) -> None:
        """The SDK's stream ended (the CLI exited, or reading failed): end the execution."""
        self.stopper.cli_exited()
        if self.end.finished:
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
        self.end.report_lost_pushes(lost, "the CLI exited")
        # With an abort under way this gives the one ``aborted`` (the error, if any, first).
        self.end.finish("cli_died", lambda: self.mapper.stream_ended(error))
