"""``contract_violations``: every break of the stream contract, each with its seq."""

from __future__ import annotations

import attrs
import pytest
from stream_kit import answer, call, result, said, sub, usage
from stream_kit import numbered as numbered_events

from claude_trio.protocol.session.contract import (
    RULES,
    Violation,
    contract_violations,
    describe_violations,
)
from claude_trio.protocol.session.events import (
    Aborted,
    AdapterReady,
    Error,
    Event,
    SubagentCompleted,
    SubagentStarted,
    TextDelta,
    TurnStarted,
    UserInputRequest,
    UserInputResolved,
    WarningEvent,
)

READY = AdapterReady(model="claude-sonnet-4-6", seq=0)


def numbered(*events: Event, turn: int = 1) -> list[Event]:
    """An execution's stream: ``adapter_ready`` at seq 0, then ``events`` from seq 1."""
    return [READY, *numbered_events(*events, turn=turn)]


def rules_at(violations: list[Violation]) -> list[tuple[int | None, str]]:
    return [(v.seq, v.rule) for v in violations]


def test_a_clean_stream_keeps_the_contract() -> None:
    events = numbered(
        TurnStarted(session_id="s"),
        TextDelta(text="hi"),
        call("t-1"),
        answer("t-1"),
        UserInputRequest(request_id="q", source="model-tool"),
        UserInputResolved(request_id="q", outcome="answered", answer={}),
        result(final=False),
        TurnStarted(session_id="s", turn=2),
        result(turn=2, session_usage=usage(20, 0.02), execution_usage=usage(20, 0.02)),
    )
    assert contract_violations(events) == []
    assert describe_violations([]) == "the event stream keeps the contract"


def test_final_every_event_after_the_end_is_reported_with_its_seq() -> None:
    events = numbered(result(), TextDelta(text="late", turn=2), Aborted(reason="again", turn=2))
    found = contract_violations(events)
    assert rules_at(found) == [(2, "final"), (3, "final")]
    assert "text_delta after the event that ended the execution (result at seq 1)" in str(found[0])


def test_final_a_stream_without_its_end_is_reported_unless_cut_short_on_purpose() -> None:
    events = numbered(TextDelta(text="x"), result(final=False))
    [missing] = contract_violations(events)
    assert (missing.seq, missing.rule) == (2, "final")
    assert contract_violations(events, complete=False) == []
    [empty] = contract_violations([])
    assert (empty.seq, empty.rule) == (None, "final")
    assert str(empty).startswith("stream [final]: the stream ended without")


def test_turn_nothing_follows_its_turns_terminal_event() -> None:
    events = numbered(result(final=False), TextDelta(text="stale"), result(turn=2))
    assert rules_at(contract_violations(events)) == [(2, "turn")]
    assert "stamped with turn 1, which ended at seq 1" in str(contract_violations(events)[0])


def test_seq_must_strictly_increase_and_skips_are_allowed() -> None:
    events = [
        READY,
        TextDelta(text="a", seq=1, turn=1),
        TextDelta(text="b", seq=5, turn=1),  # merged deltas skip seqs
        TextDelta(text="c", seq=5, turn=1),
        TextDelta(text="d", seq=3, turn=1),
        attrs.evolve(result(), seq=6, turn=1),
    ]
    found = contract_violations(events)
    assert rules_at(found) == [(5, "seq"), (3, "seq")]
    assert str(found[1]) == "seq 3 [seq]: seq 3 after seq 5: not strictly increasing"


def test_tool_use_once_and_tool_result_at_most_once_after_its_call() -> None:
    events = numbered(
        call("t-1"),
        call("t-1"),
        answer("t-1"),
        answer("t-1"),
        answer("t-9"),
        result(),
    )
    found = contract_violations(events)
    assert rules_at(found) == [(2, "tool_use"), (4, "tool_result"), (5, "tool_result")]
    assert "reported again (first at seq 1)" in found[0].message
    assert "a second tool_result for 't-1' (the first at seq 3)" in found[1].message
    assert "whose tool_use was not reported before" in found[2].message


def test_user_input_resolved_exactly_once() -> None:
    events = numbered(
        UserInputRequest(request_id="a", source="model-tool"),
        UserInputRequest(request_id="a", source="model-tool"),
        UserInputResolved(request_id="a", outcome="answered"),
        UserInputResolved(request_id="a", outcome="cancelled"),
        UserInputResolved(request_id="ghost", outcome="expired"),
        UserInputRequest(request_id="open", source="mcp-elicitation"),
        result(),
    )
    found = contract_violations(events)
    assert rules_at(found) == [
        (2, "user_input"),
        (4, "user_input"),
        (5, "user_input"),
        (6, "user_input"),  # found at the end: never resolved
    ]
    assert "resolved again (cancelled; first at seq 3)" in found[1].message
    assert found[3].message == "user_input_request 'open' was never resolved"
    assert rules_at(contract_violations(events, complete=False)) == [
        (2, "user_input"),
        (4, "user_input"),
        (5, "user_input"),
    ]


