"""How one execution ends: the one place its terminal event goes out, and what comes before it.

Every path that ends an execution comes through :meth:`ExecutionEnd.finish`: the CLI's last
result or its own ``aborted`` result (the mapping, ``actors/session/core.py``), the stop of an abort
(``actors/session/stopper.py``), a dead or wedged CLI (the driver, ``actors/session/watchdogs.py``),
the session left before the end (``open_session``). It queues the terminal event, closes the event
stream and the input channel, and wakes whoever waits for the end. Everything runs on one trio
thread and nothing here awaits, so an end is atomic.

Channels: closes the event stream (its producer side) and the send side of the input
channel's inbox; events emitted after the end are dropped (the stream is closed).
Cancellation: nothing here awaits.
Error handling: nothing here raises; a failed write to the CLI becomes a non-fatal ``error``
event (:meth:`ExecutionEnd.report_write_failure`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import attrs
import trio

from claude_trio.actors.extensions.broker import UserInputBroker
from claude_trio.actors.extensions.tool_runner import CallbackRunner
from claude_trio.actors.session.event_stream import EventStream
from claude_trio.actors.session.input_channel import Outgoing
from claude_trio.protocol.session.events import Error, Event, WarningEvent
from claude_trio.protocol.session.lifecycle import EndCause, ExecutionLifecycle
from claude_trio.protocol.session.mapper import Mapper
from claude_trio.protocol.session.outcomes import Outcome


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


@attrs.define(eq=False)
class ExecutionEnd:
    """The end of one execution (see the module docstring)."""

    mapper: Mapper
    lifecycle: ExecutionLifecycle
    stream: EventStream
    emitter: Emitter
    outbox: trio.MemorySendChannel[Outgoing]
    broker: UserInputBroker | None
    # The session's custom tools' and hooks' runner (None without any): cancelled at the end.
    callbacks: CallbackRunner | None = None
    prompt_uuid: str | None = None
    done: trio.Event = attrs.field(factory=trio.Event)
    # The driver's read loop: cancelled at the end (nothing after the terminal event belongs
    # to this execution).
    read_scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)

    @property
    def finished(self) -> bool:
        return self.done.is_set()

    def emit(self, event: Event) -> Event:
        return self.emitter.emit(event)

    def finish(self, cause: EndCause, terminal: list[Event] | Callable[[], list[Event]]) -> None:
        """End the execution: queue the last events, close the stream, wake waiters.

        Idempotent. ``terminal`` holds (or, called, builds) the one terminal event; it is built
        after pending questions were resolved and lost pushes reported, so it is the last event
        and has the highest seq.
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

    def abort_started(self, lost: list[str], reason: str) -> None:
        """The execution was aborted (``protocol/session/stop.py``, rule 2): the pushes accepted but
        never consumed are reported, pending questions and running tools are cancelled."""
        why = "the execution was aborted" + (f" ({reason})" if reason != "aborted" else "")
        self.report_lost_pushes(lost, why)
        if self.broker is not None:
            self.broker.close("cancelled")
        if self.callbacks is not None:
            self.callbacks.close(f"{why}: the tool call was cancelled")

    def abort_events(
        self, reason: str, outcome: Outcome = Outcome.ABORTED
    ) -> Callable[[], list[Event]]:
        """Builds the one terminal ``aborted`` event: for the open turn, or between turns; its
        ``outcome`` is that of the abort under way, if any, else ``outcome``."""

        def build() -> list[Event]:
            self.mapper.abort_requested()
            return self.mapper.turn_aborted(reason, outcome)

        return build

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

    def note(self, message: str, code: Literal["transport", "cli_timeout"]) -> None:
        """A non-fatal error about the CLI, while the execution runs (dropped after its end)."""
        if not self.done.is_set():
            self.emit(Error(message=message, code=code, fatal=False))
