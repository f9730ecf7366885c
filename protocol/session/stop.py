"""The stop of one execution: from the request to the CLI gone, and the one event that answers it
(pure, no I/O).

Everything that changes the stop's state is in this file: the phase of the CLI's stop, what the
CLI last said about itself, whether backpressure is off, and the state of the answer (the one
``Aborted`` event an abort gets, which the mapper emits). The actors feed it what happened as
*inputs* and perform the *actions* each input returns (``actors/session/stopper.py``); the mapper
(``mapper.py``) reads the answer's state and reports the answer's progress. The execution's own
phase stays :class:`~.lifecycle.ExecutionLifecycle`'s: this machine consults it (has the
execution ended, completed, is it aborting?) and drives it once (``abort`` calls
``lifecycle.abort()``), and never keeps a copy of it. The end of the CLI's output, a failed
send and a deadline are inputs like any other (h11's ``receive_data(None)``, ``send_failed()``).

The phases of the CLI's stop::

    LIVE --abort / teardown--> INTERRUPTING --answered--> SETTLING --idle--> SETTLED
      |                            |   (queued, refused,      |  (settle deadline)  |
      |                            |    interrupt deadline)   |                     | teardown
      +--(nothing to stop)--> SETTLED  +-------> KILLED <-----+                     v
                                                   ^                            EXITING
                                                   +------(exit deadline)-----------+
    any phase --cli_exited--> GONE;   any live phase --wedged--> KILLED

Rules:

1. ``cli_connected(reusable=...)`` once, while ``LIVE``: a CLI now runs and may have to be
   stopped. Before it, a stop has nothing to stop. ``reusable``: a pool's CLI, which may be
   given back after the execution (rule 7); any other serves this execution only.
2. ``abort(reason, decided=..., outcome=..., phase=...)`` (``Session.abort``, or a run/idle
   deadline with ``decided=True`` and its ``outcome``; ``phase``: what the execution was doing
   when it was asked): once per execution and only while it is running; after its end or a
   first abort it changes nothing (the caller waits for the end). It closes the execution's
   gate (``lifecycle.abort()``: pushes are rejected, the stop gate denies every tool, the
   pushes accepted but never consumed are returned in :class:`CloseGate`), marks the answer
   pending (rule 10) and starts the stop (rule 3). Its terminal event is due once the stop is
   done (rule 9).
3. Starting the stop from ``LIVE``: with a CLI connected, not exited, and an execution that did
   not complete, the stop releases backpressure (the CLI's answer arrives on the reader that
   a behind consumer parks), kills everything the CLI started (its tools, MCP servers, hook
   commands, helpers), *then* sends the interrupt that also cancels what the CLI queued
   (:data:`INTERRUPT`), and arms the ``interrupt`` deadline: ``INTERRUPTING``. Otherwise
   there is nothing to stop: ``SETTLED``. The tools die first so that no tool acts after the
   stop, and so that the CLI finds them exited when it handles the interrupt (the actor lets
   it reap them first): a tool it has to abort itself, it signals and then waits for until
   its whole process group is gone, and a killed tool's child stays a zombie until init reaps
   it (measured in a container whose init reaps late: 1.2-1.5 s to the CLI's exit in 4 of 15
   stops of a running Bash call). While the phase is ``INTERRUPTING`` or ``SETTLING`` the
   actor keeps killing the *tools* the CLI still starts (:attr:`StopMachine.sweeping`; each
   runs in a session of its own): one the stop gate allowed just before the stop can still be
   on its way to exec. The CLI's own helpers are left alone from then on: it starts some to
   handle the interrupt, and one killed under it costs a retry (measured: 15-25 ms a stop).
4. ``interrupt_answered(still_queued=..., turn_open=...)``, only while ``INTERRUPTING``. A CLI
   that kept queued messages (it ignores ``cancel_queued``) would run them as new turns: it is
   killed (``KILLED``). Otherwise it starts nothing new from now on: the tools it started
   meanwhile are killed (:class:`KillTools`) and it has the ``settle`` deadline to finish the
   interrupted turn (whose result carries the turn's usage) and report ``idle``:
   ``SETTLING``, or at once ``SETTLED`` when it already is idle (rule 6).
5. ``send_failed(message)`` (the interrupt could not be sent, or the CLI refused it), only
   while ``INTERRUPTING``, and ``deadline_passed("interrupt")`` kill the CLI, with a
   non-fatal error saying why (``transport``, ``cli_timeout``): ``KILLED``.
6. The CLI is idle when it reports ``idle`` (``cli_reported``), or, for a CLI that never
   reports its state, when no turn is open (``output_seen(turn_open=False)``, fed on every
   frame while :attr:`StopMachine.wants_output`). ``SETTLING`` then becomes ``SETTLED``;
   ``deadline_passed("settle")`` first kills it with a ``cli_timeout`` error: ``KILLED``.
7. ``teardown(keep_cli=...)``: the session is done with the CLI (once). From ``LIVE`` it starts
   the stop of rule 3 without touching the execution (it ended already, or is being left).
   A ``SETTLED`` CLI is then given back (``keep_cli``, only for a ``reusable`` one: a pool's
   warm CLI stays ``SETTLED``; asked of another, it is a ``LocalProtocolError``) or
   let exit on the end of its input (:class:`EndInput`, the ``exit`` deadline: ``EXITING``),
   also when it settles only later. A CLI that will not be given back (not ``reusable``, or
   torn down without ``keep_cli``) has its input ended as soon as it confirmed the interrupt
   (``SETTLING``), whether an abort or the teardown stopped it: the session tears it down
   once the execution ended, and it uses it for nothing in between. It still finishes the
   interrupted turn, reports its result (the turn's usage) and ``idle`` and writes its
   transcript, then exits on its own, with no round trip through the session after its
   ``idle`` (measured with the real CLI: the same transcript, the same history on a resume).
   The end of input goes out once (not again when it settles), and never before the CLI
   confirmed: the interrupt must be written first. ``deadline_passed("exit")`` kills it:
   ``KILLED``.
8. ``cli_exited()`` (its output ended) in any phase: ``GONE``, whatever was pending; idempotent.
   ``wedged()`` (the liveness watchdog found it not answering) kills it from any phase but
   ``GONE``. Only the armed deadline may pass (:attr:`StopMachine.deadline`); any other input
   in a phase that does not take it is a bug of the caller: ``LocalProtocolError``.
9. The stop is *done* once the phase is ``SETTLED``, ``EXITING``, ``KILLED`` or ``GONE``. On
   the input that makes it done, an abort's terminal event is due: :class:`EmitTerminal`
   (exactly once, and not when the execution ended meanwhile another way).
10. The answer (the mapper's part, ``mapper.py`` rules R5-R7): ``abort_requested(reason,
    outcome, phase)`` marks an abort as pending (``reason``, when given, is the ``Aborted``
    event's reason even when the CLI confirms with one of its own; ``outcome`` and ``phase``,
    when given, its ``outcome`` and ``phase``: the first ones given stay, so a user's abort
    stays ``ABORTED``, in the phase it was asked in, when the session is left while it
    stops). ``answered(drain=...)``: an ``Aborted`` went out;
    nothing is pending any more, and with ``drain`` (it closed a turn the CLI is still
    finishing) the dead turn is drained until ``drain_ended()``. ``execution_started()``
    clears what is pending (not the drain).

:data:`TRANSITIONS` lists, for every phase, the inputs it takes and the phases each may lead
to; the tests check every rule against it (``tests/protocol/test_stop_machine.py``).
"""

