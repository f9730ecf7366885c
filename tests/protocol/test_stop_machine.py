"""StopMachine: every rule of protocol/session/stop.py, every input a phase does not take, and a
Hypothesis state machine over all of its inputs checked against the transition table."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from claude_trio.protocol.errors import LocalProtocolError
from claude_trio.protocol.session.lifecycle import ExecutionLifecycle
from claude_trio.protocol.session.stop import (
    TRANSITIONS,
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
    StopInput,
    StopMachine,
    StopPhase,
)

P = StopPhase
DEADLINES = st.sampled_from(["interrupt", "settle", "exit"])
STOP_STARTED = [
    ReleaseBackpressure(),
    KillTools(everything=True),
    SendInterrupt(),
    ArmDeadline(deadline="interrupt"),
]


def running(*, connected: bool = True, reusable: bool = False) -> StopMachine:
    """A machine whose execution runs (the prompt went out) and whose CLI is connected
    (``reusable``: a pool's CLI)."""
    lifecycle = ExecutionLifecycle()
    lifecycle.push("prompt")
    lifecycle.started()
    machine = StopMachine(lifecycle)
    if connected:
        assert machine.cli_connected(reusable=reusable) == []
    return machine


def interrupting(*, reusable: bool = False) -> StopMachine:
    machine = running(reusable=reusable)
    machine.abort("aborted")
    assert machine.phase is P.INTERRUPTING
    return machine


def settling(*, reusable: bool = False) -> StopMachine:
    machine = interrupting(reusable=reusable)
    machine.interrupt_answered(still_queued=False, turn_open=True)
    assert machine.phase is P.SETTLING
    return machine


def settled(*, reusable: bool = False) -> StopMachine:
    machine = settling(reusable=reusable)
    machine.cli_reported("idle")
    assert machine.phase is P.SETTLED
    return machine


def exiting() -> StopMachine:
    machine = settled()
    machine.teardown()
    assert machine.phase is P.EXITING
    return machine


def killed() -> StopMachine:
    machine = interrupting()
    machine.send_failed("broken pipe")
    assert machine.phase is P.KILLED
    return machine


def gone() -> StopMachine:
    machine = running()
    machine.cli_exited()
    assert machine.phase is P.GONE
    return machine


IN_PHASE: dict[StopPhase, Callable[[], StopMachine]] = {
    P.LIVE: running,
    P.INTERRUPTING: interrupting,
    P.SETTLING: settling,
    P.SETTLED: settled,
    P.EXITING: exiting,
    P.KILLED: killed,
    P.GONE: gone,
}

FEED: dict[StopInput, Callable[[StopMachine], list[StopAction]]] = {
    StopInput.CONNECTED: lambda m: m.cli_connected(),
    StopInput.ABORT: lambda m: m.abort("aborted"),
    StopInput.TEARDOWN: lambda m: m.teardown(),
    StopInput.INTERRUPT_ANSWERED: lambda m: m.interrupt_answered(
        still_queued=False, turn_open=False
    ),
    StopInput.SEND_FAILED: lambda m: m.send_failed("broken pipe"),
    StopInput.DEADLINE_PASSED: lambda m: m.deadline_passed(m.deadline or "interrupt", after=1.0),
    StopInput.CLI_REPORTED: lambda m: m.cli_reported("running"),
    StopInput.OUTPUT_SEEN: lambda m: m.output_seen(turn_open=True),
    StopInput.CLI_EXITED: lambda m: m.cli_exited(),
    StopInput.WEDGED: lambda m: m.wedged(),
}


def test_the_table_covers_every_phase_and_leads_only_to_phases() -> None:
    assert set(TRANSITIONS) == set(StopPhase)
    for phase, inputs in TRANSITIONS.items():
        assert inputs, phase
        for targets in inputs.values():
            assert targets <= set(StopPhase)
    # Only an exit leaves GONE, and nothing leaves it.
    assert all(targets == {P.GONE} for targets in TRANSITIONS[P.GONE].values())


@pytest.mark.parametrize(
    ("phase", "event"),
    [(p, i) for p in StopPhase for i in StopInput if i not in TRANSITIONS[p]],
    ids=lambda value: value.value,
)
def test_an_input_the_phase_does_not_take_raises_and_changes_nothing(
    phase: StopPhase, event: StopInput
) -> None:
    machine = IN_PHASE[phase]()
    with pytest.raises(LocalProtocolError, match=rf"{event.value}\(\) in phase {phase.value}"):
        FEED[event](machine)
    assert machine.phase is phase


@pytest.mark.parametrize(
    ("phase", "event"),
    [(p, i) for p in StopPhase for i in StopInput if i in TRANSITIONS[p]],
    ids=lambda value: value.value,
)
def test_an_input_the_phase_takes_leads_where_the_table_says(
    phase: StopPhase, event: StopInput
) -> None:
    machine = IN_PHASE[phase]()
    if event is StopInput.CONNECTED:
        machine = running(connected=False)
    FEED[event](machine)
    assert machine.phase in TRANSITIONS[phase][event]


# -- rule 1 ------------------------------------------------------------------------------------


def test_rule_1_before_a_cli_is_connected_a_stop_has_nothing_to_stop() -> None:
    machine = running(connected=False)
    actions = machine.abort("aborted")
    assert actions == [
        CloseGate(lost=("prompt",), reason="aborted"),
        EmitTerminal(reason="aborted"),
    ]
    assert machine.phase is P.SETTLED
    assert not machine.released


def test_rule_1_a_cli_is_connected_once() -> None:
    machine = running()
    with pytest.raises(LocalProtocolError, match="cli_connected\\(\\) twice"):
        machine.cli_connected()


# -- rules 2 and 3 -----------------------------------------------------------------------------


def test_rule_2_and_3_abort_closes_the_gate_kills_the_tools_then_interrupts() -> None:
    machine = running()
    machine.lifecycle.push("p1")
    actions = machine.abort("aborted")
    assert actions == [CloseGate(lost=("prompt", "p1"), reason="aborted"), *STOP_STARTED]
    assert machine.phase is P.INTERRUPTING
    assert machine.lifecycle.aborting
    assert not machine.lifecycle.may_write_user_messages  # the stop gate denies every tool
    assert machine.released
    assert machine.deadline == "interrupt"
    assert machine.sweeping
    assert not machine.stop_done
    assert machine.abort_pending
    assert machine.abort_reason is None  # not decided: the CLI's own reason may stand


def test_rule_2_a_decided_reason_is_the_answer_s_reason() -> None:
    machine = running()
    machine.abort("run_timeout: the execution ran for 5 s", decided=True)
    assert machine.abort_reason == "run_timeout: the execution ran for 5 s"


def test_rule_2_a_second_abort_and_an_abort_after_the_end_change_nothing() -> None:
    machine = interrupting()
    assert machine.abort("again") == []
    assert machine.phase is P.INTERRUPTING
    ended = running()
    ended.lifecycle.finish("completed")
    assert ended.abort("aborted") == []
    assert ended.phase is P.LIVE


def test_rule_3_a_cli_that_exited_or_completed_is_not_interrupted() -> None:
    machine = running()
    machine.cli_exited()
    assert machine.abort("aborted") == [
        CloseGate(lost=("prompt",), reason="aborted"),
        EmitTerminal(reason="aborted"),
    ]
    completed = running()
    completed.lifecycle.finish("completed")
    assert completed.teardown() == [EndInput(), ArmDeadline(deadline="exit")]
    assert completed.phase is P.EXITING
    assert not completed.released


# -- rule 4 ------------------------------------------------------------------------------------


def test_rule_4_confirmed_the_tools_are_killed_and_the_cli_has_the_settle_deadline() -> None:
    machine = interrupting()
    actions = machine.interrupt_answered(still_queued=False, turn_open=True)
    # (and its input ends: rule 7)
    assert actions == [KillTools(everything=False), ArmDeadline(deadline="settle"), EndInput()]
    assert machine.phase is P.SETTLING
    assert machine.sweeping
    assert not machine.stop_done


def test_rule_4_a_cli_that_kept_its_queue_is_killed() -> None:
    machine = interrupting()
    actions = machine.interrupt_answered(still_queued=True, turn_open=True)
    assert actions == [KillCLI(), EmitTerminal(reason="aborted")]
    assert machine.phase is P.KILLED
    assert not machine.settled


def test_rule_4_a_cli_already_idle_is_settled_at_once() -> None:
    machine = interrupting()
    machine.cli_reported("idle")  # reported before its answer arrived
    actions = machine.interrupt_answered(still_queued=False, turn_open=False)
    assert actions == [KillTools(everything=False), EmitTerminal(reason="aborted")]
    assert machine.phase is P.SETTLED
    assert machine.settled


def test_rule_4_and_5_an_answer_or_a_failure_outside_the_interrupt_is_a_bug() -> None:
    for machine in (running(), settling(), gone()):
        with pytest.raises(LocalProtocolError):
            machine.interrupt_answered(still_queued=False, turn_open=False)
        with pytest.raises(LocalProtocolError):
            machine.send_failed("late")


# -- rule 5 ------------------------------------------------------------------------------------


def test_rule_5_a_refused_interrupt_kills_the_cli_and_says_why() -> None:
    machine = interrupting()
    assert machine.send_failed("broken pipe") == [
        KillCLI(note="the CLI refused the interrupt (broken pipe); killing it", code="transport"),
        EmitTerminal(reason="aborted"),
    ]
    assert machine.phase is P.KILLED
    assert machine.stop_done


def test_rule_5_an_unconfirmed_interrupt_kills_the_cli_at_its_deadline() -> None:
    machine = interrupting()
    assert machine.deadline_passed("interrupt", after=1.5) == [
        KillCLI(
            note="the CLI did not confirm the interrupt within 1.5 s; killing it",
            code="cli_timeout",
        ),
        EmitTerminal(reason="aborted"),
    ]
    assert not machine.sweeping


# -- rule 6 ------------------------------------------------------------------------------------


def test_rule_6_idle_settles_the_cli() -> None:
    machine = settling()
    assert machine.cli_reported("running") == []
    assert machine.phase is P.SETTLING
    assert machine.cli_reported("idle") == [EmitTerminal(reason="aborted")]
    assert machine.phase is P.SETTLED
    assert machine.deadline is None
    assert not machine.sweeping


def test_rule_6_a_cli_that_never_reports_its_state_settles_when_no_turn_is_open() -> None:
    machine = settling()
    assert machine.wants_output
    assert machine.output_seen(turn_open=True) == []
    assert machine.output_seen(turn_open=False) == [EmitTerminal(reason="aborted")]
    assert machine.phase is P.SETTLED
    reporting = interrupting()
    reporting.cli_reported("running")
    reporting.interrupt_answered(still_queued=False, turn_open=False)
    assert reporting.phase is P.SETTLING  # it reports its state: only idle counts
    assert not reporting.wants_output
    assert reporting.output_seen(turn_open=False) == []
    assert reporting.phase is P.SETTLING


def test_rule_6_a_cli_that_does_not_settle_is_killed_at_the_settle_deadline() -> None:
    machine = settling()
    assert machine.deadline_passed("settle", after=3.0) == [
        KillCLI(
            note="the CLI did not finish the interrupted turn within 3 s; killing it",
            code="cli_timeout",
        ),
        EmitTerminal(reason="aborted"),
    ]
    assert machine.phase is P.KILLED


# -- rule 7 ------------------------------------------------------------------------------------


def test_rule_7_teardown_of_a_running_cli_stops_it_without_touching_the_execution() -> None:
    machine = running()
    machine.lifecycle.finish("closed")  # the block was left: the session ended it already
    assert machine.teardown() == STOP_STARTED
    assert machine.phase is P.INTERRUPTING
    # Once it confirmed, its input ends: it finishes the interrupted turn and exits on its own
    # (no round trip after its idle); no terminal event is due (rule 7).
    assert machine.interrupt_answered(still_queued=False, turn_open=True) == [
        KillTools(everything=False),
        ArmDeadline(deadline="settle"),
        EndInput(),
    ]
    assert machine.input_ended
    assert machine.phase is P.SETTLING
    assert machine.cli_reported("idle") == [ArmDeadline(deadline="exit")]  # not a second end
    assert machine.phase is P.EXITING
    assert not machine.finished
    assert machine.cli_exited() == []
    assert machine.finished


def pooled_settling() -> StopMachine:
    lifecycle = ExecutionLifecycle()
    lifecycle.push("prompt")
    lifecycle.started()
    machine = StopMachine(lifecycle)
    machine.cli_connected(reusable=True)
    machine.abort("aborted")
    machine.interrupt_answered(still_queued=False, turn_open=True)
    assert machine.phase is P.SETTLING
    return machine


def test_rule_7_the_input_ends_once_the_cli_confirmed_never_before() -> None:
    machine = running()
    abort = machine.abort("aborted")
    assert EndInput() not in abort  # the interrupt may not be written yet
    assert machine.teardown() == []
    assert not machine.input_ended
    assert machine.interrupt_answered(still_queued=False, turn_open=True) == [
        KillTools(everything=False),
        ArmDeadline(deadline="settle"),
        EndInput(),
    ]
    assert machine.input_ended
    # An abort's CLI too: the session tears it down once the execution ended.
    aborted = running()
    aborted.abort("aborted")
    assert aborted.interrupt_answered(still_queued=False, turn_open=True)[-1] == EndInput()
    assert aborted.cli_reported("idle") == [EmitTerminal(reason="aborted")]
    assert aborted.teardown() == [ArmDeadline(deadline="exit")]  # not a second end
    assert aborted.phase is P.EXITING


def test_rule_7_a_pool_s_cli_keeps_its_input_until_its_teardown() -> None:
    pooled = pooled_settling()
    assert not pooled.input_ended
    assert pooled.cli_reported("idle") == [EmitTerminal(reason="aborted")]
    assert pooled.teardown(keep_cli=True) == []  # given back settled, input open
    assert not pooled.input_ended
    # Torn down without keeping it, while it finishes the interrupted turn: at once.
    dropped = pooled_settling()
    assert dropped.teardown() == [EndInput()]
    assert dropped.cli_reported("idle") == [
        ArmDeadline(deadline="exit"),
        EmitTerminal(reason="aborted"),
    ]
    kept = pooled_settling()
    assert kept.teardown(keep_cli=True) == []
    assert not kept.input_ended


def test_rule_7_a_settled_cli_exits_on_the_end_of_its_input_or_is_killed() -> None:
    machine = running()
    machine.lifecycle.finish("completed")  # settled without a stop: its input is still open
    assert machine.teardown() == [EndInput(), ArmDeadline(deadline="exit")]
    assert machine.settled
    assert machine.deadline_passed("exit", after=2.0) == [KillCLI()]  # no note: it had settled
    assert machine.phase is P.KILLED
    assert machine.finished


def test_rule_7_a_pool_s_cli_is_given_back_settled() -> None:
    machine = settled(reusable=True)
    assert not machine.input_ended
    assert machine.teardown(keep_cli=True) == []
    assert machine.phase is P.SETTLED
    assert machine.finished
    pooled = running(reusable=True)
    pooled.lifecycle.finish("completed")
    assert pooled.teardown(keep_cli=True) == []
    assert pooled.finished


def test_rule_7_only_a_pool_s_cli_is_given_back() -> None:
    # A CLI that is not reusable had its input ended once it confirmed: keeping it would give
    # back a CLI that is exiting.
    machine = settling()
    assert machine.input_ended
    with pytest.raises(LocalProtocolError, match="not reusable"):
        machine.teardown(keep_cli=True)
    assert not machine.torn_down
    assert machine.teardown() == []
    assert machine.torn_down


def test_rule_7_teardown_without_a_cli_is_over_at_once_and_happens_once() -> None:
    machine = running(connected=False)
    assert machine.teardown() == []
    assert machine.phase is P.GONE
    assert machine.finished
    settled_pool = settled(reusable=True)
    settled_pool.teardown(keep_cli=True)
    with pytest.raises(LocalProtocolError, match="teardown\\(\\) twice"):
        settled_pool.teardown()


# -- rule 8 ------------------------------------------------------------------------------------


@pytest.mark.parametrize("phase", list(StopPhase), ids=lambda p: p.value)
def test_rule_8_an_exit_ends_every_phase_and_is_idempotent(phase: StopPhase) -> None:
    machine = IN_PHASE[phase]()
    machine.cli_exited()
    assert machine.phase is P.GONE
    assert machine.exited
    assert machine.cli_exited() == []
    assert machine.stop_done
    assert not machine.cli_running


def test_rule_8_an_exit_while_interrupting_makes_the_abort_s_terminal_due() -> None:
    machine = interrupting()
    assert machine.cli_exited() == [EmitTerminal(reason="aborted")]
    assert not machine.sweeping
    assert machine.deadline is None


@pytest.mark.parametrize("phase", list(StopPhase), ids=lambda p: p.value)
def test_rule_8_a_wedged_cli_is_killed_unless_it_is_gone(phase: StopPhase) -> None:
    machine = IN_PHASE[phase]()
    before = machine.phase
    actions = machine.wedged()
    if before in (P.KILLED, P.GONE):
        assert actions == []
        assert machine.phase is before
    else:
        assert actions[0] == KillCLI()
        assert machine.phase is P.KILLED


def test_rule_8_only_the_armed_deadline_may_pass() -> None:
    machine = settling()
    with pytest.raises(LocalProtocolError, match="only 'settle' is armed"):
        machine.deadline_passed("interrupt", after=1.0)
    assert machine.phase is P.SETTLING


# -- rule 9 ------------------------------------------------------------------------------------


def test_rule_9_the_terminal_is_due_once() -> None:
    machine = settling()
    assert machine.cli_reported("idle") == [EmitTerminal(reason="aborted")]
    assert machine.teardown() == [ArmDeadline(deadline="exit")]  # its input ended (rule 7)
    assert machine.cli_exited() == []


def test_rule_9_no_terminal_when_the_execution_ended_meanwhile() -> None:
    machine = settling()
    machine.lifecycle.finish("aborted")  # the CLI's own result for the aborted turn
    assert machine.cli_reported("idle") == []
    assert machine.stop_done


# -- rule 10 -----------------------------------------------------------------------------------


def test_rule_10_the_answer_pending_answered_and_drained() -> None:
    machine = StopMachine()
    machine.abort_requested()
    assert machine.abort_pending
    assert machine.abort_reason is None
    machine.abort_requested("idle_timeout")
    machine.abort_requested()  # a later request without a reason keeps the decided one
    assert machine.abort_reason == "idle_timeout"
    machine.answered(drain=True)
    assert not machine.abort_pending
    assert machine.abort_reason is None
    assert machine.draining
    machine.abort_requested("again")
    machine.execution_started()
    assert not machine.abort_pending
    assert machine.abort_reason is None
    assert machine.draining  # a new execution does not end the dead turn's drain
    machine.drain_ended()
    assert not machine.draining
    assert machine.phase is P.LIVE  # the answer never moves the CLI's stop


# -- every input, generated ---------------------------------------------------------------------


def takes(run: StopMachineRun, event: StopInput) -> bool:
    return event in TRANSITIONS[run.machine.phase]


class StopMachineRun(RuleBasedStateMachine):
    """Random sequences of the machine's inputs, legal and not. Invariants: every phase change
    is in the table; an illegal input raises and changes nothing; the actions agree with the
    state (rules 3-9); the abort's terminal is due at most once, only once the stop is done."""

    def __init__(self) -> None:
        super().__init__()
        self.start()

    def start(self) -> None:
        self.lifecycle = ExecutionLifecycle()
        self.lifecycle.push("prompt")
        self.lifecycle.started()
        self.machine = StopMachine(self.lifecycle)
        self.terminals = 0
        self.gates = 0
        self.interrupts = 0
        self.input_ends = 0
        self.aborted = False
        self.ended_before_done = False

    def feed(self, event: StopInput, call: Callable[[], list[StopAction]]) -> None:
        machine = self.machine
        before = machine.phase
        was_done = machine.stop_done
        assert event in TRANSITIONS[before]
        actions = call()
        after = machine.phase
        assert after in TRANSITIONS[before][event], (before, event, after)
        self.check_actions(event, actions, was_done=was_done)

    def check_actions(
        self, event: StopInput, actions: list[StopAction], *, was_done: bool
    ) -> None:
        machine = self.machine
        kinds = [type(a) for a in actions]
        self.terminals += kinds.count(EmitTerminal)
        self.gates += kinds.count(CloseGate)
        self.interrupts += kinds.count(SendInterrupt)
        if EmitTerminal in kinds:
            # On the input that made the stop done, or on an abort that found it done; never
            # when the execution ended meanwhile another way (rule 9).
            assert machine.stop_done
            assert not was_done or event is StopInput.ABORT
            assert not self.lifecycle.ended
            assert actions[-1] == EmitTerminal(reason="aborted")
        if SendInterrupt in kinds:
            assert machine.released
            # Backpressure off and the tools dead before the interrupt goes out (rule 3).
            assert kinds.index(ReleaseBackpressure) < kinds.index(KillTools)
            assert kinds.index(KillTools) < kinds.index(SendInterrupt)
            assert KillTools(everything=True) in actions  # everything at the stop (rule 3)
        if KillTools(everything=False) in actions:
            assert machine.phase in (P.SETTLING, P.SETTLED, P.EXITING)  # after the answer
        if KillCLI in kinds:
            assert machine.phase is P.KILLED
        if EndInput in kinds:
            # Once, for a CLI that will not be given back: once it confirmed the interrupt, or
            # at the teardown of a settled one (rule 7).
            self.input_ends += 1
            assert machine.input_ended
            assert not machine.may_be_given_back
            if machine.phase is not P.SETTLING:
                assert machine.phase is P.EXITING
                assert machine.torn_down
        arms = [a for a in actions if isinstance(a, ArmDeadline)]
        if arms:
            assert arms[-1].deadline == machine.deadline

    @precondition(lambda self: takes(self, StopInput.CONNECTED) and not self.machine.connected)
    @rule(reusable=st.booleans())
    def connect(self, reusable: bool) -> None:
        self.feed(StopInput.CONNECTED, lambda: self.machine.cli_connected(reusable=reusable))

    @precondition(lambda self: takes(self, StopInput.ABORT))
    @rule(decided=st.booleans())
    def abort(self, decided: bool) -> None:
        self.aborted = True
        self.feed(StopInput.ABORT, lambda: self.machine.abort("aborted", decided=decided))

    @precondition(lambda self: takes(self, StopInput.TEARDOWN) and not self.machine.torn_down)
    @rule(keep_cli=st.booleans())
    def tear_down(self, keep_cli: bool) -> None:
        machine = self.machine
        if keep_cli and machine.connected and not machine.reusable:
            # Only a pool's CLI is given back (rule 7): refused, and nothing changes.
            phase, input_ended = machine.phase, machine.input_ended
            with pytest.raises(LocalProtocolError, match="not reusable"):
                machine.teardown(keep_cli=True)
            assert (machine.phase, machine.input_ended, machine.torn_down) == (
                phase,
                input_ended,
                False,
            )
            return
        self.feed(StopInput.TEARDOWN, lambda: machine.teardown(keep_cli=keep_cli))

    @precondition(lambda self: takes(self, StopInput.INTERRUPT_ANSWERED))
    @rule(still_queued=st.booleans(), turn_open=st.booleans())
    def interrupt_answered(self, still_queued: bool, turn_open: bool) -> None:
        self.feed(
            StopInput.INTERRUPT_ANSWERED,
            lambda: self.machine.interrupt_answered(
                still_queued=still_queued, turn_open=turn_open
            ),
        )

    @precondition(lambda self: takes(self, StopInput.SEND_FAILED))
    @rule()
    def send_failed(self) -> None:
        self.feed(StopInput.SEND_FAILED, lambda: self.machine.send_failed("broken pipe"))

    @precondition(lambda self: self.machine.deadline is not None)
    @rule()
    def deadline_passed(self) -> None:
        machine = self.machine
        deadline = machine.deadline
        assert deadline is not None
        self.feed(StopInput.DEADLINE_PASSED, lambda: machine.deadline_passed(deadline, after=1.0))

    @rule(state=st.sampled_from(["running", "requires_action", "idle"]))
    def cli_reported(self, state: str) -> None:
        self.feed(StopInput.CLI_REPORTED, lambda: self.machine.cli_reported(state))

    @rule(turn_open=st.booleans())
    def output_seen(self, turn_open: bool) -> None:
        self.feed(StopInput.OUTPUT_SEEN, lambda: self.machine.output_seen(turn_open=turn_open))

    @rule()
    def cli_exited(self) -> None:
        self.feed(StopInput.CLI_EXITED, self.machine.cli_exited)

    @rule()
    def wedged(self) -> None:
        self.feed(StopInput.WEDGED, self.machine.wedged)

    @rule(event=st.sampled_from(list(StopInput)), which=DEADLINES)
    def an_input_out_of_turn(self, event: StopInput, which: Deadline) -> None:
        """An input the phase does not take, a deadline that is not armed, or a second connect
        or teardown: refused, and nothing changes (rules 1, 7, 8)."""
        machine = self.machine
        before = machine.phase
        if event is StopInput.DEADLINE_PASSED:
            if which == machine.deadline:
                return
            with pytest.raises(LocalProtocolError):
                machine.deadline_passed(which, after=1.0)
        else:
            repeated = (event is StopInput.CONNECTED and machine.connected) or (
                event is StopInput.TEARDOWN and machine.torn_down
            )
            if takes(self, event) and not repeated:
                return
            with pytest.raises(LocalProtocolError):
                FEED[event](machine)
        assert machine.phase is before

    @precondition(lambda self: self.machine.phase in (P.GONE, P.KILLED))
    @rule()
    def next_execution(self) -> None:
        # GONE takes every input and changes nothing, KILLED nearly: a fresh machine explores
        # more in the same number of steps.
        self.start()

    @precondition(lambda self: not self.lifecycle.ended)
    @rule()
    def execution_ends(self) -> None:
        # The CLI's own result (or its death) ends the execution beside the stop.
        if not self.machine.stop_done:
            self.ended_before_done = True
        self.lifecycle.finish("aborted" if self.lifecycle.aborting else "completed")

    @invariant()
    def the_state_agrees_with_the_phase(self) -> None:
        machine = self.machine
        phase = machine.phase
        assert machine.stop_done == (phase in {P.SETTLED, P.EXITING, P.KILLED, P.GONE})
        assert machine.sweeping == (phase in {P.INTERRUPTING, P.SETTLING})
        assert machine.deadline == {
            P.INTERRUPTING: "interrupt",
            P.SETTLING: "settle",
            P.EXITING: "exit",
        }.get(phase)
        if phase in (P.INTERRUPTING, P.SETTLING):
            assert machine.connected
            assert machine.released
            assert not machine.exited
        if machine.exited:
            assert phase is P.GONE
        if machine.finished:
            assert machine.torn_down
        if phase is P.EXITING:
            assert machine.torn_down
            assert not machine.keep_cli
        if phase is P.SETTLED and machine.torn_down:
            assert machine.keep_cli  # otherwise it goes on to EXITING at once (rule 7)
        if phase is P.SETTLING or phase is P.EXITING:
            # Its input ends once it confirmed, unless it may be given back (rule 7).
            assert machine.input_ended == (not machine.may_be_given_back)

    @invariant()
    def an_abort_is_answered_once_and_stops_once(self) -> None:
        assert self.gates <= 1
        assert self.interrupts <= 1
        assert self.input_ends <= 1
        assert self.terminals <= 1
        if self.terminals:
            assert self.aborted
        if self.gates and self.machine.stop_done and not self.ended_before_done:
            assert self.terminals == 1


StopMachineRun.TestCase.settings = settings(
    max_examples=1000, stateful_step_count=30, deadline=None
)
test_stop_machine_run = StopMachineRun.TestCase
