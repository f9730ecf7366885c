"""ExecutionLifecycle: the phase of an execution, and one outcome per push."""

from __future__ import annotations

import pytest

from claude_trio.protocol.errors import LocalProtocolError
from claude_trio.protocol.session.lifecycle import Accepted, ExecutionLifecycle, Phase, Rejected


def test_push_is_accepted_while_the_execution_runs() -> None:
    lifecycle = ExecutionLifecycle()
    assert lifecycle.push("u1") == Accepted(uuid="u1")
    assert lifecycle.pending == {"u1"}


def test_result_ends_the_execution_when_nothing_is_pending() -> None:
    lifecycle = ExecutionLifecycle()
    lifecycle.push("u1")
    assert lifecycle.result_arrived(["u1"], tasks_in_flight=False) is True
    assert lifecycle.ended
    assert lifecycle.push("u2") == Rejected(reason="the execution has ended")


def test_echo_consumes_a_push() -> None:
    lifecycle = ExecutionLifecycle()
    lifecycle.push("u1")
    lifecycle.consumed("u1")
    assert lifecycle.pending == frozenset()
    assert lifecycle.result_arrived([], tasks_in_flight=False) is True


def test_push_at_the_turn_boundary_keeps_the_execution_open_for_one_more_turn() -> None:
    lifecycle = ExecutionLifecycle()
    lifecycle.push("u1")
    lifecycle.push("u2")  # lands before the first result is processed
    assert lifecycle.result_arrived(["u1"], tasks_in_flight=False) is False
    assert lifecycle.pending == {"u2"}
    assert lifecycle.result_arrived(["u2"], tasks_in_flight=False) is True


def test_push_folded_into_the_turn_is_consumed_by_its_result() -> None:
    lifecycle = ExecutionLifecycle()
    lifecycle.push("u1")
    lifecycle.push("u2")
    assert lifecycle.result_arrived(["u1", "u2"], tasks_in_flight=False) is True


def test_background_task_in_flight_keeps_the_execution_open() -> None:
    lifecycle = ExecutionLifecycle()
    lifecycle.push("u1")
    assert lifecycle.result_arrived(["u1"], tasks_in_flight=True) is False
    assert lifecycle.push("u2") == Accepted(uuid="u2")  # still open
    lifecycle.consumed("u2")
    # The task finished; its follow-up turn's result ends the execution.
    assert lifecycle.result_arrived([], tasks_in_flight=False) is True


def test_abort_rejects_later_pushes_and_returns_the_unconsumed_ones() -> None:
    lifecycle = ExecutionLifecycle()
    lifecycle.push("u1")
    lifecycle.push("u2")
    lifecycle.consumed("u1")
    assert lifecycle.abort() == ["u2"]
    assert lifecycle.abort() == []
    assert lifecycle.push("u3") == Rejected(reason="the execution was aborted")
    assert lifecycle.result_arrived(["u1"], tasks_in_flight=False) is False


def test_cli_death_rejects_with_the_reason() -> None:
    lifecycle = ExecutionLifecycle()
    lifecycle.push("u1")
    assert lifecycle.cli_died("exit code 137") == ["u1"]
    outcome = lifecycle.push("u2")
    assert isinstance(outcome, Rejected)
    assert "exit code 137" in outcome.reason
    assert lifecycle.end_reason == outcome.reason


def test_unknown_uuids_are_ignored() -> None:
    lifecycle = ExecutionLifecycle()
    lifecycle.push("u1")
    lifecycle.consumed("injected-by-cli")
    assert lifecycle.result_arrived(["other"], tasks_in_flight=False) is False
    assert lifecycle.pending == {"u1"}


def test_pushing_a_uuid_twice_is_a_local_error() -> None:
    lifecycle = ExecutionLifecycle()
    lifecycle.push("u1")
    with pytest.raises(LocalProtocolError, match="u1"):
        lifecycle.push("u1")


# -- the phase machine ---------------------------------------------------------------------------


def test_phases_starting_running_aborting_ended() -> None:
    lifecycle = ExecutionLifecycle()
    assert lifecycle.phase is Phase.STARTING
    assert lifecycle.may_write_user_messages
    lifecycle.push("prompt")
    lifecycle.started()
    assert lifecycle.phase is Phase.RUNNING
    assert lifecycle.abort() == ["prompt"]
    assert lifecycle.phase is Phase.ABORTING
    assert lifecycle.aborting
    assert not lifecycle.ended
    assert not lifecycle.may_write_user_messages  # queued messages must never reach the CLI
    assert lifecycle.finish("aborted") == []
    assert lifecycle.phase is Phase.ENDED
    assert lifecycle.end_cause == "aborted"


def test_finish_is_the_only_way_to_the_end_and_is_idempotent() -> None:
    lifecycle = ExecutionLifecycle()
    lifecycle.push("u1")
    lifecycle.started()
    assert lifecycle.finish("closed") == ["u1"]
    assert lifecycle.end_cause == "closed"
    assert lifecycle.push("u2") == Rejected(reason="the session was closed")
    assert lifecycle.finish("completed") == []
    assert lifecycle.end_cause == "closed"


def test_a_result_completes_the_execution_through_finish() -> None:
    lifecycle = ExecutionLifecycle()
    lifecycle.push("u1")
    lifecycle.started()
    assert lifecycle.result_arrived(["u1"], tasks_in_flight=False)
    assert lifecycle.phase is Phase.ENDED
    assert lifecycle.end_cause == "completed"


def test_whatever_ends_an_abort_the_cause_is_the_abort() -> None:
    lifecycle = ExecutionLifecycle()
    lifecycle.started()
    lifecycle.abort()
    assert lifecycle.cli_died("exit 1") == []
    assert lifecycle.end_cause == "aborted"
    assert lifecycle.push("u") == Rejected(reason="the execution was aborted")


def test_a_result_during_the_abort_does_not_complete_the_execution() -> None:
    lifecycle = ExecutionLifecycle()
    lifecycle.push("u1")
    lifecycle.started()
    lifecycle.abort()
    assert lifecycle.result_arrived(["u1"], tasks_in_flight=False) is False
    assert lifecycle.phase is Phase.ABORTING