from __future__ import annotations

import enum
from typing import Any, Literal, TypeAlias

import attrs

from claude_trio.protocol.errors import LocalProtocolError
from claude_trio.protocol.session.lifecycle import ExecutionLifecycle
from claude_trio.protocol.session.outcomes import AbortPhase, Outcome

INTERRUPT: dict[str, Any] = {"subtype": "interrupt", "cancel_queued": True}
"""The stop request: abort the running turn AND cancel every message the CLI has queued (a
plain interrupt leaves them queued, and the CLI runs them as new turns right after)."""

STOPPED = "the session is stopping: no tool may start"
"""Why the stop gate denies a tool (the ``PreToolUse`` answer after a stop)."""

Deadline = Literal["interrupt", "settle", "exit"]
"""``interrupt``: for the CLI to answer the interrupt. ``settle``: for it to finish the
interrupted turn and report ``idle``. ``exit``: for a settled CLI to exit on the end of its
input. The actor arms each with its configured duration (``DriverConfig``)."""

class StopPhase(enum.Enum):
    LIVE = "live"
    """No stop yet: the CLI (once connected) runs freely."""
    INTERRUPTING = "interrupting"
    """The CLI's tools are killed, the interrupt is out; waiting for the CLI's answer."""
    SETTLING = "settling"
    """The CLI confirmed; its tools are killed; waiting for it to report ``idle``."""
    SETTLED = "settled"
    """Nothing runs in the CLI (or there was nothing to stop): it may exit on its own."""
    EXITING = "exiting"
    """Its input ended; waiting for it to exit."""
    KILLED = "killed"
    """It is killed with everything it started."""
    GONE = "gone"
    """Its output ended: it exited (or was never there)."""


