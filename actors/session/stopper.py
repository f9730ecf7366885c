"""The stopper: the actor that stops one execution's CLI, as ``protocol/session/stop.py`` decides.

The pure machine (:class:`~claude_trio.protocol.session.stop.StopMachine`) holds the stop's whole
state and its rules; this actor feeds it what happens and performs the actions it returns. A stop
(``Session.abort()``, a run or idle deadline, the session left, the driver's teardown):

1. backpressure is released, the CLI's tools are killed (whatever the CLI does next, no tool
   acts any more), and once the CLI reaped them (it saw them exit: it never aborts one itself
   and waits for it to vanish; at most ``REAP_WAIT_SECONDS``) the interrupt that also cancels
   the CLI's queued messages goes out;
2. until the CLI settled, any tool it still starts is killed as soon as it shows up (its own
   helpers are left alone: it starts some to handle the interrupt);
3. once it confirmed (it starts nothing new), it finishes the interrupted turn (its result
   carries the turn's usage) and reports ``idle``; a settled CLI exits on the end of its input
   (so it writes its transcript's last rows), anything else is killed with everything it
   started (``actors/session/process.py``). The input of a CLI that will not be given back to
   a pool ends as soon as it confirmed: it then exits on its own once it settled.

Each wait is bounded (``DriverConfig``: ``interrupt_timeout``, ``abort_grace``, ``exit_grace``,
the whole teardown by ``close_grace``); when one passes, the CLI is killed. Walking the CLI's
process tree reads the process table, a millisecond or two of blocking reads: the first walk
runs at once (the interrupt waits for it), the repeated ones in a worker thread.

Who calls what: the handle's inputs (``connected``, ``cli_reported``, ``output_seen``,
``cli_exited``, ``wedged``, ``teardown``) are synchronous, called by the mapping in the SDK's
reader task, the driver and the watchdogs; they perform the machine's synchronous actions at
once (a kill, the terminal event) and wake the stopper's task for the rest. ``abort()`` is
called by the session's caller and the deadline watchdog. The task (:func:`start_stopper`, started
by the driver once connected) alone awaits the CLI: the interrupt, the tools' walks, the end of
its input, the deadlines.

Channels: none of its own. It writes to the CLI through the SDK's control protocol (the
interrupt) and the transport (the end of input), and ends the execution through
``actors/session/ending.py``.
Cancellation: the task runs shielded from the session's cancellation: a stop that has begun
completes, bounded by its deadlines, and the teardown by ``close_grace``. ``abort()`` waits
shielded too, bounded by ``interrupt_timeout + abort_grace``.
Error handling: a failed interrupt is an input of the machine (the CLI is killed, with an
``error`` event saying why); a failed end of input leaves the ``exit`` deadline to kill it.
"""

from __future__ import annotations

import contextlib
from typing import Any, assert_never

import trio
from claude_agent_sdk import ClaudeSDKClient, Transport
from claude_agent_sdk.types import HookCallback

from claude_trio.actors.session.config import DriverConfig
from claude_trio.actors.session.ending import ExecutionEnd
from claude_trio.actors.session.event_stream import EventStream
from claude_trio.actors.session.process import kill_now, kill_tools, kills_processes, reaped
from claude_trio.actors.session.sdk_private import send_control_request
from claude_trio.protocol.session.lifecycle import ExecutionLifecycle
from claude_trio.protocol.session.outcomes import Outcome
from claude_trio.protocol.session.stop import (
    INTERRUPT,
    STOPPED,
    ArmDeadline,
    CloseGate,
    Deadline,
    EmitTerminal,
    EndInput,
    KillCLI,
    KillTools,
    ReleaseBackpressure,
    SendInterrupt,
    StopAction,
    StopMachine,
    StopPhase,
)

__all__ = ["STOPPED", "TOOL_SWEEP_SECONDS", "Stopper", "start_stopper", "stop_gate"]

# While the CLI is being stopped, any tool it still starts is killed at this interval: one the
# stop gate allowed just before the stop can still be on its way to exec.
TOOL_SWEEP_SECONDS = 0.02
# The interrupt waits (at most this long, polling) until the CLI reaped the tools the stop
# killed, so it handles their exit first and never aborts one itself: it would then wait for
# the tool's whole process group to vanish, which takes the CLI's exit 1.2-1.5 s where init
# reaps a killed tool's orphaned child late (measured in a container: 4 of 15 stops of a
# running Bash call without this wait, 0 of 15 with it).
REAP_WAIT_SECONDS = 0.05
REAP_POLL_SECONDS = 0.001


def stop_gate(lifecycle: ExecutionLifecycle) -> HookCallback:
    """The ``PreToolUse`` hook the CLI asks before every tool call: once the execution is
    stopping (aborted, ended, closed) every call is denied, so no tool starts after a stop
    whatever the interrupt races with, and the turn stops there (``continue: false``): the
    CLI does not hand the denial to the model in one more request before the interrupt
    lands. Before that it has no opinion (``{}``)."""

    async def gate(hook_input: Any, tool_use_id: str | None, context: Any) -> Any:
        await trio.lowlevel.checkpoint()
        if lifecycle.may_write_user_messages:
            return {}
        return {
            "continue_": False,
            "stopReason": STOPPED,
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": STOPPED,
            },
        }

    return gate