def test_usage_never_decreases_field_by_field() -> None:
    events = numbered(
        result(final=False, session_usage=usage(20, 0.5), execution_usage=usage(20, 0.5)),
        result(
            final=False,
            turn=2,
            usage=usage(-1),
            session_usage=usage(30, 0.25),
            execution_usage=usage(30, 0.75),
        ),
        result(turn=3, session_usage=usage(40, 1.0), execution_usage=usage(40, 1.0)),
    )
    found = contract_violations(events)
    assert rules_at(found) == [(2, "usage"), (2, "usage")]
    assert "result.usage has negative input_tokens, output_tokens" in found[0].message
    assert found[1].message == (
        "session_usage went down since the result at seq 1: cost_usd 0.5 -> 0.25"
    )


def test_subagent_attribution_is_consistent() -> None:
    events = numbered(
        SubagentStarted(task_id="a", tool_use_id="t", description="x"),
        said("from a", **sub("a")),
        TextDelta(text="no flag", subagent_task_id="a"),
        said("from nowhere", **sub("ghost")),
        SubagentStarted(task_id="a", tool_use_id="t", description="x"),
        SubagentCompleted(task_id="a", tool_use_id="t", status="completed"),
        said("too late", **sub("a")),
        SubagentCompleted(task_id="a", tool_use_id="t", status="completed"),
        SubagentCompleted(task_id="b", tool_use_id="u", status="failed"),
        SubagentStarted(task_id="c", tool_use_id="v", description="self", **sub("c")),
        result(),
    )
    found = contract_violations(events)
    assert rules_at(found) == [
        (3, "subagent"),
        (4, "subagent"),
        (5, "subagent"),
        (7, "subagent"),
        (8, "subagent"),
        (9, "subagent"),
        (10, "subagent"),
    ]
    messages = [v.message for v in found]
    assert "names subagent 'a' but is not marked is_subagent" in messages[0]
    assert "subagent 'ghost', whose start was not reported before it" in messages[1]
    assert "started again (first at seq 1)" in messages[2]
    assert "after it completed at seq 6" in messages[3]
    assert "completed again (first at seq 6)" in messages[4]
    assert "'b' completed but its start was not reported" in messages[5]
    assert "'c' started inside itself" in messages[6]


def test_every_violation_is_reported_not_just_the_first() -> None:
    events: list[Event] = numbered(
        call("t"),
        call("t"),
        result(),
        Error(message="late", code="internal"),
    )
    described = describe_violations(contract_violations(events))
    assert described.splitlines() == [
        "2 violations of the event contract:",
        "  seq 2 [tool_use]: tool_use 't' reported again (first at seq 1)",
        "  seq 4 [final]: error after the event that ended the execution (result at seq 3)",
    ]


@pytest.mark.parametrize("rule", RULES)
def test_every_rule_is_documented(rule: str) -> None:
    from claude_trio.protocol.session import contract

    assert f"``{rule}``" in (contract.__doc__ or "")


# -- ready: adapter_ready once, first (after warnings only) ------------------------------------


def warning(text: str = "version not verified") -> WarningEvent:
    return WarningEvent(message=text, code="untested_version")


def test_ready_warnings_may_come_before_adapter_ready() -> None:
    events = numbered_events(warning(), warning("converted"), READY, TextDelta(text="x"), result())
    assert contract_violations(events) == []


@pytest.mark.parametrize(
    "end",
    [Error(message="claude not found", code="cli_not_found"), Aborted(reason="closed")],
    ids=["error", "aborted"],
)
def test_ready_an_execution_that_ends_before_the_cli_starts_has_none(end: Event) -> None:
    assert contract_violations(numbered_events(warning(), end)) == []
    assert contract_violations(numbered_events(end)) == []


def test_ready_none_is_a_violation_at_the_first_event_that_needed_it() -> None:
    events = numbered_events(warning(), TurnStarted(session_id="s"), TextDelta(text="x"), result())
    [missing] = contract_violations(events)
    assert (missing.seq, missing.rule) == (2, "ready")
    assert missing.message.startswith("turn_started and no adapter_ready before it")
    # Cut short on purpose or not: it was due before the turn started.
    assert rules_at(contract_violations(events[:3], complete=False)) == [(2, "ready")]


def test_ready_a_final_result_without_adapter_ready_is_a_violation() -> None:
    # A result means the CLI ran: only an error or an abort may end an execution without one.
    assert rules_at(contract_violations(numbered_events(result()))) == [(1, "ready")]


def test_ready_two_are_a_violation() -> None:
    events = numbered_events(READY, TextDelta(text="x"), READY, result())
    [second] = contract_violations(events)
    assert (second.seq, second.rule) == (3, "ready")
    assert second.message == "a second adapter_ready (the first at seq 1)"


def test_ready_a_late_one_is_a_violation_reported_once() -> None:
    events = numbered_events(warning(), TextDelta(text="x"), READY, result())
    [late] = contract_violations(events)
    assert (late.seq, late.rule) == (3, "ready")
    assert late.message == "adapter_ready after text_delta at seq 2: only warnings come before it"


def test_ready_after_the_end_only_the_final_rule_speaks() -> None:
    events = numbered_events(READY, result(), READY)
    assert rules_at(contract_violations(events)) == [(3, "final")]