class StopInput(enum.Enum):
    """The inputs that may change the phase (the answer's own inputs, rule 10, never do)."""

    CONNECTED = "cli_connected"
    ABORT = "abort"
    TEARDOWN = "teardown"
    INTERRUPT_ANSWERED = "interrupt_answered"
    SEND_FAILED = "send_failed"
    DEADLINE_PASSED = "deadline_passed"
    CLI_REPORTED = "cli_reported"
    OUTPUT_SEEN = "output_seen"
    CLI_EXITED = "cli_exited"
    WEDGED = "wedged"


# -- actions: what the actor must do ------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ReleaseBackpressure:
    """Wake the hot-path producer and let it add past capacity from now on (rule 3)."""


@attrs.frozen(kw_only=True)
class CloseGate:
    """The execution is aborted (rule 2): report ``lost`` (accepted pushes never consumed) as
    undelivered, cancel pending questions and running custom tools and hooks."""

    lost: tuple[str, ...]
    reason: str


@attrs.frozen(kw_only=True)
class SendInterrupt:
    """Send :data:`INTERRUPT`; feed its answer (``interrupt_answered``) or its failure
    (``send_failed``) while the phase is still ``INTERRUPTING``."""


@attrs.frozen(kw_only=True)
class KillTools:
    """Kill what the CLI started, not the CLI: ``everything`` (at the stop), or its tools only
    (after its answer): processes in a session other than the CLI's, and what they started."""

    everything: bool


@attrs.frozen(kw_only=True)
class ArmDeadline:
    """Feed ``deadline_passed(deadline, after)`` once its configured duration has passed, unless
    the phase changed before."""

    deadline: Deadline


@attrs.frozen(kw_only=True)
class KillCLI:
    """Kill the CLI and everything it started now; with a ``note``, first report it as a
    non-fatal ``error`` event of ``code`` (when the execution has not ended)."""

    note: str | None = None
    code: Literal["transport", "cli_timeout"] | None = None


@attrs.frozen(kw_only=True)
class EndInput:
    """End the CLI's input: a settled CLI exits on it; one that confirmed the interrupt exits
    on it once it finished the interrupted turn (rule 7)."""


@attrs.frozen(kw_only=True)
class EmitTerminal:
    """End the execution with the abort's one ``aborted`` event (rule 9)."""

    reason: str


StopAction: TypeAlias = (
    ReleaseBackpressure
    | CloseGate
    | SendInterrupt
    | KillTools
    | ArmDeadline
    | KillCLI
    | EndInput
    | EmitTerminal
)

_P = StopPhase
_I = StopInput
_DONE = frozenset({_P.SETTLED, _P.EXITING, _P.KILLED, _P.GONE})
_ALIVE = frozenset({_P.LIVE, _P.INTERRUPTING, _P.SETTLING, _P.SETTLED, _P.EXITING})

