"""UsageLedger: per-turn usage from results, cost as a difference of the CLI's cumulative cost."""

from __future__ import annotations

import pytest
from sdk_frames import api_usage, interrupted_result, result

from claude_trio.protocol.session.accounting import UsageLedger, transcript_cost
from claude_trio.protocol.session.usage import Usage


def test_turn_tokens_are_the_results_usage_normalized() -> None:
    ledger = UsageLedger()
    turn = ledger.record_result(
        result(usage=api_usage(input_tokens=10, output_tokens=7, cache_read=100, cache_creation=20))
    )
    assert turn.turn == Usage(
        input_tokens=130,
        output_tokens=7,
        cache_read_input_tokens=100,
        cache_creation_input_tokens=20,
        cost_usd=0.01,
    )


def test_turn_cost_is_the_difference_of_the_cumulative_cost() -> None:
    ledger = UsageLedger()
    first = ledger.record_result(result(total_cost_usd=0.25))
    second = ledger.record_result(result(total_cost_usd=0.75))
    assert first.turn.cost_usd == pytest.approx(0.25)
    assert second.turn.cost_usd == pytest.approx(0.5)
    assert second.session.cost_usd == pytest.approx(0.75)


def test_cumulative_cost_going_down_means_a_new_cli_process() -> None:
    ledger = UsageLedger()
    ledger.record_result(result(total_cost_usd=0.9))
    resumed = ledger.record_result(result(total_cost_usd=0.2))
    assert resumed.turn.cost_usd == pytest.approx(0.2)
    assert resumed.session.cost_usd == pytest.approx(1.1)


def test_missing_cost_counts_zero_and_keeps_the_previous_cumulative() -> None:
    ledger = UsageLedger()
    ledger.record_result(result(total_cost_usd=0.3))
    missing = ledger.record_result(result(total_cost_usd=None))
    after = ledger.record_result(result(total_cost_usd=0.4))
    assert missing.turn.cost_usd == 0.0
    assert after.turn.cost_usd == pytest.approx(0.1)


def test_missing_usage_fields_are_zero() -> None:
    ledger = UsageLedger()
    turn = ledger.record_result(result(usage={"output_tokens": 3}))
    assert turn.turn.input_tokens == 0
    assert turn.turn.output_tokens == 3


def test_execution_total_restarts_and_session_total_goes_on() -> None:
    ledger = UsageLedger()
    ledger.record_result(
        result(usage=api_usage(input_tokens=10, output_tokens=1), total_cost_usd=0.1)
    )
    ledger.start_execution()
    assert ledger.execution == Usage()
    turn = ledger.record_result(
        result(usage=api_usage(input_tokens=5, output_tokens=2), total_cost_usd=0.3)
    )
    assert turn.execution.input_tokens == 5
    assert turn.execution.cost_usd == pytest.approx(0.2)
    assert turn.session.input_tokens == 15
    assert turn.session.output_tokens == 3
    assert ledger.session == turn.session


def test_a_resumed_conversation_s_carried_cost_is_not_charged_to_its_first_turn() -> None:
    # The CLI restores the conversation's cost so far: identical turns report 0.0001, 0.0002...
    ledger = UsageLedger()
    ledger.carry_over(0.0002)
    first = ledger.record_result(result(total_cost_usd=0.0003))
    second = ledger.record_result(result(total_cost_usd=0.0004))
    assert first.turn.cost_usd == pytest.approx(0.0001)
    assert second.turn.cost_usd == pytest.approx(0.0001)
    assert ledger.session.cost_usd == pytest.approx(0.0002)


def test_every_counted_turn_is_listed_interrupted_ones_included() -> None:
    ledger = UsageLedger()
    ledger.record_result(result(total_cost_usd=0.01))
    ledger.record_result(interrupted_result(total_cost_usd=0.03))
    assert [t.cost_usd for t in ledger.turns] == pytest.approx([0.01, 0.02])


def test_transcript_cost_is_the_last_cost_state_row() -> None:
    lines = [
        '{"type":"user","message":{"content":"cost-state"}}',
        '{"type":"cost-state","totalCostUSD":0.000105}',
        "not json at all",
        '{"type":"assistant"}',
        '{"type":"cost-state","totalCostUSD":0.00021}',
        '{"type":"cost-state","totalCostUSD":"bad"}',
    ]
    assert transcript_cost(lines) == pytest.approx(0.00021)
    assert transcript_cost(['{"type":"user"}']) is None