class Stopper:
    """The stopper's handle (see the module docstring); its task is :func:`start_stopper`."""

    def __init__(
        self,
        *,
        machine: StopMachine,
        end: ExecutionEnd,
        stream: EventStream,
        transport: Transport,
        config: DriverConfig,
    ) -> None:
        self.machine = machine
        self._end = end
        self._stream = stream
        # The CLI's own transport (inside the tap): kills and the end of input go to it.
        self._transport = transport
        self._config = config
        #: The connected CLI (None before the driver connected it and after the teardown).
        self.client: ClaudeSDKClient | None = None
        self._changed = trio.Event()
        self._deadline: tuple[Deadline, float] | None = None
        self._interrupt_due = False
        self._end_input_due = False
        self._terminal: str | None = None  # the reason of the abort's terminal event, when due
        self._killed: tuple[int, ...] = ()  # the CLI's children the stop killed, to be reaped
        self._walks = False  # kills walk real processes: repeat them in a thread
        self._sweeping = False
        self._scope: trio.CancelScope | None = None
        #: When the stop began (``abort()``: the caller or a deadline), on trio's clock; the
        #: traces and metrics measure the stop from it.
        self.requested_at: float | None = None

    # -- state -----------------------------------------------------------------------------

    @property
    def settled(self) -> bool:
        """The CLI has nothing running and was not killed (``StopMachine.settled``)."""
        return self.machine.settled

    # -- inputs (synchronous: they never wait) ---------------------------------------------------

    def connected(self, client: ClaudeSDKClient, *, reusable: bool = False) -> None:
        self.client = client
        self._walks = kills_processes(self._transport)
        # Made here, entered by the task: a teardown before the task's first step still bounds it.
        self._scope = trio.CancelScope(shield=True)
        self._apply(self.machine.cli_connected(reusable=reusable))

    def cli_reported(self, state: str) -> None:
        self._apply(self.machine.cli_reported(state))

    def output_seen(self, *, turn_open: bool) -> None:
        self._apply(self.machine.output_seen(turn_open=turn_open))

    def cli_exited(self) -> None:
        self._apply(self.machine.cli_exited())

    def wedged(self) -> None:
        """The CLI answers nothing any more: kill it now (the caller reports why)."""
        self._apply(self.machine.wedged())

    def teardown(self, *, keep_cli: bool = False) -> None:
        """The session is done with the CLI: stop it if it runs, then let it exit (or give it
        back settled, ``keep_cli``), all within ``close_grace``."""
        self._apply(self.machine.teardown(keep_cli=keep_cli))
        if self._scope is not None:
            self._scope.deadline = trio.current_time() + self._config.close_grace

    async def abort(
        self,
        reason: str = "aborted",
        *,
        decided: bool = False,
        outcome: Outcome = Outcome.ABORTED,
    ) -> None:
        """Abort the execution: reject later pushes, cancel pending questions, stop the CLI,
        then exactly one ``aborted`` event (``protocol/session/stop.py``, rules 2-9). ``decided``:
        ``reason`` is the event's reason even when the CLI confirms with one of its own;
        ``outcome``: the event's outcome (a deadline says which).
        Idempotent: a second caller waits for the end of the execution."""
        lifecycle = self.machine.lifecycle
        if lifecycle.ended or lifecycle.aborting:
            await self._end.done.wait()
            return
        phase = self._end.mapper.activity
        self.requested_at = trio.current_time()
        self._apply(self.machine.abort(reason, decided=decided, outcome=outcome, phase=phase))
        # The stop's own deadlines end it within this bound; the bound only guards against a
        # stopper task that is gone (a bug of ours would otherwise hang a shielded wait).
        bound = self._config.interrupt_timeout + self._config.abort_grace
        with trio.move_on_after(bound, shield=True):  # noqa: ASYNC912 - awaits inside
            while not self.machine.stop_done:
                await self._changed.wait()
        # The terminal event goes out here, in the task that aborted, once the stop is done (a
        # CLI that died meanwhile may have ended the execution already: its error first).
        terminal, self._terminal = self._terminal, None
        if terminal is not None or not self._end.finished:
            self._end.finish("aborted", self._end.abort_events(terminal or reason, outcome))
        await trio.lowlevel.checkpoint()

    # -- performing the machine's actions ---------------------------------------------------

    def _apply(self, actions: list[StopAction]) -> None:
        for action in actions:
            match action:
                case ReleaseBackpressure():
                    self._stream.wake_producers()
                case CloseGate(lost=lost, reason=reason):
                    self._end.abort_started(list(lost), reason)
                case SendInterrupt():
                    self._interrupt_due = True
                case KillTools(everything=everything):
                    self._killed = kill_tools(self._transport, tools_only=not everything)
                case ArmDeadline(deadline=deadline):
                    self._deadline = (deadline, trio.current_time() + self._seconds(deadline))
                case KillCLI(note=note, code=code):
                    if note is not None and code is not None:
                        self._end.note(note, code)
                    kill_now(self._transport)
                case EndInput():
                    self._end_input_due = True
                case EmitTerminal(reason=reason):
                    self._terminal = reason  # for abort() (below), which waits for it
                case _:
                    assert_never(action)
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def _seconds(self, deadline: Deadline) -> float:
        config = self._config
        match deadline:
            case "interrupt":
                return config.interrupt_timeout
            case "settle":
                return config.abort_grace
            case "exit":
                return config.exit_grace
            case _:
                assert_never(deadline)

    # -- the task --------------------------------------------------------------------------

    async def _serve(self, client: ClaudeSDKClient) -> None:
        machine = self.machine
        assert self._scope is not None, "connected() first"
        with self._scope:  # noqa: ASYNC912 - awaits inside
            async with trio.open_nursery() as nursery:
                interrupt: trio.CancelScope | None = None
                while not machine.finished:
                    changed = self._changed
                    if self._interrupt_due:
                        self._interrupt_due = False
                        interrupt = trio.CancelScope()
                        nursery.start_soon(self._interrupt, client, interrupt)
                    if interrupt is not None and machine.phase is not StopPhase.INTERRUPTING:
                        interrupt.cancel()  # answered, or no answer will matter any more
                        interrupt = None
                    if self._walks and machine.sweeping and not self._sweeping:
                        self._sweeping = True
                        nursery.start_soon(self._sweep)
                    if self._end_input_due:
                        self._end_input_due = False
                        nursery.start_soon(self._end_input)
                    armed = self._deadline
                    if armed is None or armed[0] != machine.deadline:
                        # No deadline to keep (most wake-ups): no cancel scope either.
                        await changed.wait()
                        continue
                    with trio.move_on_at(armed[1]):
                        await changed.wait()
                        continue
                    self._deadline = None
                    which = armed[0]
                    if machine.deadline == which:  # not moved on in the same instant
                        self._apply(machine.deadline_passed(which, after=self._seconds(which)))
                nursery.cancel_scope.cancel()
        self.client = None

    async def _interrupt(self, client: ClaudeSDKClient, scope: trio.CancelScope) -> None:
        """Send the stop request; feed its answer or failure while it still matters."""
        answer: dict[str, Any] | None = None
        failure: str | None = None
        with scope:
            killed = self._killed
            with trio.move_on_after(REAP_WAIT_SECONDS):  # noqa: ASYNC912 - awaits inside
                # Another process's state: there is nothing to wait on but the clock.
                while not reaped(killed):  # noqa: ASYNC110
                    await trio.sleep(REAP_POLL_SECONDS)
            try:
                answer = await send_control_request(client, dict(INTERRUPT))
            except Exception as exc:  # the CLI is gone, or refused
                failure = str(exc)
        machine = self.machine
        # Only while it matters: the CLI may have exited, or a deadline passed, meanwhile.
        if machine.phase is StopPhase.INTERRUPTING:
            if failure is not None:
                self._apply(machine.send_failed(failure))
            elif answer is not None:
                self._apply(
                    machine.interrupt_answered(
                        still_queued=bool(answer.get("still_queued")),
                        turn_open=self._end.mapper.turn_open,
                    )
                )
        await trio.lowlevel.checkpoint()

    async def _sweep(self) -> None:
        """Kill what the CLI still starts, every ``TOOL_SWEEP_SECONDS`` while the stop is under
        way (``StopMachine.sweeping``); each walk in a worker thread."""
        machine = self.machine
        try:
            while machine.sweeping:
                with trio.move_on_after(TOOL_SWEEP_SECONDS):  # noqa: ASYNC912 - awaits inside
                    while machine.sweeping:
                        await self._changed.wait()
                if machine.sweeping:
                    await trio.to_thread.run_sync(_kill_new_tools, self._transport)
        finally:
            self._sweeping = False
        await trio.lowlevel.checkpoint()

    async def _end_input(self) -> None:
        # A CLI whose input cannot be ended any more is killed when the exit deadline passes.
        with contextlib.suppress(Exception):
            await self._transport.end_input()
        await trio.lowlevel.checkpoint()


def _kill_new_tools(transport: Transport) -> None:
    kill_tools(transport, tools_only=True)


def start_stopper(
    nursery: trio.Nursery, stopper: Stopper, client: ClaudeSDKClient, *, reusable: bool = False
) -> None:
    """Start the stopper's task in ``nursery`` for the connected ``client``: it runs until the
    teardown is over (the CLI exited, was killed, or is given back settled). ``reusable``: a
    pool's CLI, which may be given back after the execution (its input is ended only at its
    teardown). See the module docstring. Its inputs work at once (``connected`` is called
    here); the task acts on them from its first step (no ``nursery.start`` round trip per
    session)."""
    stopper.connected(client, reusable=reusable)
    nursery.start_soon(stopper._serve, client)