TRANSITIONS: dict[StopPhase, dict[StopInput, frozenset[StopPhase]]] = {
    _P.LIVE: {
        _I.CONNECTED: frozenset({_P.LIVE}),
        _I.ABORT: frozenset({_P.LIVE, _P.INTERRUPTING, _P.SETTLED}),
        _I.TEARDOWN: frozenset({_P.INTERRUPTING, _P.SETTLED, _P.EXITING, _P.GONE}),
        _I.CLI_REPORTED: frozenset({_P.LIVE}),
        _I.OUTPUT_SEEN: frozenset({_P.LIVE}),
        _I.CLI_EXITED: frozenset({_P.GONE}),
        _I.WEDGED: frozenset({_P.KILLED}),
    },
    _P.INTERRUPTING: {
        _I.ABORT: frozenset({_P.INTERRUPTING}),
        _I.TEARDOWN: frozenset({_P.INTERRUPTING}),
        _I.INTERRUPT_ANSWERED: frozenset({_P.SETTLING, _P.SETTLED, _P.EXITING, _P.KILLED}),
        _I.SEND_FAILED: frozenset({_P.KILLED}),
        _I.DEADLINE_PASSED: frozenset({_P.KILLED}),
        _I.CLI_REPORTED: frozenset({_P.INTERRUPTING}),
        _I.OUTPUT_SEEN: frozenset({_P.INTERRUPTING}),
        _I.CLI_EXITED: frozenset({_P.GONE}),
        _I.WEDGED: frozenset({_P.KILLED}),
    },
    _P.SETTLING: {
        _I.ABORT: frozenset({_P.SETTLING}),
        _I.TEARDOWN: frozenset({_P.SETTLING}),
        _I.DEADLINE_PASSED: frozenset({_P.KILLED}),
        _I.CLI_REPORTED: frozenset({_P.SETTLING, _P.SETTLED, _P.EXITING}),
        _I.OUTPUT_SEEN: frozenset({_P.SETTLING, _P.SETTLED, _P.EXITING}),
        _I.CLI_EXITED: frozenset({_P.GONE}),
        _I.WEDGED: frozenset({_P.KILLED}),
    },
    _P.SETTLED: {
        _I.ABORT: frozenset({_P.SETTLED}),
        _I.TEARDOWN: frozenset({_P.SETTLED, _P.EXITING}),
        _I.CLI_REPORTED: frozenset({_P.SETTLED}),
        _I.OUTPUT_SEEN: frozenset({_P.SETTLED}),
        _I.CLI_EXITED: frozenset({_P.GONE}),
        _I.WEDGED: frozenset({_P.KILLED}),
    },
    _P.EXITING: {
        _I.ABORT: frozenset({_P.EXITING}),
        _I.DEADLINE_PASSED: frozenset({_P.KILLED}),
        _I.CLI_REPORTED: frozenset({_P.EXITING}),
        _I.OUTPUT_SEEN: frozenset({_P.EXITING}),
        _I.CLI_EXITED: frozenset({_P.GONE}),
        _I.WEDGED: frozenset({_P.KILLED}),
    },
    _P.KILLED: {
        _I.ABORT: frozenset({_P.KILLED}),
        _I.TEARDOWN: frozenset({_P.KILLED}),
        _I.CLI_REPORTED: frozenset({_P.KILLED}),
        _I.OUTPUT_SEEN: frozenset({_P.KILLED}),
        _I.CLI_EXITED: frozenset({_P.GONE}),
        _I.WEDGED: frozenset({_P.KILLED}),
    },
    _P.GONE: {
        _I.ABORT: frozenset({_P.GONE}),
        _I.TEARDOWN: frozenset({_P.GONE}),
        _I.CLI_REPORTED: frozenset({_P.GONE}),
        _I.OUTPUT_SEEN: frozenset({_P.GONE}),
        _I.CLI_EXITED: frozenset({_P.GONE}),
        _I.WEDGED: frozenset({_P.GONE}),
    },
}
"""For every phase: the inputs it takes, and the phases each may lead to (the guards of the
rules choose). An input a phase does not list raises ``LocalProtocolError`` (rule 8)."""

_DEADLINES: dict[StopPhase, Deadline] = {
    _P.INTERRUPTING: "interrupt",
    _P.SETTLING: "settle",
    _P.EXITING: "exit",
}


class StopMachine:
    """The state of one execution's stop (see the module docstring for its rules).

    Attributes are read-only outside this file: ``phase``, ``connected``, ``cli_state`` (what
    the CLI last reported: ``running``, ``requires_action``, ``idle``), ``exited``,
    ``released`` (backpressure is off), ``reusable`` (rule 1), ``torn_down``, ``input_ended``
    (:class:`EndInput` went out), and the answer's ``abort_pending``,
    ``abort_reason``, ``abort_outcome``, ``abort_phase`` and ``draining`` (read by the mapper on
    every frame: plain attributes).
    """

    def __init__(self, lifecycle: ExecutionLifecycle | None = None) -> None:
        self.lifecycle = lifecycle if lifecycle is not None else ExecutionLifecycle()
        self.phase = StopPhase.LIVE
        self.connected = False
        self.cli_state: str | None = None
        self.exited = False
        self.released = False
        self.torn_down = False
        self.keep_cli = False
        self.reusable = False
        self.input_ended = False
        self._terminal: str | None = None  # the reason of an abort's terminal event, while due
        # The answer (rule 10).
        self.abort_pending = False
        self.abort_reason: str | None = None
        self.abort_outcome: Outcome | None = None
        self.abort_phase: AbortPhase | None = None
        self.draining = False

    # -- state -----------------------------------------------------------------------------

    @property
    def stop_done(self) -> bool:
        """Nothing will change in the CLI any more without us (rule 9)."""
        return self.phase in _DONE

    @property
    def settled(self) -> bool:
        """The CLI has nothing running and was not killed: it may exit on the end of its input
        (or be given back to a pool)."""
        return self.phase in (_P.SETTLED, _P.EXITING, _P.GONE)

    @property
    def finished(self) -> bool:
        """The teardown is over: the CLI is gone, killed, or (``keep_cli``) given back settled."""
        if not self.torn_down:
            return False
        return self.phase in (_P.GONE, _P.KILLED) or (self.keep_cli and self.phase is _P.SETTLED)

    @property
    def may_be_given_back(self) -> bool:
        """The CLI may be given back settled after the execution (rule 7): a pool's CLI, not
        yet torn down, or torn down with ``keep_cli``."""
        return self.keep_cli if self.torn_down else self.reusable

    @property
    def deadline(self) -> Deadline | None:
        """The deadline armed in this phase (none but in the three waiting phases)."""
        return _DEADLINES.get(self.phase)

    @property
    def sweeping(self) -> bool:
        """Whatever the CLI starts now is killed (rule 3)."""
        return self.phase is _P.INTERRUPTING or self.phase is _P.SETTLING

    @property
    def wants_output(self) -> bool:
        """Feed ``output_seen`` on every frame: settling, and the CLI never said its state."""
        return self.phase is _P.SETTLING and self.cli_state is None

    @property
    def cli_running(self) -> bool:
        """A connected CLI that has not exited and was not killed."""
        return self.connected and self.phase in _ALIVE

    # -- inputs ----------------------------------------------------------------------------

    def cli_connected(self, *, reusable: bool = False) -> list[StopAction]:
        """Rule 1."""
        self._check(_I.CONNECTED)
        if self.connected:
            raise LocalProtocolError("cli_connected() twice: one CLI per execution")
        self.connected = True
        self.reusable = reusable
        return []

    def abort(
        self,
        reason: str,
        *,
        decided: bool = False,
        outcome: Outcome = Outcome.ABORTED,
        phase: AbortPhase | None = None,
    ) -> list[StopAction]:
        """Rule 2."""
        self._check(_I.ABORT)
        lifecycle = self.lifecycle
        if lifecycle.ended or lifecycle.aborting:
            return []
        lost = lifecycle.abort()
        self.abort_requested(reason if decided else None, outcome, phase)
        self._terminal = reason
        actions: list[StopAction] = [CloseGate(lost=tuple(lost), reason=reason)]
        if self.phase is _P.LIVE:
            actions += self._start_stop()
        return self._done_with(actions)

    def teardown(self, *, keep_cli: bool = False) -> list[StopAction]:
        """Rule 7."""
        self._check(_I.TEARDOWN)
        if self.torn_down:
            raise LocalProtocolError("teardown() twice: the session tears its CLI down once")
        if keep_cli and self.connected and not self.reusable:
            raise LocalProtocolError(
                "teardown(keep_cli=True) of a CLI that is not reusable: only a pool's CLI"
                " (cli_connected(reusable=True)) is given back; its input may have ended already"
            )
        self.torn_down = True
        self.keep_cli = keep_cli
        actions: list[StopAction] = []
        if self.phase is _P.LIVE:
            if not self.connected:
                self.phase = _P.GONE
                return []
            actions += self._start_stop()
        return self._done_with(actions)

    def interrupt_answered(self, *, still_queued: bool, turn_open: bool) -> list[StopAction]:
        """Rule 4."""
        self._check(_I.INTERRUPT_ANSWERED)
        if still_queued:
            self.phase = _P.KILLED
            return self._done_with([KillCLI()])
        actions: list[StopAction] = [KillTools(everything=False)]
        if self._idle(turn_open=turn_open):
            self.phase = _P.SETTLED
        else:
            self.phase = _P.SETTLING
            actions.append(ArmDeadline(deadline="settle"))
        return self._done_with(actions)

    def send_failed(self, message: str) -> list[StopAction]:
        """Rule 5: the interrupt could not be sent, or the CLI refused it."""
        self._check(_I.SEND_FAILED)
        self.phase = _P.KILLED
        note = f"the CLI refused the interrupt ({message}); killing it"
        return self._done_with([KillCLI(note=note, code="transport")])

    def deadline_passed(self, deadline: Deadline, *, after: float) -> list[StopAction]:
        """Rules 5-7: the armed deadline passed ``after`` seconds after it was armed."""
        self._check(_I.DEADLINE_PASSED)
        if deadline != self.deadline:
            raise LocalProtocolError(
                f"deadline_passed({deadline!r}) in phase {self.phase.value}: only "
                f"{self.deadline!r} is armed"
            )
        self.phase = _P.KILLED
        if deadline == "interrupt":
            note: str | None = (
                f"the CLI did not confirm the interrupt within {after:g} s; killing it"
            )
        elif deadline == "settle":
            note = f"the CLI did not finish the interrupted turn within {after:g} s; killing it"
        else:
            note = None  # it had settled: nothing of the execution is lost
        return self._done_with([KillCLI(note=note, code="cli_timeout" if note else None)])

    def cli_reported(self, state: str) -> list[StopAction]:
        """Rule 6: the CLI said what it is doing (``session_state_changed``)."""
        self._check(_I.CLI_REPORTED)
        self.cli_state = state
        return self._settle_if_idle(turn_open=True)

    def output_seen(self, *, turn_open: bool) -> list[StopAction]:
        """Rule 6: a frame arrived (only needed while :attr:`wants_output`)."""
        self._check(_I.OUTPUT_SEEN)
        return self._settle_if_idle(turn_open=turn_open)

    def cli_exited(self) -> list[StopAction]:
        """Rule 8: the CLI's output ended."""
        self._check(_I.CLI_EXITED)
        self.exited = True
        self.phase = _P.GONE
        return self._done_with([])

    def wedged(self) -> list[StopAction]:
        """Rule 8: the CLI answers nothing any more; the caller reports why."""
        self._check(_I.WEDGED)
        if self.phase in (_P.KILLED, _P.GONE):
            return []
        self.phase = _P.KILLED
        return self._done_with([KillCLI()])

    # -- the answer (rule 10) ----------------------------------------------------------------

    def abort_requested(
        self,
        reason: str | None = None,
        outcome: Outcome | None = None,
        phase: AbortPhase | None = None,
    ) -> None:
        self.abort_pending = True
        if reason is not None:
            self.abort_reason = reason
        if outcome is not None and self.abort_outcome is None:
            self.abort_outcome = outcome
        if phase is not None and self.abort_phase is None:
            self.abort_phase = phase

    def answered(self, *, drain: bool) -> None:
        self.abort_pending = False
        self.abort_reason = None
        self.abort_outcome = None
        self.abort_phase = None
        if drain:
            self.draining = True

    def drain_ended(self) -> None:
        self.draining = False

    def execution_started(self) -> None:
        self.abort_pending = False
        self.abort_reason = None
        self.abort_outcome = None
        self.abort_phase = None

    # -- guts ----------------------------------------------------------------------------------

    def _check(self, event: StopInput) -> None:
        if event not in TRANSITIONS[self.phase]:
            raise LocalProtocolError(
                f"{event.value}() in phase {self.phase.value}: that phase does not take it"
            )

    def _start_stop(self) -> list[StopAction]:
        """Rule 3, from ``LIVE``."""
        if not self.connected or self.lifecycle.end_cause == "completed":
            self.phase = _P.SETTLED
            return []
        self.phase = _P.INTERRUPTING
        self.released = True
        return [
            ReleaseBackpressure(),
            KillTools(everything=True),
            SendInterrupt(),
            ArmDeadline(deadline="interrupt"),
        ]

    def _idle(self, *, turn_open: bool) -> bool:
        return self.cli_state == "idle" or (self.cli_state is None and not turn_open)

    def _settle_if_idle(self, *, turn_open: bool) -> list[StopAction]:
        if self.phase is _P.SETTLING and self._idle(turn_open=turn_open):
            self.phase = _P.SETTLED
            return self._done_with([])
        return []

    def _end_input(self) -> list[StopAction]:
        """Rule 7: once."""
        if self.input_ended:
            return []
        self.input_ended = True
        return [EndInput()]

    def _done_with(self, actions: list[StopAction]) -> list[StopAction]:
        """What a phase change adds: the teardown goes on (rule 7), the abort's terminal event
        is due (rule 9)."""
        if self.phase is _P.SETTLED and self.torn_down and not self.keep_cli:
            self.phase = _P.EXITING
            actions += self._end_input()
            actions.append(ArmDeadline(deadline="exit"))
        elif self.phase is _P.SETTLING and not self.may_be_given_back:
            actions += self._end_input()
        if self._terminal is not None and self.stop_done:
            reason, self._terminal = self._terminal, None
            if not self.lifecycle.ended:
                actions.append(EmitTerminal(reason=reason))
        return actions
